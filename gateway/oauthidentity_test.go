package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/oidc/oidctest"
	"github.com/manifold-mcp/manifold/internal/testauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	idpClientID = "manifold"
	idpSecret   = "oidc-client-secret-0123456789"
	idpJWTKey   = "a-jwt-hmac-secret-of-at-least-32-bytes!"
	carolKey    = "carol-api-key-0123456789abcdef"
)

// identityRig is a gateway authenticating clients with JWTs of a test OpenID provider (with
// its OIDC client configured) and one API key (carol's), in front of two `auth.type: oauth`
// servers, "user" and "other", of our test authorization server.
type identityRig struct {
	url string
	idp *oidctest.Issuer
	as  *testauth.Server
}

func newIdentityRig(t *testing.T) *identityRig {
	t.Helper()
	idp := oidctest.New(t, idpClientID, idpSecret, "")
	as := &testauth.Server{}
	upURL, stop := testauth.StartAuthCode(as, "alice", "bob", "carol")
	t.Cleanup(stop)
	oauth := config.UpstreamAuth{Type: config.UpstreamAuthOAuth}
	cfg := &config.Config{Servers: map[string]config.Server{
		"user":  {Name: "user", Type: config.TypeHTTP, URL: upURL, Session: config.SessionPerClient, Auth: oauth},
		"other": {Name: "other", Type: config.TypeHTTP, URL: upURL, Session: config.SessionPerClient, Auth: oauth},
	}, Gateway: config.DefaultGateway()}
	cfg.Auth.APIKeys = []config.APIKey{{Name: "carol", Key: carolKey}}
	cfg.Auth.JWT = &config.JWT{Issuer: idp.URL, Audience: []string{"manifold"}, Secret: idpJWTKey,
		OIDC: config.OIDC{ClientID: idpClientID, ClientSecret: idpSecret}}
	hs, _ := servePublicGateway(t, cfg)
	return &identityRig{url: hs.URL, idp: idp, as: as}
}

// servePublicGateway serves a gateway of cfg over HTTP, with gateway.publicURL set to its
// address, until the test ends; it returns the server and the gateway.
func servePublicGateway(t *testing.T, cfg *config.Config) (*httptest.Server, *Gateway) {
	t.Helper()
	hs := httptest.NewUnstartedServer(nil)
	cfg.Gateway.PublicURL = "http://" + hs.Listener.Addr().String()
	gw := validGateway(t, cfg) // upcreds_test.go
	startServing(t, gw, hs)
	return hs, gw
}

// jwtOf returns a JWT of the issuer naming sub.
func (r *identityRig) jwtOf(t *testing.T, sub string) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": r.idp.URL, "aud": "manifold", "sub": sub,
		"iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(idpJWTKey))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// credentialOf is who's credential with the gateway: carol's API key, else a JWT.
func (r *identityRig) credentialOf(t *testing.T, who string) string {
	if who == "carol" {
		return carolKey
	}
	return r.jwtOf(t, who)
}

// link returns the start link of who's sign-in at server, from its sign-in tool's answer.
func (r *identityRig) link(t *testing.T, who, server string) string {
	t.Helper()
	cs := connectAs(t, r.url, r.credentialOf(t, who), "2025-11-25")
	if _, err := cs.ListTools(context.Background(), nil); err != nil { // a session's lists are made when it first lists
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: server + "__sign_in"})
	if err != nil || !res.IsError {
		t.Fatalf("%s's sign-in at %s: %v %+v", who, server, err, res)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	_, rest, ok := strings.Cut(text, r.url+oauthStartPath)
	id, _, _ := strings.Cut(rest, " ")
	if !ok || id == "" {
		t.Fatalf("no start link in %q", text)
	}
	return r.url + oauthStartPath + id
}

// newBrowser is an HTTP client with cookies that never follows redirects: tests take each
// step themselves.
func newBrowser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// visit GETs u with b and returns the status, the Location and the page.
func visit(t *testing.T, b *http.Client, u string) (int, string, string) {
	t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(page)
}

// redirectTo asserts a redirect to the server at base and returns where.
func redirectTo(t *testing.T, what string, code int, loc, page, base string) string {
	t.Helper()
	if code != http.StatusFound || !strings.HasPrefix(loc, base+"/") {
		t.Fatalf("%s: %d to %q, want a redirect to %s\n%s", what, code, loc, base, page)
	}
	return loc
}

// throughIssuer opens link in b signed in at the issuer as who: it returns the callback
// URL the issuer sends the browser to.
func (r *identityRig) throughIssuer(t *testing.T, b *http.Client, link, who string) string {
	t.Helper()
	code, loc, page := visit(t, b, link)
	authz := redirectTo(t, "the start page", code, loc, page, r.idp.URL)
	r.idp.SetToken(r.jwtOf(t, who))
	code, loc, page = visit(t, b, authz)
	return redirectTo(t, "the issuer", code, loc, page, r.url)
}

