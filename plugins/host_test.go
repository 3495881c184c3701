package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/policy"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

// testHost starts a host with the test binary as guard and builtin
// executable, closed with the test.
func testHost(t *testing.T, onList func()) *Host {
	t.Helper()
	h := New(&Options{Logger: zaptest.NewLogger(t), GuardPath: os.Args[0], Executable: os.Args[0], OnListChange: onList})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return h
}

// testPluginConfig is the test plugin, run from the test binary.
func testPluginConfig(t *testing.T, name, cfg string) config.Plugin {
	p := config.Plugin{Name: name, Command: []string{os.Args[0]}, SHA256: selfSum(t), Env: map[string]string{"ALLOWED": "yes"}}
	if cfg != "" {
		p.Config = json.RawMessage(cfg)
	}
	p.Mode, p.OnError, p.Timeout = config.PluginEnforce, config.PluginFailClosed, 5*time.Second
	return p
}

var toolTarget = &Target{Kind: policy.Tool, Server: "s", Name: "s__t", Upstream: "t", Principal: policy.NewPrincipal("alice", nil)}

func TestHooksModifyAndBlock(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	h := testHost(t, nil)
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", `{"block":"etc/passwd","replace":"secret"}`)}, 1<<20)
	c := h.Chain()

	out, err := c.Pre(context.Background(), toolTarget, []byte(`{"path":"../../etc/passwd"}`))
	var be *BlockedError
	if !errors.As(err, &be) || be.Unavailable || be.Reason != "no etc/passwd for alice" {
		t.Fatalf("Pre = %+v, %v; want blocked with the plugin's reason", out, err)
	}
	if len(out.Decisions) != 1 || out.Decisions[0].Action != "block" || out.Decisions[0].Rule != "test" {
		t.Errorf("decisions = %+v", out.Decisions)
	}
	out, err = c.Pre(context.Background(), toolTarget, []byte(`{"path":"a"}`))
	if err != nil || out.Changed {
		t.Errorf("Pre of allowed arguments = %+v, %v", out, err)
	}
	out, err = c.Post(context.Background(), toolTarget, []byte(`{"content":[{"type":"text","text":"a secret"}]}`))
	if err != nil || !out.Changed || string(out.Payload) != `{"content":[{"type":"text","text":"a [gone]"}]}` {
		t.Errorf("Post = %s, %v", out.Payload, err)
	}
	if out.Decisions[0].Counts["word"] != 1 {
		t.Errorf("counts = %v", out.Decisions[0].Counts)
	}
	if st := h.Status(); len(st) != 1 || !st[0].Up || st[0].Error != "" {
		t.Errorf("status = %+v", st)
	}
}

func TestPluginProcessHygiene(t *testing.T) {
	t.Setenv("GATEWAY_SECRET", "do-not-leak")
	h := testHost(t, nil)
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", "")}, 1<<20)
	out, err := h.Chain().Pre(context.Background(), &Target{Kind: policy.Prompt, Server: "s", Name: "s__p"}, []byte(`{}`))
	if err != nil || !out.Respond {
		t.Fatalf("Pre = %+v, %v", out, err)
	}
	var seen struct {
		Env   []string
		Stdin int
		Pgid  int
	}
	if err := json.Unmarshal(out.Payload, &seen); err != nil {
		t.Fatal(err)
	}
	env := strings.Join(seen.Env, "\n")
	if strings.Contains(env, "GATEWAY_SECRET") || !strings.Contains(env, "ALLOWED=yes") {
		t.Errorf("plugin environment = %q; want its env only", seen.Env)
	}
	if seen.Stdin != 0 {
		t.Errorf("plugin read %d bytes from stdin; want none", seen.Stdin)
	}
	if seen.Pgid == syscall.Getpgrp() {
		t.Errorf("plugin runs in the gateway's process group")
	}
}

