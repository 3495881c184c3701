package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
)

// startRaw starts a raw call and returns the channel its outcome arrives on.
func startRaw(t *testing.T, u *Upstream) (*RawCall, chan error) {
	t.Helper()
	out := make(chan error, 1)
	call := u.StartRaw("tools/call", []byte(`{"name":"x"}`), func(_ []byte, err error) { out <- err })
	if call == nil {
		t.Fatal("StartRaw did not start the call")
	}
	return call, out
}

// outcome waits for a StartRaw call's outcome.
func outcome(t *testing.T, out chan error) error {
	t.Helper()
	select {
	case err := <-out:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the call was never completed")
		return nil
	}
}

// TestStartRaw: a call StartRaw started completes once, with what CallRaw
// would return: the upstream's result; ctx.Err() after Abort, with
// notifications/cancelled sent for its id; ErrTimeout past the call
// timeout, likewise; ErrUnavailable when the pipe breaks.
func TestStartRaw(t *testing.T) {
	checkLeaks(t)
	opts := fastOptions()
	opts.CallTimeout = 300 * time.Millisecond
	ids := make(chan string, 4)
	answer := make(chan bool, 4)
	u, fakes := rawUpstream(t, opts, func(f *fakeStdio) {
		f.onRaw = func(f *fakeStdio, req []byte) {
			id := idOf(t, req)
			ids <- id
			if <-answer {
				f.send([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[]}}`))
			}
		}
	})
	f := <-fakes
	cancelled := func(what string) {
		t.Helper()
		expectCancelled(t, f, <-ids, what)
	}

	answer <- true
	call, out := startRaw(t, u)
	if err := outcome(t, out); err != nil {
		t.Errorf("answered call = %v", err)
	}
	<-ids
	call.Abort(context.Canceled) // answered already: nothing happens
	select {
	case err := <-out:
		t.Errorf("an answered call completed again: %v", err)
	default:
	}

	answer <- false
	call, out = startRaw(t, u)
	waitFor(t, 5*time.Second, "the request", func() bool { return len(ids) > 0 })
	call.Abort(context.Canceled)
	if err := outcome(t, out); !errors.Is(err, context.Canceled) {
		t.Errorf("aborted call = %v, want context.Canceled", err)
	}
	cancelled("aborted")

	answer <- false
	_, out = startRaw(t, u)
	if err := outcome(t, out); !errors.Is(err, ErrTimeout) {
		t.Errorf("call past its timeout = %v, want ErrTimeout", err)
	}
	cancelled("timed out")

	answer <- false
	_, out = startRaw(t, u)
	<-ids
	f.cut()
	if err := outcome(t, out); !errors.Is(err, ErrUnavailable) {
		t.Errorf("call across a cut = %v, want ErrUnavailable", err)
	}
	if u.InFlight() != 0 {
		t.Errorf("%d calls in flight after every call ended", u.InFlight())
	}
}

// TestStartRawUnsupported: an upstream whose connection is not a stdio
// one starts nothing, and leaves the call to CallRaw.
func TestStartRawUnsupported(t *testing.T) {
	checkLeaks(t)
	m := newMemServer(t, echoServer())
	u := startUpstream(t, config.Server{Name: "mem"}, m.options())
	waitReady(t, u, 10*time.Second)
	if call := u.StartRaw("tools/call", []byte(`{}`), func([]byte, error) { t.Error("done called") }); call != nil {
		t.Error("StartRaw started a call on an in-memory transport")
	}
	if u.InFlight() != 0 {
		t.Errorf("%d calls in flight", u.InFlight())
	}
}

// expectCancelled checks that the next line the connection sent past the
// server (f.seen) is notifications/cancelled for id.
func expectCancelled(t *testing.T, f *fakeStdio, id, what string) {
	t.Helper()
	select {
	case line := <-f.seen:
		var n struct {
			Method string `json:"method"`
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		if err := json.Unmarshal(line, &n); err != nil || n.Method != "notifications/cancelled" || string(n.Params.RequestID) != id {
			t.Errorf("%s: sent %s, want notifications/cancelled for %s", what, line, id)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("%s: no notifications/cancelled for %s", what, id)
	}
}

// TestStartRawTimeoutSweep: the calls StartRaw starts share one timer
// (expiry.go), which ends a call no sooner than its timeout, keeps ticking
// while a call is pending though none starts, stops when nothing is
// pending, and is armed again by the next call.
func TestStartRawTimeoutSweep(t *testing.T) {
	checkLeaks(t)
	opts := fastOptions()
	opts.CallTimeout = 80 * time.Millisecond // ticks of minSweepTick
	u, fakes := rawUpstream(t, opts, func(f *fakeStdio) {
		f.onRaw = func(*fakeStdio, []byte) {} // never answers
	})
	<-fakes
	u.mu.Lock()
	c := u.raw.(*stdioConn)
	u.mu.Unlock()
	for i := range 2 {
		began := time.Now()
		_, out := startRaw(t, u)
		if err := outcome(t, out); !errors.Is(err, ErrTimeout) {
			t.Fatalf("call %d = %v, want ErrTimeout", i, err)
		}
		if took := time.Since(began); took < opts.CallTimeout {
			t.Errorf("call %d timed out after %s, before its timeout of %s", i, took, opts.CallTimeout)
		}
		waitFor(t, 5*time.Second, "the sweep to stop", func() bool { return c.expiry.state.Load() == expiryIdle })
	}
	if u.InFlight() != 0 {
		t.Errorf("%d calls in flight after every call ended", u.InFlight())
	}
}
