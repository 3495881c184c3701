package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/internal/fixture"
	"github.com/manifold-mcp/manifold/policy"
)

// The raw path and the SDK path must answer alike whatever path a request
// takes. These tests come from a review of the raw HTTP front: each failed
// before its fix.

// denyA is a policy that allows everything but mem__a.
func denyA(c *config.Config) {
	c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
		{Effect: config.Deny, Match: config.Match{Tools: []string{"mem__a"}}},
	}}
}

// TestDeniedNamesTakeTheUnknownNamesPath: a denied tool of an upstream that
// takes no raw calls (in-memory here; in production a legacy SSE upstream,
// one while it reconnects, or for a 2026-07-28 request one before that
// version) is answered as an unknown name is, headers included, on both
// HTTP fronts: the SDK path's answer would have told them apart.
func TestDeniedNamesTakeTheUnknownNamesPath(t *testing.T) {
	gw := newRawGateway(t, nil, denyA, rawSpec{name: "mem", server: newRecordingServer().Server, inMemory: true})
	waitTools(t, gw)
	url := serveHTTPRaw(t, gw)
	t.Run("session", func(t *testing.T) {
		s := openHTTPSession(t, url, "", `{}`)
		_, ctDenied, denied := s.post(context.Background(), callLine("1", "mem__a", `{}`))
		_, ctUnknown, unknown := s.post(context.Background(), callLine("1", "mem__zz", `{}`))
		if ctDenied != ctUnknown || strings.ReplaceAll(denied, "mem__a", "X") != strings.ReplaceAll(unknown, "mem__zz", "X") {
			t.Errorf("denied: %q %q\nunknown: %q %q", ctDenied, denied, ctUnknown, unknown)
		}
	})
	t.Run("stateless", func(t *testing.T) {
		answer := func(name string) (string, string) {
			resp, body := post(t, url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+name+`","arguments":{},`+statelessMeta+`}}`,
				map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name})
			h := resp.Header.Clone()
			h.Del("Date")
			h.Del("Content-Length")
			return fmt.Sprint(resp.StatusCode, " ", h), strings.ReplaceAll(body, name, "X")
		}
		dh, db := answer("mem__a")
		uh, ub := answer("mem__zz")
		if dh != uh || db != ub {
			t.Errorf("denied: %s %s\nunknown: %s %s", dh, db, uh, ub)
		}
	})
}

// TestRefusesAgreesWithTheStages: refuses, which rawTake asks without
// recording anything, decides as resolve and permit do, for every tool and
// resource of an upstream and spellings of them, under a policy with
// names, a server-wide rule and a cleaned-form URI rule, for a principal
// and for a caller without one.
func TestRefusesAgreesWithTheStages(t *testing.T) {
	gw := newRawGateway(t, nil, func(c *config.Config) {
		c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
			{Effect: config.Deny, Match: config.Match{Tools: []string{"alpha__echo"}}},
			{Effect: config.Deny, Match: config.Match{Resources: []string{"manifold://alpha/demo://alpha/readme"}}},
			{Effect: config.Allow, Match: config.Match{Tools: []string{"*"}}, Principals: []string{"nobody"}},
		}}
	}, rawSpec{name: "alpha", server: demo.NewServer("alpha", nil)})
	waitTools(t, gw)
	snap, routes := gw.current(), gw.routes.Load()
	type item struct {
		kind policy.Kind
		name string
	}
	var items []item
	for name := range routes.tools {
		items = append(items, item{policy.Tool, name})
	}
	for _, res := range routes.resourceDefs {
		items = append(items, item{policy.Resource, res.URI}, item{policy.Resource, res.URI + "?x"},
			item{policy.Resource, strings.Replace(res.URI, "/readme", "//readme", 1)})
	}
	if len(items) < 4 {
		t.Fatalf("only %d names to check", len(items))
	}
	ctx := context.Background()
	refused := map[policy.Kind]map[bool]int{policy.Tool: {}, policy.Resource: {}}
	for _, who := range []caller{{local: true}, {}} {
		for _, it := range items {
			rt, ok := routes.lookup(it.kind, it.name)
			if !ok {
				continue
			}
			c := call{kind: it.kind, name: it.name, snap: snap, routes: routes}
			got := gw.refuses(ctx, who, &c, rt)
			s := call{kind: it.kind, name: it.name, snap: snap, routes: routes}
			gw.authenticate(&s, who)
			want := !gw.resolve(ctx, &s) || !gw.permit(ctx, &s)
			if got != want {
				t.Errorf("%v %s (local %v): refuses %v, the stages refuse %v", it.kind, it.name, who.local, got, want)
			}
			refused[it.kind][want]++
		}
	}
	// Both outcomes, for tools and for resources: the check can fail.
	for kind, n := range refused {
		if n[true] == 0 || n[false] == 0 {
			t.Errorf("%v: %d refused and %d allowed, want some of each", kind, n[true], n[false])
		}
	}
}

