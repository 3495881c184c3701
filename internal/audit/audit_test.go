package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/testutil"
)

func TestMain(m *testing.M) {
	// lumberjack starts a goroutine per file that its Close does not stop
	// (natefinch/lumberjack#56); it is parked on a channel receive.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("gopkg.in/natefinch/lumberjack%2ev2.(*Logger).millRun"))
}

func noEnv(string) (string, bool) { return "", false }

func closeLog(t *testing.T, l *Log) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// lines parses JSON lines, failing on any line that is not a JSON object.
func lines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d is not a JSON object: %v\n%s", len(out)+1, err, sc.Text())
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRecordJSON(t *testing.T) {
	var out testutil.SyncBuffer
	l, err := New(&config.Audit{Stdout: true, Arguments: config.ArgumentsFull, Redact: []string{"secret"}},
		&Options{Stdout: &out, LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 7, 1, 12, 0, 0, 123456789, time.FixedZone("CEST", 2*3600))
	l.Write(&Record{
		Time: start, Duration: 1234567 * time.Nanosecond, Method: "tools/call", SessionID: "s-1",
		Principal: "alice", Groups: []string{"dev"}, ClientName: "claude", ClientVersion: "1.2",
		ProtocolVersion: "2025-11-25", Server: "weather", Name: "weather__forecast", UpstreamName: "forecast",
		Decision: DecisionAllow, Rule: "devs", Outcome: OutcomeError, ErrorCode: -32602, ResultBytes: 0, Rounds: 2,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7",
		Arguments: json.RawMessage(`{"city":"Paris","secret":"x"}`),
	})
	l.Write(&Record{Method: "resources/read", Principal: "bob", Name: "file:///x", Decision: DecisionDeny, Outcome: OutcomeError, ErrorCode: -32002})
	closeLog(t, l)

	text := out.String()
	wantFirst := `{"time":"2026-07-01T10:00:00.123456789Z","duration_ms":1.235,"method":"tools/call","session_id":"s-1",` +
		`"principal":"alice","groups":["dev"],"client_name":"claude","client_version":"1.2","protocol_version":"2025-11-25",` +
		`"server":"weather","name":"weather__forecast","upstream_name":"forecast","decision":"allow","rule":"devs",` +
		`"outcome":"error","error_code":-32602,"result_bytes":0,"rounds":2,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736",` +
		`"span_id":"00f067aa0ba902b7","arguments":{"city":"Paris","secret":"[REDACTED]"}}`
	first, rest, _ := strings.Cut(text, "\n")
	if first != wantFirst {
		t.Errorf("first line:\n%s\nwant:\n%s", first, wantFirst)
	}
	got := lines(t, rest)
	if len(got) != 1 {
		t.Fatalf("got %d more lines, want 1", len(got))
	}
	want := map[string]any{"method": "resources/read", "principal": "bob", "name": "file:///x", "decision": "deny",
		"outcome": "error", "error_code": -32002.0, "result_bytes": 0.0, "duration_ms": 0.0}
	delete(got[0], "time") // filled in by Write
	if diff := cmp.Diff(want, got[0]); diff != "" {
		t.Errorf("second line (-want +got):\n%s", diff)
	}
}

func TestTimeFilledIn(t *testing.T) {
	var out testutil.SyncBuffer
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l, err := New(&config.Audit{Stdout: true, Arguments: config.ArgumentsNone}, &Options{Stdout: &out, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	l.Write(&Record{Method: "prompts/get", Arguments: map[string]string{"a": "b"}})
	closeLog(t, l)
	got := lines(t, out.String())
	if len(got) != 1 || got[0]["time"] != "2026-01-02T03:04:05Z" || got[0]["arguments"] != nil {
		t.Fatalf("got %v", got)
	}
}

// TestExactCount writes from many goroutines, closing while they write: every record is
// either written, as one well-formed line, or counted as dropped.
func TestExactCount(t *testing.T) {
	for _, buffer := range []int{1, 16, 4096} {
		t.Run(fmt.Sprint("buffer ", buffer), func(t *testing.T) {
			var out testutil.SyncBuffer
			l, err := New(&config.Audit{Stdout: true, Buffer: buffer}, &Options{Stdout: &out, LookupEnv: noEnv})
			if err != nil {
				t.Fatal(err)
			}
			const writers, each = 8, 500
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						l.Write(&Record{Method: "tools/call", Name: fmt.Sprintf("w%d-%d", w, i), Arguments: map[string]int{"i": i}})
					}
				})
			}
			time.Sleep(time.Millisecond)
			closeLog(t, l) // races with the writers on purpose
			wg.Wait()
			got := lines(t, out.String())
			if total := uint64(len(got)) + l.Dropped(); total != writers*each {
				t.Errorf("written %d + dropped %d = %d, want %d", len(got), l.Dropped(), total, writers*each)
			}
		})
	}
}

