package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/fixture"
)

// statelessMeta is the _meta of a 2026-07-28 request.
const statelessMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}`

// postStateless sends a 2026-07-28 request of method on name with params
// (the _meta added), with the headers a client sends, and returns the
// status, the Content-Type and the JSON-RPC answer (the last event of an
// SSE answer) with every event before it.
func postStateless(t *testing.T, url, method, name, body string) (int, string, string, []string) {
	t.Helper()
	resp, text := post(t, url, body, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name})
	ct := resp.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "text/event-stream") {
		return resp.StatusCode, ct, text, nil
	}
	events := sseData(t, text)
	if len(events) == 0 {
		t.Fatalf("an SSE answer without events: %q", text)
	}
	return resp.StatusCode, ct, events[len(events)-1], events[:len(events)-1]
}

// TestStatelessHTTPRawAnswersEqualTheSDKPaths: over streamable HTTP, a
// 2026-07-28 call the raw path takes gets the answer the SDK's stateless
// handler gives the same call (status, result or error), and the raw path
// takes exactly the simple calls.
func TestStatelessHTTPRawAnswersEqualTheSDKPaths(t *testing.T) {
	fx := fixture.NewServer(&fixture.Options{Name: "fx"})
	gw := newRawGateway(t, nil, func(c *config.Config) {
		c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
			{Effect: config.Deny, Match: config.Match{Tools: []string{"fx__test_simple_text"}, Resources: []string{"manifold://fx/test://static-binary"}}},
		}}
	}, rawSpec{name: "fx", server: fx})
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	waitTools(t, gw)
	url := srv.URL + "/mcp"
	tests := []struct{ name, method, target, params string }{
		{"tool", "tools/call", "fx__echo", `"name":"fx__echo","arguments":{"message":"hi"}`},
		{"tool error", "tools/call", "fx__test_error_handling", `"name":"fx__test_error_handling","arguments":{}`},
		{"embedded resource", "tools/call", "fx__test_embedded_resource", `"name":"fx__test_embedded_resource","arguments":{}`},
		{"unknown tool", "tools/call", "fx__nope", `"name":"fx__nope","arguments":{}`},
		{"denied tool", "tools/call", "fx__test_simple_text", `"name":"fx__test_simple_text","arguments":{}`},
		{"prompt", "prompts/get", "fx__test_prompt_with_arguments", `"name":"fx__test_prompt_with_arguments","arguments":{"arg1":"a","arg2":"b"}`},
		{"unknown prompt", "prompts/get", "fx__nope", `"name":"fx__nope"`},
		{"read", "resources/read", "manifold://fx/test://static-text", `"uri":"manifold://fx/test://static-text"`},
		{"unknown resource", "resources/read", "manifold://fx/test://nope", `"uri":"manifold://fx/test://nope"`},
		{"denied resource", "resources/read", "manifold://fx/test://static-binary", `"uri":"manifold://fx/test://static-binary"`},
		{"Mcp-Name mismatch", "tools/call", "fx__other", `"name":"fx__echo","arguments":{"message":"hi"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := `{` + tt.params + `,` + statelessMeta + `}`
			before := rawCount(gw)
			rawStatus, _, raw, _ := postStateless(t, url, tt.method, tt.target, `{"jsonrpc":"2.0","id":1,"method":"`+tt.method+`","params":`+params+`}`)
			took := rawCount(gw) - before
			sdkStatus, _, sdk, _ := postStateless(t, url, tt.method, tt.target, `{"x":0,"jsonrpc":"2.0","id":1,"method":"`+tt.method+`","params":`+params+`}`)
			wantTook := int64(1)
			if strings.Contains(tt.name, "mismatch") {
				wantTook = 0 // refused before the stages
			}
			if took != wantTook || rawCount(gw)-before != wantTook {
				t.Fatalf("raw calls %d then %d, want %d then none", took, rawCount(gw)-before-took, wantTook)
			}
			if rawStatus != sdkStatus {
				t.Errorf("status: raw %d, SDK %d\nraw: %s\nsdk: %s", rawStatus, sdkStatus, raw, sdk)
			}
			var rawMsg, sdkMsg any
			if json.Unmarshal([]byte(raw), &rawMsg) != nil || json.Unmarshal([]byte(sdk), &sdkMsg) != nil {
				t.Fatalf("answers are not JSON:\nraw: %s\nsdk: %s", raw, sdk)
			}
			if diff := gocmp.Diff(sdkMsg, rawMsg); diff != "" {
				t.Errorf("answer (-sdk +raw):\n%s", diff)
			}
		})
	}
}

// TestStatelessHTTPRawProgressSwitchesToSSE: a raw call whose upstream
// sends progress is answered as an event stream, the progress (with the
// client's token) ahead of the result; one without is plain JSON.
func TestStatelessHTTPRawProgressSwitchesToSSE(t *testing.T) {
	fx := fixture.NewServer(&fixture.Options{Name: "fx", StepDelay: time.Millisecond})
	gw := newRawGateway(t, nil, nil, rawSpec{name: "fx", server: fx})
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	waitTools(t, gw)
	url := srv.URL + "/mcp"
	before := rawCount(gw)
	status, ct, res, events := postStateless(t, url, "tools/call", "fx__test_tool_with_progress",
		`{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"fx__test_tool_with_progress","arguments":{},"_meta":{"progressToken":"tok-1",`+strings.TrimPrefix(statelessMeta, `"_meta":{`)+`}}`)
	if rawCount(gw)-before != 1 || status != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("raw %d, %d %q", rawCount(gw)-before, status, ct)
	}
	if len(events) == 0 {
		t.Fatalf("no progress before the result %s", res)
	}
	for _, e := range events {
		var n struct {
			Method string `json:"method"`
			Params struct {
				Token any `json:"progressToken"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(e), &n); err != nil || n.Method != "notifications/progress" || n.Params.Token != "tok-1" {
			t.Errorf("event %s: want progress with the client's token", e)
		}
	}
	if !strings.Contains(res, `"id":"p"`) || !strings.Contains(res, `"result"`) {
		t.Errorf("the result: %s", res)
	}
	_, ct, _, _ = postStateless(t, url, "tools/call", "fx__echo", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{"message":"m"},`+statelessMeta+`}}`)
	if ct != "application/json" {
		t.Errorf("a call without notifications: Content-Type %q, want application/json", ct)
	}
}

// waitTools waits, at most 10 s, until gw routes a tool.
func waitTools(t *testing.T, gw *Gateway) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if r := gw.routes.Load(); r != nil && len(r.tools) > 0 {
			return
		}
	}
	t.Fatal("no tool routed within 10 s")
}
