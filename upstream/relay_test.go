package upstream

//lint:file-ignore SA1019 this test drives the sampling, roots and logging features that the gateway relays for protocol versions before 2026-07-28

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// updates is a Relay that records the resources/updated it is handed and
// refuses the rest.
type updates struct {
	mu   sync.Mutex
	uris []string
}

func (r *updates) CreateMessage(context.Context, *Upstream, *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	return nil, context.Canceled
}
func (r *updates) Elicit(context.Context, *Upstream, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return nil, context.Canceled
}
func (r *updates) ListRoots(context.Context, *Upstream, *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	return nil, context.Canceled
}
func (r *updates) Progress(*Upstream, *mcp.ProgressNotificationParams)           {}
func (r *updates) Log(*Upstream, *mcp.LoggingMessageParams)                      {}
func (r *updates) ElicitationComplete(*Upstream, *mcp.ElicitationCompleteParams) {}
func (r *updates) ResourceUpdated(_ *Upstream, p *mcp.ResourceUpdatedNotificationParams) {
	r.mu.Lock()
	r.uris = append(r.uris, p.URI)
	r.mu.Unlock()
}

func (r *updates) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.uris...)
}

// TestSubscriptionsRenewedOnReconnect: after a reconnect the upstream
// subscribes again to the URIs it held, and reports each as updated (what
// changed meanwhile was missed); an unsubscribed URI is not renewed.
func TestSubscriptionsRenewedOnReconnect(t *testing.T) {
	checkLeaks(t)
	var subscribes atomic.Int32
	// 2025-11-25: resources/subscribe (2026-07-28 clients listen instead).
	srv := mcp.NewServer(&mcp.Implementation{Name: "subs"}, &mcp.ServerOptions{
		SupportedProtocolVersions: []string{"2025-11-25"},
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			if req.Params.URI == "test://a" {
				subscribes.Add(1)
			}
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	srv.AddResource(&mcp.Resource{URI: "test://a", Name: "a"}, nil)
	mem := newMemServer(t, srv)
	relay := &updates{}
	opts := mem.options()
	opts.Relay = relay
	u := startUpstream(t, config.Server{Name: "subs"}, opts)
	waitReady(t, u, 5*time.Second)
	ctx := context.Background()
	for _, uri := range []string{"test://a", "test://b"} {
		if err := u.Subscribe(ctx, uri); err != nil {
			t.Fatal(err)
		}
	}
	if err := u.Unsubscribe(ctx, "test://b"); err != nil {
		t.Fatal(err)
	}
	if n := u.Subscriptions(); n != 1 {
		t.Fatalf("%d subscriptions held, want 1", n)
	}

	mem.dropAll()
	waitFor(t, 5*time.Second, "the subscription renewed", func() bool { return subscribes.Load() == 2 })
	waitFor(t, 5*time.Second, "the renewal reported", func() bool { return len(relay.got()) > 0 })
	if got := relay.got(); len(got) != 1 || got[0] != "test://a" {
		t.Errorf("resources/updated after the reconnect: %q, want test://a once", got)
	}
}

// TestNoLists: with NoLists the catalog holds what initialize told, and no
// list is fetched.
func TestNoLists(t *testing.T) {
	checkLeaks(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "lists"}, nil)
	srv.AddTool(objectTool("a"), noopTool)
	var lists atomic.Int32
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				lists.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	mem := newMemServer(t, srv)
	opts := mem.options()
	opts.NoLists = true
	u := startUpstream(t, config.Server{Name: "lists"}, opts)
	select {
	case <-u.Attempted():
	case <-time.After(5 * time.Second):
		t.Fatal("the first attempt did not end")
	}
	waitReady(t, u, time.Second)
	cat := u.Catalog()
	if cat.ProtocolVersion == "" || cat.Capabilities == nil || cat.Capabilities.Tools == nil {
		t.Errorf("catalog = %+v, want initialize's version and capabilities", cat)
	}
	if len(cat.Tools) != 0 || lists.Load() != 0 {
		t.Errorf("%d tools listed (%d tools/list): want none", len(cat.Tools), lists.Load())
	}
	res, err := u.CallTool(context.Background(), &mcp.CallToolParams{Name: "a"})
	if err != nil || res.IsError {
		t.Errorf("calling a tool it did not list: %v %v", res, err)
	}
}
