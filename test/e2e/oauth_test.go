package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/testauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestOAuthSignInPerUser: with the real binary, an upstream that requires OAuth (our test
// authorization server with two users and its protected MCP server) and `auth.type: oauth`:
// alice's first call of the server's sign-in tool gets the URL elicitation (-32042); her
// link opened with bob's API key is refused; after the browser step (start page with her
// key, the authorization server's sign-in, the gateway's callback) her session lists the
// server's tools and her call reaches the upstream with alice's token; bob gets his own
// elicitation and the upstream sees bob; `manifold auth revoke` sends alice back to the
// sign-in; a restart keeps bob's token; the token file holds no plaintext.
func TestOAuthSignInPerUser(t *testing.T) {
	as := &testauth.Server{}
	upURL, stop := testauth.StartAuthCode(as, "alice", "bob")
	t.Cleanup(stop)
	dir := t.TempDir()
	store := filepath.Join(dir, "tokens")
	keys := map[string]string{"alice": "alice-e2e-key-0123456789ab", "bob": "bob-e2e-key-0123456789abcd"}
	t.Setenv("ALICE_KEY", keys["alice"])
	t.Setenv("BOB_KEY", keys["bob"])
	t.Setenv("STORE_SECRET", "e2e-oauth-store-secret-0123456789abcdef")
	cfg := writeConfig(t, `
auth:
  apiKeys:
    - { name: alice, key: "${ALICE_KEY}" }
    - { name: bob, key: "${BOB_KEY}" }
gateway:
  tokenStore: { file: `+store+`, secret: "${STORE_SECRET}" }
mcpServers:
  user:
    url: `+upURL+`
    session: per-client
    auth: { type: oauth }
`)
	connect := func(g *gatewayProc, who string) *mcp.ClientSession {
		t.Helper()
		return connectURLElicitation(t, g, keys[who])
	}
	// signInLink calls the sign-in tool and returns the link of its URL elicitation.
	signInLink := func(cs *mcp.ClientSession) string {
		t.Helper()
		return signInLinkOf(t, cs)
	}
	// browse opens link as who (the start page's form with who's key), signing in at the
	// authorization server as user; it returns the final status and page.
	browse := func(link, who, user string) (int, string) {
		t.Helper()
		return browseSignIn(t, link, keys[who], user) // oauthmodern_test.go
	}
	whoami := func(cs *mcp.ClientSession) string {
		t.Helper()
		ctx := ctxT(t, 30*time.Second)
		if names := listToolNames(ctx, t, cs); !slices.Equal(names, []string{"user__whoami"}) {
			t.Fatalf("after signing in the tools are %v, want [user__whoami]", names)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "user__whoami"})
		if err != nil || res.IsError {
			t.Fatalf("whoami: %v %+v", err, res)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}

	g := startGateway(t, "--config", cfg)
	alice := connect(g, "alice")
	link := signInLink(alice)
	if code, page := browse(link, "bob", "bob"); code != http.StatusForbidden || !strings.Contains(page, "another account") {
		t.Fatalf("alice's link opened with bob's key: %d %s", code, page)
	}
	if code, page := browse(link, "alice", "alice"); code != http.StatusOK || !strings.Contains(page, "Signed in") {
		t.Fatalf("alice's sign-in: %d %s", code, page)
	}
	if got := whoami(alice); got != "alice" {
		t.Fatalf("alice reached the upstream as %q", got)
	}
	bob := connect(g, "bob")
	bobLink := signInLink(bob)
	if bobLink == link {
		t.Fatal("bob got alice's link")
	}
	if code, page := browse(bobLink, "bob", "bob"); code != http.StatusOK {
		t.Fatalf("bob's sign-in: %d %s", code, page)
	}
	if got := whoami(bob); got != "bob" {
		t.Fatalf("bob reached the upstream as %q", got)
	}
	if code, _ := browse(link, "alice", "alice"); code != http.StatusNotFound {
		t.Errorf("a used link answered %d, want 404", code)
	}
	// The upstream saw only tokens of our authorization server, alice's and bob's.
	principals := map[string]bool{}
	for _, h := range as.Seen() {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
			i, known := as.Lookup(tok)
			if !known {
				t.Errorf("the upstream saw a token the authorization server never issued")
			}
			principals[i.Principal] = true
		}
	}
	if !principals["alice"] || !principals["bob"] || len(principals) != 2 {
		t.Errorf("the upstream saw the tokens of %v, want alice and bob", principals)
	}

	out, err := exec.Command(binary, "auth", "revoke", "--principal", "alice", "--server", "user", "--config", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("auth revoke: %v %s", err, out)
	}
	signInLink(connect(g, "alice")) // back to the sign-in

	g.stop(t)
	codes := as.CountGrants(testauth.GrantAuthorizationCode)
	g = startGateway(t, "--config", cfg)
	if got := whoami(connect(g, "bob")); got != "bob" {
		t.Fatalf("after a restart bob reached the upstream as %q", got)
	}
	if n := as.CountGrants(testauth.GrantAuthorizationCode); n != codes {
		t.Errorf("%d code exchanges after the restart, want none", n-codes)
	}
	data, err := os.ReadFile(store)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range as.Seen() {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok && strings.Contains(string(data), tok) {
			t.Fatal("the token file holds a token in plaintext")
		}
	}
	if strings.Contains(string(data), "alice") || strings.Contains(string(data), "rt-") {
		t.Fatal("the token file holds plaintext")
	}
	for _, l := range strings.Split(g.logs.String(), "\n") {
		if strings.Contains(l, "/oauth/start/") || strings.Contains(l, "code-") {
			t.Fatalf("the log carries a sign-in link or code: %s", l)
		}
	}
}
