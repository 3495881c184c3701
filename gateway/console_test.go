package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/audit"
	"github.com/manifold-mcp/manifold/internal/console"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// devOperators makes the developers (alice) operators.
func devOperators(c *config.Config) { c.Auth.Operators = []string{"group:dev"} }

// fetch sends method path to srv with header and returns the status and body.
func fetch(t *testing.T, srv *httptest.Server, method, path string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func bearerHeader(token string) http.Header {
	if token == "" {
		return http.Header{}
	}
	return http.Header{"Authorization": {"Bearer " + token}}
}

// TestOperatorsOnly: with auth on, the console, /status and /reload answer
// 401 without a credential and 403 to a principal that is not an operator;
// an operator gets through.
func TestOperatorsOnly(t *testing.T) {
	_, srv, _ := teamGateway(t, devOperators)
	endpoints := []struct{ method, path string }{
		{http.MethodGet, "/ui/"},
		{http.MethodGet, "/ui/api/overview"},
		{http.MethodGet, "/ui/api/catalog?principal=bob"},
		{http.MethodGet, "/ui/api/audit"},
		{http.MethodGet, "/status"},
		{http.MethodPost, "/reload"},
	}
	tests := []struct {
		name  string
		token string
		want  func(method string) int
	}{
		{name: "no credential", token: "", want: func(string) int { return http.StatusUnauthorized }},
		{name: "invalid key", token: "not-a-key-0123456789", want: func(string) int { return http.StatusUnauthorized }},
		{name: "bob, not an operator", token: bobKey, want: func(string) int { return http.StatusForbidden }},
		{name: "eve, not an operator", token: eveKey, want: func(string) int { return http.StatusForbidden }},
		{name: "alice, an operator by group", token: aliceKey, want: func(method string) int {
			if method == http.MethodPost {
				return http.StatusUnprocessableEntity // the test gateway has no config file to reload
			}
			return http.StatusOK
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, e := range endpoints {
				if resp, body := fetch(t, srv, e.method, e.path, bearerHeader(tc.token)); resp.StatusCode != tc.want(e.method) {
					t.Errorf("%s %s: %d %q, want %d", e.method, e.path, resp.StatusCode, body, tc.want(e.method))
				}
			}
		})
	}
}

// TestNoOperatorsNoConsole: with auth on and no auth.operators, nobody may
// use the console, /status or /reload.
func TestNoOperatorsNoConsole(t *testing.T) {
	_, srv, _ := teamGateway(t, nil)
	for _, p := range []string{"/ui/", "/status"} {
		if resp, _ := fetch(t, srv, http.MethodGet, p, bearerHeader(aliceKey)); resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s as alice without operators: %d, want 403", p, resp.StatusCode)
		}
	}
}

// TestConsoleLoopbackOnlyWithoutAuth: with auth off the console answers
// loopback clients only, even on a listener opened with gateway.insecure.
func TestConsoleLoopbackOnlyWithoutAuth(t *testing.T) {
	gw := newAlphaGateway(t, func(c *config.Config) { c.Gateway.Insecure = true }, nil)
	h := gw.Handler()
	for _, tc := range []struct {
		remote string
		want   int
	}{{"127.0.0.1:5000", http.StatusOK}, {"[::1]:5000", http.StatusOK}, {"192.0.2.1:5000", http.StatusForbidden}} {
		for _, p := range []string{"/ui/", "/ui/api/overview", "/status"} {
			r := httptest.NewRequest(http.MethodGet, p, nil)
			r.Host, r.RemoteAddr = "127.0.0.1", tc.remote
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("GET %s from %s: %d, want %d", p, tc.remote, w.Code, tc.want)
			}
		}
	}
}

