package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gowebpki/jcs"
	"github.com/manifold-mcp/manifold/internal/ratelimit"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// The bridge between 2026-07-28 clients and older upstreams (docs/architecture.md,
// The MRTR bridge; Decisions: bridging newest clients to older servers).
//
// A 2026-07-28 client cannot receive server requests: it gets
// input_required results and retries with inputResponses (multi
// round-trip requests, MRTR). An upstream on an older version asks with
// real requests, in the middle of a call that must stay open until they are
// answered. So a tools/call, prompts/get or resources/read of a 2026-07-28
// client to an older upstream runs in a goroutine the gateway owns, and the
// downstream handler waits for one of two things:
//
//   - the upstream call returns: its result (or error) is the answer;
//   - the upstream sends sampling/createMessage, elicitation/create or
//     roots/list for the call (relay.target resolves it, and bridgedOf finds
//     the call from the origin's context): the request is parked, and the
//     handler answers input_required with it, under an input request id of
//     the gateway's ("elicitation-1"), and a requestState naming the call.
//     Requests that arrive within the bridge window (20 ms) of the first,
//     and any still unanswered, go in the same result.
//
// The client's retry (same method and name, with inputResponses and the
// requestState) is checked (bridgestate.go), each answer goes to the
// upstream request waiting for it, and the handler waits again, as above:
// a call may take any number of rounds. An answer the client left out is
// asked for again in the next round (as the spec asks of servers); answers
// to ids the gateway did not ask for are ignored; an answer of the wrong
// kind refuses the retry (-32602) before any answer is handed over. An
// elicitation the client declined or cancelled reaches the upstream as
// such.
//
// Exactness (docs/architecture.md, Decisions: exact routing of server→client
// requests): a server request names no call, so it
// is parked only when its bridged call is the one call in flight on the
// upstream session; otherwise the upstream gets codeUnroutable, as for any
// request the gateway cannot route. (A per-client upstream session has only its
// principal's calls in flight.)
//
// Lifetimes. The upstream call is bounded by the call timeout like any
// call — time spent waiting for the client included, as when an older
// client is asked directly — and ends with the gateway (Close cancels
// its run context). Between rounds the call waits for the client at most the
// bridge TTL (5 minutes, bridge.ttl): then it is cancelled upstream, its
// parked requests are answered with codeClientNoAnswer, and its
// requestState stops verifying. A client that cancels a round (or whose
// connection drops) cancels the call the same way. Each round's
// requestState verifies once: a replay of an earlier one is refused.
//
// Audit. A bridged call is one audit record with the number of rounds (as
// a call of several MRTR rounds is, config/REFERENCE.md), written by the
// round that ends it, or when it is abandoned between rounds; the
// input_required rounds have none of their own.
//
// Progress and log messages of a bridged call go to the round serving it
// now, and those sent between rounds to the next one (bridgenotes.go).

// Defaults of the bridge's knobs (bridge.ttl and bridge.window).
const (
	// defaultBridgeTTL is how long a parked call waits for the client's
	// retry, and how long its requestState is valid.
	defaultBridgeTTL = 5 * time.Minute
	// defaultBridgeWindow is how long a round waits, after an upstream's
	// first request, for others arriving together.
	defaultBridgeWindow = 20 * time.Millisecond
)

// bridge is the registry of bridged calls. The zero value is ready.
type bridge struct {
	once   sync.Once
	signer stateSigner
	seq    atomic.Uint64
	calls  sync.Map // id (uint64) → *bridgedCall, until served or expired
	// ttl and window override defaultBridgeTTL and defaultBridgeWindow
	// when set; tests set them before the first call.
	ttl, window time.Duration
	// urls are the URL elicitations sent to 2025-11-25 sessions, for
	// notifications/elicitation/complete (elicit.go).
	urls urlElicitations
}

func (b *bridge) init() {
	b.once.Do(func() { b.signer.key = newStateKey() })
}

func (b *bridge) ttlOrDefault() time.Duration {
	if b.ttl > 0 {
		return b.ttl
	}
	return defaultBridgeTTL
}

func (b *bridge) windowOrDefault() time.Duration {
	if b.window > 0 {
		return b.window
	}
	return defaultBridgeWindow
}

// bridgedKey is the context key under which a bridged call's context holds
// the call, for bridgedOf.
type bridgedKey struct{}

