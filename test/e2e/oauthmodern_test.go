package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/testauth"
	"github.com/manifold-mcp/manifold/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// browseSignIn opens a start link in a browser: the start page's form with
// key, then the test authorization server's sign-in as user. It returns the
// final status and page.
func browseSignIn(t *testing.T, link, key, user string) (int, string) {
	t.Helper()
	code, page, err := testauth.Browse(link, user, key)
	if err != nil {
		t.Fatal(err)
	}
	return code, page
}

// TestOAuthSignInSessionless: with the real binary and a real 2026-07-28
// client (the go-sdk's, sessionless: every request stands alone), an oauth
// server's sign-in is reachable and works: alice lists her own tools of the
// server (its sign-in tool), her call of it is answered input_required with
// a URL elicitation of the gateway's start page, her client's elicitation
// handler signs her in in a browser (the start page with her key, the
// authorization server as alice) and the SDK's retry with the requestState
// succeeds; then she lists the server's tools and reaches the upstream with
// her token. bob's client declares no URL elicitation: his call gets the
// isError answer with his start link.
func TestOAuthSignInSessionless(t *testing.T) {
	as := &testauth.Server{}
	upURL, stop := testauth.StartAuthCode(as, "alice", "bob")
	t.Cleanup(stop)
	keys := map[string]string{"alice": "alice-e2e-key-0123456789ab", "bob": "bob-e2e-key-0123456789abcd"}
	t.Setenv("ALICE_KEY", keys["alice"])
	t.Setenv("BOB_KEY", keys["bob"])
	cfg := writeConfig(t, `
auth:
  apiKeys:
    - { name: alice, key: "${ALICE_KEY}" }
    - { name: bob, key: "${BOB_KEY}" }
mcpServers:
  user:
    url: `+upURL+`
    session: per-client
    auth: { type: oauth }
`)
	g := startGateway(t, "--config", cfg)
	connect := func(who string, opts *mcp.ClientOptions) *mcp.ClientSession {
		t.Helper()
		cs, err := testutil.ConnectStateless(ctxT(t, 30*time.Second), g.url("/mcp"), &http.Client{Transport: bearerRT{keys[who]}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	text := func(res *mcp.CallToolResult) string {
		if res == nil || len(res.Content) == 0 {
			return ""
		}
		tc, _ := res.Content[0].(*mcp.TextContent)
		return tc.Text
	}

	var asked atomic.Int32
	alice := connect("alice", &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			if req.Params.Mode != "url" || !strings.HasPrefix(req.Params.URL, g.url("/oauth/start/")) {
				t.Errorf("elicitation %+v, want a URL elicitation of the start page", req.Params)
				return &mcp.ElicitResult{Action: "cancel"}, nil
			}
			if code, page := browseSignIn(t, req.Params.URL, keys["alice"], "alice"); code != http.StatusOK || !strings.Contains(page, "Signed in") {
				t.Errorf("alice's sign-in: %d %s", code, page)
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	ctx := ctxT(t, 60*time.Second)
	if names := listToolNames(ctx, t, alice); !slices.Equal(names, []string{"user__sign_in"}) {
		t.Fatalf("before signing in alice's tools are %v, want [user__sign_in]", names)
	}
	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "user__sign_in"})
	if err != nil || res.IsError || !strings.Contains(text(res), "signed in") || asked.Load() != 1 {
		t.Fatalf("alice's sign-in call: %v %q (asked %d times)", err, text(res), asked.Load())
	}
	if names := listToolNames(ctx, t, alice); !slices.Equal(names, []string{"user__whoami"}) {
		t.Fatalf("after signing in alice's tools are %v, want [user__whoami]", names)
	}
	res, err = alice.CallTool(ctx, &mcp.CallToolParams{Name: "user__whoami"})
	if err != nil || res.IsError || text(res) != "alice" {
		t.Fatalf("alice's whoami: %v %q", err, text(res))
	}

	bob := connect("bob", &mcp.ClientOptions{})
	if names := listToolNames(ctx, t, bob); !slices.Equal(names, []string{"user__sign_in"}) {
		t.Fatalf("bob's tools are %v, want [user__sign_in]: alice's sign-in is hers", names)
	}
	res, err = bob.CallTool(ctx, &mcp.CallToolParams{Name: "user__sign_in"})
	if err != nil || !res.IsError || !strings.Contains(text(res), g.url("/oauth/start/")) {
		t.Fatalf("bob's call without URL elicitation: %v %+v, want an isError result with his link", err, res)
	}

	principals := map[string]bool{}
	for _, h := range as.Seen() {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
			if i, known := as.Lookup(tok); known {
				principals[i.Principal] = true
			}
		}
	}
	if !principals["alice"] || len(principals) != 1 {
		t.Errorf("the upstream saw the tokens of %v, want alice's alone", principals)
	}
	for _, l := range strings.Split(g.logs.String(), "\n") {
		if strings.Contains(l, "upstream failed; retrying") && !strings.Contains(l, `"session":"per-client"`) {
			t.Errorf("the oauth server's pool upstream tried to connect: %s", l)
		}
	}
}
