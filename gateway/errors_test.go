package gateway

//lint:file-ignore SA1019 this test drives the sampling, roots and logging features that the gateway relays for protocol versions before 2026-07-28

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/audit"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reservedByJSONRPC reports whether code lies in −32768…−32000, which
// JSON-RPC reserves (and MCP 2026-07-28 partly keeps for itself).
func reservedByJSONRPC(code int64) bool { return code >= -32768 && code <= -32000 }

// TestGatewayCodesAreApplicationCodes provokes each condition the gateway
// answers with a code of its own, and checks the code that was really sent
// (to the client, or to the upstream) lies outside the reserved range.
func TestGatewayCodesAreApplicationCodes(t *testing.T) {
	tests := []struct {
		name    string
		want    int64
		message string // part of the message
		provoke func(t *testing.T) *jsonrpc.Error
	}{
		{name: "unavailable", want: CodeUpstreamUnavailable, message: `upstream "alpha": upstream unavailable`, provoke: provokeUnavailable},
		{name: "timeout", want: CodeUpstreamTimeout, message: `upstream "alpha": upstream timed out after 200ms`, provoke: provokeTimeout},
		{name: "busy", want: CodeUpstreamBusy, message: "", provoke: provokeBusy},
		{name: "cannot route", want: codeUnroutable, message: "manifold: cannot route roots/list", provoke: provokeUnroutable},
		{name: "client gave no answer", want: codeClientNoAnswer, message: "manifold: the client did not answer within 100ms", provoke: provokeNoAnswer},
	}
	seen := map[int64]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.provoke(t)
			if got == nil {
				t.Fatal("no JSON-RPC error")
			}
			if reservedByJSONRPC(got.Code) {
				t.Errorf("code %d (%q) lies in the range JSON-RPC reserves, −32768…−32000", got.Code, got.Message)
			}
			if got.Code != tt.want || !strings.Contains(got.Message, tt.message) {
				t.Errorf("got %d %q, want %d with %q", got.Code, got.Message, tt.want, tt.message)
			}
			if other, dup := seen[got.Code]; dup {
				t.Errorf("code %d is also %s's", got.Code, other)
			}
			seen[got.Code] = tt.name
		})
	}
}

func provokeUnavailable(t *testing.T) *jsonrpc.Error {
	h := newHarness(t, upstreamSpec{name: "alpha", demoName: "alpha"})
	h.ups["alpha"].kill(true)
	var last error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_, err := h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "x"}})
		if rpcErr, ok := mcpx.AsRPCError(err); ok && strings.Contains(rpcErr.Message, "unavailable") {
			return rpcErr
		}
		last = err
	}
	t.Fatalf("no unavailable error after the upstream died; last: %v", last)
	return nil
}

func provokeTimeout(t *testing.T) *jsonrpc.Error {
	h := newHarnessWith(t, func(c *config.Config) {
		alpha := c.Servers["alpha"]
		alpha.Timeout = 200 * time.Millisecond
		c.Servers["alpha"] = alpha
	}, upstreamSpec{name: "alpha", demoName: "alpha"})
	_, err := h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{"ms": 5000}})
	rpcErr, _ := mcpx.AsRPCError(err)
	return rpcErr
}

// provokeBusy fills alpha's one slot and makes a second call give up
// waiting for it. The client has gone by then, so the code is the one the
// audit record of the call says it was answered with.
func provokeBusy(t *testing.T) *jsonrpc.Error {
	var buf testutil.SyncBuffer
	log, err := audit.New(&config.Audit{Stdout: true, Arguments: config.ArgumentsNone},
		&audit.Options{Stdout: &buf, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close(context.Background()) })
	h := newHarnessOpts(t, &Options{Audit: log}, func(c *config.Config) {
		alpha := c.Servers["alpha"]
		alpha.MaxConcurrency = 1
		c.Servers["alpha"] = alpha
	}, upstreamSpec{name: "alpha", demoName: "alpha"})
	holdCtx, release := context.WithCancel(context.Background())
	defer release()
	held := make(chan struct{})
	go func() {
		defer close(held)
		_, _ = h.client.CallTool(holdCtx, &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{"ms": 10000}})
	}()
	up := h.gw.pool.members["alpha"].up
	waitFor(t, "the slot to be taken", func() bool { return up.InFlight() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := h.client.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "x"}}); err == nil {
		t.Fatal("a call waiting for a full slot succeeded")
	}
	// The slot stays taken until the waiting call's record is written.
	waitFor(t, "the waiting call's audit record", func() bool { return strings.Contains(buf.String(), `"name":"alpha__echo"`) })
	release()
	<-held
	settled(t, h.gw)
	if err := log.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	records := testutil.JSONLines(t, []byte(buf.String()))
	for _, r := range records {
		if r["name"] == "alpha__echo" {
			code, _ := r["error_code"].(float64)
			return &jsonrpc.Error{Code: int64(code)}
		}
	}
	t.Fatalf("no audit record of the call that waited: %v", records)
	return nil
}

