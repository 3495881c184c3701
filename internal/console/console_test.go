package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/audit"
)

const (
	opKey    = "operator-key-0123456789"
	otherKey = "other-key-0123456789"
)

// fakeSource knows two keys: opKey, an operator's, and otherKey, a principal's that is not
// one. authOff turns auth off; revoke forgets opKey.
type fakeSource struct {
	mu      sync.Mutex
	authOff bool
	revoked bool
}

func (f *fakeSource) AuthOff() (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return "local", f.authOff
}

func (f *fakeSource) Authorize(_ context.Context, token string) (Operator, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case token == opKey && !f.revoked:
		return Operator{Name: "carol"}, nil
	case token == otherKey:
		return Operator{}, fmt.Errorf("%w: bob", ErrForbidden)
	}
	return Operator{}, fmt.Errorf("%w: unknown key", ErrUnauthenticated)
}

func (f *fakeSource) Overview() Overview {
	return Overview{Upstreams: []Upstream{{Name: "alpha", State: "ready"}, {Name: "beta", State: "failed"}}}
}

func (f *fakeSource) Principals() []Principal {
	return []Principal{{Name: "bob", Groups: []string{"contractor"}}}
}

func (f *fakeSource) Catalog(pr Principal) Catalog {
	return Catalog{Principal: pr, Items: []Item{{Kind: "tool", Name: "alpha__x", Visible: pr.Name != "bob", Rule: "policy.rules[0]"}}}
}

