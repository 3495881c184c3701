package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRelayNode is acceptance 1 of the relay issue: server-everything behind
// the gateway (a stdio upstream), the TypeScript SDK client (client.mjs) in
// front over streamable HTTP, SSE and stdio, in both session modes. Each
// scenario asserts what the client actually got: sampling and elicitation
// answers reaching the server, URL elicitation and its -32042 error,
// roots (and, per-client, roots after list_changed), progress with the
// client's own tokens, log messages at the level the client set, and
// resources/updated for the URIs the client subscribed to.
//
// Shape, and why: a shared upstream session is exact only while one
// client's calls are in flight on it, and server-everything keeps roots,
// simulated logging and subscriber updates per upstream session; so in
// shared mode every client gets a gateway (and a server-everything) of its
// own. In per-client mode all HTTP and SSE clients share one gateway, which
// is what that mode promises to handle. Each client runs every scenario in
// sequence (one ~5 s wait, for server-everything's 5-second timers, at the
// end); all clients run at once, and the subtests then check their reports.
func TestRelayNode(t *testing.T) {
	requireNode(t)
	for _, mode := range []string{"shared", "per-client"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testRelayMode(t, mode)
		})
	}
}

const (
	relayPrefix = "everything__"
	// What the client knows server-everything's static documents as.
	relayURIA        = "manifold://everything/demo://resource/static/document/architecture.md"
	relayURIB        = "manifold://everything/demo://resource/static/document/features.md"
	relayCannedModel = "ts-canned-model"
)

// relayMainCaps are the main client's capabilities: everything
// server-everything can ask of a client.
const relayMainCaps = `{"sampling":{},"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true}}`

// relayRun is one client.mjs session through a gateway, and its report.
type relayRun struct {
	transport string // http, sse, stdio
	kind      string // "main" (every scenario) or "quiet" (logging at level error)
	script    *relayScript
	args      []string
	out       nodeOutput
	err       error // the gateway did not start, or client.mjs failed
	took      time.Duration
}

// slowSteps lists the steps that took 500 ms or more, for the log.
func (r *relayRun) slowSteps() string {
	var slow []string
	for name, i := range r.script.at {
		if i < len(r.out.Steps) && r.out.Steps[i].MS >= 500 {
			slow = append(slow, fmt.Sprintf("%s %dms", name, r.out.Steps[i].MS))
		}
	}
	if len(slow) == 0 {
		return ""
	}
	slices.Sort(slow)
	return " (" + strings.Join(slow, ", ") + ")"
}

