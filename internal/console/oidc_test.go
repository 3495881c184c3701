package console

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"github.com/manifold-mcp/manifold/internal/oidc/oidctest"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

const (
	idpClientID = "console"
	idpSecret   = "client-secret-0123456789"
)

// newFakeIssuer serves the test OpenID provider (oidctest) for the console's client,
// issuing token.
func newFakeIssuer(t *testing.T, token string) *oidctest.Issuer {
	return oidctest.New(t, idpClientID, idpSecret, token)
}

// oidcSource is fakeSource with the OIDC sign-in on at issuer.
type oidcSource struct {
	*fakeSource
	issuer string
}

func (s oidcSource) OIDC() (OIDC, bool) {
	return OIDC{Issuer: s.issuer, ClientID: idpClientID, ClientSecret: idpSecret, Scopes: []string{"openid", "mcp"}}, true
}

// nextLink returns the link a sign-in step page (next.html) moves on to.
func nextLink(t *testing.T, page string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, `id="next" href="`)
	link, _, ok2 := strings.Cut(rest, `"`)
	if !ok || !ok2 {
		t.Fatalf("no next link in\n%s", page)
	}
	return html.UnescapeString(link)
}

// start posts to /ui/oidc/start with b and returns the link to the issuer it moves on to.
func start(t *testing.T, b *http.Client, console string) string {
	t.Helper()
	resp, err := b.PostForm(console+"/ui/oidc/start", nil)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("start: %d\n%s", resp.StatusCode, page)
	}
	return nextLink(t, string(page))
}

// browser is an HTTP client with cookies that follows redirects, like a browser.
func browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar}
}

func TestOIDCSignIn(t *testing.T) {
	idp := newFakeIssuer(t, opKey)
	srv := httptest.NewServer(New(oidcSource{&fakeSource{}, idp.URL}, nil))
	defer srv.Close()
	b := browser(t)

	resp, err := b.Get(srv.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(page), `action="/ui/oidc/start"`) {
		t.Fatalf("sign-in page: %d, no OIDC button:\n%s", resp.StatusCode, page)
	}

	resp, err = b.Get(start(t, b, srv.URL)) // → issuer → callback
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `href="/ui/"`) {
		t.Fatalf("callback: %d\n%s", resp.StatusCode, page)
	}
	asked := idp.Asked()
	if asked.Get("code_challenge_method") != "S256" || asked.Get("client_id") != idpClientID || asked.Get("scope") != "openid mcp" ||
		asked.Get("redirect_uri") != srv.URL+"/ui/oidc/callback" || asked.Get("nonce") == "" || asked.Get("response_type") != "code" {
		t.Errorf("authorization request %v", asked)
	}
	resp, err = b.Get(srv.URL + "/ui/api/me")
	if err != nil {
		t.Fatal(err)
	}
	var m me
	json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || m.Operator != "carol" || !m.SignedIn {
		t.Fatalf("after the OIDC sign-in: %d %+v", resp.StatusCode, m)
	}
	u, _ := url.Parse(srv.URL + "/ui/")
	for _, ck := range b.Jar.Cookies(u) {
		if strings.Contains(ck.Value, opKey) {
			t.Error("a cookie holds the token")
		}
	}
}

func TestOIDCCallbackRefusals(t *testing.T) {
	tests := []struct {
		name  string
		token string
		// tamper changes the callback URL the issuer sends the browser to; nil keeps it.
		tamper func(q url.Values)
		// dropCookie: the callback reaches another browser (no state cookie).
		dropCookie bool
		want       int
	}{
		{name: "a principal that is not an operator", token: otherKey, want: http.StatusForbidden},
		{name: "a token the gateway does not accept", token: "someone-elses-token-0123", want: http.StatusUnauthorized},
		{name: "another state", token: opKey, tamper: func(q url.Values) { q.Set("state", "forged") }, want: http.StatusBadRequest},
		{name: "another browser", token: opKey, dropCookie: true, want: http.StatusBadRequest},
		{name: "a code that is not the issuer's", token: opKey, tamper: func(q url.Values) { q.Set("code", "forged") }, want: http.StatusUnauthorized},
		{name: "the issuer's refusal", token: opKey, tamper: func(q url.Values) { q.Del("code"); q.Set("error", "access_denied") }, want: http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idp := newFakeIssuer(t, tc.token)
			srv := httptest.NewServer(New(oidcSource{&fakeSource{}, idp.URL}, nil))
			defer srv.Close()
			b := browser(t)
			var callback *url.URL
			b.CheckRedirect = func(r *http.Request, _ []*http.Request) error {
				if strings.HasPrefix(r.URL.Path, "/ui/oidc/callback") {
					callback = r.URL
					return http.ErrUseLastResponse
				}
				return nil
			}
			resp, err := b.Get(start(t, b, srv.URL))
			if err != nil || callback == nil {
				t.Fatalf("to the issuer: %v, callback %v", err, callback)
			}
			resp.Body.Close()
			q := callback.Query()
			if tc.tamper != nil {
				tc.tamper(q)
			}
			callback.RawQuery = q.Encode()
			if tc.dropCookie {
				b = browser(t)
			}
			resp, err = b.Get(callback.String())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("callback: %d, want %d", resp.StatusCode, tc.want)
			}
			for _, ck := range resp.Cookies() {
				if ck.Name == cookieName && ck.MaxAge >= 0 {
					t.Errorf("a session cookie was set: %+v", ck)
				}
			}
			// A state is good for one callback only.
			if tc.tamper == nil && !tc.dropCookie {
				resp, _ = b.Get(callback.String())
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					t.Error("the callback was accepted twice")
				}
			}
		})
	}
}

func TestOIDCOffIsNotFound(t *testing.T) {
	c := New(&fakeSource{}, nil)
	if w := do(c, http.MethodPost, "/ui/oidc/start", loopback, url.Values{}, nil); w.Code != http.StatusNotFound {
		t.Errorf("start without OIDC: %d", w.Code)
	}
	if w := do(c, http.MethodGet, "/ui/", loopback, nil, nil); strings.Contains(w.Body.String(), "oidc") {
		t.Error("the sign-in page offers OIDC while it is off")
	}
}

func TestOIDCIssuerMustMatchDiscovery(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": "https://elsewhere.example",
			"authorization_endpoint": "https://elsewhere.example/a", "token_endpoint": "https://elsewhere.example/t"})
	}))
	defer other.Close()
	if _, err := newOIDCFlow(nil, time.Now).discover(context.Background(), other.URL); err == nil {
		t.Error("a discovery document naming another issuer was accepted")
	}
}

func TestIDTokenNonce(t *testing.T) {
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"carol","nonce":"n-1"}`))
	for jwt, want := range map[string]string{"h." + payload + ".s": "n-1", "h.!!.s": "", "nope": ""} {
		if got := idTokenNonce(jwt); got != want {
			t.Errorf("idTokenNonce(%q) = %q, want %q", jwt, got, want)
		}
	}
}
