package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/internal/fixture"
	"go.uber.org/goleak"
)

// fixtureEnv makes the test binary act as the fixture's stdio server.
const fixtureEnv = "LOADGEN_TEST_FIXTURE"

func TestMain(m *testing.M) {
	if os.Getenv(fixtureEnv) == "1" {
		if err := fixture.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func stdioTarget() Target {
	return Target{Command: []string{os.Args[0], "--stdio"}, Env: append(os.Environ(), fixtureEnv+"=1")}
}

// httpTarget serves a fixture in-process until t ends.
func httpTarget(t *testing.T, opts *fixture.Options) Target {
	t.Helper()
	srv := httptest.NewServer(fixture.Handler(fixture.NewServer(opts)))
	t.Cleanup(srv.Close)
	return Target{URL: srv.URL + "/mcp"}
}

func TestPercentiles(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range n {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // reversed: percentiles sorts
	}
	tests := []struct {
		name string
		in   []time.Duration
		want Percentiles
	}{
		{"empty", nil, Percentiles{}},
		{"one", ms(7), Percentiles{N: 1, P50: 7 * time.Millisecond, P90: 7 * time.Millisecond, P99: 7 * time.Millisecond, Max: 7 * time.Millisecond, Mean: 7 * time.Millisecond}},
		{"hundred", ms(hundred...), Percentiles{N: 100, P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond, Mean: 50500 * time.Microsecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, percentiles(tt.in)); diff != "" {
				t.Errorf("percentiles (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no target", Config{}, "exactly one"},
		{"both targets", Config{Target: Target{URL: "http://x", Command: []string{"x"}}}, "exactly one"},
		{"negative", Config{Target: Target{URL: "http://x"}, Calls: -1}, "must not be negative"},
		{"bad args", Config{Target: Target{URL: "http://x"}, Args: json.RawMessage(`[1]`)}, "JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(context.Background(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
			}
		})
	}
	d, err := (&Config{Target: Target{URL: "http://x"}}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if d.Sessions != DefaultSessions || d.Calls != DefaultCalls || d.Tool != DefaultTool || string(d.Args) != DefaultArgs || d.Duration != DefaultDuration {
		t.Errorf("defaults = %+v", d)
	}
}

func TestRunHTTP(t *testing.T) {
	target := httpTarget(t, nil)
	rep, err := Run(context.Background(), Config{Target: target, Sessions: 4, Calls: 200, TargetPIDs: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Completed != 200 || rep.Errors != 0 || rep.TimedOut {
		t.Fatalf("report = %+v, want 200 calls without errors", rep)
	}
	if rep.Latency.N != 200 || rep.Latency.P50 <= 0 || rep.Latency.Max < rep.Latency.P99 || rep.CallsPerSecond <= 0 {
		t.Errorf("latency = %+v, calls/s %v", rep.Latency, rep.CallsPerSecond)
	}
	if rep.Initialize.N != 4 || rep.ListTools.N != 4 {
		t.Errorf("initialize %+v, list %+v: want 4 sessions each", rep.Initialize, rep.ListTools)
	}
	if rep.RSS.Err != "" || rep.RSS.PeakBytes <= 0 || rep.RSS.Processes < 1 {
		t.Errorf("rss = %+v, want this process measured", rep.RSS)
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"200 asked, 200 ok, 0 errors", "calls/s", "initialize", "tools/list", "rss"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"calls_per_second", "latency", "initialize", "list_tools", "rss", "elapsed_ms"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
}

func TestRunStdio(t *testing.T) {
	rep, err := Run(context.Background(), Config{Target: stdioTarget(), Sessions: 3, Calls: 60})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Completed != 60 || rep.Errors != 0 {
		t.Fatalf("report = %+v, want 60 calls without errors", rep)
	}
	if rep.RSS.Processes != 3 || rep.RSS.EndBytes <= 0 {
		t.Errorf("rss = %+v, want 3 processes measured", rep.RSS)
	}
}

func TestRunStdioLeavesNoProcess(t *testing.T) {
	// Find the servers' pids while they run, through the RSS roots.
	target := stdioTarget()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := (&Config{Target: target, Sessions: 2}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := connectAll(ctx, cfg, nil, &Report{})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, s := range sessions {
		pids = append(pids, s.proc.pid())
	}
	closeAll(sessions)
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("server %d still running after closeAll", pid)
		}
	}
}

func TestRunToolErrors(t *testing.T) {
	rep, err := Run(context.Background(), Config{Target: httpTarget(t, nil), Sessions: 2, Calls: 10, Tool: "test_error_handling", Args: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors != 10 || rep.ToolErrors != 10 || rep.Completed != 0 || len(rep.ErrorSamples) != 1 || !strings.Contains(rep.ErrorSamples[0], fixture.ErrorText) {
		t.Errorf("report = %+v, want 10 tool errors with one sample", rep)
	}
}

// TestRunPacedWithAToken: a paced run makes its calls, and sends its
// bearer token on every request.
func TestRunPacedWithAToken(t *testing.T) {
	var seen, without atomic.Int64
	h := fixture.Handler(fixture.NewServer(nil))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer k" {
			seen.Add(1)
		} else {
			without.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rep, err := Run(context.Background(), Config{Target: Target{URL: srv.URL + "/mcp"}, Sessions: 2, Calls: 10, Rate: 1000, Token: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Completed != 10 || rep.ToolErrors != 0 || seen.Load() < 10 || without.Load() != 0 {
		t.Errorf("report = %+v; requests with the token %d, without %d", rep, seen.Load(), without.Load())
	}
}

func TestRunUnknownTool(t *testing.T) {
	_, err := Run(context.Background(), Config{Target: httpTarget(t, nil), Calls: 1, Tool: "nope"})
	if err == nil || !strings.Contains(err.Error(), `no tool "nope"`) {
		t.Fatalf("err = %v, want no tool", err)
	}
}

func TestRunConnectFailure(t *testing.T) {
	_, err := Run(context.Background(), Config{Target: Target{Command: []string{"/nonexistent/server"}}, Calls: 1})
	if err == nil || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("err = %v, want a connect error", err)
	}
}

func TestRunDurationBound(t *testing.T) {
	// Each call takes ~200ms (two 100ms steps); the bound stops the run.
	target := httpTarget(t, &fixture.Options{StepDelay: 100 * time.Millisecond})
	start := time.Now()
	rep, err := Run(context.Background(), Config{Target: target, Calls: 1000, Tool: "test_tool_with_progress", Args: json.RawMessage(`{}`), Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.TimedOut || rep.Completed+rep.Errors >= 1000 || time.Since(start) > 10*time.Second {
		t.Errorf("report = %+v, want stopped by the duration bound", rep)
	}
}

func TestTreeRSS(t *testing.T) {
	rss, n, err := TreeRSS([]int{os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	if rss <= 0 || n < 1 {
		t.Errorf("TreeRSS(self) = %d bytes in %d processes", rss, n)
	}
	if _, _, err := TreeRSS(nil); err == nil {
		t.Errorf("TreeRSS(nil) succeeded")
	}
	if rss, n, err := TreeRSS([]int{1 << 30}); err != nil || rss != 0 || n != 0 {
		t.Errorf("TreeRSS(no such pid) = %d, %d, %v", rss, n, err)
	}
}

// TestProcessMemory: touching 64 MiB raises this process's peak by about
// that much; ResetPeak brings the peak back to the resident set.
func TestProcessMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	pid := os.Getpid()
	if err := ResetPeak(pid); err != nil {
		t.Skipf("cannot reset the peak here: %v", err)
	}
	before, err := ProcessMemory(pid)
	if err != nil {
		t.Fatal(err)
	}
	if before.RSS <= 0 || before.Peak < before.RSS {
		t.Fatalf("memory = %+v, want 0 < RSS <= Peak", before)
	}
	const size = 64 << 20
	buf := make([]byte, size)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	touched, err := ProcessMemory(pid)
	runtime.KeepAlive(buf)
	if err != nil {
		t.Fatal(err)
	}
	if grew := touched.Peak - before.RSS; grew < size*9/10 {
		t.Errorf("peak grew by %d bytes after touching %d", grew, size)
	}
	buf = nil
	runtime.GC()
	debug.FreeOSMemory()
	if err := ResetPeak(pid); err != nil {
		t.Fatal(err)
	}
	after, err := ProcessMemory(pid)
	if err != nil {
		t.Fatal(err)
	}
	if after.Peak >= touched.Peak-size/2 {
		t.Errorf("peak after ResetPeak = %d, want well under %d", after.Peak, touched.Peak)
	}
}
