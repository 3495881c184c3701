package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/fixture"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpSession is a streamable HTTP session of a test gateway, spoken as
// bytes so that tests choose each request exactly.
type httpSession struct {
	t     *testing.T
	url   string
	token string // bearer token, when not empty
	sid   string
}

// serveHTTPRaw serves gw on a loopback listener, closed when t ends.
func serveHTTPRaw(t *testing.T, gw *Gateway) string {
	t.Helper()
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(func() {
		for ss := range gw.Server().Sessions() {
			ss.Close()
		}
		srv.Close()
	})
	return srv.URL
}

// openHTTPSession opens a session at 2025-11-25 with token (none when
// empty) whose client declares caps (a JSON object).
func openHTTPSession(t *testing.T, url, token, caps string) *httpSession {
	t.Helper()
	header := map[string]string{}
	if token != "" {
		header["Authorization"] = "Bearer " + token
	}
	resp, body := post(t, url+"/mcp", `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"`+legacyVersion+`","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}}`, header)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	s := &httpSession{t: t, url: url, token: token, sid: resp.Header.Get("Mcp-Session-Id")}
	if status, _, body := s.post(context.Background(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", status, body)
	}
	return s
}

// post sends body to the session and returns the status, the answer's
// content type and its body.
func (s *httpSession) post(ctx context.Context, body string) (int, string, string) {
	s.t.Helper()
	resp, err := http.DefaultClient.Do(s.request(ctx, body))
	if err != nil {
		if ctx.Err() != nil {
			return 0, "", ""
		}
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// request is the POST of body to the session, with the headers a client
// sends.
func (s *httpSession) request(ctx context.Context, body string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.sid)
	req.Header.Set("Mcp-Protocol-Version", legacyVersion)
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	return req
}

// postInBackground posts body to the session from a goroutine that
// reports nothing, for a call the test holds (it may use no t there).
func (s *httpSession) postInBackground(ctx context.Context, body string) {
	req := s.request(ctx, body)
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
}

// call posts a request and returns its response message: the JSON body,
// or the last event of an event stream.
func (s *httpSession) call(body string) (ctype string, msg string) {
	s.t.Helper()
	status, ctype, b := s.post(context.Background(), body)
	if status != http.StatusOK {
		s.t.Fatalf("%s: %d %s", body, status, b)
	}
	if strings.HasPrefix(ctype, "text/event-stream") {
		data := sseData(s.t, b)
		return ctype, data[len(data)-1]
	}
	return ctype, b
}

// sdkLine is line changed so that the raw path does not take it (an
// extra top-level key): the same request on the SDK path.
func sdkLine(line string) string {
	return strings.Replace(line, `"jsonrpc"`, `"x":0,"jsonrpc"`, 1)
}

// TestHTTPRawPathServesSimpleCallsOfSessions: on a streamable session, a
// simple call takes the raw path and is answered with application/json,
// its result the bytes the stdio front answers; the rest takes the SDK
// path with an answer equal to the raw one; a denied or unknown name is
// answered as on the SDK path.
func TestHTTPRawPathServesSimpleCallsOfSessions(t *testing.T) {
	gw := newRawGateway(t, nil, func(c *config.Config) {
		c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
			{Effect: config.Deny, Match: config.Match{Tools: []string{"rec__b"}}},
		}}
	}, rawSpec{name: "rec", server: newRecordingServer().Server})
	s := openHTTPSession(t, serveHTTPRaw(t, gw), "", `{}`)
	lines := serveStdioLines(t, gw, legacyVersion, `{}`)
	for _, tc := range []struct{ name, line string }{
		{"allowed", callLine("1", "rec__a", `{"k":[1, 2]}`)},
		{"denied", callLine("1", "rec__b", `{}`)},
		{"unknown", callLine("1", "rec__zz", `{}`)},
		{"string id", callLine(`"x\u0031"`, "rec__a", `{}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := rawCount(gw)
			ctype, raw := s.call(tc.line)
			if got := rawCount(gw) - before; got != 1 {
				t.Fatalf("%d raw calls, want 1", got)
			}
			if ctype != "application/json" {
				t.Errorf("content type %q, want application/json", ctype)
			}
			var id json.RawMessage
			json.Unmarshal([]byte(tc.line), &struct {
				ID *json.RawMessage `json:"id"`
			}{&id})
			if stdio := lines.call(string(id), tc.line).line; raw != stdio {
				t.Errorf("raw answer on HTTP\n%s\n, on stdio\n%s", raw, stdio)
			}
			_, sdk := s.call(sdkLine(tc.line))
			if got := rawCount(gw) - before; got != 2 {
				t.Fatalf("%d raw calls after the SDK path's, want 2 (1 on stdio)", got)
			}
			var a, b any
			json.Unmarshal([]byte(raw), &a)
			json.Unmarshal([]byte(sdk), &b)
			if diff := gocmp.Diff(b, a); diff != "" {
				t.Errorf("raw answer differs from the SDK path's (-sdk +raw):\n%s", diff)
			}
		})
	}
	t.Run("a 2026-07-28 request on a session", func(t *testing.T) {
		// The SDK refuses that version on a session; the raw path, which
		// takes 2026-07-28 calls elsewhere, leaves it to the SDK.
		line := `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"rec__a","arguments":{},` + statelessMeta + `}}`
		before := rawCount(gw)
		status, _, body := s.post(context.Background(), line)
		if got := rawCount(gw) - before; got != 0 {
			t.Errorf("%d raw calls, want 0", got)
		}
		sdkStatus, _, sdkBody := s.post(context.Background(), sdkLine(line))
		if status != sdkStatus || status == http.StatusOK || body != sdkBody {
			t.Errorf("answer %d %s\nthe SDK path's %d %s", status, body, sdkStatus, sdkBody)
		}
	})
	t.Run("not a hot method", func(t *testing.T) {
		before := rawCount(gw)
		if _, m := s.call(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`); !strings.Contains(m, "rec__a") {
			t.Errorf("tools/list: %s", m)
		}
		if got := rawCount(gw) - before; got != 0 {
			t.Errorf("%d raw calls, want 0", got)
		}
	})
}

