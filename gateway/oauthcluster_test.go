package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/cluster"
	"github.com/manifold-mcp/manifold/internal/oidc/oidctest"
	"github.com/manifold-mcp/manifold/internal/redistest"
	"github.com/manifold-mcp/manifold/internal/testauth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// signInReplicas starts two replicas of one cluster in front of an
// upstream that signs in per user (the test authorization server, users
// alice and bob), their tokens in the cluster's shared store; each
// replica's public URL is its own address. more edits the config further.
func signInReplicas(t *testing.T, more ...func(*config.Config)) ([]*replica, func(*config.Config)) {
	t.Helper()
	redis := redistest.Start(t)
	as := &testauth.Server{}
	upURL, stop := testauth.StartAuthCode(as, "alice", "bob")
	t.Cleanup(stop)
	edit := func(c *config.Config) {
		c.Servers["user"] = config.Server{Name: "user", Type: config.TypeHTTP, URL: upURL, Session: config.SessionPerClient,
			Auth: config.UpstreamAuth{Type: config.UpstreamAuthOAuth}}
		c.Gateway.Cluster.Store = "redis://" + redis + "/0"
		c.Gateway.TokenStore = config.TokenStore{Store: config.StoreCluster, Secret: "a-token-store-secret-of-32-bytes-or-more"}
		c.Gateway.PublicURL = "http://" + c.Gateway.Cluster.Advertise
		c.Policy.Rules = append(c.Policy.Rules, config.Rule{Effect: config.Allow, Match: config.Match{Tools: []string{"user__*"}}, Principals: []string{"bob"}})
		for _, m := range more {
			m(c)
		}
		c.ApplyDefaults()
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	return newReplicas(t, 2, edit), edit
}

// signInLink connects key's client (2025-11-25, URL elicitation) to base
// and returns the start link its call of the sign-in tool gets.
func signInLink(t *testing.T, base, key string) string {
	t.Helper()
	opts := &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sign-in-test"}, opts).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{key, http.DefaultTransport}}, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "user__sign_in"})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeURLElicitationRequired {
		t.Fatalf("sign-in tool: %v, want -32042", err)
	}
	var data struct{ Elicitations []mcp.ElicitParams }
	if err := json.Unmarshal(rpcErr.Data, &data); err != nil || len(data.Elicitations) != 1 {
		t.Fatalf("data %s", rpcErr.Data)
	}
	return data.Elicitations[0].URL
}

// onReplica is link with r's scheme and address: the load balancer sent
// the browser there.
func onReplica(t *testing.T, link string, r *replica) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = r.addr()
	return u.String()
}

// browser is a person's browser behind the load balancer: it signs in at
// the authorization server as user, and its callback lands on callback;
// stopAt, when set, stops at the authorization server's page (noting the
// URL in authorize).
type browser struct {
	user      string
	callback  *replica
	stopAt    bool
	authorize string
	callbacks []string
	jar       http.CookieJar // its cookies, as a browser keeps them
}

func (b *browser) client() *http.Client {
	if b.jar == nil {
		b.jar, _ = cookiejar.New(nil)
	}
	return &http.Client{Jar: b.jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		switch req.URL.Path {
		case "/authorize":
			b.authorize = req.URL.String()
			if b.stopAt {
				return http.ErrUseLastResponse
			}
			q := req.URL.Query()
			q.Set("user", b.user)
			req.URL.RawQuery = q.Encode()
		case oauthCallbackPath:
			req.URL.Host, req.Host = b.callback.addr(), b.callback.addr()
			b.callbacks = append(b.callbacks, req.URL.String())
		}
		return nil
	}}
}