func testRelayMode(t *testing.T, mode string) {
	nm := filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol")
	cfg := writeConfig(t, fmt.Sprintf(`
mcpServers:
  everything:
    command: node
    args: [%q, stdio]
    session: %s
gateway:
  timeouts: { call: 20s }
`, filepath.Join(nm, "server-everything", "dist", "index.js"), mode))

	var runs []*relayRun
	for _, tr := range []string{"http", "sse", "stdio"} {
		runs = append(runs, &relayRun{transport: tr, kind: "main", script: relayMainScript(mode, tr)})
		if tr != "sse" {
			runs = append(runs, &relayRun{transport: tr, kind: "quiet", script: relayQuietScript()})
		}
	}

	// Gateways: per-client mode shares one among the HTTP and SSE clients,
	// shared mode gives each its own. Stdio clients start their own.
	type pending struct {
		g    *gatewayProc
		runs []*relayRun
	}
	var gateways []*pending
	for _, r := range runs {
		switch {
		case r.transport == "stdio":
			r.args = stdioArgs(binary, "serve", "--stdio", "--config", cfg)
		case mode == "per-client" && len(gateways) > 0:
			gateways[0].runs = append(gateways[0].runs, r)
		default:
			g := launch(t, []string{"serve", "--listen", "127.0.0.1:0", "--config", cfg}, nil)
			gateways = append(gateways, &pending{g, []*relayRun{r}})
		}
	}
	for _, p := range gateways {
		err := awaitServing(p.g, 60*time.Second)
		for _, r := range p.runs {
			r.err = err
			path := map[string]string{"http": "/mcp", "sse": "/sse"}[r.transport]
			r.args = []string{"--transport", r.transport, "--url", p.g.url(path)}
		}
	}

	start := time.Now()
	var wg sync.WaitGroup
	for _, r := range runs {
		if r.err != nil {
			continue
		}
		caps, roots := relayMainCaps, fmt.Sprintf(`[{"uri":%q,"name":"one"}]`, r.script.root("one"))
		if r.kind == "quiet" {
			caps, roots = "{}", "[]"
		}
		args := append([]string{"--timeout-ms", "10000", "--capabilities", caps, "--roots", roots, "--client-name", "relay-" + r.kind}, r.args...)
		wg.Go(func() {
			t0 := time.Now()
			r.out, r.err = execNodeClient(args, r.script.steps, 90*time.Second)
			r.took = time.Since(t0)
		})
	}
	wg.Wait()
	t.Logf("%s: all clients done in %s", mode, time.Since(start).Round(time.Millisecond))

	for _, r := range runs {
		t.Logf("%s/%s client took %s%s", r.transport, r.kind, r.took.Round(time.Millisecond), r.slowSteps())
		scenarios := relayMainChecks
		if r.kind == "quiet" {
			scenarios = relayQuietChecks
		}
		for _, sc := range scenarios {
			if sc.perClientOnly && mode != "per-client" {
				continue
			}
			t.Run(r.transport+"/"+sc.name, func(t *testing.T) {
				if r.err != nil {
					t.Fatalf("%s client: %v", r.kind, r.err)
				}
				if v := r.out.ProtocolVersion; v != "2025-11-25" {
					t.Errorf("negotiated %q, want 2025-11-25", v)
				}
				sc.check(t, r.script, r.out)
			})
		}
	}
}

// relayScript is a client.mjs step list whose steps the checks find by name.
// Its tag (the transport) goes into every answer, root, URL and progress
// token of the client, so that a message relayed to the wrong client (they
// share a gateway in per-client mode) shows.
type relayScript struct {
	tag   string
	steps []nodeStep
	at    map[string]int
}

func (s *relayScript) canned() string          { return "canned answer for the " + s.tag + " client" }
func (s *relayScript) root(name string) string { return "file:///manifold/e2e/" + s.tag + "/" + name }
func (s *relayScript) url(name string) string {
	return "https://example.com/manifold/" + s.tag + "/" + name
}
func (s *relayScript) token() int {
	return map[string]int{"http": 9001, "sse": 9002, "stdio": 9003}[s.tag]
}

// add appends st, under name when it is not empty, and returns its index.
func (s *relayScript) add(name string, st nodeStep) int {
	if s.at == nil {
		s.at = map[string]int{}
	}
	if name != "" {
		if _, dup := s.at[name]; dup {
			panic("duplicate step " + name)
		}
		s.at[name] = len(s.steps)
	}
	s.steps = append(s.steps, st)
	return len(s.steps) - 1
}

// step returns the result of the named step, failing the test when it
// failed.
func (s *relayScript) step(t *testing.T, out nodeOutput, name string) nodeResult {
	t.Helper()
	i, ok := s.at[name]
	if !ok {
		t.Fatalf("no step %q", name)
	}
	r := out.Steps[i]
	if !r.OK {
		t.Fatalf("step %q (%s) failed: %s", name, r.Op, jsonOf(r.Error))
	}
	return r
}

func call(tool string, args map[string]any) nodeStep {
	return nodeStep{"op": "callTool", "name": relayPrefix + tool, "arguments": args}
}

