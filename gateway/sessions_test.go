package gateway

//lint:file-ignore SA1019 this test drives the sampling, roots and logging features that the gateway relays for protocol versions before 2026-07-28

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// perClientMode sets every server of the config to session: per-client.
func perClientMode(cfg *config.Config) {
	for name, s := range cfg.Servers {
		s.Session = config.SessionPerClient
		cfg.Servers[name] = s
	}
}

// TestPerClientFanOut: 8 clients answer sampling, elicitation and roots
// with their own nonce, all at once, through per-client upstream sessions:
// every call gets its own client's answer, and none is refused.
func TestPerClientFanOut(t *testing.T) {
	h := newHarnessWith(t, perClientMode, upstreamSpec{name: "ask", server: askingServer()})
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		nonce := fmt.Sprintf("nonce%d", i)
		rc := newRelayClient(t, h, nonce)
		for tool, want := range map[string]string{
			"ask__sample": "sampled: " + nonce,
			"ask__elicit": "accept " + nonce,
			"ask__roots":  "file:///" + nonce,
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					if got, err := rc.call(ctx, tool, nil); err != nil || got != want {
						t.Errorf("%s for %s = %q, %v; want %q", tool, nonce, got, err, want)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if n := h.gw.perClient.countByBase()[h.gw.pool.serving()[0]]; n != 8 {
		t.Errorf("%d per-client upstream sessions, want 8", n)
	}
	if n := len(h.gw.Status(nil).Upstreams); n != 1 {
		t.Fatalf("status lists %d upstreams", n)
	}
	if st := h.gw.Status(nil).Upstreams[0]; st.Session != config.SessionPerClient || st.ClientSessions != 8 {
		t.Errorf("status: session %q with %d client sessions, want per-client with 8", st.Session, st.ClientSessions)
	}
}

// TestPerClientSessionsEndWithTheirClient: each downstream session that
// calls, subscribes and sets a log level gets its own upstream session,
// and ending it releases all of that.
func TestPerClientSessionsEndWithTheirClient(t *testing.T) {
	h := newHarnessWith(t, perClientMode, upstreamSpec{name: "a", demoName: "alpha"})
	f := h.ups["a"]
	upstreamSessions := func() int {
		n := 0
		for range f.server.Sessions() {
			n++
		}
		return n
	}
	base := upstreamSessions() // the pool's session, for the catalog
	ctx := context.Background()
	uri := resourceURI(t, h)
	for i := range 20 {
		c := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprint("c", i)}, nil)
		cs := connectClient(t, h, c, "2025-11-25")
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__echo", Arguments: map[string]any{"text": "x"}}); err != nil {
			t.Fatal(err)
		}
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
		if n := upstreamSessions(); n != base+1 {
			t.Fatalf("client %d: %d upstream sessions, want %d", i, n, base+1)
		}
		cs.Close()
		waitFor(t, "the per-client session to close", func() bool {
			return upstreamSessions() == base && h.gw.perClient.countByBase()[h.gw.pool.serving()[0]] == 0
		})
	}
	if n := h.gw.subscriptionCount(); n != 0 {
		t.Errorf("%d upstream subscriptions left", n)
	}
	n := 0
	h.gw.flights.levels.Range(func(any, any) bool { n++; return true })
	if n != 0 {
		t.Errorf("%d session log levels left", n)
	}
}

// resourceURI returns the first resource h's gateway lists.
func resourceURI(t *testing.T, h *harness) string {
	t.Helper()
	res, err := h.client.ListResources(context.Background(), nil)
	if err != nil || len(res.Resources) == 0 {
		t.Fatalf("no resource to subscribe to: %v", err)
	}
	return res.Resources[0].URI
}

// laterServer is a pre-2026 upstream that reaches its client outside any
// call: after "later" returns it logs; when the client's roots change it
// lists them again, and "roots" returns what it last listed.
func laterServer() *mcp.Server {
	var mu sync.Mutex
	last := map[*mcp.ServerSession]string{}
	listRoots := func(ctx context.Context, ss *mcp.ServerSession) {
		res, err := ss.ListRoots(ctx, nil)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			last[ss] = "error: " + err.Error()
			return
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		last[ss] = strings.Join(uris, ",")
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "later"}, &mcp.ServerOptions{
		SupportedProtocolVersions: []string{"2025-11-25"},
		Capabilities:              &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{}},
		RootsListChangedHandler: func(ctx context.Context, req *mcp.RootsListChangedRequest) {
			go listRoots(context.Background(), req.Session)
		},
	})
	schema := map[string]any{"type": "object"}
	s.AddTool(&mcp.Tool{Name: "later", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		go func() {
			time.Sleep(20 * time.Millisecond)
			req.Session.Log(context.Background(), &mcp.LoggingMessageParams{Level: "warning", Data: "later"})
		}()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "roots", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		got, ok := last[req.Session]
		mu.Unlock()
		if !ok {
			listRoots(ctx, req.Session)
			mu.Lock()
			got = last[req.Session]
			mu.Unlock()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: got}}}, nil
	})
	return s
}

