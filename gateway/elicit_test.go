package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestURLElicitationByClientVersion: -32042 reaches a 2025-11-25 client
// unchanged, and the upstream's completion notification reaches that
// client only; older and 2026-07-28 clients get a translation.
func TestURLElicitationByClientVersion(t *testing.T) {
	h := newBridgeHarness(t, nil, nil)
	args := func(id string) *mcp.CallToolParams { return &mcp.CallToolParams{Arguments: map[string]any{"id": id}} }
	current := newTestClient(t, h, "cur", clientOptions{version: "2025-11-25", urlElicit: true})
	other := newTestClient(t, h, "oth", clientOptions{version: "2025-11-25", urlElicit: true})
	old := newTestClient(t, h, "old", clientOptions{version: "2025-06-18"})
	modern := newTestClient(t, h, "new", clientOptions{})

	_, err := current.call(t, "b__urlerror", args("el-1"))
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeURLElicitationRequired ||
		!strings.Contains(string(rpcErr.Data), `"elicitationId":"el-1"`) || !strings.Contains(string(rpcErr.Data), "https://auth.example/el-1") {
		t.Fatalf("2025-11-25 client: %v (data %s), want -32042 with its data", err, dataOf(rpcErr))
	}
	for _, c := range []*testClient{old, modern} {
		res, err := c.call(t, "b__urlerror", args("el-"+c.nonce))
		if err != nil || !res.IsError || !strings.Contains(textOfContent(res.Content), "open https://auth.example/el-"+c.nonce) {
			t.Errorf("%s client: %+v, %v; want a tool error naming the URL", c.nonce, res, err)
		}
	}
	if _, err := old.cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "b__urlerror"}); rpcCode(err) != jsonrpc.CodeInternalError ||
		!strings.Contains(err.Error(), "https://auth.example/p") {
		t.Errorf("old client's prompt: %v, want -32603 naming the URL", err)
	}

	// The completion goes to the session the elicitation went to, whoever
	// makes the upstream send it; never to another session, never to an
	// older client.
	for _, id := range []string{"el-1", "el-old", "el-new", "unknown"} {
		if _, err := other.call(t, "b__complete", args(id)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case id := <-current.completed:
		if id != "el-1" {
			t.Errorf("completion %q reached the client of el-1", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the completion of el-1 did not reach its client")
	}
	// Through the relay: a URL elicitation request, then its completion.
	if res, err := current.call(t, "b__urlask", args("el-2")); err != nil || textOfContent(res.Content) != "accept" {
		t.Fatalf("urlask: %+v, %v", res, err)
	}
	select {
	case id := <-current.completed:
		if id != "el-2" {
			t.Errorf("completion %q, want el-2", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the completion of el-2 did not reach its client")
	}
	time.Sleep(100 * time.Millisecond)
	for _, c := range []*testClient{current, other, old, modern} {
		select {
		case id := <-c.completed:
			t.Errorf("client %s got a completion for %q", c.nonce, id)
		default:
		}
	}
}

func dataOf(e *jsonrpc.Error) string {
	if e == nil {
		return ""
	}
	return string(e.Data)
}