// relayMainScript runs every scenario in one session.
func relayMainScript(mode, tag string) *relayScript {
	s := &relayScript{tag: tag}
	s.add("ready", nodeStep{"op": "until", "step": nodeStep{"op": "listTools"}, "contains": `"name":"` + relayPrefix + `trigger-url-elicitation"`, "timeoutMs": 30000, "intervalMs": 100})

	s.add("", nodeStep{"op": "respond", "method": "sampling/createMessage", "result": map[string]any{
		"role": "assistant", "content": map[string]any{"type": "text", "text": s.canned()}, "model": relayCannedModel, "stopReason": "endTurn"}})
	s.add("sampling", call("trigger-sampling-request", map[string]any{"prompt": "relay probe from " + tag, "maxTokens": 42}))

	s.add("", nodeStep{"op": "respond", "method": "elicitation/create", "result": map[string]any{
		"action": "accept", "content": map[string]any{"name": "Ada " + tag, "check": true, "integer": 7}}})
	s.add("elicit-accept", call("trigger-elicitation-request", nil))
	s.add("", nodeStep{"op": "respond", "method": "elicitation/create", "result": map[string]any{"action": "decline"}})
	s.add("elicit-decline", call("trigger-elicitation-request", nil))
	s.add("", nodeStep{"op": "respond", "method": "elicitation/create", "result": map[string]any{"action": "cancel"}})
	s.add("elicit-cancel", call("trigger-elicitation-request", nil))

	s.add("", nodeStep{"op": "respond", "method": "elicitation/create", "result": map[string]any{"action": "accept"}})
	s.add("url-plain", call("trigger-url-elicitation", map[string]any{
		"url": s.url("plain"), "elicitationId": "manifold-e2e-plain-" + tag, "message": "Open the plain link"}))
	errArgs := map[string]any{"url": s.url("error"), "errorPath": true}
	s.add("url-error", call("trigger-url-elicitation", errArgs))
	s.add("url-retry", call("trigger-url-elicitation", errArgs)) // the prerequisite "done": the server proceeds

	s.add("roots", call("get-roots-list", nil))
	if mode == "per-client" {
		set := s.add("set-roots", nodeStep{"op": "setRoots", "roots": []map[string]any{
			{"uri": s.root("two"), "name": "two"}, {"uri": s.root("three"), "name": "three"}}})
		s.add("roots-request", nodeStep{"op": "waitServerRequest", "method": "roots/list", "since": set, "timeoutMs": 5000})
		s.add("roots-changed", nodeStep{"op": "until", "step": call("get-roots-list", nil), "contains": s.root("two"), "timeoutMs": 3000})
	}

	progress := call("trigger-long-running-operation", map[string]any{"duration": 0.6, "steps": 3})
	progress["progress"] = true
	s.add("progress", progress)
	a := call("trigger-long-running-operation", map[string]any{"duration": 0.5, "steps": 2})
	a["_meta"] = map[string]any{"progressToken": "tok-A-" + tag}
	b := call("trigger-long-running-operation", map[string]any{"duration": 0.8, "steps": 4})
	b["_meta"] = map[string]any{"progressToken": s.token()}
	s.add("progress-parallel", nodeStep{"op": "parallel", "steps": []nodeStep{a, b}})
	s.add("", nodeStep{"op": "sleep", "ms": 300}) // room for late progress

	s.add("resources", nodeStep{"op": "listResources"})
	s.add("level", nodeStep{"op": "setLoggingLevel", "level": "debug"})
	s.add("sub-a", nodeStep{"op": "subscribe", "uri": relayURIA})
	s.add("sub-b", nodeStep{"op": "subscribe", "uri": relayURIB})
	toggle := s.add("toggle-subs", call("toggle-subscriber-updates", nil))
	s.add("first-a", nodeStep{"op": "waitNotification", "method": "notifications/resources/updated", "since": toggle, "match": map[string]any{"uri": relayURIA}, "timeoutMs": 3000})
	s.add("first-b", nodeStep{"op": "waitNotification", "method": "notifications/resources/updated", "since": toggle, "match": map[string]any{"uri": relayURIB}, "timeoutMs": 3000})
	unsub := s.add("unsub-a", nodeStep{"op": "unsubscribe", "uri": relayURIA})
	logs := s.add("toggle-log", call("toggle-simulated-logging", nil))
	// The first simulated message comes at once, the next 5 s later: one
	// wait covers it and the subscriber updates' own 5-second tick.
	s.add("first-log", nodeStep{"op": "waitNotification", "method": "notifications/message", "since": logs, "pattern": relaySimulated, "timeoutMs": 3000})
	s.add("tick-log", nodeStep{"op": "waitNotification", "method": "notifications/message", "since": logs, "pattern": relaySimulated, "count": 2, "timeoutMs": 6500})
	s.add("tick-b", nodeStep{"op": "waitNotification", "method": "notifications/resources/updated", "since": unsub, "match": map[string]any{"uri": relayURIB}, "timeoutMs": 2000})
	s.add("", nodeStep{"op": "sleep", "ms": 300})
	s.add("", call("toggle-simulated-logging", nil))
	s.add("", call("toggle-subscriber-updates", nil))
	s.add("", nodeStep{"op": "unsubscribe", "uri": relayURIB})
	return s
}

