package gateway

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/audit"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/internal/telemetry"
	"github.com/manifold-mcp/manifold/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// auditSink is an audit log writing full arguments into a buffer.
type auditSink struct {
	log *audit.Log
	buf bytes.Buffer
}

func newAuditSink(t *testing.T, mode string) *auditSink {
	t.Helper()
	s := &auditSink{}
	l, err := audit.New(&config.Audit{Stdout: true, Arguments: mode},
		&audit.Options{Stdout: &lockedWriter{w: &s.buf}, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	s.log = l
	t.Cleanup(func() { l.Close(context.Background()) })
	return s
}

// records closes the log (writing what is queued) and returns its records.
func (s *auditSink) records(t *testing.T) []map[string]any {
	t.Helper()
	if err := s.log.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return testutil.JSONLines(t, s.buf.Bytes())
}

// observedPolicy denies alpha__add (a named rule) and the logo resource, and
// allows alpha__echo to the dev group by a rule of its own; the rest is
// allowed by default.
func observedPolicy(c *config.Config) {
	c.Auth.Local.Groups = []string{"dev"}
	c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
		{Name: "no-add", Effect: config.Deny, Match: config.Match{Tools: []string{"alpha__add"}}},
		{Effect: config.Deny, Match: config.Match{Resources: []string{"manifold://alpha/demo://alpha/logo"}}},
		{Effect: config.Allow, Match: config.Match{Tools: []string{"alpha__echo"}}, Principals: []string{"group:dev"}},
	}}
}

// observedCalls makes one of each kind of audited request.
func observedCalls(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		args    any
		wantErr bool
	}{
		{name: "alpha__echo", args: map[string]any{"message": "hi"}},
		{name: "alpha__fail"},
		{name: "alpha__nope", wantErr: true},
		{name: "alpha__add", args: map[string]any{"a": 1, "b": 2}, wantErr: true},
	} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.name, Arguments: c.args}); (err != nil) != c.wantErr {
			t.Fatalf("call %s: %v", c.name, err)
		}
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "alpha__greet", Arguments: map[string]string{"person": "Ada"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "manifold://alpha/demo://alpha/readme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "manifold://alpha/demo://alpha/logo"}); err == nil {
		t.Fatal("the denied resource was read")
	}
}

// TestAuditRecords: the handlers fill in each record: route, the policy's
// decision and rule (denials included), outcome and error code, result
// size, client and principal.
func TestAuditRecords(t *testing.T) {
	sink := newAuditSink(t, config.ArgumentsFull)
	h := newHarnessOpts(t, &Options{Audit: sink.log}, observedPolicy, upstreamSpec{name: "alpha", demoName: "alpha"})
	cs := h.connectVersion(t, "2025-11-25")
	observedCalls(t, cs)
	recs := sink.records(t)

	common := map[string]any{"principal": "local", "groups": []any{"dev"}, "client_name": "test-client",
		"protocol_version": "2025-11-25", "rounds": float64(1)}
	want := []map[string]any{
		{"method": "tools/call", "name": "alpha__echo", "server": "alpha", "upstream_name": "echo",
			"decision": "allow", "rule": "policy.rules[2]", "outcome": "ok", "arguments": map[string]any{"message": "hi"}},
		{"method": "tools/call", "name": "alpha__fail", "server": "alpha", "upstream_name": "fail",
			"decision": "allow", "outcome": "tool_error", "arguments": map[string]any{}},
		{"method": "tools/call", "name": "alpha__nope", "decision": "allow", "outcome": "error", "error_code": float64(-32602),
			"arguments": map[string]any{}},
		{"method": "tools/call", "name": "alpha__add", "server": "alpha", "upstream_name": "add",
			"decision": "deny", "rule": "no-add", "outcome": "error", "error_code": float64(-32602),
			"arguments": map[string]any{"a": float64(1), "b": float64(2)}},
		{"method": "prompts/get", "name": "alpha__greet", "server": "alpha", "upstream_name": "greet",
			"decision": "allow", "outcome": "ok", "arguments": map[string]any{"person": "Ada"}},
		{"method": "resources/read", "name": "manifold://alpha/demo://alpha/readme", "server": "alpha",
			"upstream_name": "demo://alpha/readme", "decision": "allow", "outcome": "ok"},
		{"method": "resources/read", "name": "manifold://alpha/demo://alpha/logo", "server": "alpha",
			"upstream_name": "demo://alpha/logo", "decision": "deny", "rule": "policy.rules[1]", "outcome": "error",
			"error_code": float64(codeLegacyResourceNotFound)}, // a 2025-11-25 client's code
	}
	var got []map[string]any
	for i, rec := range recs {
		if _, err := time.Parse(time.RFC3339Nano, rec["time"].(string)); err != nil {
			t.Errorf("record %d: time %v", i, rec["time"])
		}
		if d, _ := rec["duration_ms"].(float64); d <= 0 {
			t.Errorf("record %d: duration_ms %v", i, rec["duration_ms"])
		}
		size, _ := rec["result_bytes"].(float64)
		if ok := rec["outcome"] != "error"; ok != (size > 0) {
			t.Errorf("record %d (%s): result_bytes %v", i, rec["outcome"], size)
		}
		for _, k := range []string{"time", "duration_ms", "result_bytes"} {
			delete(rec, k)
		}
		got = append(got, rec)
	}
	for _, w := range want {
		for k, v := range common {
			w[k] = v
		}
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("audit records (-want +got):\n%s", diff)
	}
}

