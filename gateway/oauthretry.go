package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/upcred"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The sign-in of a 2026-07-28 client (docs/architecture.md, Upstream
// credentials: oauth). A request that needs a sign-in is answered
// input_required with a URL elicitation of the start link (consentAnswer)
// and a requestState of the gateway's own: a bridge state (bridgestate.go)
// that names no parked call (id 0), bound like every state to the method,
// the name and the principal with how it authenticated. The client opens
// the link and retries with the elicitation's answer and that state, as
// the URL mode flow of the 2026-07-28 elicitation spec has it; the retry
// waits for the sign-in to complete (the callback stores the token), at
// most the call timeout and the state's life, then goes on as a fresh call
// with the answer and the state removed: they were the gateway's, and the
// upstream never asked for them. A sign-in still pending then is asked for
// again. A declined or cancelled elicitation answers what a client without
// URL elicitation reads.

// consentTTL is the life of a sign-in's requestState: that of the start
// link it names (upcred's sign-in lifetime).
const consentTTL = 10 * time.Minute

// consentWaits are the retries waiting for a principal's sign-in, by
// server and principal: each key has a channel that signedIn closes, kept
// while a retry waits on it.
type consentWaits struct {
	mu sync.Mutex
	m  map[oauthWaitKey]*consentWait
}

type consentWait struct {
	ch      chan struct{}
	waiters int
}

// waiting returns the channel closed at the next sign-in of principal at
// server, and the function to call when the caller stops waiting.
func (w *consentWaits) waiting(server, principal string) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := oauthWaitKey{server, principal}
	if w.m == nil {
		w.m = map[oauthWaitKey]*consentWait{}
	}
	cw := w.m[k]
	if cw == nil {
		cw = &consentWait{ch: make(chan struct{})}
		w.m[k] = cw
	}
	cw.waiters++
	return cw.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if cw.waiters--; cw.waiters == 0 && w.m[k] == cw {
			delete(w.m, k)
		}
	}
}

// release wakes the retries waiting for principal's sign-in at server.
func (w *consentWaits) release(server, principal string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := oauthWaitKey{server, principal}
	if cw := w.m[k]; cw != nil {
		close(cw.ch)
		delete(w.m, k)
	}
}

// principalSignedIn is told by signedIn that principal signed in at
// server: its retries waiting go on, and its sessionless generations are
// rebuilt at their next list (principallists.go).
func (g *Gateway) principalSignedIn(server, principal string) {
	g.consentWaits.release(server, principal)
	g.prinLists.byKey.Range(func(_, v any) bool {
		if pl := v.(*principalRoutes); pl.name == principal {
			pl.stale.Store(true)
		}
		return true
	})
	g.notifyPrincipal("", principal, [3]bool{true, false, false}) // its listen streams (listenlists.go)
}

// consentState returns the requestState of a sign-in's input_required
// answer to method on name, for owner (bindOwner).
func (g *Gateway) consentState(method, name, owner string) string {
	g.bridge.init()
	return g.bridge.signer.sign(bridgeState{expires: time.Now().Add(consentTTL)}, method, name, owner)
}

// askConsent is the upstream session stage's answer to a call of method m
// that needs the sign-in ce (consentAnswer), with the requestState that
// consentRetry knows again for a 2026-07-28 client.
func askConsent[Q callerRequest, R mcp.Result](ctx context.Context, g *Gateway, m *method[Q, R], c *call, req Q, ce *upcred.ConsentRequiredError) (R, error) {
	from := fromRequest(req)
	var state string
	if caps, version := from.client(); wantsInputRequired(caps, version) {
		state = g.consentState(m.name, c.name, g.stateOwner(ctx, c.snap.access, req))
	}
	return consentAnswer(m, from, ce, state)
}

// consentRetry is the part of the upstream session stage that knows the
// retry of a call askConsent answered: for such a retry to an oauth server
// it waits for the principal's sign-in and leaves *req without the answer
// and the state. done is true when it answers the call itself: a state
// that does not verify, or an elicitation that was not accepted. Any
// other request is left as it is.
func consentRetry[Q callerRequest, R mcp.Result](ctx context.Context, g *Gateway, m *method[Q, R], c *call, req *Q) (_ R, done bool, _ error) {
	var zero R
	answers, state := m.input(*req)
	if state == "" || !isBridgeState(state) || c.route.up.Config().Auth.Type != config.UpstreamAuthOAuth {
		return zero, false, nil
	}
	g.bridge.init()
	st, err := g.bridge.signer.verify(state, m.name, c.name, g.stateOwner(ctx, c.snap.access, *req), time.Now())
	if err != nil {
		return zero, true, invalidState(err)
	}
	if st.id != 0 {
		return zero, false, nil // a bridged call's (bridge.go)
	}
	if er, ok := answers[consentInputKey].(*mcp.ElicitResult); ok && er.Action != "accept" {
		text := fmt.Sprintf("Sign-in to %s was %sd: its tools stay unavailable. Call again to be asked again.", c.route.up.Name(), er.Action)
		if r, ok := m.toolError(text); ok {
			return r, true, nil
		}
		return zero, true, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: text}
	}
	g.awaitSignIn(ctx, c, st.expires)
	*req = m.retry(*req, nil, "")
	return zero, false, nil
}

// rawConsentState is the requestState of a sign-in's input_required answer
// on the raw path (rawConsentAnswer) to the call c of f's client from; ""
// for a client that gets another answer.
func (g *Gateway) rawConsentState(f rawFront, method string, c *call, from downstream) string {
	if caps, version := from.client(); !wantsInputRequired(caps, version) {
		return ""
	}
	var auth, source string
	if id := f.caller().id; id != nil {
		auth, source = id.Method, id.Source
	}
	return g.consentState(method, c.name, bindOwner(auth, source, c.principal.Key()))
}

// awaitSignIn waits, while the principal of c has a sign-in in progress at
// the server of c's route (its link opened or not), for the principal to
// sign in there, at most until ctx is done, the call timeout passed or
// expires.
func (g *Gateway) awaitSignIn(ctx context.Context, c *call, expires time.Time) {
	oa, err := g.oauthOf(c.route.up.Config())
	if err != nil {
		return
	}
	principal := c.principal.Name()
	done, stop := g.consentWaits.waiting(c.route.up.Name(), principal) // before looking: no sign-in is missed
	defer stop()
	if !oa.InProgress(principal) {
		return
	}
	wait := min(c.snap.cfg.Gateway.Timeouts.Call, time.Until(expires))
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// consentInputKey is the key of the sign-in's elicitation in the input
// requests of a consent answer.
const consentInputKey = "manifold-sign-in"