// relayQuietScript turns simulated logging on at level error and listens
// past one of server-everything's 5-second ticks.
func relayQuietScript() *relayScript {
	s := &relayScript{tag: "quiet"}
	s.add("ready", nodeStep{"op": "until", "step": nodeStep{"op": "listTools"}, "contains": `"name":"` + relayPrefix + `toggle-simulated-logging"`, "timeoutMs": 30000, "intervalMs": 100})
	s.add("level", nodeStep{"op": "setLoggingLevel", "level": "error"})
	s.add("toggle-log", call("toggle-simulated-logging", nil))
	s.add("wait", nodeStep{"op": "sleep", "ms": 5600})
	s.add("", call("toggle-simulated-logging", nil))
	return s
}

type relayCheck struct {
	name          string
	perClientOnly bool
	check         func(t *testing.T, s *relayScript, out nodeOutput)
}

var relayMainChecks = []relayCheck{
	{name: "sampling", check: checkSampling},
	{name: "elicitation", check: checkElicitation},
	{name: "url-elicitation", check: checkURLElicitation},
	{name: "url-elicitation-error", check: checkURLElicitationError},
	{name: "roots", check: checkRoots},
	{name: "roots-list-changed", perClientOnly: true, check: checkRootsChanged},
	{name: "progress", check: checkProgress},
	{name: "logging", check: checkLogging},
	{name: "subscriptions", check: checkSubscriptions},
}

var relayQuietChecks = []relayCheck{
	{name: "logging-level-error", check: checkQuietLogging},
}

// serverRequestOf returns the one request of method the client got while
// step r was waiting for its response.
func serverRequestOf(t *testing.T, out nodeOutput, r nodeResult, method string) map[string]any {
	t.Helper()
	got := within(out.ServerRequests, method, r.Marks.Start.ServerRequests, r.Marks.Response.ServerRequests)
	if len(got) != 1 {
		t.Fatalf("%s: the client got %d %s requests during the call, want 1; all: %s", r.Op, len(got), method, jsonOf(out.ServerRequests))
	}
	return params(t, got[0])
}

func checkSampling(t *testing.T, s *relayScript, out nodeOutput) {
	r := s.step(t, out, "sampling")
	mustContain(t, "sampling result", callText(t, r), s.canned(), relayCannedModel, `"stopReason": "endTurn"`)
	p := serverRequestOf(t, out, r, "sampling/createMessage")
	b, _ := json.Marshal(p)
	mustContain(t, "sampling request", string(b),
		`"text":"Resource trigger-sampling-request context: relay probe from `+s.tag+`"`, `"maxTokens":42`,
		`"systemPrompt":"You are a helpful test server."`, `"temperature":0.7`)
}