// TestOAuthStartSignsInAtTheIssuer: with auth.jwt and its OIDC client, alice's start link
// sends the browser to the issuer (code flow with PKCE S256, the callback under /oauth/);
// signed in there as bob, the callback refuses with 403 and the link stays valid; signed
// in as alice, the callback goes on to the upstream's authorization server, and after it
// alice's session reaches the upstream as alice.
func TestOAuthStartSignsInAtTheIssuer(t *testing.T) {
	r := newIdentityRig(t)
	link := r.link(t, "alice", "user")

	bobs := newBrowser()
	callback := r.throughIssuer(t, bobs, link, "bob")
	asked := r.idp.Asked()
	if asked.Get("client_id") != idpClientID || asked.Get("code_challenge_method") != "S256" || asked.Get("code_challenge") == "" ||
		asked.Get("redirect_uri") != r.url+oauthOIDCCallbackPath || asked.Get("response_type") != "code" || asked.Get("scope") != "openid" {
		t.Errorf("authorization request %v", asked)
	}
	if code, loc, page := visit(t, bobs, callback); code != http.StatusForbidden || !strings.Contains(page, "another account") {
		t.Fatalf("alice's link, signed in as bob: %d %q\n%s", code, loc, page)
	}

	alices := newBrowser()
	callback = r.throughIssuer(t, alices, link, "alice")
	code, loc, page := visit(t, alices, callback)
	authz := redirectTo(t, "the callback, signed in as alice", code, loc, page, r.as.Issuer)
	u, _ := url.Parse(authz)
	q := u.Query()
	q.Set("user", "alice") // she signs in at the upstream's authorization server
	u.RawQuery = q.Encode()
	code, loc, page = visit(t, alices, u.String())
	code, _, page = visit(t, alices, redirectTo(t, "the authorization server", code, loc, page, r.url))
	if code != http.StatusOK || !strings.Contains(page, "Signed in") {
		t.Fatalf("the upstream's callback: %d\n%s", code, page)
	}
	cs := connectAs(t, r.url, r.jwtOf(t, "alice"), "2025-11-25")
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "user__whoami"})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "alice" {
		t.Fatalf("alice's whoami: %v %+v", err, res)
	}
	for _, ck := range alices.Jar.Cookies(u) {
		if strings.Contains(ck.Value, r.jwtOf(t, "alice")[:20]) {
			t.Error("a cookie holds the token")
		}
	}
}

// TestOAuthOIDCCallbackRefusesForeignStates: a callback whose state is not the one bound to
// the browser, reaches another browser, or comes again, is refused, and nothing goes on to
// the upstream's authorization server.
func TestOAuthOIDCCallbackRefusesForeignStates(t *testing.T) {
	r := newIdentityRig(t)
	tests := []struct {
		name string
		// tamper changes the callback URL; nil keeps it.
		tamper func(q url.Values)
		// other: the callback reaches another browser (no state cookie).
		other bool
		// twice: the callback is replayed after its first use.
		twice bool
	}{
		{name: "a forged state", tamper: func(q url.Values) { q.Set("state", "forged") }},
		{name: "another browser", other: true},
		{name: "a replay", twice: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			link := r.link(t, "alice", "user")
			b := newBrowser()
			callback := r.throughIssuer(t, b, link, "alice")
			u, _ := url.Parse(callback)
			if tc.tamper != nil {
				q := u.Query()
				tc.tamper(q)
				u.RawQuery = q.Encode()
			}
			if tc.other {
				b = newBrowser()
			}
			if tc.twice {
				code, loc, page := visit(t, b, u.String())
				redirectTo(t, "the first callback", code, loc, page, r.as.Issuer)
				// The browser keeps its state cookie (a replay by whoever saw the URL and
				// the cookie).
				b.Jar.SetCookies(u, []*http.Cookie{{Name: oauthOIDCCookie, Value: u.Query().Get("state"), Path: oauthOIDCPath}})
			}
			code, loc, page := visit(t, b, u.String())
			if code != http.StatusBadRequest || loc != "" {
				t.Fatalf("callback: %d to %q, want 400\n%s", code, loc, page)
			}
		})
	}
	// A state cookie made up to match a made-up state names no sign-in.
	b := newBrowser()
	u, _ := url.Parse(r.url + oauthOIDCCallbackPath + "?state=made-up&code=c")
	b.Jar.SetCookies(u, []*http.Cookie{{Name: oauthOIDCCookie, Value: "made-up", Path: oauthOIDCPath}})
	if code, loc, _ := visit(t, b, u.String()); code != http.StatusBadRequest || loc != "" {
		t.Fatalf("made-up state: %d to %q", code, loc)
	}
}