func TestWrongChecksumIsRefused(t *testing.T) {
	h := testHost(t, nil)
	p := testPluginConfig(t, "p", "")
	p.SHA256 = strings.Repeat("0", 64)
	h.Apply(context.Background(), []config.Plugin{p}, 1<<20)
	st := h.Status()
	if len(st) != 1 || st[0].Up || !strings.Contains(st[0].Error, "does not match its sha256") {
		t.Fatalf("status = %+v; want the checksum error", st)
	}
	_, err := h.Chain().Pre(context.Background(), toolTarget, []byte(`{}`))
	var be *BlockedError
	if !errors.As(err, &be) || !be.Unavailable {
		t.Errorf("Pre with the plugin down = %v; want fail-closed", err)
	}
	p.OnError = config.PluginFailOpen
	h.Apply(context.Background(), []config.Plugin{p}, 1<<20)
	if out, err := h.Chain().Pre(context.Background(), toolTarget, []byte(`{}`)); err != nil || out.Decisions[0].Action != "error" {
		t.Errorf("Pre fail-open = %+v, %v; want it to pass, the error recorded", out, err)
	}
}

func TestCrashedPluginRestarts(t *testing.T) {
	h := testHost(t, nil)
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", "")}, 1<<20)
	pid, _ := strconv.Atoi(h.Status()[0].PID)
	if pid == 0 {
		t.Fatal("no pid")
	}
	// The guard's group: kill the plugin itself (the guard's child).
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		st := h.Status()[0]
		if st.Up && st.PID != strconv.Itoa(pid) {
			if st.Restarts != 1 {
				t.Errorf("restarts = %d", st.Restarts)
			}
			break
		}
		if i > 200 {
			t.Fatalf("not back after 10 s: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := h.Chain().Pre(context.Background(), toolTarget, []byte(`{}`)); err != nil {
		t.Errorf("after restart: %v", err)
	}
}

func TestReloadOfConfigKeepsTheProcess(t *testing.T) {
	var lists atomic.Int32
	h := testHost(t, func() { lists.Add(1) })
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", `{"block":"x"}`)}, 1<<20)
	pid := h.Status()[0].PID
	before := lists.Load()
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", `{"block":"y"}`)}, 1<<20)
	if got := h.Status()[0].PID; got != pid {
		t.Errorf("pid %s → %s: a config change restarted the plugin", pid, got)
	}
	if lists.Load() == before {
		t.Error("a config change did not signal a list change")
	}
	if _, err := h.Chain().Pre(context.Background(), toolTarget, []byte(`"y"`)); !errors.Is(err, ErrBlocked) {
		t.Errorf("new config not in force: %v", err)
	}
	// Adding a plugin and removing it.
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", `{"block":"y"}`), testPluginConfig(t, "q", `{"block":"z"}`)}, 1<<20)
	if _, err := h.Chain().Pre(context.Background(), toolTarget, []byte(`"z"`)); !errors.Is(err, ErrBlocked) {
		t.Errorf("added plugin not in force: %v", err)
	}
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", `{"block":"y"}`)}, 1<<20)
	if _, err := h.Chain().Pre(context.Background(), toolTarget, []byte(`"z"`)); err != nil {
		t.Errorf("removed plugin still in force: %v", err)
	}
	if got := h.Status()[0].PID; got != pid {
		t.Errorf("pid %s → %s across add/remove of another plugin", pid, got)
	}
}

func TestListPostRenames(t *testing.T) {
	h := testHost(t, nil)
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", `{"rename":{"s__echo":"say","s__other":"s__echo2"}}`)}, 1<<20)
	items := []ListItem{
		{Key: "s__echo", Raw: json.RawMessage(`{"name":"s__echo","inputSchema":{"type":"object"}}`)},
		{Key: "s__echo2", Raw: json.RawMessage(`{"name":"s__echo2","inputSchema":{"type":"object"}}`)},
	}
	out, renames := h.Chain().ListPost(context.Background(), "tools", "name", nil, items[:1])
	if len(out) != 1 || out[0].Key != "say" || renames["say"] != "s__echo" {
		t.Errorf("ListPost = %+v, %v", out, renames)
	}
	// s__other is not listed: nothing to rename. A rename onto a listed
	// name is refused; fail-closed empties the list.
	items = append(items, ListItem{Key: "s__other", Raw: json.RawMessage(`{"name":"s__other"}`)})
	out, _ = h.Chain().ListPost(context.Background(), "tools", "name", nil, items)
	if len(out) != 0 {
		t.Errorf("colliding rename: %+v; want it refused", out)
	}
}

func TestAuditEventIsDelivered(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit")
	h := testHost(t, nil)
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", `{"auditFile":`+strconv.Quote(file)+`}`)}, 1<<20)
	if !h.Chain().Audits() {
		t.Fatal("Audits() = false for a plugin with audit_event")
	}
	h.Chain().Audit([]byte(`{"method":"tools/call"}`))
	for i := 0; ; i++ {
		if b, _ := os.ReadFile(file); string(b) == "{\"method\":\"tools/call\"}\n" {
			break
		}
		if i > 200 {
			t.Fatal("the audit record did not reach the plugin in 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestObserveModeChangesNothing(t *testing.T) {
	h := testHost(t, nil)
	p := testPluginConfig(t, "p", `{"block":"x","replace":"x"}`)
	p.Mode = config.PluginObserve
	h.Apply(context.Background(), []config.Plugin{p}, 1<<20)
	out, err := h.Chain().Pre(context.Background(), toolTarget, []byte(`{"a":"x"}`))
	if err != nil || out.Changed || len(out.Decisions) != 1 || out.Decisions[0].Action != "block" || !out.Decisions[0].Observed {
		t.Errorf("Pre in observe mode = %+v, %v; want the block recorded, not applied", out, err)
	}
	out, err = h.Chain().Post(context.Background(), toolTarget, []byte(`{"t":"x"}`))
	if err != nil || out.Changed || string(out.Payload) != `{"t":"x"}` || out.Decisions[0].Action != "modify" {
		t.Errorf("Post in observe mode = %+v, %v", out, err)
	}
}

func TestChangedBinaryIsSwappedAfterItsHealthCheck(t *testing.T) {
	h := testHost(t, nil)
	p := testPluginConfig(t, "p", `{"block":"x"}`)
	h.Apply(context.Background(), []config.Plugin{p}, 1<<20)
	old := h.Status()[0].PID
	// A changed spec (here its environment; a new binary and checksum
	// alike) starts a new process beside the old one.
	p.Env = map[string]string{"ALLOWED": "again"}
	h.Apply(context.Background(), []config.Plugin{p}, 1<<20)
	st := h.Status()[0]
	if !st.Up || st.PID == old {
		t.Fatalf("status after the change = %+v; want a new process up (old pid %s)", st, old)
	}
	if _, err := h.Chain().Pre(context.Background(), toolTarget, []byte(`"x"`)); !errors.Is(err, ErrBlocked) {
		t.Errorf("after the swap: %v", err)
	}
	// A replacement that fails to start leaves the running one in force.
	bad := p
	bad.Env = map[string]string{"ALLOWED": "bad"}
	bad.SHA256 = strings.Repeat("1", 64)
	h.Apply(context.Background(), []config.Plugin{bad}, 1<<20)
	if got := h.Status()[0]; !got.Up || got.PID != st.PID {
		t.Errorf("status after a failed replacement = %+v; want pid %s still up", got, st.PID)
	}
}

func TestHookCallsAreTracedAndMeasured(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	h := New(&Options{Logger: zaptest.NewLogger(t),
		Tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)).Tracer("test"),
		Meter:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")})
	t.Cleanup(func() { h.Close(context.Background()) })
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", `{"block":"x"}`)}, 1<<20)
	_, _ = h.Chain().Pre(context.Background(), toolTarget, []byte(`"x"`))

	ended := spans.Ended()
	if len(ended) != 1 || ended[0].Name() != "plugin tool_pre_call" {
		t.Fatalf("spans = %v; want one per hook call", ended)
	}
	attrs := map[string]string{}
	for _, a := range ended[0].Attributes() {
		attrs[string(a.Key)] = a.Value.AsString()
	}
	if attrs["manifold.plugin"] != "p" || attrs["manifold.plugin.outcome"] != "BLOCK" {
		t.Errorf("span attributes = %v", attrs)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "manifold.plugin.hook.duration" {
				found = len(h.DataPoints) == 1 && h.DataPoints[0].Count == 1
			}
		}
	}
	if !found {
		t.Errorf("no hook latency recorded: %+v", rm.ScopeMetrics)
	}
}
