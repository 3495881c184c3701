package gateway

import (
	"bufio"
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGETStreamDetached: an open GET stream over HTTP/1 is not parked in
// net/http's request goroutine (whose buffers and stack it would keep);
// it still carries the session's messages outside requests, and ends,
// leaving the session, when the client closes it.
func TestGETStreamDetached(t *testing.T) {
	gw, srv := newHTTPGateway(t, nil)
	resp, _ := post(t, srv.URL+"/mcp", initBody, nil)
	sid := resp.Header.Get(sessionIDHeader)
	if code, _ := sendHTTP(t, srv.URL, http.MethodPost, "", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); code != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(sessionIDHeader, sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		t.Fatalf("GET stream: %s, %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			lines <- line
		}
	}()
	v, _ := gw.clients.byID.Load(sid)
	cl := v.(*client)
	waitFor(t, "the stream counted open", func() bool { return cl.busy.Load() >= streamUnit })
	// The request returns once the stream is handed over (with the old
	// way, never).
	waitFor(t, "no request goroutine of net/http holding the stream", func() bool {
		return goroutinesIn("net/http.(*conn).serve", "gateway.(*Gateway).serveGET") == 0
	})
	if n := goroutinesIn("gateway.serveDetached("); n != 1 {
		t.Fatalf("%d goroutines serve the stream, want 1", n)
	}
	// A message outside requests reaches the client on the stream.
	gw.Server().AddTool(&mcp.Tool{Name: "added", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	found := false
	for line := range lines {
		if found = strings.Contains(line, "notifications/tools/list_changed"); found {
			break
		}
	}
	if !found {
		t.Fatal("the stream ended without the tools/list_changed notification")
	}
	// The client goes: the stream ends, the session stays.
	cancel()
	waitFor(t, "the stream counted closed", func() bool { return cl.busy.Load() < streamUnit })
	if _, ok := gw.clients.byID.Load(sid); !ok {
		t.Fatal("the session ended with its stream")
	}
	if n := goroutinesIn("gateway.serveDetached("); n != 0 {
		t.Fatalf("%d goroutines still serve the closed stream", n)
	}
}

// goroutinesIn counts the goroutines whose stacks hold every one of
// frames.
func goroutinesIn(frames ...string) int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		all := true
		for _, f := range frames {
			all = all && strings.Contains(g, f)
		}
		if all {
			n++
		}
	}
	return n
}