func checkElicitation(t *testing.T, s *relayScript, out nodeOutput) {
	for _, c := range []struct {
		step      string
		fragments []string
	}{
		{"elicit-accept", []string{"✅ User provided the requested information!", "- Name: Ada " + s.tag, "- Agreed to terms: true", "- Favorite Integer: 7", `"action": "accept"`}},
		{"elicit-decline", []string{"❌ User declined to provide the requested information.", `"action": "decline"`}},
		{"elicit-cancel", []string{"⚠️ User cancelled the elicitation dialog.", `"action": "cancel"`}},
	} {
		r := s.step(t, out, c.step)
		mustContain(t, c.step+" result", callText(t, r), c.fragments...)
		p := serverRequestOf(t, out, r, "elicitation/create")
		b, _ := json.Marshal(p)
		// The form's schema reaches the client intact, keywords the SDK's
		// types may not know (enumNames, oneOf titles, formats) included.
		mustContain(t, c.step+" request", string(b),
			`"message":"Please provide inputs for the following fields:"`, `"required":["name"]`,
			`"enumNames":["Cats","Dogs","Birds","Fish","Reptiles"]`, `{"const":"hero-2","title":"Green Lantern"}`,
			`"format":"email"`, `"default":"It was a dark and stormy night."`)
		if m, _ := p["mode"].(string); m != "" && m != "form" {
			t.Errorf("%s: mode %q", c.step, m)
		}
	}
}

func checkURLElicitation(t *testing.T, s *relayScript, out nodeOutput) {
	r := s.step(t, out, "url-plain")
	mustContain(t, "url-plain result", callText(t, r), "✅ User completed the URL elicitation flow.",
		"Elicitation ID: manifold-e2e-plain-"+s.tag, "URL: "+s.url("plain"))
	p := serverRequestOf(t, out, r, "elicitation/create")
	want := map[string]any{"mode": "url", "url": s.url("plain"), "elicitationId": "manifold-e2e-plain-" + s.tag, "message": "Open the plain link"}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("elicitation/create %s = %v, want %v (params %v)", k, p[k], v, p)
		}
	}
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func checkURLElicitationError(t *testing.T, s *relayScript, out nodeOutput) {
	r := out.Steps[s.at["url-error"]]
	if r.OK || r.Error == nil {
		t.Fatalf("errorPath call: want JSON-RPC error -32042, got ok: %s", r.Result)
	}
	if r.Error.Code != -32042 {
		t.Errorf("errorPath call: code %d, want -32042: %s", r.Error.Code, jsonOf(r.Error))
	}
	mustContain(t, "error message", r.Error.Message, "This request requires browser-based authorization.")
	var data struct {
		Elicitations []map[string]any `json:"elicitations"`
	}
	if err := json.Unmarshal(r.Error.Data, &data); err != nil || len(data.Elicitations) != 1 {
		t.Fatalf("error data %s: %v, want one elicitation", r.Error.Data, err)
	}
	e := data.Elicitations[0]
	if e["mode"] != "url" || e["url"] != "https://modelcontextprotocol.io" ||
		e["message"] != "Open this link to satisfy the prerequisite, then retry the request." ||
		!uuidRE.MatchString(fmt.Sprint(e["elicitationId"])) || len(e) != 4 {
		t.Errorf("error data elicitation = %v", e)
	}
	if n := len(within(out.ServerRequests, "elicitation/create", r.Marks.Start.ServerRequests, r.Marks.End.ServerRequests)); n != 0 {
		t.Errorf("the error path sent %d elicitation/create requests", n)
	}
	retry := s.step(t, out, "url-retry")
	mustContain(t, "retry result", callText(t, retry), "✅ User completed the URL elicitation flow.", "URL: "+s.url("error"))
}

func checkRoots(t *testing.T, s *relayScript, out nodeOutput) {
	text := callText(t, s.step(t, out, "roots"))
	mustContain(t, "get-roots-list", text, "Current MCP Roots (1 total)", "1. one", "URI: "+s.root("one"))
}

func checkRootsChanged(t *testing.T, s *relayScript, out nodeOutput) {
	s.step(t, out, "set-roots")
	s.step(t, out, "roots-request") // the server asked again after list_changed
	var u struct{ Step nodeResult }
	if err := json.Unmarshal(s.step(t, out, "roots-changed").Result, &u); err != nil {
		t.Fatal(err)
	}
	text := callText(t, u.Step)
	mustContain(t, "get-roots-list after list_changed", text, "Current MCP Roots (2 total)", "URI: "+s.root("two"), "URI: "+s.root("three"))
	if strings.Contains(text, s.root("one")) {
		t.Errorf("the server still sees the old root:\n%s", text)
	}
}