// TestAuditResultBytes: result_bytes is the size of the result's JSON as
// the client receives it.
func TestAuditResultBytes(t *testing.T) {
	sink := newAuditSink(t, config.ArgumentsNone)
	h := newHarnessOpts(t, &Options{Audit: sink.log}, nil, upstreamSpec{name: "alpha", demoName: "alpha"})
	var wire bytes.Buffer
	ct, st := mcp.NewInMemoryTransports()
	if _, err := h.gw.Server().Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(),
		&mcp.LoggingTransport{Transport: ct, Writer: &lockedWriter{w: &wire}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "sized"}}); err != nil {
		t.Fatal(err)
	}
	var want int
	for line := range strings.Lines(wire.String()) {
		var msg struct{ Result json.RawMessage }
		if data, ok := strings.CutPrefix(line, "read: "); ok && strings.Contains(data, "sized") && json.Unmarshal([]byte(data), &msg) == nil {
			want = len(msg.Result)
		}
	}
	recs := sink.records(t)
	if len(recs) != 1 || want == 0 {
		t.Fatalf("%d records; wire:\n%s", len(recs), wire.String())
	}
	if got := recs[0]["result_bytes"]; got != float64(want) {
		t.Errorf("result_bytes = %v, want %d; wire:\n%s", got, want, wire.String())
	}
	if _, ok := recs[0]["arguments"]; ok {
		t.Error("arguments recorded in none mode")
	}
}

const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan  = "00f067aa0ba902b7"
	clientTP    = "00-" + clientTrace + "-" + clientSpan + "-01"
)

