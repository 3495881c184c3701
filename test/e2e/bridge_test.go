package e2e

//lint:file-ignore SA1019 this test drives the sampling, roots and logging features that the gateway relays for protocol versions before 2026-07-28

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestBridgeNode: server-everything (stdio, an upstream older than
// 2026-07-28, which samples and elicits with real server requests) behind
// the real binary. A go-sdk client that negotiated 2026-07-28 completes
// trigger-sampling-request and trigger-elicitation-request through
// input_required rounds — its handlers run, and it never receives a server
// request — and a 2025-11-25 client completes them through
// sampling/createMessage and elicitation/create requests.
func TestBridgeNode(t *testing.T) {
	requireNode(t)
	cfg := writeConfig(t, everythingServer()+`
gateway:
  timeouts: { call: 30s }
`)
	g := startGateway(t, "--config", cfg)
	waitForTool(t, g, "everything__trigger-elicitation-request")

	for _, c := range []struct {
		version string
		asked   int32 // server→client requests the client must receive
	}{
		{version: "2026-07-28", asked: 0},
		{version: "2025-11-25", asked: 2},
	} {
		t.Run(c.version, func(t *testing.T) {
			bc := newBridgeClient(t, g, c.version)
			ctx := ctxT(t, 60*time.Second)

			res, err := bc.cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__trigger-sampling-request",
				Arguments: map[string]any{"prompt": "say hi", "maxTokens": 20}})
			text := bridgeText(res)
			if err != nil || res.IsError || !strings.Contains(text, "LLM sampling result") || !strings.Contains(text, bc.nonce+"-sampled") {
				t.Errorf("trigger-sampling-request: %q, %v; want the client's sample in the result", text, err)
			}
			res, err = bc.cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__trigger-elicitation-request", Arguments: map[string]any{}})
			text = bridgeText(res)
			if err != nil || res.IsError || !strings.Contains(text, "- Name: "+bc.nonce+"-name") {
				t.Errorf("trigger-elicitation-request: %q, %v; want the client's answer in the result", text, err)
			}
			if s, e, a := bc.sampled.Load(), bc.elicited.Load(), bc.asked.Load(); s != 1 || e != 1 || a != c.asked {
				t.Errorf("sampling handler ran %d times, elicitation handler %d times (want 1 each); %d server requests received (want %d)", s, e, a, c.asked)
			}
		})
	}
}

// bridgeClient is a go-sdk client over streamable HTTP that answers
// sampling and elicitation with its nonce and counts how it was asked.
type bridgeClient struct {
	cs                *mcp.ClientSession
	nonce             string
	sampled, elicited atomic.Int32
	// asked counts the server→client requests received: a 2026-07-28
	// client gets input_required results instead, which the SDK's MRTR
	// loop fulfils with the same handlers.
	asked atomic.Int32
}

func newBridgeClient(t *testing.T, g *gatewayProc, version string) *bridgeClient {
	t.Helper()
	bc := &bridgeClient{nonce: "n" + strings.ReplaceAll(version, "-", "")}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-bridge", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			bc.sampled.Add(1)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "e2e-model", Content: &mcp.TextContent{Text: bc.nonce + "-sampled"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			bc.elicited.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": bc.nonce + "-name"}}, nil
		},
	})
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "sampling/createMessage" || method == "elicitation/create" {
				bc.asked.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	cs, err := c.Connect(ctxT(t, 30*time.Second), &mcp.StreamableClientTransport{Endpoint: g.url("/mcp")},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	bc.cs = cs
	// The go-sdk client falls back to 2025-11-25 silently when a server
	// refuses 2026-07-28 (docs/architecture.md, The request path): the version
	// must be asserted.
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated %q, want %q", got, version)
	}
	return bc
}

// bridgeText is the text of a tool result ("" for none).
func bridgeText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