// progressParams is a notifications/progress's params; the token kept raw
// so that 7 and "7" differ.
type progressParams struct {
	ProgressToken json.RawMessage `json:"progressToken"`
	Progress      float64         `json:"progress"`
	Total         float64         `json:"total"`
}

func checkProgress(t *testing.T, s *relayScript, out nodeOutput) {
	single := s.step(t, out, "progress")
	var par struct{ Steps []nodeResult }
	if err := json.Unmarshal(s.step(t, out, "progress-parallel").Result, &par); err != nil || len(par.Steps) != 2 {
		t.Fatalf("parallel: %v %s", err, s.step(t, out, "progress-parallel").Result)
	}
	calls := []struct {
		r     nodeResult
		token string
		steps int
	}{
		{single, string(single.RequestID), 3},
		{par.Steps[0], `"tok-A-` + s.tag + `"`, 2},
		{par.Steps[1], fmt.Sprint(s.token()), 4},
	}
	var tokens []string
	for i, c := range calls {
		if !c.r.OK {
			t.Errorf("call %d failed: %s", i, jsonOf(c.r.Error))
			continue
		}
		mustContain(t, "long-running result", callText(t, c.r), fmt.Sprintf("Steps: %d.", c.steps))
		tokens = append(tokens, c.token)
		var seen []float64
		for idx, n := range out.Notifications {
			if n.Method != "notifications/progress" {
				continue
			}
			var p progressParams
			if err := json.Unmarshal(n.Params, &p); err != nil {
				t.Fatal(err)
			}
			if string(p.ProgressToken) != c.token {
				continue
			}
			if idx >= c.r.Marks.Response.Notifications {
				t.Errorf("token %s: progress %v arrived after the result (notification %d, result after %d)", c.token, p.Progress, idx, c.r.Marks.Response.Notifications)
			}
			if p.Total != float64(c.steps) {
				t.Errorf("token %s: total %v, want %d", c.token, p.Total, c.steps)
			}
			seen = append(seen, p.Progress)
		}
		want := []float64{}
		for k := 1; k <= c.steps; k++ {
			want = append(want, float64(k))
		}
		if !slices.Equal(seen, want) {
			t.Errorf("token %s: progress %v, want %v", c.token, seen, want)
		}
	}
	// No other token (the gateway's own, say) reaches the client.
	for _, n := range out.Notifications {
		if n.Method != "notifications/progress" {
			continue
		}
		var p progressParams
		_ = json.Unmarshal(n.Params, &p)
		if !slices.Contains(tokens, string(p.ProgressToken)) {
			t.Errorf("progress with a token the client never sent: %s", n.Params)
		}
	}
}

var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// relaySimulated matches server-everything's simulated log messages
// ("Debug-level message", …, "Alert level-message").
const relaySimulated = `level[- ]message`

var simulatedRE = regexp.MustCompile(relaySimulated)

type logParams struct {
	Level  string `json:"level"`
	Logger string `json:"logger"`
	Data   any    `json:"data"`
}

// logMessages decodes the notifications/message in [from, to), checking
// that each names the server in its logger.
func logMessages(t *testing.T, out nodeOutput, from, to int) []logParams {
	t.Helper()
	var got []logParams
	for _, n := range within(out.Notifications, "notifications/message", from, to) {
		var p logParams
		if err := json.Unmarshal(n.Params, &p); err != nil {
			t.Fatal(err)
		}
		if p.Logger != "everything" && !strings.HasPrefix(p.Logger, "everything/") {
			t.Errorf("log message with logger %q, want everything or everything/…: %s", p.Logger, n.Params)
		}
		if !slices.Contains(logLevels, p.Level) {
			t.Errorf("log message with level %q: %s", p.Level, n.Params)
		}
		got = append(got, p)
	}
	return got
}

