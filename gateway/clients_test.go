package gateway

//lint:file-ignore SA1019 this test drives the sampling, roots and logging features that the gateway relays for protocol versions before 2026-07-28

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/internal/fixture"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// principalsHarness serves the alpha demo upstream over HTTP with
// teamPolicy, and reloads the config edits give it.
type principalsHarness struct {
	gw      *Gateway
	srv     *httptest.Server
	servers []string // besides alpha

	mu   sync.Mutex
	edit func(*config.Config) // of the config the next reload loads
}

func (h *principalsHarness) config() *config.Config {
	cfg := &config.Config{Servers: map[string]config.Server{
		"alpha": {Name: "alpha", Type: "stdio", Command: "unused"},
	}, Gateway: config.DefaultGateway()}
	for _, name := range h.servers {
		cfg.Servers[name] = config.Server{Name: name, Type: "stdio", Command: "unused"}
	}
	teamPolicy(cfg)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.edit != nil {
		h.edit(cfg)
	}
	return cfg
}

func newPrincipalsHarness(t *testing.T, edit func(*config.Config)) *principalsHarness {
	t.Helper()
	return newPrincipalsHarnessWith(t, edit, nil)
}

// newPrincipalsHarnessWith serves more upstreams beside alpha, by name.
func newPrincipalsHarnessWith(t *testing.T, edit func(*config.Config), more map[string]*mcp.Server) *principalsHarness {
	t.Helper()
	h := &principalsHarness{edit: edit}
	transports := map[string]func() (mcp.Transport, error){"alpha": newFakeUpstream(demo.NewServer("alpha", nil)).transport}
	for name, srv := range more {
		h.servers = append(h.servers, name)
		transports[name] = newFakeUpstream(srv).transport
	}
	gw, err := New(h.config(), &Options{
		Transports: transports,
		LoadConfig: func() (*config.Config, error) { return h.config(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	gw.Start(context.Background())
	h.gw, h.srv = gw, httptest.NewServer(gw.Handler())
	t.Cleanup(func() {
		for ss := range gw.Server().Sessions() {
			ss.Close()
		}
		h.srv.Close()
		gw.Close(context.Background())
	})
	return h
}

// reload applies the config with edit (on top of teamPolicy).
func (h *principalsHarness) reload(t *testing.T, edit func(*config.Config)) {
	t.Helper()
	h.mu.Lock()
	h.edit = edit
	h.mu.Unlock()
	if res, err := h.gw.Reload(context.Background(), TriggerAPI); err != nil || res.Result != ReloadApplied {
		t.Fatalf("reload: %+v, %v", res, err)
	}
}

// connectSSE opens a legacy SSE session with token.
func connectSSE(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: bearer{token, http.DefaultTransport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sse-test"}, nil).Connect(context.Background(),
		&mcp.SSEClientTransport{Endpoint: url + "/sse", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect over SSE: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// withAlice sets alice's key entry.
func withAlice(name string, groups ...string) func(*config.Config) {
	return func(c *config.Config) {
		c.Auth.APIKeys[0] = config.APIKey{Name: name, Key: aliceKey, Groups: groups}
	}
}

// ended reports whether cs's session ended within a few seconds.
func ended(cs *mcp.ClientSession) bool {
	done := make(chan struct{})
	go func() { cs.Wait(); close(done) }()
	return within(done, 5*time.Second)
}

// TestReloadAppliesToEverySessionOfAPrincipal: a reload that moves alice
// to another group takes alpha's tools from her streamable and her legacy
// SSE session alike, at their next request; one that removes her key ends
// both.
func TestReloadAppliesToEverySessionOfAPrincipal(t *testing.T) {
	h := newPrincipalsHarness(t, nil)
	ctx := context.Background()
	sessions := map[string]*mcp.ClientSession{
		"streamable": connectAs(t, h.srv.URL, aliceKey, "2025-11-25"),
		"sse":        connectSSE(t, h.srv.URL, aliceKey),
	}
	add := &mcp.CallToolParams{Name: "alpha__add", Arguments: map[string]any{"a": 1, "b": 2}}
	for kind, cs := range sessions {
		if !slices.Contains(toolNames(t, cs), "alpha__add") {
			t.Fatalf("%s: alice lacks alpha__add before the reload", kind)
		}
		if _, err := cs.CallTool(ctx, add); err != nil {
			t.Fatalf("%s: alice's add before the reload: %v", kind, err)
		}
	}

	h.reload(t, withAlice("alice", "contractor"))
	for kind, cs := range sessions {
		if got, want := toolNames(t, cs), []string{"alpha__echo", "alpha__link"}; !slices.Equal(got, want) {
			t.Errorf("%s: alice as a contractor lists %v, want %v", kind, got, want)
		}
		if _, err := cs.CallTool(ctx, add); rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), `unknown tool "alpha__add"`) {
			t.Errorf("%s: alice's add as a contractor: %v, want unknown tool", kind, err)
		}
	}

	h.reload(t, func(c *config.Config) { c.Auth.APIKeys = c.Auth.APIKeys[1:] })
	if !ended(sessions["sse"]) {
		t.Error("the SSE session of a removed key goes on")
	}
	if _, err := sessions["streamable"].ListTools(ctx, nil); err == nil {
		t.Error("the streamable session of a removed key goes on")
	}
	waitFor(t, "no session left", func() bool { n, _ := h.gw.clients.count(""); return n == 0 })
}

// TestReloadEndsSessionsOfAKeyNamingAnotherPrincipal: when a reload gives
// alice's key to another name, her sessions end: the next request of the
// streamable one gets 404, as for any session that ended.
func TestReloadEndsSessionsOfAKeyNamingAnotherPrincipal(t *testing.T) {
	h := newPrincipalsHarness(t, nil)
	resp, body := post(t, h.srv.URL+"/mcp", initBody, map[string]string{"Authorization": "Bearer " + aliceKey})
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	sse := connectSSE(t, h.srv.URL, aliceKey)
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	hdr := map[string]string{"Authorization": "Bearer " + aliceKey, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	if resp, body := post(t, h.srv.URL+"/mcp", ping, hdr); resp.StatusCode != http.StatusOK {
		t.Fatalf("ping before: %d %s", resp.StatusCode, body)
	}

	h.reload(t, withAlice("mallory", "dev"))
	if resp, body := post(t, h.srv.URL+"/mcp", ping, hdr); resp.StatusCode != http.StatusNotFound {
		t.Errorf("ping after the key changed hands: %d %s, want 404", resp.StatusCode, body)
	}
	if !ended(sse) {
		t.Error("the SSE session of a key that names another principal goes on")
	}
}

// TestReloadKeepsSessionsOfUnchangedCredentials: a reload that changes
// auth without touching bob's key leaves bob's sessions alone.
func TestReloadKeepsSessionsOfUnchangedCredentials(t *testing.T) {
	h := newPrincipalsHarness(t, nil)
	bob := connectSSE(t, h.srv.URL, bobKey)
	h.reload(t, withAlice("alice", "contractor"))
	if got, want := toolNames(t, bob), []string{"alpha__echo", "alpha__link"}; !slices.Equal(got, want) {
		t.Errorf("bob lists %v after an unrelated reload, want %v", got, want)
	}
	if n, _ := h.gw.clients.count(""); n != 1 {
		t.Errorf("%d sessions registered, want bob's 1", n)
	}
}

// openRaw initializes a streamable session with token and returns its id.
func openRaw(t *testing.T, url, token string) (sid string, status int, body string) {
	t.Helper()
	resp, body := post(t, url+"/mcp", initBody, map[string]string{"Authorization": "Bearer " + token})
	return resp.Header.Get("Mcp-Session-Id"), resp.StatusCode, body
}

// pingRaw pings session sid with token and returns the HTTP status.
func pingRaw(t *testing.T, url, token, sid string) int {
	t.Helper()
	resp, _ := post(t, url+"/mcp", `{"jsonrpc":"2.0","id":2,"method":"ping"}`,
		map[string]string{"Authorization": "Bearer " + token, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"})
	return resp.StatusCode
}

// TestSessionsPerPrincipal: a principal at gateway.limits.maxSessionsPerPrincipal
// that opens another session ends its own session idle the longest; the
// others, and other principals' sessions, stay. With a call in flight on
// each, it is refused with 503 naming the limit.
func TestSessionsPerPrincipal(t *testing.T) {
	h := newPrincipalsHarness(t, func(c *config.Config) {
		c.Gateway.Limits.MaxSessions = 10
		c.Gateway.Limits.MaxSessionsPerPrincipal = 3
	})
	alice, status, body := openRaw(t, h.srv.URL, aliceKey)
	if status != http.StatusOK {
		t.Fatalf("alice's session: %d %s", status, body)
	}
	var bob []string
	for i := range 8 {
		sid, status, body := openRaw(t, h.srv.URL, bobKey)
		if status != http.StatusOK {
			t.Fatalf("bob's session %d: %d %s", i, status, body)
		}
		bob = append(bob, sid)
	}
	for i, sid := range bob {
		want := http.StatusOK
		if i < 5 {
			want = http.StatusNotFound // his oldest: ended for the newer ones
		}
		if got := pingRaw(t, h.srv.URL, bobKey, sid); got != want {
			t.Errorf("bob's session %d: %d, want %d", i, got, want)
		}
	}
	if got := pingRaw(t, h.srv.URL, aliceKey, alice); got != http.StatusOK {
		t.Errorf("alice's session: %d, want 200", got)
	}
	if _, err := connectAs(t, h.srv.URL, aliceKey, "2025-11-25").CallTool(context.Background(),
		&mcp.CallToolParams{Name: "alpha__add", Arguments: map[string]any{"a": 1, "b": 2}}); err != nil {
		t.Errorf("alice's call in a new session: %v", err)
	}
	if n, mine := h.gw.clients.count("apikey:bob"); n != 5 || mine != 3 {
		t.Errorf("%d sessions, bob's %d; want 5 and 3", n, mine)
	}

	t.Run("none idle", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		for i := range 3 { // each ends one of alice's idle sessions
			cs := connectAs(t, h.srv.URL, aliceKey, "2025-11-25")
			wg.Add(1)
			go func() {
				defer wg.Done()
				cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{"ms": 20000}})
			}()
			waitFor(t, "alice's slow calls in flight", func() bool { return countFlights(h.gw) == i+1 })
		}
		_, status, body := openRaw(t, h.srv.URL, aliceKey)
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "maxSessionsPerPrincipal") || !strings.Contains(body, `"alice"`) {
			t.Errorf("alice's 4th session with 3 busy: %d %q, want 503 naming maxSessionsPerPrincipal", status, body)
		}
	})
}

// TestSessionsAtTheGatewayLimit: with every session slot taken, a new
// session of a principal holding few ends an idle session of the principal
// holding the most, rather than being refused; that principal itself is
// refused.
func TestSessionsAtTheGatewayLimit(t *testing.T) {
	h := newPrincipalsHarness(t, func(c *config.Config) {
		c.Gateway.Limits.MaxSessions = 4
		c.Gateway.Limits.MaxSessionsPerPrincipal = 5
	})
	var bob []string
	for range 4 {
		sid, status, body := openRaw(t, h.srv.URL, bobKey)
		if status != http.StatusOK {
			t.Fatalf("bob: %d %s", status, body)
		}
		bob = append(bob, sid)
	}
	if _, status, body := openRaw(t, h.srv.URL, bobKey); status != http.StatusServiceUnavailable || !strings.Contains(body, "gateway.limits.maxSessions") {
		t.Errorf("bob's 5th: %d %q, want 503 naming maxSessions", status, body)
	}
	if _, status, body := openRaw(t, h.srv.URL, aliceKey); status != http.StatusOK {
		t.Fatalf("alice at the gateway's limit: %d %s", status, body)
	}
	if got := pingRaw(t, h.srv.URL, bobKey, bob[0]); got != http.StatusNotFound {
		t.Errorf("bob's oldest session: %d, want 404", got)
	}
	for _, sid := range bob[1:] {
		if got := pingRaw(t, h.srv.URL, bobKey, sid); got != http.StatusOK {
			t.Errorf("bob's other sessions: %d, want 200", got)
		}
	}
}

// TestReloadAppliesToLogsOutsideCalls: a log message an upstream sends
// outside any call reaches the sessions whose principal may see that
// upstream under the config in force, not the one in force when the
// session set its log level.
func TestReloadAppliesToLogsOutsideCalls(t *testing.T) {
	const carolKey = "carol-key-0123456789"
	addCarol := func(c *config.Config) {
		c.Auth.APIKeys = append(c.Auth.APIKeys, config.APIKey{Name: "carol", Key: carolKey, Groups: []string{"dev"}})
	}
	h := newPrincipalsHarnessWith(t, addCarol, map[string]*mcp.Server{"l": laterServer()})
	ctx := context.Background()
	var mu sync.Mutex
	var logs []string
	hc := &http.Client{Transport: bearer{aliceKey, http.DefaultTransport}}
	alice, err := mcp.NewClient(&mcp.Implementation{Name: "alice-sse"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, fmt.Sprint(req.Params.Data))
		},
	}).Connect(ctx, &mcp.SSEClientTransport{Endpoint: h.srv.URL + "/sse", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	if err := alice.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	carol := connectAs(t, h.srv.URL, carolKey, "2025-11-25")
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(logs)
	}
	if _, err := carol.CallTool(ctx, &mcp.CallToolParams{Name: "l__later"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "alice, a developer, gets l's log message", func() bool { return count() == 1 })

	h.reload(t, func(c *config.Config) { addCarol(c); withAlice("alice", "contractor")(c) })
	if _, err := carol.CallTool(ctx, &mcp.CallToolParams{Name: "l__later"}); err != nil {
		t.Fatal(err)
	}
	// A third message, to carol only, marks the end of the second.
	if _, err := carol.CallTool(ctx, &mcp.CallToolParams{Name: "l__later"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the messages are sent 20 ms after their call
	if n := count(); n != 1 {
		t.Errorf("alice, now a contractor who sees nothing of l, got %d of l's log messages, want the 1 from before", n)
	}
}

// TestSessionsPerPrincipalNeedAuth: without auth every client is the local
// principal, so only gateway.limits.maxSessions applies.
func TestSessionsPerPrincipalNeedAuth(t *testing.T) {
	_, srv := newHTTPGateway(t, func(g *config.Gateway) {
		g.Limits.MaxSessions = 3
		g.Limits.MaxSessionsPerPrincipal = 1
	})
	var sids []string
	for i := range 3 {
		resp, body := post(t, srv.URL+"/mcp", initBody, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("session %d: %d %s", i, resp.StatusCode, body)
		}
		sids = append(sids, resp.Header.Get("Mcp-Session-Id"))
	}
	for i, sid := range sids {
		resp, _ := post(t, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":2,"method":"ping"}`, map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("session %d: %d, want 200", i, resp.StatusCode)
		}
	}
	if resp, body := post(t, srv.URL+"/mcp", initBody, nil); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "gateway.limits.maxSessions") {
		t.Errorf("4th session: %d %q, want 503 naming maxSessions", resp.StatusCode, body)
	}
}

// swappable is a bearer whose token the test changes.
type swappable struct{ token atomic.Value }

func (s *swappable) RoundTrip(r *http.Request) (*http.Response, error) {
	return bearer{s.token.Load().(string), http.DefaultTransport}.RoundTrip(r)
}

// TestSSETakesTheLatestToken: the messages of a legacy SSE session act as
// the identity of the session's latest POST: a renewed JWT with other
// groups applies to the next message, as on streamable HTTP.
func TestSSETakesTheLatestToken(t *testing.T) {
	const secret = "a-jwt-hmac-secret-of-at-least-32-bytes"
	h := newPrincipalsHarness(t, func(c *config.Config) {
		c.Auth.JWT = &config.JWT{Issuer: "https://idp.example", Audience: []string{"manifold"},
			Secret: secret, PrincipalClaim: "sub", GroupsClaim: "groups"}
	})
	mint := func(groups ...string) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"iss": "https://idp.example", "aud": "manifold", "sub": "dora", "groups": groups,
			"iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix(),
		}).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tok := &swappable{}
	tok.token.Store(mint("dev"))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sse-jwt"}, nil).Connect(context.Background(),
		&mcp.SSEClientTransport{Endpoint: h.srv.URL + "/sse", HTTPClient: &http.Client{Transport: tok}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if !slices.Contains(toolNames(t, cs), "alpha__add") {
		t.Fatal("dora as a developer lacks alpha__add")
	}
	tok.token.Store(mint("contractor"))
	if got, want := toolNames(t, cs), []string{"alpha__echo", "alpha__link"}; !slices.Equal(got, want) {
		t.Errorf("dora with a renewed token naming her a contractor lists %v, want %v", got, want)
	}
}

// BenchmarkPrincipal is the per-request cost of resolving the principal
// from its credential under the snapshot in force (an API key's id looked
// up among 100 keys).
func BenchmarkPrincipal(b *testing.B) {
	cfg := &config.Config{Gateway: config.DefaultGateway()}
	for i := range 100 {
		cfg.Auth.APIKeys = append(cfg.Auth.APIKeys, config.APIKey{Name: fmt.Sprint("p", i), Key: fmt.Sprintf("key-%020d", i), Groups: []string{"dev"}})
	}
	an, err := newAuthenticator(context.Background(), &cfg.Auth, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	a := newAccess(cfg, an)
	id, err := an.Authenticate(context.Background(), fmt.Sprintf("key-%020d", 42))
	if err != nil {
		b.Fatal(err)
	}
	req := &mcp.ListToolsRequest{Extra: &mcp.RequestExtra{TokenInfo: &auth.TokenInfo{Extra: map[string]any{identityKey: id}}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if p, ok := principal(ctx, a, req); !ok || p.Name() != "p42" {
			b.Fatal("not resolved")
		}
	}
}

// TestReloadAppliesToResourceUpdates: a session subscribed to a URI stops
// getting its resources/updated once a reload denies the URI to its
// principal; a session still allowed keeps getting them.
func TestReloadAppliesToResourceUpdates(t *testing.T) {
	const uri = "manifold://fix/" + fixture.WatchedURI
	const carolKey = "carol-key-0123456789"
	addCarol := func(c *config.Config) {
		c.Auth.APIKeys = append(c.Auth.APIKeys, config.APIKey{Name: "carol", Key: carolKey, Groups: []string{"dev"}})
	}
	h := newPrincipalsHarnessWith(t, addCarol, map[string]*mcp.Server{"fix": fixture.NewServer(nil)})
	ctx := context.Background()
	type watcher struct {
		cs *mcp.ClientSession
		n  atomic.Int32
	}
	watch := func(key string) *watcher {
		w := &watcher{}
		hc := &http.Client{Transport: bearer{key, http.DefaultTransport}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "watcher"}, &mcp.ClientOptions{
			ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) { w.n.Add(1) },
		}).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.srv.URL + "/mcp", HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
		w.cs = cs
		return w
	}
	alice, carol := watch(aliceKey), watch(carolKey)
	trigger := func() {
		if _, err := carol.cs.CallTool(ctx, &mcp.CallToolParams{Name: "fix__test_trigger_resource_update", Arguments: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
	}
	trigger()
	waitFor(t, "both subscribers get the update", func() bool { return alice.n.Load() == 1 && carol.n.Load() == 1 })

	h.reload(t, func(c *config.Config) {
		addCarol(c)
		c.Policy.Rules = append([]config.Rule{{Effect: config.Deny, Match: config.Match{Resources: []string{uri}}, Principals: []string{"alice"}}}, c.Policy.Rules...)
	})
	trigger()
	waitFor(t, "carol, still allowed, gets the second update", func() bool { return carol.n.Load() == 2 })
	// Each update goes to its subscribers in one pass: once carol has the
	// third, alice's copy of the second would have been sent.
	trigger()
	waitFor(t, "carol gets the third update", func() bool { return carol.n.Load() == 3 })
	if n := alice.n.Load(); n != 1 {
		t.Errorf("alice, denied the URI by the reload, got %d updates, want the 1 from before", n)
	}
}
