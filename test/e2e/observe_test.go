package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/manifold-mcp/manifold/internal/testutil"
)

// Secrets of the observability tests: they reach the upstreams, and must
// appear in no log and no audit record.
const (
	remoteToken = "remote-token-e2e-Zq8v1xW"
	envSecret   = "env-secret-e2e-Kp3w9Yt"
)

// observeConfig fronts the demo server over stdio (alpha, with a secret in
// its env) and over streamable HTTP (remote, with a secret header), denies
// alpha__add, and adds extra (the audit and telemetry sections).
func observeConfig(t *testing.T, remoteURL, extra string) string {
	t.Helper()
	t.Setenv("REMOTE_TOKEN", remoteToken)
	t.Setenv("DEMO_SECRET", envSecret)
	return writeConfig(t, fmt.Sprintf(`
mcpServers:
  alpha:
    command: %q
    args: [demo-server, --name, alpha]
    env: { DEMO_VALUE: "${DEMO_SECRET}" }
    required: true
  remote:
    type: http
    url: %s/mcp
    headers: { Authorization: "Bearer ${REMOTE_TOKEN}" }
gateway:
  log: { level: debug }
  timeouts: { drain: 2s }
policy:
  default: allow
  rules:
    - { name: no-add, deny: { tools: ["alpha__add"] } }
`, binary, remoteURL)+extra)
}

// headersRT adds fixed headers to every request.
type headersRT http.Header

