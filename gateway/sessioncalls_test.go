package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDeleteSessionCancelsItsCalls: a DELETE of a streamable session with a
// slow call in flight returns at once, the call is cancelled, and another
// session's call is not.
func TestDeleteSessionCancelsItsCalls(t *testing.T) {
	gw, srv := newHTTPGateway(t, nil)
	connect := func() *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	deleted, other := connect(), connect()
	defer other.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	slow := func(cs *mcp.ClientSession, ms int) chan error {
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{"ms": ms}})
			errc <- err
		}()
		return errc
	}
	inFlight := func(id string) bool {
		v, ok := gw.calls.m.Load(id)
		if !ok {
			return false
		}
		in := v.(*sessionInflight)
		in.mu.Lock()
		defer in.mu.Unlock()
		return len(in.calls) > 0
	}
	abandoned, sibling := slow(deleted, 20000), slow(other, 1000)
	for deadline := time.Now().Add(5 * time.Second); !inFlight(deleted.ID()) || !inFlight(other.ID()); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the calls are not recorded in flight")
		}
	}

	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	req, _ := http.NewRequestWithContext(dctx, http.MethodDelete, srv.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", deleted.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("DELETE (waiting for the call in flight?): %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE: %s", resp.Status)
	}
	select {
	case err := <-abandoned:
		if err == nil {
			t.Error("the deleted session's call succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the deleted session's call is still in flight 10s later")
	}
	if err := <-sibling; err != nil {
		t.Errorf("the other session's call: %v", err)
	}
	if inFlight(deleted.ID()) || inFlight(other.ID()) {
		t.Error("ended calls are still recorded")
	}
	deleted.Close()
	waitFor(t, "the deleted session's entry to go", func() bool {
		_, ok := gw.calls.m.Load(deleted.ID())
		return !ok
	})
}

// TestCancelSessionOwner: a DELETE cancels the calls of the session it
// names, and only those of its own user when the session has one.
func TestCancelSessionOwner(t *testing.T) {
	var c sessionCalls
	add := func(id, user string) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		t.Cleanup(func() { cancel(nil) })
		v, _ := c.m.LoadOrStore(id, &sessionInflight{calls: map[*sessionCall]struct{}{}})
		in := v.(*sessionInflight)
		in.mu.Lock()
		defer in.mu.Unlock()
		in.calls[&sessionCall{cancel: cancel, user: user}] = struct{}{}
		return ctx
	}
	anon, alice, otherSession := add("s1", ""), add("s1", "alice"), add("s2", "")
	// Bearer tokens name the user (the gateway's authenticator puts the
	// principal in TokenInfo the same way).
	h := auth.RequireBearerToken(func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		return &auth.TokenInfo{UserID: token, Expiration: time.Now().Add(time.Hour)}, nil
	}, nil)(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { c.cancelSession(r) }))
	del := func(user string) {
		r := httptest.NewRequest(http.MethodDelete, "/mcp", nil)
		r.Header.Set("Mcp-Session-Id", "s1")
		r.Header.Set("Authorization", "Bearer "+user)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	del("mallory")
	if !errors.Is(context.Cause(anon), errSessionDeleted) || alice.Err() != nil || otherSession.Err() != nil {
		t.Fatalf("after mallory's DELETE: anonymous %v, alice's %v, other session's %v; want only the anonymous call cancelled",
			context.Cause(anon), alice.Err(), otherSession.Err())
	}
	del("alice")
	if !errors.Is(context.Cause(alice), errSessionDeleted) || otherSession.Err() != nil {
		t.Errorf("after alice's DELETE: alice's %v, other session's %v", context.Cause(alice), otherSession.Err())
	}
}