// TestOAuthSignInCookie: after a verified sign-in the browser's sign-in cookie lets a later
// start link of the same principal go straight to the upstream's authorization server (no
// issuer round trip, no key form), for JWT principals (OIDC) and API-key principals (the
// form) alike; it is never accepted for another principal's link.
func TestOAuthSignInCookie(t *testing.T) {
	r := newIdentityRig(t)

	alices := newBrowser()
	code, loc, page := visit(t, alices, r.throughIssuer(t, alices, r.link(t, "alice", "user"), "alice"))
	redirectTo(t, "alice's first link", code, loc, page, r.as.Issuer)
	var ck *http.Cookie
	base, _ := url.Parse(r.url + oauthStartPath)
	for _, c := range alices.Jar.Cookies(base) {
		if c.Name == signInCookie {
			ck = c
		}
	}
	if ck == nil {
		t.Fatal("no sign-in cookie after the verified sign-in")
	}
	code, loc, page = visit(t, alices, r.link(t, "alice", "other"))
	redirectTo(t, "alice's second link with her cookie", code, loc, page, r.as.Issuer)

	// bob's link in alice's browser: her cookie does not count; bob must sign in.
	code, loc, page = visit(t, alices, r.link(t, "bob", "user"))
	redirectTo(t, "bob's link in alice's browser", code, loc, page, r.idp.URL)
	// Nor does a copy of her cookie in bob's browser, for his link.
	bobs := newBrowser()
	bobs.Jar.SetCookies(base, []*http.Cookie{{Name: signInCookie, Value: ck.Value, Path: signInCookiePath}})
	code, loc, page = visit(t, bobs, r.link(t, "bob", "other"))
	redirectTo(t, "bob's link with alice's cookie", code, loc, page, r.idp.URL)

	// carol (an API key) types her key once: the form, never the issuer.
	carols := newBrowser()
	carolLink := r.link(t, "carol", "user")
	code, loc = formOf(t, carols, carolLink, carolKey)
	redirectTo(t, "carol's key", code, loc, "", r.as.Issuer)
	code, loc, page = visit(t, carols, r.link(t, "carol", "other"))
	redirectTo(t, "carol's second link with her cookie", code, loc, page, r.as.Issuer)
}

// TestSignInCookieSeal: a cookie opens with a key that made it, before its expiry, and
// names its principal; any change, another key or a late use fails.
func TestSignInCookieSeal(t *testing.T) {
	key, other := []byte("0123456789abcdef0123456789abcdef"), []byte("fedcba9876543210fedcba9876543210")
	now := time.Unix(1_800_000_000, 0)
	v := sealSignIn(key, "alice", now.Add(time.Hour))
	tests := []struct {
		name  string
		keys  [][]byte
		value string
		at    time.Time
		want  string
	}{
		{name: "valid", keys: [][]byte{key}, value: v, at: now, want: "alice"},
		{name: "a previous key", keys: [][]byte{other, key}, value: v, at: now, want: "alice"},
		{name: "another key", keys: [][]byte{other}, value: v, at: now},
		{name: "expired", keys: [][]byte{key}, value: v, at: now.Add(time.Hour)},
		{name: "another principal", keys: [][]byte{key}, value: strings.Replace(v, "YWxpY2U", "Ym9i", 1), at: now},
		{name: "truncated", keys: [][]byte{key}, value: v[:len(v)-2], at: now},
		{name: "empty", keys: [][]byte{key}, value: "", at: now},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := openSignIn(tc.keys, tc.value, tc.at)
			if got != tc.want || (err == nil) != (tc.want != "") {
				t.Errorf("openSignIn = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func FuzzOpenSignIn(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	f.Add(sealSignIn(key, "alice", time.Unix(1_900_000_000, 0)))
	f.Add("v1.1.YQ.")
	f.Fuzz(func(t *testing.T, v string) {
		p, err := openSignIn([][]byte{key}, v, time.Unix(1_800_000_000, 0))
		if err == nil && p == "" {
			t.Fatal("a cookie naming no principal was accepted")
		}
	})
}

// TestOAuthStartFallsBackToTheFormWithoutTheIssuer: when the issuer cannot be reached, the
// start page asks for the credential instead, which still checks who it is.
func TestOAuthStartFallsBackToTheFormWithoutTheIssuer(t *testing.T) {
	r := newIdentityRig(t)
	link := r.link(t, "alice", "user")
	bobJWT := r.jwtOf(t, "bob")
	r.idp.Close()
	b := newBrowser()
	if code, _ := formOf(t, b, link, bobJWT); code != http.StatusForbidden {
		t.Fatalf("alice's link with bob's token: %d, want 403", code)
	}
}

// formOf opens link in b, asserts the start page's credential form, posts credential and
// returns the answer's status and Location.
func formOf(t *testing.T, b *http.Client, link, credential string) (int, string) {
	t.Helper()
	if code, loc, page := visit(t, b, link); code != http.StatusOK || !strings.Contains(page, "<form") {
		t.Fatalf("start page: %d to %q, want the credential form\n%s", code, loc, page)
	}
	resp, err := b.PostForm(link, url.Values{"credential": {credential}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}