// bridgedCall is one call of a 2026-07-28 client running on an older
// upstream.
type bridgedCall struct {
	id uint64
	// method, name and principal (stateOwner) bind its requestStates
	// (bridgestate.go).
	method, name, principal string
	// args is the digest of the first round's arguments (argumentsDigest):
	// a retry must carry the same, since the upstream acts on those and
	// the call's audit record shows the retry's.
	args [sha256.Size]byte
	// held is the concurrency slots of the first round's rate limits,
	// released when the upstream call returns (runBridged).
	held ratelimit.Held

	// ctx is the upstream call's: the first round's values (trace, the
	// principal of stdio sessions) without its cancellation or its
	// exchange, and the call itself under bridgedKey.
	ctx    context.Context
	cancel context.CancelCauseFunc
	start  time.Time // of the first round
	// done is closed when the upstream call has returned res and err.
	done chan struct{}
	res  mcp.Result
	err  error
	// arrived is signalled (never blocking) when a request is parked.
	arrived chan struct{}

	mu sync.Mutex
	// pending are the parked requests not answered yet, by input request
	// id.
	pending map[string]*parkedRequest
	asked   int // input request ids handed out
	// round is the number of the downstream request serving the call, or
	// that served it last: 1 for the first.
	round int
	// attached: a downstream request is waiting on the call. While not,
	// timer ends the call after the TTL.
	attached bool
	expired  bool
	timer    *time.Timer
	stop     func() bool // detaches the call from the gateway's run context
	// record writes the call's audit record should it end while detached
	// (nil without an audit log); see laterRecord.
	record func(error)

	// noteMu guards notes and orders the notifications sent to the client.
	noteMu sync.Mutex
	notes  bridgeNotes
}

// parkedRequest is one upstream request waiting for the client's answer.
type parkedRequest struct {
	params mcp.InputRequest
	answer chan mcp.InputResponse // buffered 1
}

// bridgedOf returns the bridged call o belongs to, or nil for a call that
// is not bridged.
func bridgedOf(o *origin) *bridgedCall {
	if o == nil || o.ctx == nil {
		return nil
	}
	bc, _ := o.ctx.Value(bridgedKey{}).(*bridgedCall)
	return bc
}

// openBridge registers a bridged call for the downstream request of ctx
// and starts its upstream call, a goroutine of the gateway (runBridged).
// It returns false, having started nothing, when the gateway does not run
// (before Start, or closing).
func (g *Gateway) openBridge(ctx context.Context, method, name, principal string, args [sha256.Size]byte, call func(context.Context) (mcp.Result, error)) (*bridgedCall, bool) {
	g.bridge.init()
	if !g.life.Running() {
		return nil, false
	}
	runCtx := g.life.Context()
	bc := &bridgedCall{
		id: g.bridge.seq.Add(1), method: method, name: name, principal: principal, args: args,
		done: make(chan struct{}), arrived: make(chan struct{}, 1),
		pending: map[string]*parkedRequest{}, round: 1, attached: true, start: time.Now(),
	}
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	// The exchange belongs to the first round's request, whose handler
	// reads it when it returns: the call must not write to it.
	cctx = context.WithValue(cctx, exchangeKey{}, (*exchange)(nil))
	bc.ctx, bc.cancel = context.WithValue(cctx, bridgedKey{}, bc), cancel
	// The call keeps the concurrency slots of its rate limits until its
	// upstream call returns, not just for its first round.
	held, _ := ctx.Value(slotsKey{}).(*ratelimit.Held)
	if held != nil {
		bc.held, *held = *held, ratelimit.Held{}
	}
	g.bridge.calls.Store(bc.id, bc)
	stop := context.AfterFunc(runCtx, func() {
		g.end(bc, 0, &jsonrpc.Error{Code: codeClientNoAnswer, Message: "manifold: the gateway is shutting down"})
	})
	bc.mu.Lock()
	bc.stop = stop
	bc.mu.Unlock()
	if !g.life.Go(func(context.Context) { g.runBridged(bc, call) }) {
		// Close began meanwhile: the call never starts.
		g.forget(bc)
		bc.cancel(errCallReturned)
		if held != nil {
			*held, bc.held = bc.held, ratelimit.Held{}
		}
		return nil, false
	}
	return bc, true
}

// runBridged runs the upstream call of bc; it is the goroutine openBridge
// started.
func (g *Gateway) runBridged(bc *bridgedCall, call func(context.Context) (mcp.Result, error)) {
	var res mcp.Result
	err := error(errInternal)
	defer func() {
		if p := recover(); p != nil {
			g.log.Error("panic in a bridged call", zap.String(keyName, bc.name), zap.Any(keyError, p), zap.Stack(keyStack))
		}
		bc.res, bc.err = res, err
		bc.held.Release()
		bc.cancel(errCallReturned)
		close(bc.done)
	}()
	res, err = call(bc.ctx)
}

