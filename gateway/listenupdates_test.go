package gateway

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/fixture"
	"github.com/manifold-mcp/manifold/internal/testutil"
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSessionlessUpdatesFromThePrincipalsSession: a 2026-07-28 client's
// subscription (its subscriptions/listen stream) to a resource of a
// per-client server is held by its principal's own upstream session, the
// one its calls use: an update that session's server sends after the
// client's call reaches the client. (Each connection to the server is a
// server of its own, as a per-client stdio server's processes are.)
func TestSessionlessUpdatesFromThePrincipalsSession(t *testing.T) {
	cfg := &config.Config{Servers: map[string]config.Server{
		"fx": {Name: "fx", Type: config.TypeStdio, Command: "unused", Session: config.SessionPerClient},
	}, Gateway: config.DefaultGateway()}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := New(cfg, &Options{Transports: map[string]func() (mcp.Transport, error){"fx": func() (mcp.Transport, error) {
		s, c := mcp.NewInMemoryTransports()
		if _, err := fixture.NewServer(nil).Connect(context.Background(), s, nil); err != nil {
			return nil, err
		}
		return c, nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := serveGateway(t, gw)
	uri := namespacing.WrapURI("fx", fixture.WatchedURI)
	var updates atomic.Int32
	cs := connectModern(t, hs, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if req.Params.URI == uri {
				updates.Add(1)
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	// The SDK opens the listen stream in the background: trigger updates
	// until one arrives.
	for updates.Load() == 0 && ctx.Err() == nil {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__test_trigger_resource_update", Arguments: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if updates.Load() == 0 {
		t.Fatal("no resources/updated from the principal's session")
	}
}

// TestClusterSessionlessListsAtHome: in cluster mode a sessionless
// client's lists of a server with per-client lists are its principal's,
// made from its dedicated sessions on its home replica: whichever replica
// a list lands on, only the home replica opens a session of the server for
// it.
func TestClusterSessionlessListsAtHome(t *testing.T) {
	rs := newReplicas(t, 3, func(c *config.Config) {
		s := c.Servers["alpha"]
		s.Session, s.Lists = config.SessionPerClient, config.ListsPerClient
		c.Servers["alpha"] = s
	})
	hc := &http.Client{Transport: bearer{aliceKey, http.DefaultTransport}}
	for _, r := range rs {
		cs, err := testutil.ConnectStateless(context.Background(), "http://"+r.addr()+"/mcp", hc, &mcp.ClientOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.ListTools(context.Background(), nil)
		cs.Close()
		if err != nil || len(res.Tools) == 0 {
			t.Fatalf("tools/list at %s: %v %v", r.addr(), res, err)
		}
	}
	opened := 0
	for _, r := range rs {
		for _, u := range r.gw.Status(nil).Upstreams {
			opened += u.ClientSessions
		}
	}
	if opened != 1 {
		t.Errorf("%d sessions of the server opened across the replicas for one principal, want 1 (at its home)", opened)
	}
}