// TestConsoleNeverRendersSecrets drives every console page and API, /status
// and the refusals with real calls in the audit ring, and checks that no
// API key, upstream environment value, call argument, session id or cookie
// appears in any answer, headers included.
func TestConsoleNeverRendersSecrets(t *testing.T) {
	const (
		envSecret  = "upstream-env-secret-5f2c"
		argSecret  = "argument-secret-9d41"
		jwtSecret  = "jwt-hmac-secret-0123456789abcdef0123"
		oidcSecret = "oidc-client-secret-77aa"
	)
	ring := audit.NewRing(0)
	al, err := audit.New(&config.Audit{Stdout: true, Arguments: config.ArgumentsFull},
		&audit.Options{Stdout: io.Discard, LookupEnv: func(string) (string, bool) { return "", false }, Ring: ring})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { al.Close(context.Background()) })
	_, srv, _ := teamGatewayOpts(t, demo.NewServer("alpha", nil), func(c *config.Config) {
		devOperators(c)
		c.Auth.JWT = &config.JWT{Issuer: "https://idp.example", Audience: []string{"manifold"}, Secret: jwtSecret,
			OIDC: config.OIDC{ClientID: "console", ClientSecret: oidcSecret}}
		s := c.Servers["alpha"]
		s.Env = map[string]string{"UPSTREAM_TOKEN": envSecret}
		c.Servers["alpha"] = s
	}, &Options{Audit: al})

	bob := connectAs(t, srv.URL, bobKey, "2025-11-25")
	if _, err := bob.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": argSecret}}); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__fail", Arguments: map[string]any{"why": argSecret}}); err == nil {
		t.Fatal("bob's call of the denied alpha__fail succeeded")
	}
	for deadline := time.Now().Add(10 * time.Second); ring.Total() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the audit ring holds %d records, want 2", ring.Total())
		}
	}

	// alice signs in with the form; her cookie is the session.
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.PostForm(srv.URL+"/ui/signin", url.Values{"token": {aliceKey}})
	if err != nil {
		t.Fatal(err)
	}
	signInBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("sign in: %d %v", resp.StatusCode, resp.Cookies())
	}
	cookie := resp.Cookies()[0]
	secrets := map[string]string{
		"alice's key": aliceKey, "bob's key": bobKey, "eve's key": eveKey, "an upstream env value": envSecret,
		"a call argument": argSecret, "bob's session id": bob.ID(), "the console cookie": cookie.Value,
		"the JWT secret": jwtSecret, "the OIDC client secret": oidcSecret,
	}
	answers := map[string]string{"POST /ui/signin": string(signInBody) + headerText(resp.Header, "Set-Cookie")}

	paths := []string{"/ui/", "/ui/static/console.js", "/ui/static/console.css", "/ui/api/me", "/ui/api/overview",
		"/ui/api/catalog", "/ui/api/catalog?principal=alice&groups=dev", "/ui/api/catalog?principal=bob&groups=contractor",
		"/ui/api/audit", "/ui/api/audit?outcome=deny", "/status"}
	as := map[string]http.Header{
		"cookie":       {"Cookie": {cookie.Name + "=" + cookie.Value}},
		"alice bearer": bearerHeader(aliceKey),
		"bob bearer":   bearerHeader(bobKey),
		"nothing":      {},
	}
	for who, h := range as {
		for _, p := range paths {
			resp, body := fetch(t, srv, http.MethodGet, p, h)
			answers[who+" GET "+p] = body + headerText(resp.Header, "")
		}
	}
	for what, answer := range answers {
		for name, secret := range secrets {
			if strings.Contains(answer, secret) {
				t.Errorf("%s: the answer holds %s", what, name)
			}
		}
	}

	if !strings.Contains(answers["nothing GET /ui/"], `action="/ui/oidc/start"`) {
		t.Error("the sign-in page does not offer the OIDC issuer")
	}

	// The records are there, without what must not be.
	var a struct{ Records []console.AuditRecord }
	_, body := fetch(t, srv, http.MethodGet, "/ui/api/audit?outcome=deny", as["cookie"])
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatal(err)
	}
	if len(a.Records) != 1 || a.Records[0].Name != "alpha__fail" || a.Records[0].Principal != "bob" || a.Records[0].Rule != "policy.rules[2]" {
		t.Errorf("denied records: %+v", a.Records)
	}
}