// errCallReturned ends a bridged call's context once its upstream call has
// returned.
var errCallReturned = errors.New("manifold: the call returned")

// park hands p to the client of bc in its next input_required result and
// waits for the answer, until ctx (the upstream's request) or the call
// ends. kind prefixes the input request id.
func (bc *bridgedCall) park(ctx context.Context, p mcp.InputRequest, kind string) (mcp.InputResponse, error) {
	pr := &parkedRequest{params: p, answer: make(chan mcp.InputResponse, 1)}
	bc.mu.Lock()
	if bc.ctx.Err() != nil {
		bc.mu.Unlock()
		return nil, bc.endError()
	}
	bc.asked++
	id := kind + "-" + strconv.Itoa(bc.asked)
	bc.pending[id] = pr
	bc.mu.Unlock()
	select {
	case bc.arrived <- struct{}{}:
	default:
	}
	defer func() {
		bc.mu.Lock()
		delete(bc.pending, id)
		bc.mu.Unlock()
	}()
	select {
	case a := <-pr.answer:
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-bc.ctx.Done():
		// An answer delivered just before the end still counts.
		select {
		case a := <-pr.answer:
			return a, nil
		default:
		}
		return nil, bc.endError()
	}
}

// endError is what an upstream request parked on bc gets once the call
// ended without an answer.
func (bc *bridgedCall) endError() error {
	var rpcErr *jsonrpc.Error
	if cause := context.Cause(bc.ctx); errors.As(cause, &rpcErr) {
		return rpcErr
	}
	return &jsonrpc.Error{Code: codeClientNoAnswer, Message: "manifold: the call ended before the client answered"}
}

// bridgeStart runs a call of a 2026-07-28 client to an older upstream
// through the bridge, and serves its first round. Before Start and while
// closing it forwards the call directly (server requests are then refused).
func bridgeStart[Q callerRequest, R mcp.Result](ctx context.Context, g *Gateway, m *method[Q, R], req Q, rt route, snap *snapshot) (R, error) {
	bc, ok := g.openBridge(ctx, m.name, target(req), g.stateOwner(ctx, snap.access, req), argumentsDigest(req), func(ctx context.Context) (mcp.Result, error) {
		return roundTrip(ctx, g, m, req, rt, snap)
	})
	if !ok {
		return roundTrip(ctx, g, m, req, rt, snap)
	}
	g.exchange(ctx).bridgedRound(1, bc.start)
	g.attachNotes(bc, roundOf(ctx, req))
	return bridgeRound(ctx, g, m, req, bc)
}

// bridgeResume serves a retry that carries a requestState of the gateway:
// it checks the state, hands the answers to the upstream requests waiting
// for them, and serves the next round. A refused state changes nothing.
func bridgeResume[Q callerRequest, R mcp.Result](ctx context.Context, g *Gateway, m *method[Q, R], req Q, snap *snapshot) (R, error) {
	var zero R
	answers, _ := m.input(req)
	bc, st, err := bridgedRetry(ctx, g, m, req, snap)
	if err != nil {
		return zero, invalidState(err)
	}
	if argumentsDigest(req) != bc.args {
		return zero, invalidState(fmt.Errorf("%w: it was issued for other arguments", errBadState))
	}
	bc.mu.Lock()
	switch {
	case bc.expired:
		bc.mu.Unlock()
		return zero, invalidState(fmt.Errorf("%w: its call expired", errBadState))
	case bc.attached:
		bc.mu.Unlock()
		return zero, invalidState(fmt.Errorf("%w: another retry of this call is being served", errBadState))
	case int(st.round) != bc.round:
		bc.mu.Unlock()
		return zero, invalidState(fmt.Errorf("%w: round %d was answered already", errBadState, st.round))
	}
	// Check every answer before handing any over.
	for id, a := range answers {
		if pr := bc.pending[id]; pr != nil && a != nil {
			if err := checkAnswer(pr.params, a); err != nil {
				bc.mu.Unlock()
				return zero, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("inputResponses[%q]: %v", id, err)}
			}
		}
	}
	if bc.timer != nil {
		bc.timer.Stop()
	}
	bc.attached = true
	bc.round++
	round := bc.round
	for id, a := range answers {
		if pr := bc.pending[id]; pr != nil && a != nil {
			pr.answer <- a
			delete(bc.pending, id)
		}
	}
	bc.mu.Unlock()
	g.exchange(ctx).bridgedRound(round, bc.start)
	g.attachNotes(bc, roundOf(ctx, req))
	return bridgeRound(ctx, g, m, req, bc)
}