// simulated returns the indexes of server-everything's simulated log
// messages among the notifications.
func simulated(out nodeOutput) []int {
	var idx []int
	for i, n := range out.Notifications {
		if n.Method == "notifications/message" && simulatedRE.Match(n.Params) {
			idx = append(idx, i)
		}
	}
	return idx
}

func checkLogging(t *testing.T, s *relayScript, out nodeOutput) {
	s.step(t, out, "level")
	logMessages(t, out, 0, len(out.Notifications))
	toggle := s.step(t, out, "toggle-log")
	sim := simulated(out)
	if i := out.Steps[s.at["first-log"]]; !i.OK {
		t.Errorf("no simulated log message right after toggle-simulated-logging: %s", jsonOf(i.Error))
	}
	if tick := out.Steps[s.at["tick-log"]]; !tick.OK {
		t.Fatalf("no second simulated log message within 6.5 s of toggling (it comes outside any call): %s\nmessages: %s",
			jsonOf(tick.Error), jsonOf(within(out.Notifications, "notifications/message", 0, len(out.Notifications))))
	}
	var after []int
	for _, i := range sim {
		if i >= toggle.Marks.Start.Notifications {
			after = append(after, i)
		}
	}
	if len(after) < 2 {
		t.Fatalf("simulated messages since the toggle: %v", after)
	}
	// The second came with server-everything's 5-second timer, while the
	// client had no request in flight (toggle-log was its last).
	first, second := out.Notifications[after[0]], out.Notifications[after[1]]
	if d := second.T - first.T; d < 3000 {
		t.Errorf("second simulated message %d ms after the first, want ~5000", d)
	}
	if after[1] < toggle.Marks.End.Notifications {
		t.Errorf("second simulated message arrived during the toggle call")
	}
}
func checkQuietLogging(t *testing.T, s *relayScript, out nodeOutput) {
	s.step(t, out, "level")
	s.step(t, out, "toggle-log")
	s.step(t, out, "wait")
	msgs := logMessages(t, out, 0, len(out.Notifications))
	for _, m := range msgs {
		if slices.Index(logLevels, m.Level) < slices.Index(logLevels, "error") {
			t.Errorf("got a %s message after logging/setLevel error: %v", m.Level, m.Data)
		}
	}
	t.Logf("%d log messages at error or above", len(msgs))
}

func checkSubscriptions(t *testing.T, s *relayScript, out nodeOutput) {
	listed := names(s.step(t, out, "resources").items(t), "uri")
	for _, u := range []string{relayURIA, relayURIB} {
		if !slices.Contains(listed, u) {
			t.Errorf("resources/list lacks %s: %v", u, listed)
		}
	}
	for _, name := range []string{"sub-a", "sub-b", "toggle-subs", "first-a", "first-b", "unsub-a"} {
		s.step(t, out, name)
	}
	unsub := s.step(t, out, "unsub-a")
	updates := func(uri string, from, to int) int {
		n := 0
		for _, m := range within(out.Notifications, "notifications/resources/updated", from, to) {
			if params(t, m)["uri"] == uri {
				n++
			}
		}
		return n
	}
	for _, m := range within(out.Notifications, "notifications/resources/updated", 0, len(out.Notifications)) {
		if u := params(t, m)["uri"]; u != relayURIA && u != relayURIB {
			t.Errorf("resources/updated for %v, a URI the client never subscribed to", u)
		}
	}
	if n := updates(relayURIA, unsub.Marks.Response.Notifications, len(out.Notifications)); n != 0 {
		t.Errorf("%d resources/updated for %s after unsubscribing", n, relayURIA)
	}
	tick := out.Steps[s.at["tick-b"]]
	if !tick.OK || updates(relayURIB, unsub.Marks.End.Notifications, len(out.Notifications)) < 1 {
		t.Errorf("no periodic resources/updated for %s (still subscribed) after 5 s: %s", relayURIB, jsonOf(tick.Error))
	}
}
