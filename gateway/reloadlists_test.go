package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// waveWatch is a sending middleware, outermost (added after New), that
// reports each tools/list_changed the SDK sends to a session: started
// before the gateway's own middleware sees it, finished once it has been
// written or dropped.
type waveWatch struct {
	started, finished chan struct{}
}

func watchWaves(g *Gateway) *waveWatch {
	w := &waveWatch{started: make(chan struct{}, 100), finished: make(chan struct{}, 100)}
	g.Server().AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "notifications/tools/list_changed" {
				return next(ctx, method, req)
			}
			w.started <- struct{}{}
			defer func() { w.finished <- struct{}{} }()
			return next(ctx, method, req)
		}
	})
	return w
}

// wait receives one value from c, failing the test after 5s.
func wait(t *testing.T, c chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s within 5s", what)
	}
}

// TestOneListChangedWhenTheSDKsDebounceSplitsAMerge: the SDK debounces the
// list_changed of each registration by 10 ms, so a merge whose
// registrations are further apart than that (a loaded machine) made it send
// one per part. Here the first registration of the servers a reload adds
// waits until the SDK has sent its notification; the client must still be
// told once, after the whole merge.
func TestOneListChangedWhenTheSDKsDebounceSplitsAMerge(t *testing.T) {
	h := newReloadHarness(t, false)
	waves := watchWaves(h.gw)
	h.drainNotes()
	var once sync.Once
	h.gw.syncMu.Lock()
	h.gw.registry.registered = func() {
		once.Do(func() { wait(t, waves.started, "list_changed after the first registration") })
	}
	h.gw.syncMu.Unlock()

	h.reload(t, h.reloadConfig(true, nil), nil)
	// Both of the SDK's notifications have been through the gateway.
	wait(t, waves.finished, "the first notification")
	wait(t, waves.finished, "the second notification")
	waitNote(t, h.notes, "tools")
	expectNoMoreNotes(t, h.notes, "tools")
}

// TestEveryListedToolIsKnownToTheSDKDuringAMerge: lists are answered from
// the routing table, calls on the SDK path find their handler in the SDK's
// registry first. A merge that swapped the routes in before it registered
// the new tools listed tools the SDK answered "unknown tool" for, until it
// got to them. Here, at each registration of the servers a reload adds,
// every tool listed must be callable.
func TestEveryListedToolIsKnownToTheSDKDuringAMerge(t *testing.T) {
	h := newReloadHarness(t, false)
	var mu sync.Mutex
	var problems []string
	ctx := context.Background()
	h.gw.syncMu.Lock()
	h.gw.registry.registered = func() {
		res, err := h.client.ListTools(ctx, nil)
		if err != nil {
			mu.Lock()
			problems = append(problems, "tools/list: "+err.Error())
			mu.Unlock()
			return
		}
		for _, tool := range res.Tools {
			if tool.Name != "beta__echo" {
				continue
			}
			if err := h.call(ctx, tool.Name); err != nil {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s listed, and its call: %v", tool.Name, err))
				mu.Unlock()
			}
		}
	}
	h.gw.syncMu.Unlock()

	h.reload(t, h.reloadConfig(true, nil), nil)
	waitFor(t, "beta's tools", func() bool { return slices.Contains(toolNames(t, h.client), "beta__echo") })
	h.gw.syncMu.Lock() // the merge that listed them is done
	h.gw.registry.registered = nil
	h.gw.syncMu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("during the merge:\n%s", strings.Join(problems, "\n"))
	}
}