// provokeUnroutable: the upstream asks for roots while no call is in
// flight on it, so no client can be told it is for.
func provokeUnroutable(t *testing.T) *jsonrpc.Error {
	var grabbed atomic.Pointer[mcp.ServerSession]
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	srv.AddTool(&mcp.Tool{Name: "grab", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		grabbed.Store(req.Session)
		return textResult("ok"), nil
	})
	h := newHarness(t, upstreamSpec{name: "asker", server: srv})
	if _, err := h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: "asker__grab"}); err != nil {
		t.Fatal(err)
	}
	settled(t, h.gw)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := grabbed.Load().ListRoots(ctx, nil)
	rpcErr, _ := mcpx.AsRPCError(err)
	return rpcErr
}

// provokeNoAnswer: a 2026-07-28 client never retries a bridged call, and
// the upstream's elicitation gets its answer once the bridge gives up.
func provokeNoAnswer(t *testing.T) *jsonrpc.Error {
	answered := make(chan error, 1)
	srv := mcp.NewServer(&mcp.Implementation{Name: "legacy"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// Not ctx: the bridge cancels the call as it answers, and the
		// answer is what this test is after.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: nameSchema})
		answered <- err
		return textResult("done"), nil
	})
	h := newHarness(t, upstreamSpec{name: "b", server: srv})
	h.gw.bridge.ttl = 100 * time.Millisecond
	tc := newTestClient(t, h, "gone", clientOptions{manual: true})
	if res, err := tc.call(t, "b__ask", nil); err != nil || !res.NeedsInput() {
		t.Fatalf("first round: %+v, %v; want input_required", res, err)
	}
	select {
	case err := <-answered:
		settled(t, h.gw)
		rpcErr, _ := mcpx.AsRPCError(err)
		return rpcErr
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream's elicitation was not answered after the bridge TTL")
		return nil
	}
}

// TestUpstreamCodesPassThrough: an upstream's own error reaches the client
// as it was (code, message, data), also when its code is one the gateway
// uses or once used, on every kind of client.
func TestUpstreamCodesPassThrough(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "failing"}, nil)
	srv.AddTool(&mcp.Tool{Name: "fail", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		return nil, &jsonrpc.Error{Code: args.Code, Message: args.Message, Data: json.RawMessage(`{"from":"upstream"}`)}
	})
	h := newHarness(t, upstreamSpec{name: "f", server: srv})
	clients := map[string]*mcp.ClientSession{
		"2024-11-05":          h.connectVersion(t, "2024-11-05"),
		"2025-11-25":          h.connectVersion(t, "2025-11-25"),
		mcpx.StatelessVersion: newTestClient(t, h, "modern", clientOptions{}).cs,
	}
	for version, cs := range clients {
		for _, want := range []*jsonrpc.Error{
			{Code: CodeUpstreamUnavailable, Message: "the upstream's own unavailable"},
			{Code: -32050, Message: "the gateway's code before"},
			{Code: -32000, Message: "legacy range"},
			{Code: 4242, Message: "custom"},
			{Code: jsonrpc.CodeInternalError, Message: "boom"},
		} {
			want.Data = json.RawMessage(`{"from":"upstream"}`)
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "f__fail", Arguments: map[string]any{"code": want.Code, "message": want.Message}})
			got, ok := mcpx.AsRPCError(err)
			if !ok {
				t.Errorf("%s, code %d: err = %v, want a JSON-RPC error", version, want.Code, err)
				continue
			}
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Errorf("%s, code %d: error (-want +got):\n%s", version, want.Code, diff)
			}
		}
	}
}
