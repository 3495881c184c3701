package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/redistest"
	"github.com/manifold-mcp/manifold/internal/testauth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestClusterSignInRoundRobin: three replicas of the binary behind the
// round-robin proxy (every request to the next replica, on a new
// connection), their upstream tokens in one redis-server. alice's call to
// an upstream that signs in per user gets a start link through the proxy;
// her browser opens it, posts her key, and the authorization server's
// answer comes back: three requests on three replicas in turn, so at least
// two land on one that does not hold the sign-in and are forwarded; then
// her call succeeds, in her session and in a new one.
func TestClusterSignInRoundRobin(t *testing.T) {
	redis := redistest.Start(t)
	as := &testauth.Server{}
	upURL, stop := testauth.StartAuthCode(as, "alice")
	t.Cleanup(stop)
	const aliceKey = "alice-e2e-key-0123456789ab"
	t.Setenv("ALICE_KEY", aliceKey)
	t.Setenv("STORE_SECRET", "e2e-oauth-store-secret-0123456789abcdef")
	addrs := freePorts(t, 3)
	lb := newRoundRobin(t, addrs)
	servers := fmt.Sprintf(`auth:
  apiKeys:
    - { name: alice, key: "${ALICE_KEY}" }
mcpServers:
  user:
    url: %s
    session: per-client
    auth: { type: oauth }`, upURL)
	gatewayExtra := fmt.Sprintf(`  publicURL: %s
  tokenStore: { store: cluster, secret: "${STORE_SECRET}" }`, lb.URL)
	var replicas []*gatewayProc
	for _, a := range addrs {
		cfg := writeConfig(t, clusterConfig(servers, gatewayExtra, a, addrs, `    store: "redis://`+redis+`/0"`))
		replicas = append(replicas, launch(t, []string{"serve", "--listen", a, "--config", cfg}, nil))
	}
	for _, g := range replicas {
		serving(t, g)
	}
	connect := func() *mcp.ClientSession {
		t.Helper()
		client := mcp.NewClient(&mcp.Implementation{Name: "e2e-oauth-cluster"}, &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		})
		cs, err := client.Connect(ctxT(t, 30*time.Second), &mcp.StreamableClientTransport{Endpoint: lb.URL + "/mcp",
			HTTPClient: &http.Client{Transport: bearerRT{aliceKey}}, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	alice := connect()
	ctx := ctxT(t, 30*time.Second)
	if names := listToolNames(ctx, t, alice); !slices.Equal(names, []string{"user__sign_in"}) {
		t.Fatalf("before signing in the tools are %v", names)
	}
	_, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "user__sign_in"})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeURLElicitationRequired {
		t.Fatalf("sign-in call: %v, want -32042", err)
	}
	_, link, _ := strings.Cut(string(rpcErr.Data), `"url":"`)
	link, _, _ = strings.Cut(link, `"`)
	if !strings.HasPrefix(link, lb.URL+"/oauth/start/") {
		t.Fatalf("link %q is not on the load balancer", link)
	}

	var hops int
	jar, _ := cookiejar.New(nil) // the browser keeps its cookies: the callback needs the sign-in's
	browser := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/authorize" {
			q := req.URL.Query()
			q.Set("user", "alice")
			req.URL.RawQuery = q.Encode()
		}
		hops++
		return nil
	}}
	for i, step := range []func() (*http.Response, error){
		func() (*http.Response, error) { return browser.Get(link) },
		func() (*http.Response, error) { return browser.PostForm(link, url.Values{"credential": {aliceKey}}) },
	} {
		resp, err := step()
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := []string{"<form", "Signed in"}[i]
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), want) {
			t.Fatalf("browser step %d: %d %s", i, resp.StatusCode, page)
		}
	}
	if hops != 2 {
		t.Errorf("the browser followed %d redirects, want 2 (authorization server, callback)", hops)
	}
	for i, cs := range []*mcp.ClientSession{alice, connect()} {
		ctx := ctxT(t, 30*time.Second)
		if names := listToolNames(ctx, t, cs); !slices.Equal(names, []string{"user__whoami"}) {
			t.Fatalf("session %d: after signing in the tools are %v", i, names)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "user__whoami"})
		if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "alice" {
			t.Fatalf("session %d: whoami %v %+v", i, err, res)
		}
	}
}