// TestPerClientOutsideACall: what a per-client upstream session sends
// outside any call reaches its own client only: log messages, and the
// roots/list it sends after the client's roots changed.
func TestPerClientOutsideACall(t *testing.T) {
	h := newHarnessWith(t, perClientMode, upstreamSpec{name: "l", server: laterServer()})
	ctx := context.Background()
	type client struct {
		c    *mcp.Client
		cs   *mcp.ClientSession
		mu   sync.Mutex
		logs []string
	}
	clients := make([]*client, 3)
	for i := range clients {
		cl := &client{}
		cl.c = mcp.NewClient(&mcp.Implementation{Name: fmt.Sprint("c", i)}, &mcp.ClientOptions{
			LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
				cl.mu.Lock()
				cl.logs = append(cl.logs, fmt.Sprintf("%s %v", req.Params.Logger, req.Params.Data))
				cl.mu.Unlock()
			},
		})
		cl.c.AddRoots(&mcp.Root{URI: fmt.Sprintf("file:///c%d/old", i)})
		cl.cs = connectClient(t, h, cl.c, "2025-11-25")
		if err := cl.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
		clients[i] = cl
	}
	roots := func(cl *client) string {
		res, err := cl.cs.CallTool(ctx, &mcp.CallToolParams{Name: "l__roots"})
		if err != nil {
			t.Fatal(err)
		}
		return textOfContent(res.Content)
	}
	for i, cl := range clients {
		if got, want := roots(cl), fmt.Sprintf("file:///c%d/old", i); got != want {
			t.Fatalf("client %d: roots %q, want %q", i, got, want)
		}
	}
	// Only client 1 logs and changes its roots.
	if _, err := clients[1].cs.CallTool(ctx, &mcp.CallToolParams{Name: "l__later"}); err != nil {
		t.Fatal(err)
	}
	clients[1].c.AddRoots(&mcp.Root{URI: "file:///c1/new"})
	waitFor(t, "the roots listed again after list_changed", func() bool {
		return roots(clients[1]) == "file:///c1/new,file:///c1/old"
	})
	waitFor(t, "the log message sent after the call", func() bool {
		clients[1].mu.Lock()
		defer clients[1].mu.Unlock()
		return len(clients[1].logs) > 0
	})
	clients[1].mu.Lock()
	if got := strings.Join(clients[1].logs, ";"); got != "l later" {
		t.Errorf("client 1 logs = %q, want the server-tagged message once", got)
	}
	clients[1].mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	for _, i := range []int{0, 2} {
		clients[i].mu.Lock()
		if len(clients[i].logs) != 0 {
			t.Errorf("client %d got another client's logs: %q", i, clients[i].logs)
		}
		clients[i].mu.Unlock()
		if got, want := roots(clients[i]), fmt.Sprintf("file:///c%d/old", i); got != want {
			t.Errorf("client %d: roots %q after another client's change, want %q", i, got, want)
		}
	}
}

// TestSharedLogOutsideACall: a shared upstream's log message outside any
// call reaches the sessions that asked for logs and may see the server,
// and no other.
func TestSharedLogOutsideACall(t *testing.T) {
	for _, tt := range []struct {
		name   string
		policy *config.Policy
		want   string
	}{
		{name: "visible server", want: "l/x hello"},
		{name: "hidden server", policy: &config.Policy{Default: config.Allow, Rules: []config.Rule{
			{Effect: config.Deny, Match: config.Match{Tools: []string{"l__*"}}}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessWith(t, func(cfg *config.Config) { cfg.Policy = tt.policy }, upstreamSpec{name: "l", server: laterServer()})
			ctx := context.Background()
			logs := make([]chan string, 2)
			for i := range logs {
				ch := make(chan string, 10)
				logs[i] = ch
				c := mcp.NewClient(&mcp.Implementation{Name: "c"}, &mcp.ClientOptions{
					LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
						ch <- fmt.Sprintf("%s %v", req.Params.Logger, req.Params.Data)
					},
				})
				cs := connectClient(t, h, c, "2025-11-25")
				if i == 0 { // only the first asks for logs
					if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
						t.Fatal(err)
					}
				}
			}
			relay{h.gw}.Log(h.gw.pool.serving()[0], &mcp.LoggingMessageParams{Level: "info", Logger: "x", Data: "hello"})
			got := func(ch chan string) string {
				select {
				case s := <-ch:
					return s
				case <-time.After(100 * time.Millisecond):
					return ""
				}
			}
			if g := got(logs[0]); g != tt.want {
				t.Errorf("session that asked for logs got %q, want %q", g, tt.want)
			}
			if g := got(logs[1]); g != "" {
				t.Errorf("session that did not ask for logs got %q", g)
			}
		})
	}
}

