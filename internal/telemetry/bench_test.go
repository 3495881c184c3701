package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
)

// BenchmarkMetrics measures the metric calls of one request on their own.
func BenchmarkMetrics(b *testing.B) {
	tel, err := New(context.Background(), &config.Telemetry{Metrics: &config.Metrics{}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	m := tel.Metrics()
	ctx := context.Background()
	b.Run("ServerOp", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.ServerOp(ctx, "tools/call", "weather", "", 3*time.Millisecond)
		}
	})
	b.Run("Inflight", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m.Inflight(ctx, "weather", 1)
		}
	})
	b.Run("ServerOp parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.ServerOp(ctx, "tools/call", "weather", "", 3*time.Millisecond)
			}
		})
	})
	b.Run("nil Metrics", func(b *testing.B) {
		var none *Metrics
		b.ReportAllocs()
		for b.Loop() {
			none.ServerOp(ctx, "tools/call", "weather", "", 3*time.Millisecond)
		}
	})
}

// BenchmarkRequest measures what the gateway adds to one proxied tools/call: extract the
// client's trace context, a server span, a client span injected into the upstream _meta, both
// ended, and the metrics (operation durations, in-flight calls), with tracing off, on but
// sampling nothing, and on sampling everything (exported to a local receiver).
func BenchmarkRequest(b *testing.B) {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer rcv.Close()
	ratio := func(r float64) *float64 { return &r }
	for _, bc := range []struct {
		name   string
		traces *config.Traces
	}{
		{"tracing off", nil},
		{"sampling off", &config.Traces{Endpoint: rcv.URL, Protocol: config.ProtocolHTTP, SampleRatio: ratio(0)}},
		{"sampling on", &config.Traces{Endpoint: rcv.URL, Protocol: config.ProtocolHTTP, SampleRatio: ratio(1)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tel, err := New(context.Background(), &config.Telemetry{Traces: bc.traces, Metrics: &config.Metrics{}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			m := tel.Metrics()
			incoming := map[string]any{"progressToken": 1}
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				ctx := Extract(context.Background(), incoming)
				ctx, server := tel.StartServer(ctx, SpanInfo{Method: "tools/call", Target: "weather__forecast", RequestID: "7", SessionID: "s1", Transport: TransportTCP})
				m.Inflight(ctx, "weather", 1)
				cctx, client := tel.StartClient(ctx, SpanInfo{Method: "tools/call", Target: "forecast", Server: "weather"})
				meta := Inject(cctx, nil)
				_ = meta
				EndSpan(client, "")
				m.ClientOp(cctx, "tools/call", "weather", "", time.Since(start))
				m.Inflight(ctx, "weather", -1)
				EndSpan(server, "")
				m.ServerOp(ctx, "tools/call", "weather", "", time.Since(start))
			}
		})
	}
}