// open opens link with the start page's form filled with key.
func (b *browser) open(t *testing.T, link, key string) (int, string) {
	t.Helper()
	resp, err := b.client().PostForm(link, url.Values{"credential": {key}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// whoami calls user__whoami as key's principal through base, in a new
// session, and returns what the upstream saw.
func whoami(t *testing.T, base, key string) string {
	t.Helper()
	cs := connectAs(t, base, key, "2025-11-25")
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "user__whoami"})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("whoami through %s: %v %+v", base, err, res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// TestClusterSignIn: alice's sign-in started on replica A is completed
// through replica B — the start link opened there, the authorization
// server's answer landing there — forwarded to A, which holds the flow; the
// token goes to the shared store, so her calls succeed on either replica.
// The link opened with bob's key on B is refused; the answer replayed is
// refused (single use); forged, truncated, expired and other-cluster
// states are refused on every replica; a sign-in of a replica that
// restarted or is gone gets a clear page.
func TestClusterSignIn(t *testing.T) {
	outer := t
	rs, edit := signInReplicas(t)
	a, b := rs[0], rs[1]

	link := signInLink(t, a.srv.URL, aliceKey)
	id := strings.TrimPrefix(link, a.srv.URL+oauthStartPath)
	if si, err := a.gw.cluster.OpenSignIn(id); err != nil || si.Owner != a.addr() || si.Kind != cluster.KindSignInStart || si.Server != "user" {
		t.Fatalf("the start link id is no sign-in token of A: %+v %v", si, err)
	}
	onB := onReplica(t, link, b)
	if code, body := get(t, onB); code != http.StatusOK || !strings.Contains(body, "Confirm who you are") {
		t.Fatalf("start page on B: %d %s", code, body)
	}
	if code, body := (&browser{user: "bob", callback: b}).open(t, onB, bobKey); code != http.StatusForbidden || !strings.Contains(body, "Not your link") {
		t.Fatalf("alice's link opened with bob's key on B: %d %s, want 403", code, body)
	}
	alice := &browser{user: "alice", callback: b}
	if code, body := alice.open(t, onB, aliceKey); code != http.StatusOK || !strings.Contains(body, "Signed in") {
		t.Fatalf("sign-in through B: %d %s", code, body)
	}
	state, _ := url.Parse(alice.authorize)
	if si, err := a.gw.cluster.OpenSignIn(state.Query().Get("state")); err != nil || si.Kind != cluster.KindSignInState || si.Owner != a.addr() {
		t.Fatalf("the OAuth state is no sign-in token of A: %+v %v", si, err)
	}
	if len(alice.callbacks) != 1 || !strings.Contains(alice.callbacks[0], b.addr()) {
		t.Fatalf("the callback did not land on B: %q", alice.callbacks)
	}
	for _, r := range rs {
		if got := whoami(t, r.srv.URL, aliceKey); got != "alice" {
			t.Errorf("through %s the upstream saw %q, want alice", r.addr(), got)
		}
	}
	if code, body := get(t, alice.callbacks[0]); code == http.StatusOK || strings.Contains(body, "Signed in") {
		t.Errorf("the answer replayed on B: %d %s, want a refusal", code, body)
	}
	if code, _ := get(t, onB); code != http.StatusNotFound {
		t.Errorf("the used start link again on B: %d, want 404", code)
	}

	t.Run("refused states", func(t *testing.T) {
		good := state.Query().Get("state")
		other, _ := cluster.NewKeys([]byte("another-cluster-secret-0123456789abcdef"), nil)
		otherState, _ := other.SealSignIn(&cluster.SignIn{Kind: cluster.KindSignInState, Owner: a.addr(), Boot: a.gw.cluster.Boot(),
			Expires: time.Now().Add(time.Minute), Principal: cluster.PrincipalOf("alice"), Server: "user", Local: "x"})
		expired, _ := a.gw.cluster.Keys().SealSignIn(&cluster.SignIn{Kind: cluster.KindSignInState, Owner: a.addr(), Boot: a.gw.cluster.Boot(),
			Expires: time.Now().Add(-time.Second), Principal: cluster.PrincipalOf("alice"), Server: "user", Local: "x"})
		session, _ := a.gw.cluster.Issue(cluster.KindSession, cluster.PrincipalOf("apikey:alice"), "")
		for _, c := range []struct{ name, state, want string }{
			{"forged", "forged-" + strings.Repeat("A", 100), "not valid"},
			{"truncated", good[:len(good)-8], "not valid"},
			{"another cluster's", otherState, "not valid"},
			{"a session id", session, "not valid"},
			{"expired", expired, "expired"},
		} {
			for _, r := range rs {
				code, body := get(t, r.srv.URL+oauthCallbackPath+"?code=c&state="+url.QueryEscape(c.state))
				if code != http.StatusNotFound || !strings.Contains(body, c.want) {
					t.Errorf("%s state via %s: %d %s", c.name, r.addr(), code, body)
				}
				if code, _ := get(t, r.srv.URL+oauthStartPath+url.PathEscape(c.state)); code != http.StatusNotFound {
					t.Errorf("%s start id via %s: %d, want 404", c.name, r.addr(), code)
				}
			}
		}
		// Another page under /oauth/ decides on a state of its own.
		if _, body := get(t, b.srv.URL+"/oauth/oidc/callback?state=forged"); strings.Contains(body, "Unknown sign-in") {
			t.Errorf("a page's own state was refused as a sign-in token: %s", body)
		}
		req, _ := http.NewRequest(http.MethodGet, onB, nil)
		req.Header.Set(cluster.HopHeader, "9999999999999.AAAA")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a forged hop header: %d, want 403", resp.StatusCode)
		}
	})

	t.Run("owner restarted, then gone", func(t *testing.T) {
		linkBob := signInLink(t, a.srv.URL, bobKey)
		bob := &browser{user: "bob", callback: b, stopAt: true}
		bob.open(t, onReplica(t, linkBob, b), bobKey)
		if bob.authorize == "" {
			t.Fatal("bob's sign-in did not reach the authorization server")
		}
		au, _ := url.Parse(bob.authorize)
		callback := b.srv.URL + oauthCallbackPath + "?code=c&state=" + url.QueryEscape(au.Query().Get("state"))
		linkBob2 := signInLink(t, a.srv.URL, bobKey) // the same sign-in's link, not yet used
		if linkBob2 == linkBob {
			t.Fatal("the used link was handed out again")
		}
		// Another page's value (an identity provider's state) names A too.
		page, err := a.gw.signInPageValue("user", "bob", "page-nonce", time.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []*Gateway{a.gw, b.gw} {
			if local, ok := g.signInPageLocal(page); !ok || local != "page-nonce" {
				t.Fatalf("page value opened as %q %v", local, ok)
			}
		}
		if _, ok := a.gw.signInPageLocal(linkBob2[strings.LastIndex(linkBob2, "/")+1:]); ok {
			t.Error("a start link id opened as a page value")
		}

		restartReplica(t, outer, a, []string{a.addr(), b.addr()}, edit)
		for _, u := range []string{callback, b.srv.URL + "/oauth/oidc/callback?state=" + url.QueryEscape(page), onReplica(t, linkBob2, b), onReplica(t, linkBob2, a), strings.Replace(callback, b.addr(), a.addr(), 1)} {
			if code, body := get(t, u); code != http.StatusGone || !strings.Contains(body, "gone or restarted") {
				t.Errorf("%s after the owner restarted: %d %s, want 410", u, code, body)
			}
		}
		stopReplica(a)
		if code, body := get(t, callback); code != http.StatusGone || !strings.Contains(body, "gone or restarted") {
			t.Errorf("callback on B of an owner gone: %d %s, want 410", code, body)
		}
	})
}

// TestClusterSignInAtTheIssuer: with auth.jwt and its OIDC client, alice's
// start link made on replica A and opened through B sends her to the
// issuer with a state naming A; the issuer's answer lands on B, which
// forwards it to A, where the sign-in waits: A checks it and goes on to
// the upstream's authorization server, whose answer lands on B too, and her
// calls then succeed on either replica. bob signed in at the issuer gets
// 403 through B; a forged, foreign-kind or unknown page state is refused.
func TestClusterSignInAtTheIssuer(t *testing.T) {
	idp := oidctest.New(t, idpClientID, idpSecret, "")
	rs, _ := signInReplicas(t, func(c *config.Config) {
		c.Auth.APIKeys = nil // alice and bob are JWT principals: they sign in at the issuer
		c.Auth.JWT = &config.JWT{Issuer: idp.URL, Audience: []string{"manifold"}, Secret: idpJWTKey,
			OIDC: config.OIDC{ClientID: idpClientID, ClientSecret: idpSecret}}
		c.Policy.Rules = append(c.Policy.Rules, config.Rule{Effect: config.Allow, Match: config.Match{Tools: []string{"user__*"}}, Principals: []string{"alice"}})
	})
	a, b := rs[0], rs[1]
	r := &identityRig{url: a.srv.URL, idp: idp}
	link := onReplica(t, signInLink(t, a.srv.URL, r.jwtOf(t, "alice")), b)

	// through opens link in br on B, signed in at the issuer as who, and
	// returns the issuer's answer as it lands on B.
	through := func(br *http.Client, who string) string {
		t.Helper()
		code, loc, page := visit(t, br, link)
		authz := redirectTo(t, "the start page through B", code, loc, page, idp.URL)
		u, _ := url.Parse(authz)
		if si, err := b.gw.cluster.OpenSignIn(u.Query().Get("state")); err != nil || si.Kind != cluster.KindSignInPage || si.Owner != a.addr() || si.Server != "user" {
			t.Fatalf("the issuer's state is no page token of A: %+v %v", si, err)
		}
		idp.SetToken(r.jwtOf(t, who))
		code, loc, page = visit(t, br, authz)
		return onReplica(t, redirectTo(t, "the issuer", code, loc, page, a.srv.URL), b)
	}

	bobs := newBrowser()
	if code, loc, page := visit(t, bobs, through(bobs, "bob")); code != http.StatusForbidden || !strings.Contains(page, "another account") {
		t.Fatalf("alice's link signed in as bob, the answer on B: %d %q\n%s", code, loc, page)
	}

	alices := newBrowser()
	callback := through(alices, "alice")
	code, loc, page := visit(t, alices, callback)
	authz, err := url.Parse(loc)
	if code != http.StatusFound || err != nil || authz.Path != "/authorize" || authz.Host == a.addr() || authz.Host == b.addr() {
		t.Fatalf("alice's answer on B: %d to %q, want the upstream's authorization server\n%s", code, loc, page)
	}
	q := authz.Query()
	q.Set("user", "alice")
	authz.RawQuery = q.Encode()
	code, loc, page = visit(t, alices, authz.String())
	code, _, page = visit(t, alices, onReplica(t, redirectTo(t, "the authorization server", code, loc, page, a.srv.URL), b))
	if code != http.StatusOK || !strings.Contains(page, "Signed in") {
		t.Fatalf("the upstream's answer on B: %d\n%s", code, page)
	}
	// The sign-in cookie A gave her counts on every replica (its key comes
	// from the cluster secret): the owner of her next link may be B.
	req := httptest.NewRequest(http.MethodGet, link, nil)
	for _, ck := range alices.Jar.Cookies(req.URL) {
		req.AddCookie(ck)
	}
	for _, rep := range rs {
		if got := whoami(t, rep.srv.URL, r.jwtOf(t, "alice")); got != "alice" {
			t.Errorf("through %s the upstream saw %q, want alice", rep.addr(), got)
		}
		if !rep.gw.signedInAs(req, "alice") || rep.gw.signedInAs(req, "bob") {
			t.Errorf("alice's sign-in cookie on %s: not hers only", rep.addr())
		}
	}

	// The answer again, a forged state, a token of another kind, an
	// unknown sign-in of A: each with a cookie bound to it, refused.
	u, _ := url.Parse(callback)
	sealed := func(kind cluster.Kind, local string) string {
		v, err := a.gw.cluster.IssueSignIn(kind, "user", cluster.PrincipalOf("alice"), local, time.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct{ name, state string }{
		{"the answer replayed", u.Query().Get("state")},
		{"forged", "forged-" + strings.Repeat("A", 100)},
		{"an OAuth state of A", sealed(cluster.KindSignInState, "x")},
		{"an unknown page state of A", sealed(cluster.KindSignInPage, "x")},
	} {
		for _, rep := range rs {
			br := newBrowser()
			cb, _ := url.Parse(rep.srv.URL + oauthOIDCCallbackPath + "?code=c&state=" + url.QueryEscape(c.state))
			br.Jar.SetCookies(cb, []*http.Cookie{{Name: oauthOIDCCookie, Value: c.state, Path: oauthOIDCPath}})
			if code, loc, page := visit(t, br, cb.String()); code != http.StatusBadRequest || loc != "" {
				t.Errorf("%s via %s: %d to %q, want 400\n%s", c.name, rep.addr(), code, loc, page)
			}
		}
	}
}

// TestClusterSignInCookieKeys: the sign-in cookie's keys are the cluster
// keys in force on every replica, not the secret file read again when a
// replica first needs them: the file rewritten without a reload changes
// nothing, so a cookie one replica gave still counts on the other.
func TestClusterSignInCookieKeys(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cluster-secret")
	write := func(secret string) {
		if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(testClusterSecret)
	rs := newReplicas(t, 2, func(c *config.Config) { c.Gateway.Cluster.Secret, c.Gateway.Cluster.SecretFile = "", file })
	w := httptest.NewRecorder()
	rs[0].gw.setSignInCookie(w, "alice")
	write(testClusterSecret + "-next") // the next secret, not reloaded yet
	req := httptest.NewRequest(http.MethodGet, oauthStartPath+"x", nil)
	for _, ck := range w.Result().Cookies() {
		req.AddCookie(ck)
	}
	if !rs[1].gw.signedInAs(req, "alice") {
		t.Error("the other replica refused the sign-in cookie")
	}
}