// headerText is h as text, without the header skip.
func headerText(h http.Header, skip string) string {
	var b strings.Builder
	for k, vs := range h {
		if k == skip {
			continue
		}
		b.WriteString(k + ": " + strings.Join(vs, ", ") + "\n")
	}
	return b.String()
}

// TestConsoleCatalogExplainsEachItem: bob's view lacks the tools policy
// hides from him, each with the rule that hid it; alice's has them.
func TestConsoleCatalogExplainsEachItem(t *testing.T) {
	_, srv, _ := teamGateway(t, devOperators)
	catalog := func(q string) map[string]console.Item {
		t.Helper()
		resp, body := fetch(t, srv, http.MethodGet, "/ui/api/catalog?"+q, bearerHeader(aliceKey))
		var c console.Catalog
		if err := json.Unmarshal([]byte(body), &c); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("catalog %s: %d %v", q, resp.StatusCode, err)
		}
		items := map[string]console.Item{}
		for _, it := range c.Items {
			items[it.Name] = it
		}
		return items
	}
	bob := catalog("principal=bob&groups=contractor")
	if it := bob["alpha__echo"]; !it.Visible || it.Upstream != "echo" || it.Server != "alpha" || !strings.HasPrefix(it.Rule, "policy.rules[1]: allow") {
		t.Errorf("bob's alpha__echo: %+v", it)
	}
	if it := bob["alpha__fail"]; it.Visible || !strings.HasPrefix(it.Rule, "policy.rules[2]: deny tools [\"*__fail\"]") {
		t.Errorf("bob's alpha__fail: %+v, want hidden by policy.rules[2]", it)
	}
	if it := bob["alpha__add"]; it.Visible || it.Rule != "default deny" {
		t.Errorf("bob's alpha__add: %+v, want hidden by the default", it)
	}
	if it := catalog("principal=alice&groups=dev")["alpha__add"]; !it.Visible {
		t.Errorf("alice's alpha__add: %+v", it)
	}
	all := catalog("")
	if it := all["alpha__fail"]; !it.Visible || it.Rule != "" {
		t.Errorf("without a principal alpha__fail: %+v, want listed, undecided", it)
	}
}

// TestConsoleOverviewReloadHistory: the Overview lists the latest reload
// attempts, newest first, with the error of a rejected one, and every
// upstream with its negotiated protocol version.
func TestConsoleOverviewReloadHistory(t *testing.T) {
	h := newReloadHarness(t, false)
	h.reload(t, h.reloadConfig(true, nil), nil)
	h.reload(t, nil, errors.New("mcpServers.gamma.command: is required"))
	ov := consoleSource{h.gw}.Overview()
	if len(ov.Reloads) != 2 || ov.Reloads[0].Result != ReloadRejected || !strings.Contains(ov.Reloads[0].Error, "gamma") ||
		ov.Reloads[1].Result != ReloadApplied || ov.ReloadsApplied != 1 || ov.ReloadsRejected != 1 {
		t.Fatalf("reloads: %+v", ov.Reloads)
	}
	if len(ov.Upstreams) != 2 || ov.Upstreams[0].Name != "alpha" || ov.Upstreams[1].Name != "beta" {
		t.Fatalf("upstreams: %+v", ov.Upstreams)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ov = consoleSource{h.gw}.Overview()
		if ov.Upstreams[1].State == "ready" && ov.Upstreams[1].ProtocolVersion != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("beta never ready with a protocol version: %+v", ov.Upstreams[1])
		}
	}
	for range reloadHistory {
		h.reload(t, nil, errors.New("bad"))
	}
	if n := len(consoleSource{h.gw}.Overview().Reloads); n != reloadHistory {
		t.Errorf("%d reloads kept, want %d", n, reloadHistory)
	}
}