func TestAllWrittenWhenNotFull(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	var out testutil.SyncBuffer
	l, err := New(&config.Audit{File: path, Stdout: true, Buffer: 2000}, &Options{Stdout: &out, LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		l.Write(&Record{Method: "tools/call", Name: fmt.Sprint(i)})
	}
	closeLog(t, l)
	if l.Dropped() != 0 {
		t.Fatalf("Dropped = %d", l.Dropped())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := lines(t, string(data)); len(got) != 2000 {
		t.Errorf("file has %d records, want 2000", len(got))
	}
	if string(data) != out.String() {
		t.Error("file and stdout differ")
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("file mode = %v, want 0600", perm)
	}
}

// TestHashedHidesValues checks that in hashed mode no argument value reaches the log.
func TestHashedHidesValues(t *testing.T) {
	var out testutil.SyncBuffer
	l, err := New(&config.Audit{Stdout: true, HashKey: strings.Repeat("x", 32)}, &Options{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	values := []string{"s3cret-value", "4111111111111111", "deep-in-a-list"}
	l.Write(&Record{Method: "tools/call", Arguments: json.RawMessage(
		`{"password":"s3cret-value","card":4111111111111111,"x":{"y":["deep-in-a-list"]}}`)})
	l.Write(&Record{Method: "prompts/get", Arguments: map[string]string{"q": "s3cret-value"}})
	closeLog(t, l)
	text := out.String()
	for _, v := range values {
		if strings.Contains(text, v) {
			t.Errorf("the log contains %q:\n%s", v, text)
		}
	}
	for _, rec := range lines(t, text) {
		if s, _ := rec["arguments"].(string); !strings.HasPrefix(s, HashPrefix) || len(s) != len(HashPrefix)+64 {
			t.Errorf("arguments = %v, want %s and 64 hex digits", rec["arguments"], HashPrefix)
		}
	}
}

func TestHashKeySources(t *testing.T) {
	args := json.RawMessage(`{"a":1}`)
	hashWith := func(t *testing.T, cfg config.Audit, env map[string]string) (string, *observer.ObservedLogs) {
		t.Helper()
		core, logs := observer.New(zapcore.DebugLevel)
		var out testutil.SyncBuffer
		cfg.Stdout = true
		l, err := New(&cfg, &Options{Stdout: &out, Logger: zap.New(core),
			LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
		if err != nil {
			t.Fatal(err)
		}
		l.Write(&Record{Arguments: args})
		closeLog(t, l)
		return lines(t, out.String())[0]["arguments"].(string), logs
	}
	key := strings.Repeat("k", 32)
	fromConfig, logs := hashWith(t, config.Audit{HashKey: key}, nil)
	if logs.Len() != 0 {
		t.Errorf("logged with a configured key: %v", logs.All())
	}
	fromEnv, _ := hashWith(t, config.Audit{}, map[string]string{HashKeyEnv: key})
	if fromEnv != fromConfig {
		t.Error("the same key from the environment gives another hash")
	}
	random1, logs := hashWith(t, config.Audit{}, nil)
	random2, _ := hashWith(t, config.Audit{}, nil)
	if random1 == random2 || random1 == fromConfig {
		t.Error("random keys are not random")
	}
	warned := logs.FilterMessageSnippet("random key").FilterLevelExact(zapcore.WarnLevel)
	if warned.Len() != 1 {
		t.Fatalf("want one warning about the random key, got %v", logs.All())
	}
	if ctx := warned.All()[0].Context; len(ctx) != 0 {
		t.Errorf("the warning has fields %v; it must not carry the key", ctx)
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  config.Audit
		env  map[string]string
		want string
	}{
		{name: "no sink", cfg: config.Audit{}, want: "needs file or stdout"},
		{name: "bad mode", cfg: config.Audit{Stdout: true, Arguments: "some"}, want: "unknown arguments mode"},
		{name: "short configured key", cfg: config.Audit{Stdout: true, HashKey: "short"}, want: "audit.hashKey is too short"},
		{name: "short key from the environment", cfg: config.Audit{Stdout: true}, env: map[string]string{HashKeyEnv: "short"}, want: HashKeyEnv + " is too short"},
		{name: "missing directory", cfg: config.Audit{File: filepath.Join(dir, "no", "a.jsonl")}, want: "does not exist"},
		{name: "file is a directory", cfg: config.Audit{File: dir}, want: "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(&tt.cfg, &Options{LookupEnv: func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New error = %v, want it to contain %q", err, tt.want)
			}
			if l != nil {
				t.Fatal("New returned a Log with an error")
			}
		})
	}
	t.Run("unwritable file", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root can write anywhere")
		}
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		if _, err := New(&config.Audit{File: filepath.Join(ro, "a.jsonl")}, &Options{LookupEnv: noEnv}); err == nil {
			t.Fatal("New succeeded in a read-only directory")
		}
	})
}

func TestNilLog(t *testing.T) {
	l, err := New(nil, nil)
	if err != nil || l != nil {
		t.Fatalf("New(nil) = %v, %v; want nil, nil", l, err)
	}
	l.Write(&Record{Method: "tools/call"})
	if l.Dropped() != 0 {
		t.Error("a nil Log counted a drop")
	}
	if err := l.Close(context.Background()); err != nil {
		t.Errorf("Close of a nil Log: %v", err)
	}
}

// blockingWriter blocks every Write until release is closed.
type blockingWriter struct {
	release chan struct{}
	started chan struct{}
	once    sync.Once
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	<-w.release
	return len(p), nil
}

func TestBlockedSink(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{}), started: make(chan struct{})}
	core, logs := observer.New(zapcore.WarnLevel)
	l, err := New(&config.Audit{Stdout: true, Buffer: 4}, &Options{Stdout: w, LookupEnv: noEnv, Logger: zap.New(core), reportEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l.Write(&Record{Method: "tools/call"})
	<-w.started // the writer is now stuck in the sink

	const n = 10000
	start := time.Now()
	for range n {
		l.Write(&Record{Method: "tools/call"})
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("%d writes to a blocked log took %v", n, elapsed)
	}
	if got := l.Dropped(); got < n-4 {
		t.Errorf("Dropped = %d, want at least %d", got, n-4)
	}
	for deadline := time.Now().Add(5 * time.Second); logs.FilterMessage("audit records dropped").Len() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("drops were not reported while the writer is stuck")
		}
		time.Sleep(time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := l.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("Close took %v despite its deadline", elapsed)
	}
	close(w.release) // the stuck write returns; the writer drops the rest and exits
	<-l.reported
	if got := l.Dropped(); got != n {
		t.Errorf("Dropped = %d after close, want %d (all but the first record)", got, n)
	}
	var reported uint64
	for _, e := range logs.FilterMessage("audit records dropped").All() {
		reported += e.ContextMap()[logKeyDropped].(uint64)
	}
	if reported != n {
		t.Errorf("reported %d drops in all, want %d", reported, n)
	}
}