// TestPerClientModernClients: 2026-07-28 clients have no session; those of
// one principal share one per-client upstream session, through which the
// bridge asks them with input_required, and which closes after
// sessionIdleTimeout without calls.
func TestPerClientModernClients(t *testing.T) {
	h := newHarnessWith(t, func(cfg *config.Config) {
		perClientMode(cfg)
		cfg.Gateway.Limits.SessionIdleTimeout = time.Second
	}, upstreamSpec{name: "ask", server: askingServer()})
	base := h.gw.pool.serving()[0]
	for _, nonce := range []string{"m1", "m2"} {
		tc := newTestClient(t, h, nonce, clientOptions{})
		res, err := tc.call(t, "ask__sample", nil)
		if err != nil || res.IsError || textOfContent(res.Content) != "sampled: "+nonce {
			t.Fatalf("%s: ask__sample = %+v, %v", nonce, res, err)
		}
		if got, asked := tc.handled.Load(), tc.asked.Load(); got != 1 || asked != 0 {
			t.Errorf("%s: %d handler runs, %d server requests; want 1 through input_required, 0", nonce, got, asked)
		}
		if n := h.gw.perClient.countByBase()[base]; n != 1 {
			t.Errorf("after %s: %d per-client sessions, want 1 for the principal", nonce, n)
		}
	}
	// The reaper looks every second at most; allow a few rounds.
	deadline := time.Now().Add(10 * time.Second)
	for h.gw.perClient.countByBase()[base] != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle per-principal session was not closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// updatesClient connects a 2025-11-25 client that counts the
// resources/updated it receives.
func updatesClient(t *testing.T, h *harness, name string) (*mcp.ClientSession, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	c := mcp.NewClient(&mcp.Implementation{Name: name}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) { n.Add(1) },
	})
	return connectClient(t, h, c, "2025-11-25"), &n
}

// TestPerClientResourceUpdatesReachTheirOwnSession: two clients subscribe
// to one URI through their own per-client sessions; an update from one
// client's session reaches that client only.
func TestPerClientResourceUpdatesReachTheirOwnSession(t *testing.T) {
	h := newHarnessWith(t, perClientMode, upstreamSpec{name: "a", demoName: "alpha"})
	ctx := context.Background()
	uri := resourceURI(t, h)
	a, aGot := updatesClient(t, h, "a")
	b, bGot := updatesClient(t, h, "b")
	for _, cs := range []*mcp.ClientSession{a, b} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	rt, _ := h.gw.routes.Load().resource(uri)
	ds := h.gw.perClient.list(func(*dedicated) bool { return true })
	if len(ds) != 2 {
		t.Fatalf("%d per-client sessions, want 2", len(ds))
	}
	relay{h.gw}.ResourceUpdated(ds[0].up, &mcp.ResourceUpdatedNotificationParams{URI: rt.original})
	waitFor(t, "the update", func() bool { return aGot.Load()+bGot.Load() > 0 })
	time.Sleep(50 * time.Millisecond)
	if aGot.Load()+bGot.Load() != 1 {
		t.Errorf("one update from one client's session reached a %d and b %d times, want its client once", aGot.Load(), bGot.Load())
	}
}

// TestPerClientSubscriptionsSurviveAReplacement: a reload that restarts a
// per-client server opens new sessions for the clients that had
// subscriptions, subscribed again, and updates keep coming.
func TestPerClientSubscriptionsSurviveAReplacement(t *testing.T) {
	h := newReloadHarness(t, false)
	perClient := func(c *config.Config) {
		perClientMode(c)
	}
	h.reload(t, h.reloadConfig(false, perClient), nil)
	waitFor(t, "alpha in per-client mode", func() bool {
		st := h.gw.Status(nil)
		return len(st.Upstreams) == 1 && st.Upstreams[0].Session == config.SessionPerClient && st.Upstreams[0].State == upstream.StateReady
	})
	ctx := context.Background()
	uri := resourceURI(t, h.harness)
	cs, got := updatesClient(t, h.harness, "listener")
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	h.reload(t, h.reloadConfig(false, func(c *config.Config) {
		perClient(c)
		s := c.Servers["alpha"]
		s.Timeout = 7 * time.Second
		c.Servers["alpha"] = s
	}), nil)
	waitFor(t, "the replacement, with the client's session and subscription", func() bool {
		st := h.gw.Status(nil)
		return st.Draining == 0 && len(st.Upstreams) == 1 && st.Upstreams[0].Replacement == nil &&
			st.Upstreams[0].ClientSessions == 1 && st.Subscriptions == 1
	})
	var d *dedicated
	for _, x := range h.gw.perClient.list(func(*dedicated) bool { return true }) {
		d = x
	}
	if d.base != h.gw.pool.serving()[0] || d.up.Subscriptions() != 1 {
		t.Fatalf("the client's session is of the old server, or holds %d subscriptions", d.up.Subscriptions())
	}
	rt, _ := h.gw.routes.Load().resource(uri)
	relay{h.gw}.ResourceUpdated(d.up, &mcp.ResourceUpdatedNotificationParams{URI: rt.original})
	waitFor(t, "an update through the new session", func() bool { return got.Load() > 0 })
}
