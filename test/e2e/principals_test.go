package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// principalsConfig serves the demo server as alpha with alice's and bob's
// keys: alice in aliceGroups (no key at all when aliceGroups is nil), bob a
// contractor, who may call alpha__echo only, as contractors may; ops, the
// operator, reads /status. limits is
// the gateway.limits section, if any.
func principalsConfig(aliceGroups []string, limits string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mcpServers:\n  alpha:\n    command: %q\n    args: [demo-server, --name, alpha]\n", binary)
	if limits != "" {
		fmt.Fprintf(&b, "gateway:\n  limits: %s\n", limits)
	}
	b.WriteString("auth:\n  apiKeys:\n")
	if aliceGroups != nil {
		fmt.Fprintf(&b, "    - { name: alice, key: %q, groups: [%s] }\n", aliceKey, strings.Join(aliceGroups, ", "))
	}
	fmt.Fprintf(&b, "    - { name: bob, key: %q, groups: [contractor] }\n", bobKey)
	fmt.Fprintf(&b, "    - { name: ops, key: %q }\n  operators: [ops]\n", opsKey)
	b.WriteString(`policy:
  default: deny
  rules:
    - { allow: { tools: ["*"] }, principals: ["group:dev"] }
    - { allow: { tools: ["alpha__echo"] }, principals: ["group:contractor"] }
`)
	return b.String()
}

// servedHash returns the hash of the config serving, asking /status with
// token (an operator's).
func servedHash(t *testing.T, g *gatewayProc, token string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.url("/status"), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st gatewayStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET /status: %d: %v", resp.StatusCode, err)
	}
	return st.Config.Hash
}

// rewrite replaces the config file at path with content and waits until
// the gateway serves it.
func rewrite(t *testing.T, g *gatewayProc, path, content string) {
	t.Helper()
	writeAtomically(t, path, content)
	eventually(t, "the rewritten config serving", func() bool { return servedHash(t, g, opsKey) == hashOf(content) })
}

// rawPost POSTs body to /mcp with token and, unless empty, session id sid;
// it returns the status, the session id answered and the body.
func rawPost(t *testing.T, g *gatewayProc, token, sid, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.url("/mcp"), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

const (
	initRequest = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e-raw","version":"1"}}}`
	pingRequest = `{"jsonrpc":"2.0","id":2,"method":"ping"}`
)

// TestReloadReachesEverySession is issue 13's finding 5: alice holds a
// legacy SSE session and a streamable one; a reload that makes her a
// contractor takes alpha__add from both at their next request (listed and
// called), and one that removes her key ends both.
func TestReloadReachesEverySession(t *testing.T) {
	path := writeConfig(t, principalsConfig([]string{"dev"}, ""))
	g := startGateway(t, "--config", path)
	ctx := ctxT(t, 2*time.Minute)
	hc := &http.Client{Transport: bearerRT{aliceKey}}
	streamable, err := connectWithToken(ctx, g, aliceKey, "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	defer streamable.Close()
	sse, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-sse"}, nil).Connect(ctx,
		&mcp.SSEClientTransport{Endpoint: g.url("/sse"), HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sse.Close()
	sessions := map[string]*mcp.ClientSession{"streamable": streamable, "sse": sse}
	add := &mcp.CallToolParams{Name: "alpha__add", Arguments: map[string]any{"a": 1, "b": 2}}
	for kind, cs := range sessions {
		if tools := listToolNames(ctx, t, cs); !slices.Contains(tools, "alpha__add") {
			t.Fatalf("%s: alice as a developer lists %v", kind, tools)
		}
		if _, err := cs.CallTool(ctx, add); err != nil {
			t.Fatalf("%s: alice's add as a developer: %v", kind, err)
		}
	}

	rewrite(t, g, path, principalsConfig([]string{"contractor"}, ""))
	for kind, cs := range sessions {
		if tools := listToolNames(ctx, t, cs); !slices.Equal(tools, []string{"alpha__echo"}) {
			t.Errorf("%s: alice as a contractor lists %v, want [alpha__echo]", kind, tools)
		}
		if _, err := cs.CallTool(ctx, add); err == nil || !strings.Contains(err.Error(), `unknown tool "alpha__add"`) {
			t.Errorf("%s: alice's add as a contractor: %v, want unknown tool", kind, err)
		}
	}

	rewrite(t, g, path, principalsConfig(nil, ""))
	done := make(chan struct{})
	go func() { sse.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("the SSE session of a removed key is still open 10s after the reload")
	}
	if status, _, body := rawPost(t, g, aliceKey, streamable.ID(), pingRequest); status != http.StatusUnauthorized {
		t.Errorf("the streamable session of a removed key: %d %s, want 401", status, body)
	}
}

// TestSessionsPerPrincipalE2E is issue 13's finding 6: bob opens many more
// sessions than gateway.limits.maxSessionsPerPrincipal, one after the other
// and then in a burst; his oldest idle sessions are the ones ended (404 on
// their next request), he never holds more than his limit, and alice can
// still open a session and call.
func TestSessionsPerPrincipalE2E(t *testing.T) {
	const limit = 5
	g := startGateway(t, "--config", writeConfig(t, principalsConfig([]string{"dev"}, fmt.Sprintf("{maxSessions: 20, maxSessionsPerPrincipal: %d}", limit))))
	var bob []string
	for i := range 4 * limit {
		status, sid, body := rawPost(t, g, bobKey, "", initRequest)
		if status != http.StatusOK || sid == "" {
			t.Fatalf("bob's session %d: %d %s", i, status, body)
		}
		bob = append(bob, sid)
	}
	for i, sid := range bob {
		want := http.StatusOK
		if i < len(bob)-limit {
			want = http.StatusNotFound
		}
		if status, _, body := rawPost(t, g, bobKey, sid, pingRequest); status != want {
			t.Errorf("bob's session %d: %d %s, want %d", i, status, body, want)
		}
	}

	// A burst of 200 initializes, 8 at a time, as in the attack.
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var burst []string
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if status, sid, _ := rawPost(t, g, bobKey, "", initRequest); status == http.StatusOK {
					mu.Lock()
					burst = append(burst, sid)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range 200 {
		work <- i
	}
	close(work)
	wg.Wait()
	ctx := ctxT(t, time.Minute)
	alice, err := connectWithToken(ctx, g, aliceKey, "2025-11-25")
	if err != nil {
		t.Fatalf("alice after bob's burst: %v", err)
	}
	defer alice.Close()
	if res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__add", Arguments: map[string]any{"a": 1, "b": 2}}); err != nil || res.IsError {
		t.Fatalf("alice's call after bob's burst: %+v, %v", res, err)
	}
	live := 0
	for _, sid := range append(bob, burst...) {
		if status, _, _ := rawPost(t, g, bobKey, sid, pingRequest); status == http.StatusOK {
			live++
		}
	}
	if live != limit {
		t.Errorf("bob holds %d sessions after %d opened, want %d", live, len(bob)+len(burst), limit)
	}
}