// metaOf returns the _meta the demo meta tool received.
func metaOf(t *testing.T, res *mcp.CallToolResult) demoMeta {
	t.Helper()
	var out demoMeta
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

type demoMeta struct {
	Meta    map[string]any    `json:"meta"`
	Headers map[string]string `json:"headers"`
}

// TestTraceSpans: a request with a trace context in _meta gets a server
// span under it and a client span under that; the upstream receives the
// client span as its parent, and the audit record the trace and span ids.
// newTracing returns telemetry exporting traces to a receiver, recording
// only requests with a sampled parent.
func newTracing(t *testing.T) (*testutil.OTLPReceiver, *telemetry.Telemetry) {
	t.Helper()
	rcv := testutil.NewOTLPReceiver(t)
	ratio := 0.0
	tel, err := telemetry.New(context.Background(), &config.Telemetry{Traces: &config.Traces{
		Endpoint: rcv.URL, Protocol: config.ProtocolHTTP, SampleRatio: &ratio}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	return rcv, tel
}

func TestTraceSpans(t *testing.T) {
	rcv, tel := newTracing(t)
	sink := newAuditSink(t, config.ArgumentsNone)
	h := newHarnessOpts(t, &Options{Audit: sink.log, Telemetry: tel}, nil, upstreamSpec{name: "alpha", demoName: "alpha"})
	cs := h.connectVersion(t, "2025-11-25")

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__meta",
		Meta: mcp.Meta{"traceparent": clientTP, "tracestate": "vendor=1", "other": "kept"}})
	if err != nil {
		t.Fatal(err)
	}
	got := metaOf(t, res)
	if _, err := cs.ListTools(context.Background(), nil); err != nil { // not sampled: no span
		t.Fatal(err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans, _, _ := rcv.Received()
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	srv, cli := byName["tools/call alpha__meta"], byName["tools/call meta"]
	if len(spans) != 2 || srv == nil || cli == nil {
		t.Fatalf("spans: %v", spans)
	}
	if hex.EncodeToString(srv.TraceId) != clientTrace || hex.EncodeToString(cli.TraceId) != clientTrace ||
		hex.EncodeToString(srv.ParentSpanId) != clientSpan || !bytes.Equal(cli.ParentSpanId, srv.SpanId) {
		t.Errorf("span tree: server %x parent %x, client %x parent %x", srv.SpanId, srv.ParentSpanId, cli.SpanId, cli.ParentSpanId)
	}
	wantServer := map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "alpha__meta",
		"gen_ai.operation.name": "execute_tool", "mcp.protocol.version": "2025-11-25", "network.transport": "tcp",
		"manifold.server": "alpha"}
	if diff := gocmp.Diff(wantServer, testutil.AttrMap(srv.Attributes)); diff != "" {
		t.Errorf("server span (-want +got):\n%s", diff)
	}
	wantClient := map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "meta",
		"gen_ai.operation.name": "execute_tool", "network.transport": "pipe", "manifold.server": "alpha"}
	if diff := gocmp.Diff(wantClient, testutil.AttrMap(cli.Attributes)); diff != "" {
		t.Errorf("client span (-want +got):\n%s", diff)
	}

	wantTP := "00-" + clientTrace + "-" + hex.EncodeToString(cli.SpanId) + "-01"
	if got.Meta["traceparent"] != wantTP || got.Meta["tracestate"] != "vendor=1" || got.Meta["other"] != "kept" {
		t.Errorf("upstream _meta = %v, want traceparent %s", got.Meta, wantTP)
	}
	recs := sink.records(t)
	if len(recs) != 1 || recs[0]["trace_id"] != clientTrace || recs[0]["span_id"] != hex.EncodeToString(srv.SpanId) {
		t.Errorf("audit records %v, want trace %s span %x", recs, clientTrace, srv.SpanId)
	}
}

// headerRT adds a header to every request.
type headerRT struct{ key, value string }

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// TestTraceContextPassesWithTracingOff: with nothing recording, a trace
// context sent in the HTTP headers reaches the upstream's _meta, and one in
// _meta passes unchanged and wins.
func TestTraceContextPassesWithTracingOff(t *testing.T) {
	gw, srv := newHTTPGateway(t, nil)
	if gw.obs.on {
		t.Fatal("something records")
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: headerRT{"traceparent", clientTP}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__meta"})
	if err != nil {
		t.Fatal(err)
	}
	if got := metaOf(t, res).Meta["traceparent"]; got != clientTP {
		t.Errorf("upstream traceparent = %v, want the header's %s", got, clientTP)
	}
	other := "00-" + strings.Repeat("1", 32) + "-" + strings.Repeat("2", 16) + "-01"
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__meta", Meta: mcp.Meta{"traceparent": other}})
	if err != nil {
		t.Fatal(err)
	}
	if got := metaOf(t, res).Meta["traceparent"]; got != other {
		t.Errorf("upstream traceparent = %v, want _meta's %s", got, other)
	}
}

// scrapeMetrics scrapes tel and returns a function giving the series of a
// family (see testutil.Series).
func scrapeMetrics(t *testing.T, tel *telemetry.Telemetry) func(name string) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	families := testutil.ParseMetrics(t, rec.Body)
	return func(name string) map[string]float64 { return testutil.Series(families, name) }
}

// TestMetricsCounts: exact counts after a known set of requests.
func TestMetricsCounts(t *testing.T) {
	tel, err := telemetry.New(context.Background(), &config.Telemetry{Metrics: &config.Metrics{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	sink := newAuditSink(t, config.ArgumentsHashed)
	var cfgs []*config.Config
	load := func() (*config.Config, error) {
		if len(cfgs) == 0 {
			return nil, errors.New("test: the config does not load")
		}
		return cfgs[0], nil
	}
	h := newHarnessOpts(t, &Options{Audit: sink.log, Telemetry: tel, LoadConfig: load}, observedPolicy, upstreamSpec{name: "alpha", demoName: "alpha"})
	cfgs = append(cfgs, h.gw.current().cfg)
	cs := h.connectVersion(t, "2025-11-25")
	observedCalls(t, cs)
	if _, err := h.gw.Reload(context.Background(), TriggerSignal); err != nil { // the same config: applied
		t.Fatal(err)
	}
	cfgs = nil
	if _, err := h.gw.Reload(context.Background(), TriggerSignal); err == nil {
		t.Fatal("a failing load was applied")
	}

	series := scrapeMetrics(t, tel)
	for _, tc := range []struct {
		family string
		want   map[string]float64
	}{
		{"mcp_server_operation_duration_seconds", map[string]float64{
			"manifold_server=alpha,mcp_method_name=tools/call":                       1,
			"error_type=tool_error,manifold_server=alpha,mcp_method_name=tools/call": 1,
			"error_type=-32602,mcp_method_name=tools/call":                           1,
			"error_type=-32602,manifold_server=alpha,mcp_method_name=tools/call":     1,
			"manifold_server=alpha,mcp_method_name=prompts/get":                      1,
			"manifold_server=alpha,mcp_method_name=resources/read":                   1,
			"error_type=-32002,manifold_server=alpha,mcp_method_name=resources/read": 1,
			"mcp_method_name=initialize":                                             1, // cs; the harness's client speaks 2026-07-28
			"mcp_method_name=server/discover":                                        1,
		}},
		{"mcp_client_operation_duration_seconds", map[string]float64{
			"manifold_server=alpha,mcp_method_name=tools/call":                       1,
			"error_type=tool_error,manifold_server=alpha,mcp_method_name=tools/call": 1,
			"manifold_server=alpha,mcp_method_name=prompts/get":                      1,
			"manifold_server=alpha,mcp_method_name=resources/read":                   1,
		}},
		{"manifold_policy_denials_total", map[string]float64{
			"manifold_kind=tool,manifold_server=alpha":     1,
			"manifold_kind=resource,manifold_server=alpha": 1,
		}},
		{"manifold_calls_inflight", map[string]float64{"manifold_server=alpha": 0}},
		{"manifold_sessions_active", map[string]float64{"": 1}},
		{"manifold_upstream_state", map[string]float64{"manifold_server=alpha,manifold_state=ready": 1}},
		{"manifold_upstream_restarts_total", map[string]float64{"manifold_server=alpha": 0}},
		{"manifold_config_reloads_total", map[string]float64{"manifold_result=ok": 1, "manifold_result=rejected": 1}},
		{"manifold_audit_dropped_total", map[string]float64{"": 0}},
	} {
		if diff := gocmp.Diff(tc.want, series(tc.family)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.family, diff)
		}
	}

	// A session that ends is counted out, with its duration.
	cs.Close()
	waitUntil(t, "the session counted closed", func() bool {
		s := scrapeMetrics(t, tel)
		return s("manifold_sessions_active")[""] == 0 && s("mcp_server_session_duration_seconds")[""] == 1
	})
	if n := len(sink.records(t)); n != 7 {
		t.Errorf("%d audit records, want 7", n)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReadiness: /readyz answers 503 until Start returned and every
// required upstream is ready, and again once shutdown begins; /healthz
// always 200.
func TestReadiness(t *testing.T) {
	cfg := &config.Config{Servers: map[string]config.Server{
		"alpha": {Name: "alpha", Type: "stdio", Command: "unused", Required: true},
		"beta":  {Name: "beta", Type: "stdio", Command: "unused"},
		"off":   {Name: "off", Type: "stdio", Command: "unused", Required: true, Disabled: true},
	}, Gateway: config.DefaultGateway()}
	cfg.Gateway.Backoff.Initial, cfg.Gateway.Backoff.Max = 10*time.Millisecond, 20*time.Millisecond
	alpha := newFakeUpstream(demo.NewServer("alpha", nil))
	alpha.down = true
	beta := newFakeUpstream(demo.NewServer("beta", nil))
	beta.down = true // not required: never holds readiness back
	gw, err := New(cfg, &Options{Transports: map[string]func() (mcp.Transport, error){"alpha": alpha.transport, "beta": beta.transport}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	probe := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode, body
	}
	if code, body := probe("/readyz"); code != http.StatusServiceUnavailable || body["status"] != ReadyStarting {
		t.Errorf("before Start: %d %v", code, body)
	}
	gw.Start(context.Background())
	defer gw.Close(context.Background())
	if code, body := probe("/readyz"); code != http.StatusServiceUnavailable || body["status"] != ReadyWaiting ||
		body["required"] != float64(1) || body["requiredReady"] != float64(0) {
		t.Errorf("required upstream down: %d %v", code, body)
	}
	if code, body := probe("/healthz"); code != http.StatusOK || body["status"] != "ok" {
		t.Errorf("healthz: %d %v", code, body)
	}
	alpha.revive()
	waitUntil(t, "ready", func() bool { code, _ := probe("/readyz"); return code == http.StatusOK })
	if _, body := probe("/readyz"); body["status"] != ReadyOK || body["requiredReady"] != float64(1) {
		t.Errorf("ready: %v", body)
	}
	gw.Close(context.Background())
	if code, body := probe("/readyz"); code != http.StatusServiceUnavailable || body["status"] != ReadyStopping {
		t.Errorf("after Close: %d %v", code, body)
	}
	resp, err := http.Post(srv.URL+"/readyz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /readyz: %d", resp.StatusCode)
	}
}

// TestRequiredChangeKeepsUpstream: required only affects readiness, so a
// reload that changes it restarts nothing.
func TestRequiredChangeKeepsUpstream(t *testing.T) {
	a := config.Server{Name: "alpha", Type: "stdio", Command: "x"}
	b := a
	b.Required = true
	gw := config.DefaultGateway()
	if !specOf(a, &gw).equal(specOf(b, &gw)) {
		t.Error("changing required changes the upstream's spec")
	}
}

// TestAuditModernClient: a 2026-07-28 client declares itself per request;
// its record carries that client info and version.
func TestAuditModernClient(t *testing.T) {
	sink := newAuditSink(t, config.ArgumentsNone)
	h := newHarnessOpts(t, &Options{Audit: sink.log}, nil, upstreamSpec{name: "alpha", demoName: "alpha"})
	if _, err := h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "x"}}); err != nil {
		t.Fatal(err)
	}
	recs := sink.records(t)
	if len(recs) != 1 || recs[0]["protocol_version"] != "2026-07-28" || recs[0]["client_name"] != "test-client" {
		t.Errorf("records %v", recs)
	}
}

// TestAuditRecordsPanics: a handler that panics still gets its record, as
// the internal error that Recover answers.
func TestAuditRecordsPanics(t *testing.T) {
	sink := newAuditSink(t, config.ArgumentsNone)
	g := &Gateway{obs: newRecorder(sink.log, nil)}
	g.snap.Store(newSnapshot(&config.Config{Gateway: config.DefaultGateway()}, nil))
	h := mcpx.Recover(nil)(g.observe(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		panic("boom")
	}))
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "alpha__echo"}}
	if _, err := h(context.Background(), "tools/call", req); rpcCode(err) != -32603 {
		t.Fatalf("error %v", err)
	}
	recs := sink.records(t)
	if len(recs) != 1 || recs[0]["outcome"] != "error" || recs[0]["error_code"] != float64(-32603) || recs[0]["name"] != "alpha__echo" {
		t.Errorf("records %v", recs)
	}
}
