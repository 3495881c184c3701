package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/manifold-mcp/manifold/internal/testauth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestOAuthSignInPerUserOIDC: with the real binary, clients authenticated by JWTs (auth.jwt)
// of our test authorization server, which is also the OpenID provider the gateway's start
// page signs people in at (auth.jwt.oidc) and the authorization server of the protected
// upstream (`auth.type: oauth`). alice's link opened in a browser signed in as bob is refused
// at the gateway's OIDC callback (403), and the link still works for alice: signed in as
// her, the browser goes on to the upstream's sign-in and her call reaches the upstream as
// alice. Her browser's sign-in cookie is not accepted for bob's link: it goes to the issuer
// again, and signed in there as alice it is refused too.
func TestOAuthSignInPerUserOIDC(t *testing.T) {
	jwtKey := []byte("e2e-oidc-jwt-hmac-secret-0123456789abcdef")
	as := &testauth.Server{JWTSecret: jwtKey, JWTAudience: "manifold"}
	upURL, stop := testauth.StartAuthCode(as, "alice", "bob")
	t.Cleanup(stop)
	mint := func(sub string) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": as.Issuer, "aud": "manifold", "sub": sub,
			"iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix()}).SignedString(jwtKey)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Setenv("JWT_SECRET", string(jwtKey))
	t.Setenv("OIDC_SECRET", "e2e-oidc-client-secret-0123")
	t.Setenv("STORE_SECRET", "e2e-oauth-store-secret-0123456789abcdef")
	cfg := writeConfig(t, `
auth:
  jwt:
    issuer: `+as.Issuer+`
    audience: [manifold]
    secret: "${JWT_SECRET}"
    oidc: { clientID: manifold-gw, clientSecret: "${OIDC_SECRET}" }
gateway:
  tokenStore: { file: `+t.TempDir()+`/tokens, secret: "${STORE_SECRET}" }
mcpServers:
  user:
    url: `+upURL+`
    session: per-client
    auth: { type: oauth }
`)
	g := startGateway(t, "--config", cfg)
	// The operator registers the gateway's OIDC callback with the issuer.
	as.Register("manifold-gw", testauth.Client{Secret: "e2e-oidc-client-secret-0123", RedirectURIs: []string{g.url("/oauth/oidc/callback")}})

	connect := func(who string) *mcp.ClientSession {
		t.Helper()
		return connectURLElicitation(t, g, mint(who))
	}
	signInLink := func(cs *mcp.ClientSession) string {
		t.Helper()
		return signInLinkOf(t, cs)
	}
	// browser is a browser signed in at the authorization server as user: every sign-in
	// there (the gateway's OIDC one and the upstream's) is user's.
	browser := func(user string) *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Path == "/authorize" {
				q := req.URL.Query()
				q.Set("user", user)
				req.URL.RawQuery = q.Encode()
			}
			return nil
		}}
	}
	open := func(b *http.Client, link string) (int, string) {
		t.Helper()
		resp, err := b.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		page, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(page)
	}

	alice := connect("alice")
	link := signInLink(alice)
	if code, page := open(browser("bob"), link); code != http.StatusForbidden || !strings.Contains(page, "another account") {
		t.Fatalf("alice's link in bob's browser: %d %s", code, page)
	}
	alices := browser("alice")
	if code, page := open(alices, link); code != http.StatusOK || !strings.Contains(page, "Signed in") {
		t.Fatalf("alice's link in her browser: %d %s", code, page)
	}
	ctx := ctxT(t, 30*time.Second)
	if names := listToolNames(ctx, t, alice); !slices.Equal(names, []string{"user__whoami"}) {
		t.Fatalf("after signing in alice's tools are %v", names)
	}
	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "user__whoami"})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "alice" {
		t.Fatalf("alice's whoami: %v %+v", err, res)
	}

	// bob's link in alice's browser: her sign-in cookie does not count for it, the issuer
	// signs her in as alice again, and the callback refuses.
	if code, page := open(alices, signInLink(connect("bob"))); code != http.StatusForbidden || !strings.Contains(page, "another account") {
		t.Fatalf("bob's link in alice's browser: %d %s", code, page)
	}
	for _, l := range strings.Split(g.logs.String(), "\n") {
		if strings.Contains(l, "/oauth/start/") || strings.Contains(l, "code-") || strings.Contains(l, "state=") {
			t.Fatalf("the log carries a sign-in link, code or state: %s", l)
		}
	}
}

// connectURLElicitation connects to g's /mcp on 2025-11-25 as the bearer of token, declaring
// URL elicitation.
func connectURLElicitation(t *testing.T, g *gatewayProc, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-oauth"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
	})
	cs, err := client.Connect(ctxT(t, 30*time.Second), &mcp.StreamableClientTransport{Endpoint: g.url("/mcp"),
		HTTPClient: &http.Client{Transport: bearerRT{token}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// signInLinkOf calls the sign-in tool of the server "user" in cs, whose principal has not
// signed in there, and returns the link of its URL elicitation (-32042).
func signInLinkOf(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	if names := listToolNames(ctx, t, cs); !slices.Equal(names, []string{"user__sign_in"}) {
		t.Fatalf("before signing in the tools are %v, want [user__sign_in]", names)
	}
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "user__sign_in"})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeURLElicitationRequired {
		t.Fatalf("sign-in call: %v, want -32042", err)
	}
	var data struct{ Elicitations []mcp.ElicitParams }
	if err := json.Unmarshal(rpcErr.Data, &data); err != nil || len(data.Elicitations) != 1 || data.Elicitations[0].Mode != "url" {
		t.Fatalf("-32042 data %s", rpcErr.Data)
	}
	return data.Elicitations[0].URL
}
