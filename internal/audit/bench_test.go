package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
)

// benchArgs are the arguments of a typical tool call.
var benchArgs = json.RawMessage(`{"city":"Paris","days":3,"units":{"temperature":"C","wind":"km/h"},"api_key":"k-123","tags":["a","b","c"]}`)

func benchRecord() *Record {
	return &Record{
		Time: time.Now(), Duration: 12 * time.Millisecond, Method: "tools/call", SessionID: "0123456789abcdef",
		Principal: "alice", Groups: []string{"dev"}, ClientName: "claude-code", ClientVersion: "2.1.0",
		ProtocolVersion: "2025-11-25", Server: "weather", Name: "weather__forecast", UpstreamName: "forecast",
		Decision: DecisionAllow, Outcome: OutcomeOK, ResultBytes: 2048, Rounds: 1,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", Arguments: benchArgs,
	}
}

// BenchmarkWrite measures the call path: Write of one record (allocated by the caller, as the
// gateway will) while the writer goroutine drains the queue to io.Discard.
func BenchmarkWrite(b *testing.B) {
	for _, mode := range []string{config.ArgumentsNone, config.ArgumentsFull, config.ArgumentsHashed} {
		b.Run(mode, func(b *testing.B) {
			l, err := New(&config.Audit{Stdout: true, Arguments: mode, Redact: []string{"*key*"}},
				&Options{Stdout: io.Discard, LookupEnv: noEnv})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				l.Write(benchRecord())
			}
			b.StopTimer()
			if err := l.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(l.Dropped())/float64(b.N), "dropped/op")
		})
	}
}

// BenchmarkWriteParallel is BenchmarkWrite from GOMAXPROCS goroutines at once.
func BenchmarkWriteParallel(b *testing.B) {
	l, err := New(&config.Audit{Stdout: true, Arguments: config.ArgumentsNone}, &Options{Stdout: io.Discard, LookupEnv: noEnv})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Write(benchRecord())
		}
	})
	b.StopTimer()
	if err := l.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(l.Dropped())/float64(b.N), "dropped/op")
}

// BenchmarkEncode measures the writer goroutine's work per record in each arguments mode:
// the arguments' recorded form and the JSON line. It bounds the sustained record rate.
func BenchmarkEncode(b *testing.B) {
	for _, bc := range []struct {
		name, mode string
		redact     []string
	}{
		{"none", config.ArgumentsNone, nil},
		{"full", config.ArgumentsFull, nil},
		{"full-redact", config.ArgumentsFull, []string{"*key*", "password"}},
		{"hashed", config.ArgumentsHashed, nil},
		{"hashed-redact", config.ArgumentsHashed, []string{"*key*", "password"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := &Log{args: newArguments(bc.mode, testKey, bc.redact)}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			rec := benchRecord()
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if !l.encode(enc, rec) {
					b.Fatal("encode failed")
				}
			}
			b.SetBytes(int64(buf.Len()))
		})
	}
}

// BenchmarkWriteDropped measures Write alone when the queue is full (the sink is stuck): the
// path a record takes when the log cannot keep up.
func BenchmarkWriteDropped(b *testing.B) {
	w := &blockingWriter{release: make(chan struct{}), started: make(chan struct{})}
	l, err := New(&config.Audit{Stdout: true, Buffer: 16}, &Options{Stdout: w, LookupEnv: noEnv})
	if err != nil {
		b.Fatal(err)
	}
	rec := benchRecord()
	for range 32 { // fill the queue
		l.Write(rec)
	}
	<-w.started
	b.ReportAllocs()
	for b.Loop() {
		l.Write(rec)
	}
	b.StopTimer()
	close(w.release)
	if err := l.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
}
