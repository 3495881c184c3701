package gateway

import (
	"context"
	"errors"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReloadDrainEndsWhenTheLastCallEnds runs in a synctest bubble, where
// time moves only when every goroutine waits: the drain of a replaced
// upstream must be over at the very instant its last call returns, with no
// time passing, so it waits on that event rather than on a poll's tick.
func TestReloadDrainEndsWhenTheLastCallEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newReloadHarness(t, false)
		done := make(chan error, 1)
		go func() {
			// 1003 ms: not on any multiple of a 10 ms tick from the drain's start.
			res, err := h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{"ms": 1003}})
			if err == nil && res.IsError {
				err = errors.New(textOfContent(res.Content))
			}
			done <- err
		}()
		synctest.Wait()
		if st := h.gw.Status(nil); len(st.Upstreams) != 1 || st.Upstreams[0].InFlight != 1 {
			t.Fatalf("the slow call is not in flight: %+v", st.Upstreams)
		}
		h.reload(t, h.reloadConfig(false, func(c *config.Config) {
			s := c.Servers["alpha"]
			s.Env = map[string]string{"CHANGED": "yes"}
			c.Servers["alpha"] = s
		}), nil)
		time.Sleep(500 * time.Millisecond) // the replacement serves; the drain waits
		synctest.Wait()
		st := h.gw.Status(nil)
		if st.Upstreams[0].Replacement != nil || st.Draining != 1 {
			t.Fatalf("after the reload: replacement %v, draining %d; want promoted, 1 draining", st.Upstreams[0].Replacement, st.Draining)
		}
		if err := <-done; err != nil { // time moves on to the call's end, and no further
			t.Fatalf("the call in flight on the replaced upstream: %v", err)
		}
		end := time.Now()
		synctest.Wait() // every goroutine has done what it can without time passing
		if !time.Now().Equal(end) {
			t.Fatalf("time moved on by %s", time.Since(end))
		}
		if n := h.gw.Status(nil).Draining; n != 0 {
			t.Fatalf("draining = %d the instant the last call ended, want 0", n)
		}
	})
}

// TestCloseEndsTheGoroutinesOfOpenSessions: an open streamable session
// holds no goroutine of the gateway waiting for its end (its connection
// reports it: sessionend.go); Close ends the session and releases it,
// and a session the SDK closes by itself is released too.
func TestCloseEndsTheGoroutinesOfOpenSessions(t *testing.T) {
	gw := newAlphaGateway(t, nil, nil)
	hs := httptest.NewServer(gw.Handler())
	defer hs.Close()
	connect := func() *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", DisableStandaloneSSE: true},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}) // a session the gateway keeps
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		// A call records the session (sessionCalls), which then waits
		// for its end.
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "hi"}}); err != nil {
			t.Fatal(err)
		}
		return cs
	}
	first, second := connect(), connect()
	if n := waitingForSessions(); n != 0 {
		t.Fatalf("%d goroutines of the gateway wait for a session's end, want 0", n)
	}
	if all, _ := gw.clients.count("local"); all != 2 {
		t.Fatalf("%d sessions registered, want 2", all)
	}
	// Ended by the SDK, not by the gateway: released all the same.
	v, _ := gw.clients.byID.Load(first.ID())
	v.(*client).ss.Load().Close()
	waitFor(t, "the closed session released", func() bool { all, _ := gw.clients.count("local"); return all == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := gw.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if all, _ := gw.clients.count("local"); all != 0 {
		t.Fatalf("%d sessions registered after Close, want 0", all)
	}
	if _, ok := gw.clients.byID.Load(second.ID()); ok {
		t.Fatal("the open session is still in the session table after Close")
	}
	if n := waitingForSessions(); n != 0 {
		t.Fatalf("%d goroutines still wait for a session's end after Close", n)
	}
}

// waitingForSessions counts the goroutines of package gateway blocked
// waiting for a session's end (ServerSession.Wait, inlined).
func waitingForSessions() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "jsonrpc2.(*Connection).Wait(") && strings.Contains(g, "manifold/gateway.") {
			n++
		}
	}
	return n
}