// TestHTTPRawAuditRecordEqualsTheSDKPaths is TestRawAuditRecordEqualsTheSDKPaths
// on streamable HTTP: with authentication, so that the principal comes
// from the request's credential on both paths.
func TestHTTPRawAuditRecordEqualsTheSDKPaths(t *testing.T) {
	sink := newAuditSink(t, config.ArgumentsFull)
	gw := newRawGateway(t, &Options{Audit: sink.log}, func(c *config.Config) {
		c.Auth.APIKeys = []config.APIKey{{Name: "alice", Key: aliceKey, Groups: []string{"dev"}}}
		c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
			{Name: "no-b", Effect: config.Deny, Match: config.Match{Tools: []string{"rec__b"}}, Principals: []string{"group:dev"}},
		}}
	}, rawSpec{name: "rec", server: newRecordingServer().Server})
	s := openHTTPSession(t, serveHTTPRaw(t, gw), aliceKey, `{}`)
	calls := []struct{ name, args string }{
		{"rec__a", `{ "z": 1, "a": {"y": [1, 2], "x": "s"} }`},
		{"rec__b", `{"k":"v"}`},
		{"rec__zz", `{}`},
	}
	for _, call := range calls {
		before := rawCount(gw)
		s.call(callLine("1", call.name, call.args))
		s.call(sdkLine(callLine("2", call.name, call.args)))
		if got := rawCount(gw) - before; got != 1 {
			t.Fatalf("%s: %d raw calls, want 1 (raw) then 0 (SDK)", call.name, got)
		}
	}
	recs := sink.records(t)
	if len(recs) > 0 && recs[0]["principal"] != "alice" {
		t.Errorf("principal %v, want alice", recs[0]["principal"])
	}
	samePairs(t, recs, len(calls))
}

