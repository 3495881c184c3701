package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/manifold-mcp/manifold/internal/testauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestUpstreamCredentialsAcrossRestarts: with the real binary, a
// token-exchange server's upstream sees each principal's exchanged token
// and a client_credentials server's the gateway's own; no client JWT,
// issued token or secret reaches the upstream or the log; the token store
// file holds no plaintext, keeps the tokens across a restart (no new
// exchange), and `manifold auth revoke` makes the next session exchange
// again while `manifold auth list` never prints a token.
func TestUpstreamCredentialsAcrossRestarts(t *testing.T) {
	as := &testauth.Server{Clients: map[string]testauth.Client{"gw": {Secret: "gw-client-secret-0123"}}, Subject: testauth.HMACSubject([]byte(jwtSecret))}
	upURL, stop := testauth.Start(as, "https://up.test")
	t.Cleanup(stop)

	dir := t.TempDir()
	store := filepath.Join(dir, "tokens")
	const storeSecret = "e2e-token-store-secret-0123456789abcdef"
	t.Setenv("JWT_SECRET", jwtSecret)
	t.Setenv("STORE_SECRET", storeSecret)
	t.Setenv("GW_SECRET", "gw-client-secret-0123")
	cfg := writeConfig(t, `
auth:
  jwt: { issuer: "https://idp.test", audience: [manifold], secret: "${JWT_SECRET}" }
gateway:
  tokenStore: { file: `+store+`, secret: "${STORE_SECRET}" }
mcpServers:
  user:
    url: `+upURL+`
    auth: { type: token-exchange, tokenURL: "`+as.TokenURL+`", clientID: gw, clientSecret: "${GW_SECRET}", audience: "https://up.test" }
  machine:
    url: `+upURL+`
    auth: { type: client_credentials, tokenURL: "`+as.TokenURL+`", clientID: gw, clientSecret: "${GW_SECRET}", audience: "https://up.test" }
`)
	jwts := map[string]string{}
	for _, who := range []string{"alice", "bob"} {
		jwts[who] = mintJWT(t, jwtSecret, jwt.MapClaims{"iss": "https://idp.test", "aud": "manifold", "sub": who,
			"iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	}
	whoami := func(g *gatewayProc, who, tool string) string {
		t.Helper()
		ctx := ctxT(t, 30*time.Second)
		cs, err := connectWithToken(ctx, g, jwts[who], "2025-11-25")
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool})
		if err != nil || res.IsError {
			t.Fatalf("%s as %s: %v %+v", tool, who, err, res)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	authCmd := func(args ...string) (string, int) {
		cmd := exec.Command(binary, append([]string{"auth"}, append(args, "--config", cfg)...)...)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}

	g := startGateway(t, "--config", cfg)
	for _, who := range []string{"alice", "bob"} {
		if got := whoami(g, who, "user__whoami"); got != who {
			t.Errorf("%s reached the token-exchange upstream as %q", who, got)
		}
	}
	if got := whoami(g, "alice", "machine__whoami"); got != "client:gw" {
		t.Errorf("the client_credentials upstream saw %q, want client:gw", got)
	}
	if n := as.CountGrants(testauth.GrantTokenExchange); n != 2 {
		t.Fatalf("%d exchanges, want 2", n)
	}
	g.stop(t)

	secrets := []string{jwts["alice"], jwts["bob"], storeSecret, "gw-client-secret-0123"}
	for _, h := range as.Seen() {
		tok := strings.TrimPrefix(h, "Bearer ")
		secrets = append(secrets, tok)
		if _, issued := as.Lookup(tok); !issued {
			t.Errorf("the upstream saw Authorization %q, not an issued token (a client's JWT?)", h)
		}
	}
	data, err := os.ReadFile(store)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(g.logs.String(), s) {
			t.Errorf("the gateway log holds a token or secret")
		}
	}
	for _, s := range append([]string{"alice", "bob", "access_token"}, secrets...) {
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("the token store file holds plaintext")
		}
	}
	out, code := authCmd("list")
	if code != 0 || !strings.Contains(out, "alice") || !strings.Contains(out, "bob") {
		t.Fatalf("auth list: exit %d\n%s", code, out)
	}
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("auth list printed a token or secret")
		}
	}
	if out, code := authCmd("list", "--server", "nonesuch"); code != 0 || strings.Contains(out, "alice") {
		t.Errorf("auth list --server nonesuch: exit %d, want no entries\n%s", code, out)
	}

	// A restart keeps the tokens: no new exchange.
	g = startGateway(t, "--config", cfg)
	if got := whoami(g, "alice", "user__whoami"); got != "alice" {
		t.Errorf("after a restart alice reached the upstream as %q", got)
	}
	if n := as.CountGrants(testauth.GrantTokenExchange); n != 2 {
		t.Errorf("%d exchanges after a restart, want still 2 (the stored tokens)", n)
	}
	// A revoke reaches the running gateway: alice's next session exchanges again, bob's does not.
	if out, code := authCmd("revoke", "--principal", "alice", "--server", "user"); code != 0 || !strings.Contains(out, "revoked 1") {
		t.Fatalf("auth revoke: exit %d\n%s", code, out)
	}
	if got := whoami(g, "alice", "user__whoami"); got != "alice" {
		t.Errorf("after revoke alice reached the upstream as %q", got)
	}
	whoami(g, "bob", "user__whoami")
	if n := as.CountGrants(testauth.GrantTokenExchange); n != 3 {
		t.Errorf("%d exchanges after revoking alice's token, want 3", n)
	}
	if out, code := authCmd("revoke", "--principal", "carol"); code != 1 {
		t.Errorf("revoking nothing: exit %d, want 1\n%s", code, out)
	}
}