func (f *fakeSource) set(fn func(*fakeSource)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// do sends a request to c as if from remote, with header, and returns the recorded answer.
func do(c http.Handler, method, target, remote string, body url.Values, header map[string]string) *httptest.ResponseRecorder {
	var r *http.Request
	if body != nil {
		r = httptest.NewRequest(method, target, strings.NewReader(body.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	r.RemoteAddr = remote
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

const (
	loopback = "127.0.0.1:40000"
	remote   = "192.0.2.7:40000"
)

func TestAccess(t *testing.T) {
	paths := []string{"/ui/", "/ui/api/me", "/ui/api/overview", "/ui/api/catalog?principal=bob", "/ui/api/audit"}
	tests := []struct {
		name    string
		authOff bool
		remote  string
		header  map[string]string
		want    int
	}{
		{name: "auth off, loopback client", authOff: true, remote: loopback, want: http.StatusOK},
		{name: "auth off, remote client", authOff: true, remote: remote, want: http.StatusForbidden},
		{name: "auth off, remote client with a key", authOff: true, remote: remote, header: map[string]string{"Authorization": "Bearer " + opKey}, want: http.StatusForbidden},
		{name: "auth on, nothing", remote: loopback, want: http.StatusUnauthorized},
		{name: "auth on, unknown key", remote: loopback, header: map[string]string{"Authorization": "Bearer nope-0123456789abcdef"}, want: http.StatusUnauthorized},
		{name: "auth on, malformed header", remote: loopback, header: map[string]string{"Authorization": "Basic " + opKey}, want: http.StatusUnauthorized},
		{name: "auth on, unknown cookie", remote: loopback, header: map[string]string{"Cookie": cookieName + "=forged"}, want: http.StatusUnauthorized},
		{name: "auth on, not an operator", remote: loopback, header: map[string]string{"Authorization": "Bearer " + otherKey}, want: http.StatusForbidden},
		{name: "auth on, operator", remote: remote, header: map[string]string{"Authorization": "Bearer " + opKey}, want: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(&fakeSource{authOff: tc.authOff}, nil)
			for _, p := range paths {
				w := do(c, http.MethodGet, p, tc.remote, nil, tc.header)
				if w.Code != tc.want {
					t.Errorf("GET %s: %d, want %d", p, w.Code, tc.want)
				}
				if w.Code == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
					t.Errorf("GET %s: 401 without a challenge", p)
				}
			}
		})
	}
}

// TestUnauthorizedPageIsTheSignInForm: a browser without a session gets the form, an API
// client plain text.
func TestUnauthorizedPageIsTheSignInForm(t *testing.T) {
	c := New(&fakeSource{}, nil)
	if w := do(c, http.MethodGet, "/ui/", loopback, nil, nil); !strings.Contains(w.Body.String(), `action="/ui/signin"`) {
		t.Errorf("GET /ui/ without a session: %d %q, want the sign-in form", w.Code, w.Body.String())
	}
	if w := do(c, http.MethodGet, "/ui/api/overview", loopback, nil, nil); strings.Contains(w.Body.String(), "<form") {
		t.Errorf("GET /ui/api/overview without a session answers a form")
	}
}

// signIn posts key to the sign-in form and returns the answer.
func signIn(c http.Handler, key string, header map[string]string) *httptest.ResponseRecorder {
	return do(c, http.MethodPost, "/ui/signin", loopback, url.Values{"token": {key}}, header)
}

func TestSignInSetsAStrictHttpOnlyCookie(t *testing.T) {
	src := &fakeSource{}
	c := New(src, nil)
	w := signIn(c, opKey, nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/" {
		t.Fatalf("sign in: %d %q", w.Code, w.Header().Get("Location"))
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	ck := cookies[0]
	if ck.Name != cookieName || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui" || ck.Secure || ck.MaxAge <= 0 {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui, not Secure over plain HTTP, with a lifetime", ck)
	}
	if strings.Contains(ck.Value, opKey) || strings.Contains(w.Body.String(), opKey) {
		t.Error("the key is in the cookie or the answer")
	}
	session := map[string]string{"Cookie": ck.Name + "=" + ck.Value}
	w = do(c, http.MethodGet, "/ui/api/me", loopback, nil, session)
	var m me
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || w.Code != http.StatusOK || m.Operator != "carol" || !m.SignedIn {
		t.Fatalf("GET /ui/api/me with the cookie: %d %q", w.Code, w.Body.String())
	}

	// The credential is checked at every request: once the key is gone, the session is too.
	src.set(func(f *fakeSource) { f.revoked = true })
	if w = do(c, http.MethodGet, "/ui/api/me", loopback, nil, session); w.Code != http.StatusUnauthorized {
		t.Fatalf("with the key revoked: %d, want 401", w.Code)
	}
	src.set(func(f *fakeSource) { f.revoked = false })
	if w = do(c, http.MethodGet, "/ui/api/me", loopback, nil, session); w.Code != http.StatusUnauthorized {
		t.Fatalf("the session outlived its key's revocation: %d, want 401", w.Code)
	}
}

func TestSignInOverTLSSetsASecureCookie(t *testing.T) {
	srv := httptest.NewTLSServer(New(&fakeSource{}, nil))
	defer srv.Close()
	hc := srv.Client()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.PostForm(srv.URL+"/ui/signin", url.Values{"token": {opKey}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ck := resp.Cookies(); len(ck) != 1 || !ck[0].Secure || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookies over TLS: %+v", ck)
	}
}

// TestSignInBehindATLSProxySetsASecureCookie: a request that came without TLS, to a gateway
// reached over https through a proxy that ends TLS (Options.SecureCookies), gets a Secure
// cookie too.
func TestSignInBehindATLSProxySetsASecureCookie(t *testing.T) {
	for _, behind := range []bool{false, true} {
		c := New(&fakeSource{}, &Options{SecureCookies: func() bool { return behind }})
		w := signIn(c, opKey, nil)
		if ck := w.Result().Cookies(); len(ck) != 1 || ck[0].Secure != behind {
			t.Errorf("behind a TLS proxy %v: cookies %+v, want Secure %v", behind, ck, behind)
		}
	}
}

func TestSignInRefusals(t *testing.T) {
	tests := []struct {
		name   string
		key    string
		header map[string]string
		want   int
	}{
		{name: "unknown key", key: "nope-0123456789abcdef", want: http.StatusUnauthorized},
		{name: "empty", key: "", want: http.StatusUnauthorized},
		{name: "not an operator", key: otherKey, want: http.StatusForbidden},
		{name: "cross-site", key: opKey, header: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: http.StatusForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(&fakeSource{}, nil)
			w := signIn(c, tc.key, tc.header)
			if w.Code != tc.want || len(w.Result().Cookies()) != 0 {
				t.Errorf("%d with cookies %v, want %d and none", w.Code, w.Result().Cookies(), tc.want)
			}
			if tc.key != "" && strings.Contains(w.Body.String(), tc.key) {
				t.Error("the key is echoed")
			}
		})
	}
}

func TestSignOut(t *testing.T) {
	c := New(&fakeSource{}, nil)
	ck := signIn(c, opKey, nil).Result().Cookies()[0]
	session := map[string]string{"Cookie": ck.Name + "=" + ck.Value}
	w := do(c, http.MethodPost, "/ui/signout", loopback, url.Values{}, session)
	if w.Code != http.StatusSeeOther || len(w.Result().Cookies()) != 1 || w.Result().Cookies()[0].MaxAge >= 0 {
		t.Fatalf("sign out: %d %v", w.Code, w.Result().Cookies())
	}
	if w = do(c, http.MethodGet, "/ui/api/me", loopback, nil, session); w.Code != http.StatusUnauthorized {
		t.Errorf("after sign-out: %d, want 401", w.Code)
	}
}

func TestReadOnly(t *testing.T) {
	c := New(&fakeSource{authOff: true}, nil)
	for _, p := range []string{"/ui/", "/ui/api/overview", "/ui/api/audit"} {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			if w := do(c, m, p, loopback, nil, nil); w.Code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405", m, p, w.Code)
			}
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	w := do(New(&fakeSource{authOff: true}, nil), http.MethodGet, "/ui/", loopback, nil, nil)
	for k, want := range map[string]string{
		"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store",
	} {
		if got := w.Header().Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
}

func TestStaticAssetsAreEmbedded(t *testing.T) {
	c := New(&fakeSource{}, nil)
	for _, p := range []string{"/ui/static/console.js", "/ui/static/console.css"} {
		w := do(c, http.MethodGet, p, loopback, nil, nil)
		if w.Code != http.StatusOK || w.Body.Len() == 0 {
			t.Errorf("GET %s: %d, %d bytes", p, w.Code, w.Body.Len())
		}
		if strings.Contains(w.Body.String(), "http://") || strings.Contains(w.Body.String(), "https://") {
			t.Errorf("%s refers to another site", p)
		}
	}
}

func TestAuditAPI(t *testing.T) {
	ring := audit.NewRing(10)
	ring.Add(&audit.Record{Time: time.Now(), Principal: "alice", Server: "alpha", Name: "alpha__echo", Decision: audit.DecisionAllow,
		Outcome: audit.OutcomeOK, SessionID: "session-id-secret", TraceID: "trace1", Duration: 3 * time.Millisecond})
	ring.Add(&audit.Record{Time: time.Now(), Principal: "bob", Server: "alpha", Name: "alpha__fail", Decision: audit.DecisionDeny,
		Rule: "no-fail", Outcome: audit.OutcomeError, ErrorCode: -32602, TraceID: "trace2"})
	c := New(&fakeSource{authOff: true}, &Options{Audit: ring})
	get := func(q string) auditAnswer {
		t.Helper()
		w := do(c, http.MethodGet, "/ui/api/audit?"+q, loopback, nil, nil)
		if strings.Contains(w.Body.String(), "session-id-secret") {
			t.Error("a session id is in the audit answer")
		}
		var a auditAnswer
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := get(""); !a.On || a.Total != 2 || len(a.Records) != 2 || a.Records[0].Name != "alpha__fail" || a.Records[0].Rule != "no-fail" {
		t.Errorf("all: %+v", a)
	}
	if a := get("outcome=deny"); len(a.Records) != 1 || a.Records[0].Principal != "bob" {
		t.Errorf("denied: %+v", a)
	}
	if a := get("trace=trace1"); len(a.Records) != 1 || a.Records[0].Name != "alpha__echo" {
		t.Errorf("trace: %+v", a)
	}
	if a := get("limit=1"); len(a.Records) != 1 {
		t.Errorf("limit: %+v", a)
	}
	var ov Overview
	w := do(c, http.MethodGet, "/ui/api/overview", loopback, nil, nil)
	if err := json.Unmarshal(w.Body.Bytes(), &ov); err != nil {
		t.Fatal(err)
	}
	if l := ov.Upstreams[0].Latency; l == nil || l.Calls != 1 || l.P50 != 3 {
		t.Errorf("alpha's latency from the ring: %+v", l)
	}
	if ov.Upstreams[1].Latency != nil {
		t.Errorf("beta has a latency without calls: %+v", ov.Upstreams[1].Latency)
	}

	off := New(&fakeSource{authOff: true}, nil)
	var a auditAnswer
	json.Unmarshal(do(off, http.MethodGet, "/ui/api/audit", loopback, nil, nil).Body.Bytes(), &a)
	if a.On || len(a.Records) != 0 {
		t.Errorf("without a ring: %+v", a)
	}
}

func TestSessionsExpireAndAreBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newSessions(2, time.Hour, func() time.Time { return now })
	a, _ := s.create("a")
	now = now.Add(time.Minute)
	b, _ := s.create("b")
	now = now.Add(time.Minute)
	c, _ := s.create("c") // drops a, the oldest
	if _, ok := s.token(a); ok {
		t.Error("the oldest session survived the limit")
	}
	if tok, ok := s.token(b); !ok || tok != "b" {
		t.Errorf("b: %q %v", tok, ok)
	}
	now = now.Add(time.Hour)
	if _, ok := s.token(c); ok {
		t.Error("an expired session is still valid")
	}
	if s.len() != 1 {
		t.Errorf("len %d after c expired, want 1", s.len())
	}
	if a == b || b == c || len(a) < 40 {
		t.Errorf("ids %q %q %q: want distinct, 256-bit", a, b, c)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[int]time.Duration{50: 50 * time.Millisecond, 95: 95 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond} {
		if got := percentile(d, p); got != want {
			t.Errorf("p%d = %v, want %v", p, got, want)
		}
	}
	if got := percentile(d[:1], 50); got != time.Millisecond {
		t.Errorf("p50 of one = %v", got)
	}
}