// bridgedRetry returns the bridged call req, a retry carrying a
// requestState of the gateway, resumes, and the state: when the state
// verifies for req's method, name and owner under snap, and its call is
// still registered. The error says why not.
func bridgedRetry[Q callerRequest, R mcp.Result](ctx context.Context, g *Gateway, m *method[Q, R], req Q, snap *snapshot) (*bridgedCall, bridgeState, error) {
	g.bridge.init()
	_, state := m.input(req)
	st, err := g.bridge.signer.verify(state, m.name, target(req), g.stateOwner(ctx, snap.access, req), time.Now())
	if err != nil {
		return nil, st, err
	}
	v, ok := g.bridge.calls.Load(st.id)
	if !ok {
		return nil, st, fmt.Errorf("%w: its call has ended (completed, cancelled or timed out)", errBadState)
	}
	return v.(*bridgedCall), st, nil
}

// resumesBridged reports whether req is a retry of a bridged call that
// bridgeResume may resume (it makes the remaining checks).
func resumesBridged[Q callerRequest, R mcp.Result](ctx context.Context, g *Gateway, m *method[Q, R], req Q, snap *snapshot) bool {
	if _, state := m.input(req); !isBridgeState(state) {
		return false
	}
	_, _, err := bridgedRetry(ctx, g, m, req, snap)
	return err == nil
}

// endRefusedRetry ends the bridged call req would have resumed, req being
// a retry the pipeline refused (after a reload its name is no longer known,
// or no longer allowed): no retry can resume the call any more, so it
// ends now, with its audit record, rather than at the TTL. Only a state
// that verifies for req's owner ends a call, so no one else's retry can.
func endRefusedRetry[Q callerRequest, R mcp.Result](ctx context.Context, g *Gateway, m *method[Q, R], req Q, snap *snapshot) {
	if _, state := m.input(req); !isBridgeState(state) {
		return
	}
	if bc, st, err := bridgedRetry(ctx, g, m, req, snap); err == nil {
		g.end(bc, int(st.round), &jsonrpc.Error{Code: codeClientNoAnswer,
			Message: "manifold: the client's retry was refused: the name is no longer known or allowed"})
	}
}

// slotsKey is the context key of the rate-limit slots a call holds
// (*ratelimit.Held), for openBridge to take over.
type slotsKey struct{}

// argumentsDigest is the SHA-256 of the canonical JSON (RFC 8785) of
// req's arguments, or of null without any: what a retry of a bridged call
// must repeat. Arguments that do not canonicalise are digested as sent.
func argumentsDigest(req mcp.Request) [sha256.Size]byte {
	var raw []byte
	switch a := arguments(req).(type) {
	case nil:
		raw = []byte("null")
	case json.RawMessage:
		raw = a
	default:
		raw, _ = json.Marshal(a)
	}
	if c, err := jcs.Transform(raw); err == nil {
		raw = c
	}
	return sha256.Sum256(raw)
}

// invalidState is the client's error for a requestState refused by err.
func invalidState(err error) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "manifold: " + err.Error()}
}

// bridgeRound waits, for the downstream request req (of ctx), until bc's
// upstream call returns (its result is the answer) or parks requests (they
// are asked for with input_required, and req gets no audit record: the
// call's one record is written by the round that ends it). If ctx ends
// first, the call is abandoned.
func bridgeRound[Q callerRequest, R mcp.Result](ctx context.Context, g *Gateway, m *method[Q, R], req Q, bc *bridgedCall) (R, error) {
	var zero R
	gathered := false
	for {
		select {
		case <-bc.done:
			return bridgeResult[R](g, bc)
		case <-ctx.Done():
			g.abandon(bc, &jsonrpc.Error{Code: codeClientNoAnswer, Message: "manifold: the client cancelled the call"})
			return zero, ctx.Err()
		default:
		}
		if bc.hasPending() {
			if !gathered {
				// Requests arriving together go in one round.
				gathered = true
				t := time.NewTimer(g.bridge.windowOrDefault())
				select {
				case <-t.C:
				case <-bc.done:
				case <-ctx.Done():
				}
				t.Stop()
				continue
			}
			if irs, state := g.detach(bc, g.laterRecord(ctx, m.name, req, bc)); irs != nil {
				g.exchange(ctx).markInterim()
				return m.ask(irs, state), nil
			}
		}
		gathered = false
		select {
		case <-bc.arrived:
		case <-bc.done:
		case <-ctx.Done():
		}
	}
}

