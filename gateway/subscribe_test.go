package gateway

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/fixture"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSubscriptionsAreRelayedAndReleased: sessions subscribed through the
// gateway get resources/updated with the URI as they know it; others do
// not; the upstream subscription is shared, and released when the last
// session unsubscribes or ends.
func TestSubscriptionsAreRelayedAndReleased(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run("upstream "+version, func(t *testing.T) {
			h := newHarness(t, upstreamSpec{name: "fix", server: fixture.NewServer(&fixture.Options{ProtocolVersions: []string{version}})})
			const uri = "manifold://fix/" + fixture.WatchedURI
			type watcher struct {
				cs      *mcp.ClientSession
				mu      sync.Mutex
				updates []string
			}
			connect := func() *watcher {
				w := &watcher{}
				c := mcp.NewClient(&mcp.Implementation{Name: "w"}, &mcp.ClientOptions{
					ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
						w.mu.Lock()
						w.updates = append(w.updates, req.Params.URI)
						w.mu.Unlock()
					},
				})
				w.cs = connectClient(t, h, c, "2025-11-25")
				return w
			}
			count := func(w *watcher) int {
				w.mu.Lock()
				defer w.mu.Unlock()
				return len(w.updates)
			}
			ctx := context.Background()
			a, b, other := connect(), connect(), connect()
			for _, w := range []*watcher{a, b} {
				if err := w.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
					t.Fatalf("subscribe: %v", err)
				}
			}
			if n := h.gw.subscriptionCount(); n != 1 {
				t.Fatalf("%d upstream subscriptions for two sessions on one URI, want 1", n)
			}
			trigger := func() {
				if _, err := other.cs.CallTool(ctx, &mcp.CallToolParams{Name: "fix__test_trigger_resource_update", Arguments: map[string]any{}}); err != nil {
					t.Fatal(err)
				}
			}
			// A 2026-07-28 upstream subscription is a listen stream opened
			// in the background: trigger until the first update arrives.
			waitFor(t, "resources/updated at both subscribers", func() bool {
				trigger()
				time.Sleep(20 * time.Millisecond)
				return count(a) > 0 && count(b) > 0
			})
			a.mu.Lock()
			if a.updates[0] != uri {
				t.Errorf("updated URI %q, want %q", a.updates[0], uri)
			}
			a.mu.Unlock()
			if count(other) != 0 {
				t.Errorf("a session that did not subscribe got %d updates", count(other))
			}

			if err := a.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
				t.Fatal(err)
			}
			if n := h.gw.subscriptionCount(); n != 1 {
				t.Fatalf("after one of two unsubscribed: %d upstream subscriptions, want 1", n)
			}
			b.cs.Close()
			waitFor(t, "the upstream subscription to be released when the last subscriber ends", func() bool {
				return h.gw.subscriptionCount() == 0
			})
		})
	}
}

// TestSubscribeToADeniedOrUnknownURI: a URI that routes nowhere and one the
// policy denies are acknowledged like any other, hold no upstream
// subscription and are never updated: an answer of their own would tell
// denied URIs from those that exist.
func TestSubscribeToADeniedOrUnknownURI(t *testing.T) {
	h := newHarnessWith(t, func(c *config.Config) {
		c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
			{Effect: config.Deny, Match: config.Match{Resources: []string{"manifold://fix/" + fixture.WatchedURI}}},
		}}
	}, upstreamSpec{name: "fix", server: fixture.NewServer(&fixture.Options{ProtocolVersions: []string{"2025-11-25"}})})
	var mu sync.Mutex
	var updates []string
	c := mcp.NewClient(&mcp.Implementation{Name: "w"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			mu.Lock()
			updates = append(updates, req.Params.URI)
			mu.Unlock()
		},
	})
	cs := connectClient(t, h, c, "2025-11-25")
	ctx := context.Background()
	for _, uri := range []string{"manifold://nowhere/x", "manifold://fix/" + fixture.WatchedURI} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Errorf("subscribe to %s: %v, want the answer of any URI", uri, err)
		}
	}
	if n := h.gw.subscriptionCount(); n != 0 {
		t.Errorf("%d upstream subscriptions for a denied and an unknown URI", n)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fix__test_trigger_resource_update", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(updates) != 0 {
		t.Errorf("updates for a denied URI: %v", updates)
	}
}