// TestNumberIDsAsTheSDKReadsThem: the SDK reads a number id as a float64
// truncated to an int64, so 1, 1.0 and 1e0 are one id to it: while a raw
// call with id 1 is in flight, a request with id 1.0 is the SDK's duplicate
// and one with 1e0 never reaches the upstream; and a request with such an
// id is answered under the id as the SDK read it, on either path.
func TestNumberIDsAsTheSDKReadsThem(t *testing.T) {
	blk := newBlockingServer()
	gw := newRawGateway(t, nil, nil, rawSpec{name: "blk", server: blk.Server}, rawSpec{name: "fx", server: fixture.NewServer(&fixture.Options{Name: "fx"})})
	waitTools(t, gw)
	url := serveHTTPRaw(t, gw)
	s := openHTTPSession(t, url, "", `{}`)
	s.postInBackground(t.Context(), callLine("1", "blk__block", `{}`)) // the raw path
	waitEntered(t, blk)
	if status, _, body := s.post(context.Background(), `{"jsonrpc":"2.0","id":1.0,"method":"ping"}`); status != http.StatusBadRequest {
		t.Errorf("id 1.0 while id 1 is in flight: %d %s, want the SDK's 400 for a duplicate", status, body)
	}
	s.postInBackground(t.Context(), callLine("1e0", "blk__block", `{}`))
	select {
	case <-blk.entered:
		t.Errorf("a call with id 1e0 reached the upstream while id 1 was in flight")
	case <-time.After(500 * time.Millisecond):
	}
	close(blk.release)

	params := `"params":{"name":"fx__nope","arguments":{},` + statelessMeta + `}`
	_, _, raw, _ := postStateless(t, url+"/mcp", "tools/call", "fx__nope", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call",`+params+`}`)
	_, _, sdk, _ := postStateless(t, url+"/mcp", "tools/call", "fx__nope", `{"x":0,"jsonrpc":"2.0","id":1.5,"method":"tools/call",`+params+`}`)
	if raw != strings.TrimSpace(sdk) {
		t.Errorf("id 1.5 on the raw path: %s\non the SDK path: %s", raw, sdk)
	}
}

// TestNoRawCallAfterItsSessionWasDeleted: a POST that began before its
// session was deleted, and whose body arrives after, is refused (404): its
// call never reaches the upstream.
func TestNoRawCallAfterItsSessionWasDeleted(t *testing.T) {
	blk := newBlockingServer()
	gw := newRawGateway(t, nil, nil, rawSpec{name: "blk", server: blk.Server})
	url := serveHTTPRaw(t, gw)
	s := openHTTPSession(t, url, "", `{}`)
	v, _ := gw.clients.byID.Load(s.sid)
	cl := v.(*client)

	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", pr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.sid)
	req.Header.Set("Mcp-Protocol-Version", legacyVersion)
	status := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	line := callLine("5", "blk__block", `{}`)
	pw.Write([]byte(line[:10]))
	waitFor(t, "the POST counted busy", func() bool { return cl.busy.Load() == 1 })
	if code, body := sendHTTP(t, url, http.MethodDelete, "", s.sid, "", nil); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	pw.Write([]byte(line[10:]))
	pw.Close()
	if code := <-status; code != http.StatusNotFound {
		t.Errorf("the POST of a deleted session: %d, want 404", code)
	}
	select {
	case <-blk.entered:
		t.Errorf("the upstream ran a call of a session deleted before the call's body was read")
		close(blk.release)
	default:
	}
}

// TestStatelessRefusalsOnBothPaths: what the SDK's stateless handler
// refuses, the raw path leaves to it: a Content-Type that is
// application/json only under Unicode case folding (the SDK: 415), and a
// POST with Last-Event-ID (the SDK: 400).
func TestStatelessRefusalsOnBothPaths(t *testing.T) {
	gw := newRawGateway(t, nil, nil, rawSpec{name: "fx", server: fixture.NewServer(&fixture.Options{Name: "fx"})})
	waitTools(t, gw)
	url := serveHTTPRaw(t, gw) + "/mcp"
	for _, tc := range []struct{ name, hdr, val string }{
		{"unicode-folded content type", "Content-Type", "application/j\u017fon"},
		{"Last-Event-ID", "Last-Event-ID", "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "fx__echo", tc.hdr: tc.val}
			params := `"params":{"name":"fx__echo","arguments":{"message":"hi"},` + statelessMeta + `}`
			raw, rawBody := post(t, url, `{"jsonrpc":"2.0","id":1,"method":"tools/call",`+params+`}`, h)
			sdk, sdkBody := post(t, url, `{"x":0,"jsonrpc":"2.0","id":1,"method":"tools/call",`+params+`}`, h)
			if raw.StatusCode != sdk.StatusCode || raw.StatusCode == http.StatusOK {
				t.Errorf("raw %d %q, SDK %d %q: want the SDK's refusal on both", raw.StatusCode, rawBody, sdk.StatusCode, sdkBody)
			}
		})
	}
}