func (bc *bridgedCall) hasPending() bool {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	return len(bc.pending) > 0
}

// detach returns the requests parked on bc and the requestState of the
// round that asks for them, and starts waiting for the client's retry;
// nil when none is parked any more. record writes the call's audit record
// should it end before the client comes back.
func (g *Gateway) detach(bc *bridgedCall, record func(error)) (mcp.InputRequestMap, string) {
	ttl := g.bridge.ttlOrDefault()
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if len(bc.pending) == 0 {
		return nil, ""
	}
	irs := make(mcp.InputRequestMap, len(bc.pending))
	for id, pr := range bc.pending {
		irs[id] = pr.params
	}
	bc.detachNotes() // the round's stream ends with its answer
	bc.attached = false
	bc.record = record
	round := bc.round
	if bc.timer != nil {
		bc.timer.Stop()
	}
	bc.timer = time.AfterFunc(ttl, func() {
		g.end(bc, round, &jsonrpc.Error{Code: codeClientNoAnswer, Message: fmt.Sprintf(
			"manifold: the client did not answer within %s", ttl)})
	})
	st := bridgeState{id: bc.id, round: uint32(round), expires: time.Now().Add(ttl)}
	return irs, g.bridge.signer.sign(st, bc.method, bc.name, bc.principal)
}

// end ends bc with cause while no round serves it: the client did not
// come back within the TTL after round's input_required (round > 0; a
// timer that fired late, after the client came back, finds the call
// attached or at a later round), or the gateway is shutting down (round
// 0; a round that serves the call then answers with its end). The call's
// audit record is written here, since no round will.
func (g *Gateway) end(bc *bridgedCall, round int, cause error) {
	bc.mu.Lock()
	if bc.expired || round > 0 && (bc.attached || bc.round != round) {
		bc.mu.Unlock()
		return
	}
	if bc.attached {
		bc.mu.Unlock()
		bc.cancel(cause)
		return
	}
	bc.expired = true
	record := bc.record
	bc.mu.Unlock()
	// Its record first: once the upstream call is cancelled and the call
	// forgotten, everything that follows (a late retry, Close) must find
	// it written.
	if record != nil {
		record(cause)
	}
	g.abandon(bc, cause)
}

// abandon cancels bc's upstream call with cause and forgets it.
func (g *Gateway) abandon(bc *bridgedCall, cause error) {
	bc.cancel(cause)
	g.forget(bc)
}

// forget drops bc from the registry, with its timers.
func (g *Gateway) forget(bc *bridgedCall) {
	g.bridge.calls.Delete(bc.id)
	bc.mu.Lock()
	if bc.timer != nil {
		bc.timer.Stop()
	}
	if bc.stop != nil {
		bc.stop()
	}
	bc.mu.Unlock()
}

// laterRecord returns what writes the audit record of bc, as of round req
// (of ctx), should the call end before another round: nil without an
// audit log.
func (g *Gateway) laterRecord(ctx context.Context, method string, req mcp.Request, bc *bridgedCall) func(error) {
	x := g.exchange(ctx)
	if g.obs.audit == nil || x == nil {
		return nil
	}
	rec := *x // the request's own goes on being read by its handler
	ss, _ := req.GetSession().(*mcp.ServerSession)
	return func(err error) {
		f := callFacts{method: method, name: target(req), version: protocolVersion(req, ss), args: arguments(req), who: callerOf(ctx, req)}
		g.obs.audit.Write(g.auditRecord(ctx, ss, &rec, bc.start, time.Since(bc.start), f, err))
	}
}

// bridgeResult serves bc's final result, once.
func bridgeResult[R mcp.Result](g *Gateway, bc *bridgedCall) (R, error) {
	g.forget(bc)
	res, _ := bc.res.(R)
	return res, bc.err
}

// stateOwner is who req's requestStates are bound to: its principal's key
// ("" when unknown) and how it authenticated (the method and the key id or
// JWT issuer; none for the local principal), so that a principal of the
// same name and groups that authenticated otherwise is another owner. a is
// the access snapshot the call is decided under.
func (g *Gateway) stateOwner(ctx context.Context, a *access, req mcp.Request) string {
	pr, _ := principal(ctx, a, req)
	var method, source string
	if id := identity(ctx, req); id != nil {
		method, source = id.Method, id.Source
	}
	return bindOwner(method, source, pr.Key())
}