// TestHTTPRawCallSwitchesToSSEForProgress: a raw call whose upstream
// sends progress is answered as an event stream, the progress first, with
// the client's token, then the result.
func TestHTTPRawCallSwitchesToSSEForProgress(t *testing.T) {
	fx := fixture.NewServer(&fixture.Options{Name: "fx", ProtocolVersions: []string{legacyVersion}, StepDelay: time.Millisecond})
	gw := newRawGateway(t, nil, nil, rawSpec{name: "fx", server: fx})
	s := openHTTPSession(t, serveHTTPRaw(t, gw), "", `{}`)
	before := rawCount(gw)
	status, ctype, body := s.post(context.Background(), `{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"fx__test_tool_with_progress","arguments":{},"_meta":{"progressToken":"tok-1"}}}`)
	if status != http.StatusOK || ctype != "text/event-stream" {
		t.Fatalf("%d %q, want 200 text/event-stream", status, ctype)
	}
	if got := rawCount(gw) - before; got != 1 {
		t.Errorf("%d raw calls, want 1", got)
	}
	var progress []float64
	var last message
	for _, d := range sseData(t, body) {
		var m message
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("event %q: %v", d, err)
		}
		if m.Method == "notifications/progress" {
			progress = append(progress, clientProgress(t, m))
		}
		last = m
	}
	if !gocmp.Equal(progress, fixture.ProgressSteps) {
		t.Errorf("progress %v, want %v", progress, fixture.ProgressSteps)
	}
	if string(last.ID) != `"p"` || firstText(t, last) != fixture.ProgressDoneText {
		t.Errorf("the last event is not the result: %+v", last)
	}
}

// blockingAsker is askingServer with a tool block that waits until
// release is closed.
func blockingAsker(release <-chan struct{}) *mcp.Server {
	srv := askingServer()
	srv.AddTool(&mcp.Tool{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-release:
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil
		}
	})
	return srv
}

