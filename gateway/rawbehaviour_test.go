package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/fixture"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRawAuditRecordEqualsTheSDKPaths: the audit record of a call the raw
// path serves is the one the SDK path writes for the same call: allowed,
// denied, unknown, and with arguments to redact and canonicalise.
func TestRawAuditRecordEqualsTheSDKPaths(t *testing.T) {
	for _, mode := range []string{config.ArgumentsFull, config.ArgumentsHashed} {
		t.Run(mode, func(t *testing.T) {
			sink := newAuditSink(t, mode)
			gw := newRawGateway(t, &Options{Audit: sink.log}, func(c *config.Config) {
				c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
					{Name: "no-b", Effect: config.Deny, Match: config.Match{Tools: []string{"rec__b"}}},
				}}
			}, rawSpec{name: "rec", server: newRecordingServer().Server})
			c := serveStdioLines(t, gw, legacyVersion, `{}`)
			calls := []struct{ name, args string }{
				{"rec__a", `{ "z": 1, "a": {"y": [1, 2], "x": "s"} }`},
				{"rec__b", `{"k":"v"}`},
				{"rec__zz", `{}`},
			}
			for _, call := range calls {
				before := rawCount(gw)
				c.call("1", callLine("1", call.name, call.args))
				// The same request with an extra top-level key: the SDK path.
				c.call("2", strings.Replace(callLine("2", call.name, call.args), `"jsonrpc"`, `"x":0,"jsonrpc"`, 1))
				if got := rawCount(gw) - before; got != 1 {
					t.Fatalf("%s: %d raw calls, want 1 (raw) then 0 (SDK)", call.name, got)
				}
			}
			samePairs(t, sink.records(t), len(calls))
		})
	}
}

// samePairs checks that recs are n pairs of audit records, each of a call
// on the raw path then the same on the SDK path, and that the records of
// a pair are equal but for their time.
func samePairs(t *testing.T, recs []map[string]any, n int) {
	t.Helper()
	if len(recs) != 2*n {
		t.Fatalf("%d records, want %d: %v", len(recs), 2*n, recs)
	}
	for i := 0; i < len(recs); i += 2 {
		raw, sdk := recs[i], recs[i+1]
		for _, r := range []map[string]any{raw, sdk} {
			delete(r, "time")
			delete(r, "duration_ms")
		}
		if diff := gocmp.Diff(sdk, raw); diff != "" {
			t.Errorf("raw record differs from the SDK path's (-sdk +raw):\n%s", diff)
		}
	}
}

