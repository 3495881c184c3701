package upcred

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TestOneStartedSignInPerPrincipal: a principal that asks for a sign-in and opens its link
// in a loop has one sign-in in flight at most: opening a link ends the principal's previous
// sign-in, its flow goroutine and its callback state, which the callback then refuses. More
// sign-ins than maxPendingConsents are asked for, and none is refused for their number.
func TestOneStartedSignInPerPrincipal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o, mcpURL := newSignInRig(t, ctx)
	before := runtime.NumGoroutine()
	const n = maxPendingConsents + 100
	var first string
	for i := 0; i < n; i++ {
		ce := askSignIn(t, o, mcpURL, "alice")
		if _, err := o.Start(ce.ID); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			o.mu.Lock()
			for st := range o.byState {
				first = st
			}
			o.mu.Unlock()
		}
	}
	o.mu.Lock()
	inFlight := len(o.byState)
	o.mu.Unlock()
	if inFlight != 1 {
		t.Errorf("%d sign-ins of one principal in flight, want 1", inFlight)
	}
	if _, ok, _ := o.Callback(ctx, first, "code", ""); ok {
		t.Error("the callback of the first sign-in, ended by later ones, was taken")
	}
	// The ended sign-ins' goroutines return.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine()-before > 20 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines more than before the sign-ins", runtime.NumGoroutine()-before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