// logLevelMeta is statelessMeta with a log level: the 2026-07-28 client
// asks for the call's log messages in the request itself.
const logLevelMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/logLevel":"debug"}`

// TestRequestLogLevelOnBothPaths: a 2026-07-28 request that asks for logs
// in its _meta gets the upstream's log messages before its answer, over
// stdio and over stateless HTTP, on whichever path takes it (a review
// found the stdio raw path delivered none).
func TestRequestLogLevelOnBothPaths(t *testing.T) {
	fx := fixture.NewServer(&fixture.Options{Name: "fx", StepDelay: -1})
	gw := newRawGateway(t, nil, nil, rawSpec{name: "fx", server: fx})
	waitTools(t, gw)
	call := func(id, pre string) string {
		return `{` + pre + `"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"fx__test_tool_with_logging","arguments":{},` + logLevelMeta + `}}`
	}
	for i, path := range []struct{ name, pre string }{{"SDK", `"x":0,`}, {"raw", ""}} {
		t.Run("stdio/"+path.name, func(t *testing.T) {
			c := serveStdioRaw(t, gw)
			id := fmt.Sprint(i + 1)
			c.send(call(id, path.pre))
			logs := 0
			for m := c.next(); string(m.ID) != id; m = c.next() {
				if m.Method == "notifications/message" {
					logs++
				}
			}
			if logs != len(fixture.LogMessages) {
				t.Errorf("%d log messages before the answer, want %d", logs, len(fixture.LogMessages))
			}
		})
		t.Run("http/"+path.name, func(t *testing.T) {
			url := serveHTTPRaw(t, gw) + "/mcp"
			_, _, answer, events := postStateless(t, url, "tools/call", "fx__test_tool_with_logging", call("1", path.pre))
			logs := 0
			for _, e := range events {
				if strings.Contains(e, `"notifications/message"`) {
					logs++
				}
			}
			if logs != len(fixture.LogMessages) {
				t.Errorf("%d log messages before the answer %s, want %d", logs, answer, len(fixture.LogMessages))
			}
		})
	}
}
