package gateway

import (
	"context"
	"sync/atomic"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/upstream"
	"go.uber.org/zap"
)

// The stdio fast path (docs/architecture.md, The stdio fast path). A raw
// call on the stdio front normally runs in a goroutine of its own, which
// waits for the upstream's answer: the reading goroutine hands the call to
// it, and the upstream's reading goroutine hands the answer back, two
// hand-offs (a futex wake-up and often a thread's) that cost more than the
// rest of the call at one session. When nothing of the call can block or
// needs the answer before it is written (stdioFast says when), the call
// runs without a goroutine of its own: the front's reading goroutine runs
// the stages up to the upstream request and sends it
// (upstream.StartRaw, which never blocks on the pipe), and the upstream's
// reading goroutine, when the answer comes, runs the rest (rewrite,
// observe) and writes the response to the client. The stages are the raw
// path's own (rawDecide, beginRound, endRound, rewriteRaw, answerRaw).

// stdioFast reports whether r, a raw call on the stdio front, takes the
// fast path: its route is a shared upstream session (a per-client one may
// have to connect), and there are no rate limits (a shared one asks the
// cluster store), no plugins (hooks are calls of their own), no sign-in
// route, no MRTR rounds to fulfil (the client is asked in between), and no
// progress or log messages to settle before the answer (flights.end
// waits for them).
func (g *Gateway) stdioFast(r *rawRequest) bool {
	c := &r.c
	if c.snap.limits != nil || g.plugins.Chain() != nil || r.env.ProgressToken.Present() {
		return false
	}
	rt, ok := c.routes.lookup(r.m.kind, c.name)
	switch {
	case !ok, rt.original == signInMarker, rt.up.SessionMode() == config.SessionPerClient:
		return false
	case !r.stateless && mcpx.Stateless(upstreamVersion(rt.up)):
		return false // a legacy client's call to a 2026-07-28 upstream: fulfilRounds
	}
	return !g.flights.sessionLogs(r.ss)
}

// rawDecide runs authenticate, resolve and policy for r, as rawStages
// does; they never block. The error is the answer to a call they refuse.
func (g *Gateway) rawDecide(ctx context.Context, f rawFront, r *rawRequest) error {
	c := &r.c
	c.x = g.exchange(ctx)
	g.authenticate(c, f.caller())
	if !g.resolve(ctx, c) || !g.permit(ctx, c) {
		return r.unknown()
	}
	return nil
}

// fastCall is a raw call on the fast path, from the front's reading
// goroutine that starts it (start) to the one that completes it (done).
type fastCall struct {
	f      *stdioFront
	r      *rawRequest
	key    string // the client's id (idKey)
	ctx    context.Context
	cancel context.CancelFunc
	obs    rawObserved
	uc     upstreamCall
	// up is the upstream call once it is under way, for abort.
	up atomic.Pointer[upstream.RawCall]
	// ended: end has run (a panic after it must not end the call again).
	ended atomic.Bool
}

// start runs the stages of fc up to the upstream request, and sends it.
// The call ends in done, or here when a stage refuses it.
func (fc *fastCall) start() {
	g, r := fc.f.g, fc.r
	g.inflight.Add()
	g.stdioFastServed.Add(1)
	defer func() {
		if p := recover(); p != nil {
			g.log.Error("raw call panicked", zap.String(keyName, r.c.name), zap.Any("panic", p))
			fc.end(nil, false, errInternal)
		}
	}()
	ctx, obs := g.observeRaw(fc.ctx, fc.f, r)
	fc.ctx, fc.obs = ctx, obs
	if err := g.rawDecide(ctx, fc.f, r); err != nil {
		fc.end(nil, false, err)
		return
	}
	// The upstream session stage: a shared server's is the pool's
	// (stdioFast).
	rt := r.c.route
	ctx, uc, params, err := g.beginRound(ctx, r, rt, nil, nil)
	if err != nil {
		fc.end(nil, false, err)
		return
	}
	fc.ctx, fc.uc = ctx, uc
	call := rt.up.StartRaw(r.m.name, params, fc.done)
	if call == nil {
		// The upstream cannot take the call at once (reconnecting, every
		// slot taken): wait for it as CallRaw waits, off this goroutine.
		go func() {
			res, err := rt.up.CallRaw(ctx, r.m.name, params)
			fc.done(res, err)
		}()
		return
	}
	fc.up.Store(call)
	if ctx.Err() != nil { // abort came before up was set
		call.Abort(context.Canceled)
	}
}

// abort ends fc early: the client cancelled it, or its input ended.
func (fc *fastCall) abort() {
	fc.cancel()
	if call := fc.up.Load(); call != nil {
		call.Abort(context.Canceled)
	}
}

// done is the upstream's answer to fc: the stages after forward, then the
// response.
func (fc *fastCall) done(res []byte, err error) {
	g, r := fc.f.g, fc.r
	defer func() {
		if p := recover(); p != nil {
			g.log.Error("raw call panicked", zap.String(keyName, r.c.name), zap.Any("panic", p))
			fc.end(nil, false, errInternal)
		}
	}()
	g.endRound(fc.ctx, r, &fc.uc, res, err)
	rt := r.c.route
	out, toolErr, err := g.rewriteRaw(r, rt, res, err)
	if ce := g.consentRequired(err, rt.up, r.c.principal.Name()); ce != nil {
		from := downstream{ss: r.ss, caps: r.caps, version: r.version}
		out, toolErr, err = rawConsentAnswer(r.m.name, from, ce, g.rawConsentState(fc.f, r.m.name, &r.c, from)) // a step-up (oauthconsent.go)
	}
	fc.end(out, toolErr, err)
}

// end answers fc with res (a tool error when toolErr) or err, as
// serveAnswer and the front's goroutine do.
func (fc *fastCall) end(res []byte, toolErr bool, err error) {
	if fc.ended.Swap(true) {
		return
	}
	g, f := fc.f.g, fc.f
	fc.r.c.held.Release()
	a := g.answerRaw(fc.ctx, f, fc.r, &fc.obs, res, toolErr, err)
	f.end(fc.key, fc.cancel)
	// end runs on the upstream's reading goroutine (or the timeout
	// sweep's), which must not wait for the client.
	f.out.writeLineNoWait(&a, fc)
}

// written ends fc once its answer is out (writeLineNoWait).
func (fc *fastCall) written() {
	fc.f.g.inflight.Done()
	fc.f.wg.Done()
}
