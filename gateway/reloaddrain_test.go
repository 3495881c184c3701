package gateway

import (
	"context"
	"errors"
	"testing"

	"github.com/manifold-mcp/manifold/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReloadKeepsCallsQueuedForASlot: a call waiting for a concurrency slot of a server that
// a reload replaces is a call the old upstream accepted, and the drain lets it finish too.
// Before, Upstream.Idle counted only the calls holding a slot, so the old upstream was
// closed as soon as the running call ended, under the queued call that had just taken the
// freed slot ("client is closing").
func TestReloadKeepsCallsQueuedForASlot(t *testing.T) {
	h := newReloadHarness(t, false)
	edit := func(c *config.Config) {
		s := c.Servers["alpha"]
		s.MaxConcurrency = 1
		c.Servers["alpha"] = s
	}
	h.reload(t, h.reloadConfig(false, edit), nil)
	waitFor(t, "the replacement to serve", func() bool {
		st := h.gw.Status(nil)
		return st.Upstreams[0].Replacement == nil && st.Draining == 0 && st.Upstreams[0].State == "ready"
	})
	slow := func(done chan<- error) {
		res, err := h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{"ms": 300}})
		if err == nil && res.IsError {
			err = errors.New(textOfContent(res.Content))
		}
		done <- err
	}
	first := make(chan error, 1)
	go slow(first)
	waitFor(t, "the first call to be in flight", func() bool {
		st := h.gw.Status(nil)
		return st.Upstreams[0].InFlight == 1
	})
	queued := make([]chan error, 3)
	for i := range queued {
		queued[i] = make(chan error, 1)
		go slow(queued[i])
	}
	waitFor(t, "the queued calls to count as in flight", func() bool {
		return h.gw.Status(nil).Upstreams[0].InFlight == 1+len(queued)
	})
	h.reload(t, h.reloadConfig(false, func(c *config.Config) {
		edit(c)
		s := c.Servers["alpha"]
		s.Env = map[string]string{"CHANGED": "yes"}
		c.Servers["alpha"] = s
	}), nil)
	if err := <-first; err != nil {
		t.Fatalf("first call: %v", err)
	}
	for i, c := range queued {
		if err := <-c; err != nil {
			t.Errorf("call %d queued on the replaced upstream failed: %v", i, err)
		}
	}
}