// TestRawCallRelaysProgressAndSampling: during a raw call, the upstream's
// progress and its sampling request reach the client and its answer the
// upstream, for an upstream on 2026-07-28 (input_required, fulfilled with
// a real request) and one before it (a relayed server request).
func TestRawCallRelaysProgressAndSampling(t *testing.T) {
	for _, versions := range [][]string{nil, {legacyVersion}} {
		t.Run(strings.Join(append([]string{"upstream"}, versions...), " "), func(t *testing.T) {
			fx := fixture.NewServer(&fixture.Options{Name: "fx", ProtocolVersions: versions, StepDelay: time.Millisecond})
			gw := newRawGateway(t, nil, nil, rawSpec{name: "fx", server: fx})
			c := serveStdioLines(t, gw, legacyVersion, `{"sampling":{}}`)

			before := rawCount(gw)
			c.send(`{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"fx__test_tool_with_progress","arguments":{},"_meta":{"progressToken":"tok-1"}}}`)
			var progress []float64
			for {
				m := c.next()
				if m.Method == "notifications/progress" {
					progress = append(progress, clientProgress(t, m))
					continue
				}
				if string(m.ID) == `"p"` {
					if got := firstText(t, m); got != fixture.ProgressDoneText {
						t.Errorf("result %q", got)
					}
					break
				}
			}
			if !gocmp.Equal(progress, fixture.ProgressSteps) {
				t.Errorf("progress %v, want %v", progress, fixture.ProgressSteps)
			}

			c.send(callLine(`"s"`, "fx__test_sampling", `{"prompt":"Say hi"}`))
			for {
				m := c.next()
				if m.Method == "sampling/createMessage" {
					c.send(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"hi there"},"model":"m"}}`)
					continue
				}
				if string(m.ID) == `"s"` {
					if got := firstText(t, m); got != "LLM response: hi there" {
						t.Errorf("sampling result %q", got)
					}
					break
				}
			}
			if got := rawCount(gw) - before; got != 2 {
				t.Errorf("%d raw calls, want 2", got)
			}
		})
	}
}

// clientProgress returns the progress of m, a progress notification,
// checking that it carries the client's token tok-1.
func clientProgress(t *testing.T, m message) float64 {
	t.Helper()
	var p struct {
		Token    any     `json:"progressToken"`
		Progress float64 `json:"progress"`
	}
	json.Unmarshal(m.Params, &p)
	if p.Token != "tok-1" {
		t.Errorf("progress token %v, want the client's", p.Token)
	}
	return p.Progress
}

// blockingServer has a tool block that waits until its call is cancelled
// (counted) or released.
type blockingServer struct {
	*mcp.Server
	entered   chan struct{}
	release   chan struct{}
	cancelled atomic.Int64
}

func newBlockingServer() *blockingServer {
	b := &blockingServer{Server: mcp.NewServer(&mcp.Implementation{Name: "blk", Version: "v1"}, nil),
		entered: make(chan struct{}, 10), release: make(chan struct{})}
	b.AddTool(&mcp.Tool{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b.entered <- struct{}{}
			select {
			case <-ctx.Done():
				b.cancelled.Add(1)
				return nil, ctx.Err()
			case <-b.release:
			case <-time.After(10 * time.Second):
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil
		})
	return b
}

func waitEntered(t *testing.T, b *blockingServer) {
	t.Helper()
	select {
	case <-b.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the call never reached the upstream")
	}
}

// TestRawCallCancellationAndDuplicateIDs: a client's notifications/cancelled
// for a raw call cancels it up to the upstream, and a request reusing the
// id of a raw call in flight is refused as the SDK refuses one.
func TestRawCallCancellationAndDuplicateIDs(t *testing.T) {
	blk := newBlockingServer()
	gw := newRawGateway(t, nil, nil, rawSpec{name: "blk", server: blk.Server})
	c := serveStdioLines(t, gw, legacyVersion, `{}`)

	// The SDK drops a request whose id is in flight, unanswered (it has no
	// id to answer); a ping sent after it is answered first.
	for _, line := range []string{
		strings.Replace(callLine("7", "blk__block", `{}`), `"jsonrpc"`, `"x":0,"jsonrpc"`, 1), // the SDK's path
		callLine("8", "blk__block", `{}`),
	} {
		c.send(line)
		waitEntered(t, blk)
		c.send(line)
		c.send(`{"jsonrpc":"2.0","id":"after","method":"ping"}`)
		if m := c.next(); string(m.ID) != `"after"` {
			t.Errorf("%s: a duplicate id was answered %s", line, m.line)
		}
		if len(blk.entered) != 0 {
			t.Errorf("%s: the duplicate reached the upstream", line)
		}
		if strings.Contains(line, `"x"`) {
			c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
			c.await("7")
		}
	}
	before := rawCount(gw) - 1
	cancelledBefore := blk.cancelled.Load()
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":8,"reason":"user"}}`)
	if m := c.await("8"); m.Error == nil {
		t.Errorf("the cancelled call answered %s", m.line)
	}
	deadline := time.Now().Add(5 * time.Second)
	for blk.cancelled.Load() == cancelledBefore && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if blk.cancelled.Load() == cancelledBefore {
		t.Error("the upstream's call was not cancelled")
	}
	if got := rawCount(gw) - before; got != 1 {
		t.Errorf("%d raw calls, want 1", got)
	}
	// The id is free again.
	c.send(callLine("8", "blk__block", `{}`))
	waitEntered(t, blk)
	close(blk.release)
	if got := firstText(t, c.await("8")); got != "released" {
		t.Errorf("result %q", got)
	}
}

// TestRawReloadMidCallAuditsUnderTheDecidingSnapshot is
// TestReloadMidCallAuditsUnderTheDecidingSnapshot on the raw path.
func TestRawReloadMidCallAuditsUnderTheDecidingSnapshot(t *testing.T) {
	blk := newBlockingServer()
	rc := &reloadingConfig{tool: "blk__block", rule: "dev-block"}
	sink := newAuditSink(t, config.ArgumentsFull)
	gw := newRawGateway(t, &Options{Audit: sink.log, LoadConfig: rc.load}, rc.first, rawSpec{name: "blk", server: blk.Server})
	c := serveStdioLines(t, gw, legacyVersion, `{}`)

	before := rawCount(gw)
	c.send(callLine("1", "blk__block", `{}`))
	waitEntered(t, blk)
	rc.moveToOps()
	if res, err := gw.Reload(context.Background(), TriggerSignal); err != nil || res.Result != ReloadApplied {
		t.Fatalf("Reload: %+v, %v", res, err)
	}
	close(blk.release)
	if got := firstText(t, c.await("1")); got != "released" {
		t.Errorf("the call allowed before the reload answered %q", got)
	}
	if got := rawCount(gw) - before; got != 1 {
		t.Errorf("%d raw calls, want 1", got)
	}
	// The next call is decided under the new snapshot: denied.
	if m := c.call("2", callLine("2", "blk__block", `{}`)); m.Error == nil {
		t.Errorf("a call after the reload answered %s", m.line)
	}
	recs := sink.records(t)
	if len(recs) != 2 {
		t.Fatalf("records %v", recs)
	}
	want := map[string]any{"decision": "allow", "rule": "dev-block", "principal": "local", "groups": []any{"dev"}}
	for k, v := range want {
		if !gocmp.Equal(recs[0][k], v) {
			t.Errorf("record %s = %v, want %v (the record: %v)", k, recs[0][k], v, recs[0])
		}
	}
	if recs[1]["decision"] != "deny" {
		t.Errorf("the call after the reload: %v", recs[1])
	}
}

// TestRawAnswersEqualTheSDKPaths: for every kind of call and outcome the
// raw path answers what the SDK path answers for the same request: the
// same result (URIs in the client's namespace, the upstream's serverInfo
// gone) or the same error (code, message, data), denials and unknown
// names included, for upstreams on 2026-07-28 and before.
func TestRawAnswersEqualTheSDKPaths(t *testing.T) {
	params := []struct{ name, method, params string }{
		{"tool", "tools/call", `{"name":"fx__echo","arguments":{"message":"hi"}}`},
		{"tool error", "tools/call", `{"name":"fx__test_error_handling","arguments":{}}`},
		{"embedded resource", "tools/call", `{"name":"fx__test_embedded_resource","arguments":{}}`},
		{"unknown tool", "tools/call", `{"name":"fx__nope","arguments":{}}`},
		{"denied tool", "tools/call", `{"name":"fx__test_simple_text","arguments":{}}`},
		{"invalid arguments", "tools/call", `{"name":"fx__echo","arguments":{"message":7}}`},
		{"prompt", "prompts/get", `{"name":"fx__test_prompt_with_arguments","arguments":{"arg1":"a","arg2":"b"}}`},
		{"prompt with a resource", "prompts/get", `{"name":"fx__test_prompt_with_embedded_resource","arguments":{"resourceUri":"test://x"}}`},
		{"unknown prompt", "prompts/get", `{"name":"fx__nope"}`},
		{"read", "resources/read", `{"uri":"manifold://fx/test://static-text"}`},
		{"read a template", "resources/read", `{"uri":"manifold://fx/test://template/7/data"}`},
		{"unknown resource", "resources/read", `{"uri":"manifold://fx/test://nope"}`},
		{"denied resource", "resources/read", `{"uri":"manifold://fx/test://static-binary"}`},
	}
	for _, tc := range []struct {
		name      string
		upstream  []string // its versions; nil: every one, 2026-07-28 first
		stateless bool     // the client speaks 2026-07-28
	}{
		{name: "upstream"},
		{name: "upstream " + legacyVersion, upstream: []string{legacyVersion}},
		{name: "2026-07-28 client", stateless: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := fixture.NewServer(&fixture.Options{Name: "fx", ProtocolVersions: tc.upstream})
			gw := newRawGateway(t, nil, func(c *config.Config) {
				c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
					{Effect: config.Deny, Match: config.Match{Tools: []string{"fx__test_simple_text"}, Resources: []string{"manifold://fx/test://static-binary"}}},
				}}
			}, rawSpec{name: "fx", server: fx})
			var c *lineClient
			if tc.stateless {
				c = serveStdioRaw(t, gw)
			} else {
				c = serveStdioLines(t, gw, legacyVersion, `{}`)
			}
			for _, p := range params {
				t.Run(p.name, func(t *testing.T) {
					params := p.params
					if tc.stateless {
						params = strings.TrimSuffix(params, "}") + `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}`
					}
					before := rawCount(gw)
					raw := c.call("1", `{"jsonrpc":"2.0","id":1,"method":"`+p.method+`","params":`+params+`}`)
					sdk := c.call("2", `{"x":0,"jsonrpc":"2.0","id":2,"method":"`+p.method+`","params":`+params+`}`)
					if got := rawCount(gw) - before; got != 1 {
						t.Fatalf("%d raw calls, want 1", got)
					}
					var rawRes, sdkRes any
					json.Unmarshal(raw.Result, &rawRes)
					json.Unmarshal(sdk.Result, &sdkRes)
					if diff := gocmp.Diff(sdkRes, rawRes); diff != "" {
						t.Errorf("result (-sdk +raw):\n%s", diff)
					}
					if diff := gocmp.Diff(sdk.Error, raw.Error); diff != "" {
						t.Errorf("error (-sdk +raw):\n%s\nraw: %s\nsdk: %s", diff, raw.line, sdk.line)
					}
				})
			}
		})
	}
}