// TestFullPipe uses a real pipe nobody reads: the kernel buffer fills and the writer blocks.
func TestFullPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l, err := New(&config.Audit{Stdout: true, Arguments: config.ArgumentsFull, Buffer: 8}, &Options{Stdout: w, LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`{"blob":"` + strings.Repeat("x", 64<<10) + `"}`)
	start := time.Now()
	for range 200 {
		l.Write(&Record{Method: "tools/call", Arguments: big})
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("writes took %v", elapsed)
	}
	deadline := time.Now().Add(5 * time.Second)
	for l.Dropped() == 0 && time.Now().Before(deadline) {
		l.Write(&Record{Method: "tools/call", Arguments: big})
		time.Sleep(time.Millisecond)
	}
	if l.Dropped() == 0 {
		t.Fatal("nothing dropped with a full pipe")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := l.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	r.Close() // the blocked write fails with EPIPE; the writer exits
	select {
	case <-l.reported:
	case <-time.After(5 * time.Second):
		t.Fatal("the writer did not exit after the pipe closed")
	}
}

func TestWriteErrorsCountAsDropped(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	l, err := New(&config.Audit{Stdout: true}, &Options{Stdout: failingWriter{}, LookupEnv: noEnv, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		l.Write(&Record{Method: "tools/call"})
	}
	closeLog(t, l)
	if l.Dropped() != 5 {
		t.Errorf("Dropped = %d, want 5", l.Dropped())
	}
	if logs.FilterMessage("audit records not written").Len() != 1 {
		t.Errorf("want one (rate-limited) write error, got %v", logs.All())
	}
	if logs.FilterMessage("audit records dropped").Len() != 1 {
		t.Errorf("want the drops reported at close, got %v", logs.All())
	}
}

func TestPanickingSink(t *testing.T) {
	l, err := New(&config.Audit{Stdout: true}, &Options{Stdout: panickingWriter{}, LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	l.Write(&Record{Method: "tools/call"})
	closeLog(t, l)
	if l.Dropped() != 1 {
		t.Errorf("Dropped = %d, want 1", l.Dropped())
	}
}

type panickingWriter struct{}

func (panickingWriter) Write([]byte) (int, error) { panic("boom") }

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestWriteAfterClose(t *testing.T) {
	l, err := New(&config.Audit{Stdout: true}, &Options{Stdout: io.Discard, LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	closeLog(t, l)
	closeLog(t, l) // twice is fine
	l.Write(&Record{})
	if l.Dropped() != 1 {
		t.Errorf("Dropped = %d, want 1", l.Dropped())
	}
}

func TestBadArgumentsAreNoted(t *testing.T) {
	var out testutil.SyncBuffer
	l, err := New(&config.Audit{Stdout: true, Arguments: config.ArgumentsFull}, &Options{Stdout: &out, LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	l.Write(&Record{Method: "tools/call", Arguments: json.RawMessage(`{"a":`)})
	l.Write(&Record{Method: "tools/call", Arguments: func() {}})
	closeLog(t, l)
	got := lines(t, out.String())
	if len(got) != 2 || got[0]["arguments_error"] != "not valid JSON" || got[1]["arguments_error"] != "cannot be recorded" {
		t.Errorf("got %v", got)
	}
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	l, err := New(&config.Audit{File: path, Arguments: config.ArgumentsFull, MaxSizeMB: 1, MaxBackups: 100, Buffer: 64},
		&Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	blob := json.RawMessage(`{"blob":"` + strings.Repeat("y", 20<<10) + `"}`)
	const n = 150 // about 3 MiB
	for i := range n {
		for l.queueLen() >= 60 { // stay below the queue's capacity: this test wants every record
			time.Sleep(100 * time.Microsecond)
		}
		l.Write(&Record{Method: "tools/call", Name: fmt.Sprint(i), Arguments: blob})
	}
	closeLog(t, l)
	if l.Dropped() != 0 {
		t.Fatalf("Dropped = %d", l.Dropped())
	}
	files, err := filepath.Glob(filepath.Join(dir, "audit*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("got files %v, want the current one and at least two rotated ones", files)
	}
	seen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 1<<20 {
			t.Errorf("%s has %d bytes, more than MaxSizeMB", f, len(data))
		}
		for _, rec := range lines(t, string(data)) {
			seen[rec["name"].(string)] = true
		}
	}
	if len(seen) != n {
		t.Errorf("found %d distinct records across the files, want %d", len(seen), n)
	}
}

func (l *Log) queueLen() int { return len(l.queue) }