func (h headersRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connectHTTP opens a 2025-11-25 session (which has a session id) over
// streamable HTTP, sending header with every request.
func connectHTTP(t *testing.T, g *gatewayProc, header http.Header) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-observe", Version: "1.2.3"}, nil).Connect(ctxT(t, 30*time.Second),
		&mcp.StreamableClientTransport{Endpoint: g.url("/mcp"), HTTPClient: &http.Client{Transport: headersRT(header)}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// scraper returns a function giving the series of a family of the
// gateway's /metrics (see testutil.Series), scraped anew on each call.
func scraper(t *testing.T, g *gatewayProc) func(family string) map[string]float64 {
	t.Helper()
	line := g.logs.waitFor(t, `"msg":"serving metrics"`, 10*time.Second)
	var rec struct{ Listen string }
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Listen == "" {
		t.Fatalf("no metrics address in %q: %v", line, err)
	}
	return func(family string) map[string]float64 {
		t.Helper()
		resp, err := http.Get("http://" + rec.Listen + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics = %d", resp.StatusCode)
		}
		return testutil.Series(testutil.ParseMetrics(t, resp.Body), family)
	}
}

// readAudit returns the records of a JSON-lines audit file, failing on a
// malformed line.
func readAudit(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return testutil.JSONLines(t, data)
}

// TestAuditMetricsAndSecrets is acceptances 1, 3 and 5 of the observability
// issue: N calls (allowed, denied, failing with a tool error and with a
// JSON-RPC error) leave exactly N audit records with every field, hashed
// arguments show no value, /metrics counts them exactly, and no secret (an
// upstream's header value, an env value) appears in the logs or the audit
// file, even at debug level.
func TestAuditMetricsAndSecrets(t *testing.T) {
	remote := startFixtureHTTP(t, "remote")
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := observeConfig(t, remote, fmt.Sprintf(`
audit: { file: %q, arguments: hashed, hashKey: "${AUDIT_KEY}" }
telemetry:
  metrics: { listen: "127.0.0.1:0" }
`, auditFile))
	t.Setenv("AUDIT_KEY", "audit-hash-key-e2e-0123456789abcdef")
	g := startGateway(t, "--config", cfg)
	metrics := scraper(t, g)
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/readyz": http.StatusOK} {
		resp, err := http.Get(g.url(path))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
	waitForTool(t, g, "remote__echo")

	cs := connectHTTP(t, g, nil)
	ctx := ctxT(t, 60*time.Second)
	type call struct {
		method, name string
		args         map[string]any
		wantErr      bool
	}
	calls := []call{
		{method: "tools/call", name: "alpha__echo", args: map[string]any{"message": "argument-value-alpha"}},
		{method: "tools/call", name: "remote__echo", args: map[string]any{"message": "argument-value-remote"}},
		{method: "tools/call", name: "alpha__info"}, // its result holds the env secret
		{method: "tools/call", name: "alpha__fail"},
		{method: "tools/call", name: "alpha__nope", wantErr: true},
		{method: "tools/call", name: "alpha__add", args: map[string]any{"a": 40, "b": 2}, wantErr: true},
		{method: "prompts/get", name: "alpha__greet", args: map[string]any{"person": "argument-value-prompt"}},
		{method: "resources/read", name: "manifold://alpha/demo://alpha/readme"},
	}
	for _, c := range calls {
		var err error
		switch c.method {
		case "tools/call":
			var res *mcp.CallToolResult
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: c.name, Arguments: c.args})
			if c.name == "alpha__info" && err == nil && !strings.Contains(fmt.Sprint(res.StructuredContent), envSecret) {
				t.Errorf("the env secret did not reach the upstream: %v", res.StructuredContent)
			}
		case "prompts/get":
			_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: c.name, Arguments: map[string]string{"person": c.args["person"].(string)}})
		case "resources/read":
			_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: c.name})
		}
		if (err != nil) != c.wantErr {
			t.Fatalf("%s %s: %v", c.method, c.name, err)
		}
	}

	// /metrics, exactly.
	for _, tc := range []struct {
		family string
		want   map[string]float64
	}{
		{"mcp_server_operation_duration_seconds", map[string]float64{
			"mcp_method_name=initialize":                                             2, // waitForTool's session and cs
			"manifold_server=alpha,mcp_method_name=tools/call":                       2,
			"manifold_server=remote,mcp_method_name=tools/call":                      1,
			"error_type=tool_error,manifold_server=alpha,mcp_method_name=tools/call": 1,
			"error_type=-32602,mcp_method_name=tools/call":                           1,
			"error_type=-32602,manifold_server=alpha,mcp_method_name=tools/call":     1,
			"manifold_server=alpha,mcp_method_name=prompts/get":                      1,
			"manifold_server=alpha,mcp_method_name=resources/read":                   1,
		}},
		{"mcp_client_operation_duration_seconds", map[string]float64{
			"manifold_server=alpha,mcp_method_name=tools/call":                       2,
			"manifold_server=remote,mcp_method_name=tools/call":                      1,
			"error_type=tool_error,manifold_server=alpha,mcp_method_name=tools/call": 1,
			"manifold_server=alpha,mcp_method_name=prompts/get":                      1,
			"manifold_server=alpha,mcp_method_name=resources/read":                   1,
		}},
		{"manifold_policy_denials_total", map[string]float64{"manifold_kind=tool,manifold_server=alpha": 1}},
		{"manifold_sessions_active", map[string]float64{"": 1}},
		{"mcp_server_session_duration_seconds", map[string]float64{"": 1}}, // waitForTool's
		{"manifold_calls_inflight", map[string]float64{"manifold_server=alpha": 0, "manifold_server=remote": 0}},
		{"manifold_upstream_state", map[string]float64{
			"manifold_server=alpha,manifold_state=ready": 1, "manifold_server=remote,manifold_state=ready": 1}},
		{"manifold_upstream_restarts_total", map[string]float64{"manifold_server=alpha": 0, "manifold_server=remote": 0}},
		{"manifold_audit_dropped_total", map[string]float64{"": 0}},
	} {
		got := metrics(tc.family)
		delete(got, "mcp_method_name=tools/list") // waitForTool polls
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.family, diff)
		}
	}

	g.stop(t) // writes out the audit records
	recs := readAudit(t, auditFile)
	if len(recs) != len(calls) {
		t.Fatalf("%d audit records for %d calls", len(recs), len(calls))
	}
	for i, rec := range recs {
		c := calls[i]
		if rec["method"] != c.method || rec["name"] != c.name {
			t.Errorf("record %d is %v %v, want %s %s", i, rec["method"], rec["name"], c.method, c.name)
		}
		for _, key := range []string{"time", "duration_ms", "session_id", "principal", "client_name", "client_version",
			"protocol_version", "decision", "outcome", "result_bytes", "rounds"} {
			if _, ok := rec[key]; !ok {
				t.Errorf("record %d (%s) lacks %s: %v", i, c.name, key, rec)
			}
		}
		if rec["client_name"] != "e2e-observe" || rec["client_version"] != "1.2.3" || rec["protocol_version"] != "2025-11-25" || rec["principal"] != "local" {
			t.Errorf("record %d: client and principal %v", i, rec)
		}
		if c.name != "alpha__nope" && (rec["server"] == nil || rec["upstream_name"] == nil) {
			t.Errorf("record %d (%s) lacks its server: %v", i, c.name, rec)
		}
		if args, ok := rec["arguments"].(string); (c.args != nil) != ok || ok && !strings.HasPrefix(args, "hmac-sha256:") {
			t.Errorf("record %d (%s): arguments %v", i, c.name, rec["arguments"])
		}
	}
	wantOutcome := []string{"ok", "ok", "ok", "tool_error", "error", "error", "ok", "ok"}
	for i, rec := range recs {
		if rec["outcome"] != wantOutcome[i] {
			t.Errorf("record %d (%s): outcome %v, want %s", i, calls[i].name, rec["outcome"], wantOutcome[i])
		}
	}
	if deny := recs[5]; deny["decision"] != "deny" || deny["rule"] != "no-add" || deny["error_code"] != float64(-32602) {
		t.Errorf("denial record: %v", deny)
	}
	if sid := recs[0]["session_id"]; sid == "" || sid != recs[7]["session_id"] {
		t.Errorf("session ids %v, %v", sid, recs[7]["session_id"])
	}

	raw, _ := os.ReadFile(auditFile)
	logs := g.logs.String()
	if bytes.Contains(raw, []byte("argument-value")) {
		t.Errorf("the audit file shows argument values:\n%s", raw)
	}
	for _, secret := range []string{remoteToken, envSecret, "audit-hash-key-e2e"} {
		if strings.Contains(logs, secret) || bytes.Contains(raw, []byte(secret)) {
			t.Errorf("secret %q appears in the log or the audit file", secret)
		}
	}
}