// TestHTTPRawCallAsksItsClientOnItsResponse: a raw call whose upstream
// asks the client (sampling, roots; a relayed request from an upstream
// before 2026-07-28, or input_required from a 2026-07-28 one) sends the
// request as an event of the call's own response, with an id of the
// gateway's; the client's answer, POSTed, reaches the upstream (202), and
// the result ends the response. A session whose client declared
// elicitation takes the SDK path.
func TestHTTPRawCallAsksItsClientOnItsResponse(t *testing.T) {
	for _, versions := range [][]string{nil, {legacyVersion}} {
		t.Run(strings.Join(append([]string{"upstream"}, versions...), " "), func(t *testing.T) {
			fx := fixture.NewServer(&fixture.Options{Name: "fx", ProtocolVersions: versions})
			gw := newRawGateway(t, nil, nil, rawSpec{name: "fx", server: fx}, rawSpec{name: "rt", server: askingServer()})
			url := serveHTTPRaw(t, gw)
			s := openHTTPSession(t, url, "", `{"sampling":{},"roots":{"listChanged":true}}`)
			for _, tc := range []struct{ line, method, answer, want string }{
				{callLine(`"s"`, "fx__test_sampling", `{"prompt":"Say hi"}`), "sampling/createMessage",
					`{"role":"assistant","content":{"type":"text","text":"hi there"},"model":"m"}`, "LLM response: hi there"},
				{callLine(`"r"`, "rt__roots", `{}`), "roots/list", `{"roots":[{"uri":"file:///work"}]}`, "file:///work"},
			} {
				before := rawCount(gw)
				ctype, last := s.ask(tc.line, func(m message) string {
					if m.Method != tc.method || !strings.HasPrefix(string(m.ID), `"manifold-ask-`) {
						t.Errorf("request %s, want %s with an id of the gateway's", m.line, tc.method)
					}
					return `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + tc.answer + `}`
				})
				if ctype != "text/event-stream" {
					t.Errorf("%s: content type %q, want text/event-stream; last %s", tc.method, ctype, last.line)
				}
				if got := firstText(t, last); !strings.Contains(got, tc.want) {
					t.Errorf("result %q, want %q", got, tc.want)
				}
				if got := rawCount(gw) - before; got != 1 {
					t.Errorf("%d raw calls, want 1", got)
				}
			}
		})
	}
	t.Run("elicitation", func(t *testing.T) {
		gw := newRawGateway(t, nil, nil, rawSpec{name: "fx", server: fixture.NewServer(&fixture.Options{Name: "fx"})})
		url := serveHTTPRaw(t, gw)
		for caps, raw := range map[string]bool{`{}`: true, `{"sampling":{}}`: true, `{"elicitation":{}}`: false} {
			s := openHTTPSession(t, url, "", caps)
			before := rawCount(gw)
			s.call(callLine("1", "fx__test_simple_text", `{}`))
			if got := rawCount(gw) - before; got != map[bool]int64{true: 1}[raw] {
				t.Errorf("%s: %d raw calls, want raw %v", caps, got, raw)
			}
		}
	})
}

// TestHTTPRawCallsOfOneSessionShareItsServerRequests: with two raw calls
// of one session in flight on a shared upstream, a server request goes to
// that session (on the oldest call's response), as on the SDK path, rather
// than being refused as if the calls came from two sessions.
func TestHTTPRawCallsOfOneSessionShareItsServerRequests(t *testing.T) {
	release := make(chan struct{})
	gw := newRawGateway(t, nil, nil, rawSpec{name: "as", server: blockingAsker(release)})
	s := openHTTPSession(t, serveHTTPRaw(t, gw), "", `{"sampling":{}}`)
	blocked := make(chan message, 1)
	go func() {
		_, last := s.ask(callLine(`"b"`, "as__block", `{}`), func(m message) string {
			if m.Method != "sampling/createMessage" {
				t.Errorf("request %s, want sampling", m.line)
			}
			return `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m"}}`
		})
		blocked <- last
	}()
	waitFor(t, "the blocking call in flight", func() bool { return countFlights(gw) == 1 })
	if _, m := s.call(callLine(`"s"`, "as__sample", `{}`)); !strings.Contains(m, `"text":"sampled: sampled"`) {
		t.Errorf("sample: %s", m)
	}
	close(release)
	if got := firstText(t, <-blocked); got != "released" {
		t.Errorf("block: %q", got)
	}
	if got := rawCount(gw); got != 2 {
		t.Errorf("%d raw calls, want 2", got)
	}
}

// ask posts line, a call whose upstream asks the client once, answers the
// request met on its event stream with reply(request), POSTed, and returns
// the content type and the last message of the stream.
func (s *httpSession) ask(line string, reply func(message) string) (string, message) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url+"/mcp", strings.NewReader(line))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Session-Id": s.sid, "Mcp-Protocol-Version": legacyVersion} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var last message
	if ct := resp.Header.Get("Content-Type"); ct == "application/json" {
		b, _ := io.ReadAll(resp.Body)
		last.line = string(b)
		json.Unmarshal(b, &last)
		return ct, last
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		last = message{line: data}
		if err := json.Unmarshal([]byte(data), &last); err != nil {
			s.t.Fatalf("event %q: %v", data, err)
		}
		if last.Method != "" && len(last.ID) > 0 {
			if status, _, b := s.post(context.Background(), reply(last)); status != http.StatusAccepted {
				s.t.Errorf("answer: %d %s", status, b)
			}
		}
	}
	return resp.Header.Get("Content-Type"), last
}