// traceMeta is what the demo meta tool reports.
type traceMeta struct {
	Meta    map[string]any    `json:"meta"`
	Headers map[string]string `json:"headers"`
}

func callMeta(t *testing.T, cs *mcp.ClientSession, name string, meta mcp.Meta) traceMeta {
	t.Helper()
	res, err := cs.CallTool(ctxT(t, 30*time.Second), &mcp.CallToolParams{Name: name, Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	var out traceMeta
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTracePropagation is acceptance 2: a traceparent from the client (an
// HTTP header, or params._meta, which wins) yields a server span and an
// upstream client span in the client's trace, with the MCP semantic
// convention attributes, exported over OTLP/HTTP; the upstream receives the
// client span as its parent in _meta (and, over HTTP, as a header); the
// audit record carries the trace id.
func TestTracePropagation(t *testing.T) {
	remote := startFixtureHTTP(t, "remote")
	rcv := testutil.NewOTLPReceiver(t)
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := observeConfig(t, remote, fmt.Sprintf(`
audit: { file: %q, arguments: hashed }
telemetry:
  traces: { endpoint: %q, protocol: http/protobuf, sampleRatio: 1.0 }
`, auditFile, rcv.URL))
	g := startGateway(t, "--config", cfg)
	waitForTool(t, g, "remote__meta")

	const (
		headerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		headerSpan  = "00f067aa0ba902b7"
		metaTrace   = "0af7651916cd43dd8448eb211c80319c"
		metaSpan    = "b7ad6b7169203331"
	)
	cs := connectHTTP(t, g, http.Header{"Traceparent": {"00-" + headerTrace + "-" + headerSpan + "-01"}})
	viaHeader := callMeta(t, cs, "remote__meta", nil)
	viaMeta := callMeta(t, cs, "alpha__meta", mcp.Meta{"traceparent": "00-" + metaTrace + "-" + metaSpan + "-01", "tracestate": "e2e=1"})
	g.stop(t) // flushes the spans and the audit log

	spans, res, _ := rcv.Received()
	if res["service.name"] != "manifold" {
		t.Errorf("resource %v", res)
	}
	for _, tc := range []struct {
		server, client      string
		trace, parent       string
		upstream, transport string
		got                 traceMeta
		wantHeader          bool
	}{
		{server: "tools/call remote__meta", client: "tools/call meta", trace: headerTrace, parent: headerSpan,
			upstream: "remote", transport: "tcp", got: viaHeader, wantHeader: true},
		{server: "tools/call alpha__meta", client: "tools/call meta", trace: metaTrace, parent: metaSpan,
			upstream: "alpha", transport: "pipe", got: viaMeta},
	} {
		var srv, cli *tracepb.Span
		for _, s := range spans {
			if hex.EncodeToString(s.TraceId) != tc.trace {
				continue
			}
			switch s.Name {
			case tc.server:
				srv = s
			case tc.client:
				cli = s
			}
		}
		if srv == nil || cli == nil {
			t.Errorf("trace %s: no %q and %q spans among %v", tc.trace, tc.server, tc.client, spanNames(spans))
			continue
		}
		if hex.EncodeToString(srv.ParentSpanId) != tc.parent || !bytes.Equal(cli.ParentSpanId, srv.SpanId) {
			t.Errorf("%s: server parent %x (want %s), client parent %x (want %x)", tc.server, srv.ParentSpanId, tc.parent, cli.ParentSpanId, srv.SpanId)
		}
		if srv.Kind != tracepb.Span_SPAN_KIND_SERVER || cli.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("%s: kinds %v %v", tc.server, srv.Kind, cli.Kind)
		}
		sa, ca := testutil.AttrMap(srv.Attributes), testutil.AttrMap(cli.Attributes)
		if sa["mcp.method.name"] != "tools/call" || sa["gen_ai.tool.name"] != strings.TrimPrefix(tc.server, "tools/call ") ||
			sa["mcp.protocol.version"] != "2025-11-25" || sa["mcp.session.id"] == "" || sa["network.transport"] != "tcp" ||
			sa["manifold.server"] != tc.upstream {
			t.Errorf("%s: server span attributes %v", tc.server, sa)
		}
		if ca["mcp.method.name"] != "tools/call" || ca["gen_ai.tool.name"] != "meta" || ca["manifold.server"] != tc.upstream ||
			ca["network.transport"] != tc.transport {
			t.Errorf("%s: client span attributes %v", tc.server, ca)
		}
		want := "00-" + tc.trace + "-" + hex.EncodeToString(cli.SpanId) + "-01"
		if tc.got.Meta["traceparent"] != want {
			t.Errorf("%s: upstream _meta traceparent %v, want %s", tc.server, tc.got.Meta["traceparent"], want)
		}
		if tc.wantHeader && tc.got.Headers["traceparent"] != want {
			t.Errorf("%s: upstream HTTP traceparent %v, want %s", tc.server, tc.got.Headers, want)
		}
	}
	if viaMeta.Meta["tracestate"] != "e2e=1" {
		t.Errorf("tracestate not passed on: %v", viaMeta.Meta)
	}
	recs := readAudit(t, auditFile)
	if len(recs) != 2 || recs[0]["trace_id"] != headerTrace || recs[1]["trace_id"] != metaTrace || recs[0]["span_id"] == nil {
		t.Errorf("audit trace ids: %v", recs)
	}
}

func spanNames(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name+"@"+hex.EncodeToString(s.TraceId))
	}
	return out
}

// TestAuditSinkBlocked is acceptance 4: with the audit log on a standard
// output that nobody reads, calls still complete at once, and the records
// that cannot be written are dropped and counted.
func TestAuditSinkBlocked(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close() // open, never read: writes block once the pipe is full
	cfg := writeConfig(t, fmt.Sprintf(`
mcpServers:
  alpha: { command: %q, args: [demo-server, --name, alpha] }
gateway: { timeouts: { drain: 1s } }
audit: { stdout: true, arguments: full, buffer: 16 }
telemetry: { metrics: { listen: "127.0.0.1:0" } }
`, binary))
	g := serving(t, launch(t, []string{"serve", "--listen", "127.0.0.1:0", "--config", cfg}, nil, func(c *exec.Cmd) { c.Stdout = pw }))
	pw.Close() // the gateway holds its own copy
	metrics := scraper(t, g)
	cs := connectHTTP(t, g, nil)

	big := strings.Repeat("x", 16<<10) // 4 records fill a 64 KiB pipe
	const calls = 100
	start := time.Now()
	for i := range calls {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": big}})
		cancel()
		if err != nil {
			t.Fatalf("call %d with the audit sink blocked: %v", i, err)
		}
	}
	t.Logf("%d calls in %s with the audit sink blocked", calls, time.Since(start))
	dropped := metrics("manifold_audit_dropped_total")[""]
	if dropped < calls-16-8 || dropped > calls {
		t.Errorf("manifold_audit_dropped_total = %v after %d calls with a queue of 16", dropped, calls)
	}
	g.stop(t)
	if l := g.logs.String(); !strings.Contains(l, "closing the audit log") {
		t.Errorf("the shutdown does not report the records still queued:\n%s", l)
	}
}

// TestAuditStdoutRefusedWithStdio: serve --stdio cannot write the audit
// log to stdout, which carries the protocol.
func TestAuditStdoutRefusedWithStdio(t *testing.T) {
	cfg := writeConfig(t, fmt.Sprintf(`
mcpServers:
  alpha: { command: %q, args: [demo-server, --name, alpha] }
audit: { stdout: true }
`, binary))
	cmd := exec.Command(binary, "serve", "--stdio", "--config", cfg)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(""), &stdout, &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 1 || err == nil {
		t.Errorf("exit %d (%v), want 1", code, err)
	}
	if !strings.Contains(stderr.String(), "audit.stdout") || !strings.Contains(stderr.String(), "--stdio") || stdout.Len() != 0 {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}