// TestHTTPRawDuplicateIDsAndCancellation: a request reusing the id of a
// call in flight on the session, on either path, is refused with the
// SDK's own answer; the client's notifications/cancelled for a raw call
// cancels it up to the upstream (202), as does a client that goes away
// and a DELETE of the session.
func TestHTTPRawDuplicateIDsAndCancellation(t *testing.T) {
	blk := newBlockingServer()
	gw := newRawGateway(t, nil, nil, rawSpec{name: "blk", server: blk.Server})
	url := serveHTTPRaw(t, gw)
	s := openHTTPSession(t, url, "", `{}`)

	type answer struct {
		status int
		body   string
	}
	start := func(s *httpSession, ctx context.Context, line string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			status, _, body := s.post(ctx, line)
			ch <- answer{status, body}
		}()
		waitEntered(t, blk)
		return ch
	}
	cancelled := func(n int64) {
		t.Helper()
		waitFor(t, "the upstream's call cancelled", func() bool { return blk.cancelled.Load() == n })
	}

	// The SDK's own answer to a duplicate among its requests.
	sdk7 := start(s, context.Background(), sdkLine(callLine("7", "blk__block", `{}`)))
	status, _, sdkDup := s.post(context.Background(), sdkLine(callLine("7", "blk__block", `{}`)))
	if status != http.StatusBadRequest || !strings.Contains(sdkDup, "duplicate in-flight request ID 7") {
		t.Fatalf("the SDK's duplicate: %d %s", status, sdkDup)
	}
	before := rawCount(gw)
	// A raw call reusing an id in flight on the SDK path.
	if status, _, body := s.post(context.Background(), callLine("7", "blk__block", `{}`)); status != http.StatusBadRequest || body != sdkDup {
		t.Errorf("raw duplicate of an SDK id: %d %s, want 400 %s", status, body, sdkDup)
	}
	if got := rawCount(gw) - before; got != 0 {
		t.Errorf("%d raw calls served for a duplicate", got)
	}
	// The SDK path's requests answer 202 to a cancellation, as before.
	if status, _, body := s.post(context.Background(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`); status != http.StatusAccepted {
		t.Fatalf("cancel 7: %d %s", status, body)
	}
	<-sdk7
	cancelled(1)

	raw8 := start(s, context.Background(), callLine("8", "blk__block", `{}`))
	for _, line := range []string{callLine("8", "blk__block", `{}`), sdkLine(callLine("8", "blk__block", `{}`))} {
		if status, _, body := s.post(context.Background(), line); status != http.StatusBadRequest || body != strings.ReplaceAll(sdkDup, "7", "8") {
			t.Errorf("%s: %d %s, want the SDK's 400", line, status, body)
		}
	}
	if len(blk.entered) != 0 {
		t.Error("a duplicate reached the upstream")
	}
	if status, _, body := s.post(context.Background(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":8,"reason":"user"}}`); status != http.StatusAccepted || body != "" {
		t.Errorf("cancel 8: %d %q, want 202", status, body)
	}
	if a := <-raw8; a.status != http.StatusOK || !strings.Contains(a.body, `"error"`) {
		t.Errorf("the cancelled call answered %d %s", a.status, a.body)
	}
	cancelled(2)
	if got := rawCount(gw) - before; got != 1 {
		t.Errorf("%d raw calls, want 1", got)
	}

	// A client that goes away.
	ctx, cancel := context.WithCancel(context.Background())
	gone := start(s, ctx, callLine("8", "blk__block", `{}`)) // the id is free again
	cancel()
	<-gone
	cancelled(3)

	// A DELETE of the session.
	deleted := start(s, context.Background(), callLine("9", "blk__block", `{}`))
	if status, body := sendHTTP(t, url, http.MethodDelete, "", s.sid, "", nil); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	<-deleted
	cancelled(4)
}

// TestHTTPRawCallKeepsItsSessionBusy: a session whose only request in
// flight is a long raw call is not ended as idle, while one without
// requests is.
func TestHTTPRawCallKeepsItsSessionBusy(t *testing.T) {
	blk := newBlockingServer()
	gw := newRawGateway(t, nil, func(c *config.Config) { c.Gateway.Limits.SessionIdleTimeout = time.Second },
		rawSpec{name: "blk", server: blk.Server})
	url := serveHTTPRaw(t, gw)
	calling := openHTTPSession(t, url, "", `{}`)
	done := make(chan struct{})
	go func() {
		defer close(done)
		calling.post(context.Background(), callLine("1", "blk__block", `{}`))
	}()
	waitEntered(t, blk)
	if got := rawCount(gw); got != 1 {
		t.Fatalf("%d raw calls, want 1", got)
	}
	idle := openHTTPSession(t, url, "", `{}`)
	if !within(sessionDone(t, gw, idle.sid), 10*time.Second) {
		t.Fatal("the idle session was not ended")
	}
	if _, ok := gw.clients.byID.Load(calling.sid); !ok {
		t.Error("the session with a raw call in flight was ended as idle")
	}
	close(blk.release)
	<-done
}
