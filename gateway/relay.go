package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// Relaying what upstreams send toward clients (docs/architecture.md, Relay;
// Decisions: exact routing of server→client requests).
//
// Nothing on the wire ties an upstream's sampling, elicitation or roots
// request to the call that caused it, so the gateway records every call it
// has in flight on each upstream (a flight). A request from an upstream goes
// to the session of the calls in flight on it when they all come from one
// downstream session; when none is in flight, or several sessions' are, the
// upstream gets a clear error: the gateway never guesses. Progress is
// exact: each forwarded progress token is replaced by one the gateway
// makes, unique per call.

// origin is one call in flight on an upstream: who made it, and where what
// the upstream sends back for it must go.
type origin struct {
	seq uint64
	up  *upstream.Upstream
	ss  *mcp.ServerSession
	ctx context.Context // the downstream handler's: routes writes to its stream
	// sink, when not nil, is the call's own HTTP response (a raw call on
	// streamable HTTP): its notifications are written there, as events,
	// rather than sent through ss.
	sink *callResponse
	// req is the downstream request, read for the client's capabilities and
	// protocol version only when a relay needs them (for 2026-07-28 clients
	// they are decoded from _meta: not work for every call).
	req callerRequest
	// caps and version are the client's when req is nil (outside any call).
	caps    *mcp.ClientCapabilities
	version string
	// progress is the client's progress token (nil: none); token is the one
	// sent upstream in its place.
	progress any
	token    string

	mu   sync.Mutex // orders relayed notifications before the end of the call
	done bool
	// settle: the caller asked for progress or logs, so the end of the call
	// waits for those the upstream sent before its answer (see end).
	settle bool
}

// client returns the capabilities and protocol version of o's client.
func (o *origin) client() (*mcp.ClientCapabilities, string) {
	if o.req != nil {
		return o.req.ClientCapabilities(), o.req.ProtocolVersion()
	}
	return o.caps, o.version
}

// settleMax bounds how long the end of a call waits for the notifications
// its upstream sent before the answer to be relayed (upstream.Settle).
// They are normally relayed already, or within microseconds; the bound is
// for a client so slow that relaying to it blocks, which must not hold up
// the answers of others for long.
const settleMax = time.Second

// flights is the registry of calls in flight, per upstream and by progress
// token. Each upstream has its own lock, so calls to different upstreams do
// not contend.
type flights struct {
	seq    atomic.Uint64
	byUp   sync.Map // *upstream.Upstream → *upFlights
	byTok  sync.Map // upstream progress token → *origin
	prefix string   // of the gateway's progress tokens, random per process
	// levels holds the log level each legacy session set (logging/setLevel):
	// *mcp.ServerSession → sessionLevel.
	levels sync.Map
	// upLevels holds the level last set on each legacy upstream.
	upLevels sync.Map // *upstream.Upstream → mcpx.LoggingLevel
}

// sessionLevel is the log level a legacy session set, and who set it: a
// log message outside any call goes only to sessions whose principal, as
// the config in force has it, may see its server.
type sessionLevel struct {
	level mcpx.LoggingLevel
	who   caller
}

type upFlights struct {
	mu sync.Mutex
	m  map[uint64]*origin
}

func newFlights() *flights {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return &flights{prefix: "manifold-" + hex.EncodeToString(b) + "-"}
}

// callerRequest is what the gateway reads of a downstream request: the SDK's
// *mcp.ServerRequest[P] for every P.
type callerRequest interface {
	mcp.Request
	ClientCapabilities() *mcp.ClientCapabilities
	ProtocolVersion() string
}

// begin records a call from req to up. meta is the _meta forwarded
// upstream; when the client asked for progress, begin returns a copy whose
// progress token is the gateway's own. Call end when the call returns.
func (f *flights) begin(ctx context.Context, up *upstream.Upstream, req mcp.Request, meta mcp.Meta) (*origin, mcp.Meta) {
	o := &origin{up: up, ctx: ctx}
	o.ss, _ = req.GetSession().(*mcp.ServerSession)
	o.req, _ = req.(callerRequest)
	meta, o.settle = f.withLogLevel(up, req, o.ss, meta)
	var progress any
	if p, ok := req.GetParams().(interface{ GetProgressToken() any }); ok {
		progress = p.GetProgressToken()
	}
	f.track(o, progress)
	if o.token != "" {
		m := make(mcp.Meta, len(meta)+1)
		for k, v := range meta {
			m[k] = v
		}
		m["progressToken"] = o.token
		meta = m
	}
	return o, meta
}

// track records o, a call to o.up, as in flight. When the client asked for
// progress (progress is its token), o gets the gateway's own token, under
// which the upstream's progress is relayed (Progress): the caller sends
// o.token upstream in its place. Call end when the call returns.
func (f *flights) track(o *origin, progress any) {
	o.seq = f.seq.Add(1)
	if progress != nil {
		o.progress = progress
		o.token = f.prefix + strconv.FormatUint(o.seq, 10)
		f.byTok.Store(o.token, o)
	}
	uf := f.of(o.up)
	uf.mu.Lock()
	uf.m[o.seq] = o
	uf.mu.Unlock()
}

// sessionLogs reports whether the legacy session ss asked for log
// messages (logging/setLevel): its calls then settle (see end).
func (f *flights) sessionLogs(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	_, ok := f.levels.Load(ss)
	return ok
}

// withLogLevel returns meta with the log level the caller asked for, for an
// upstream on 2026-07-28 or later, where the level travels with each request
// (forwardMeta has removed the client's copy with the other per-hop keys).
// The level is the request's own (2026-07-28 clients) or its session's.
// logging reports whether the caller asked for log messages at all.
func (f *flights) withLogLevel(up *upstream.Upstream, req mcp.Request, ss *mcp.ServerSession, meta mcp.Meta) (_ mcp.Meta, logging bool) {
	var level any
	if p := req.GetParams(); p != nil {
		level = p.GetMeta()[mcpx.MetaKeyLogLevel]
	}
	if level == nil && ss != nil {
		if v, ok := f.levels.Load(ss); ok {
			level = v.(sessionLevel).level
		}
	}
	if level == nil {
		return meta, false
	}
	if cat := up.Catalog(); cat == nil || !mcpx.Stateless(cat.ProtocolVersion) {
		return meta, true
	}
	m := make(mcp.Meta, len(meta)+1)
	for k, v := range meta {
		m[k] = v
	}
	m[mcpx.MetaKeyLogLevel] = level
	return m, true
}

func (f *flights) of(up *upstream.Upstream) *upFlights {
	if v, ok := f.byUp.Load(up); ok {
		return v.(*upFlights)
	}
	v, _ := f.byUp.LoadOrStore(up, &upFlights{m: map[uint64]*origin{}})
	return v.(*upFlights)
}

// end forgets o. Progress relayed after it is dropped: nothing reaches the
// client after the call's response.
func (f *flights) end(o *origin) {
	if o.token != "" {
		o.settle = true
	}
	if o.settle {
		o.up.Settle(settleMax)
	}
	o.mu.Lock()
	o.done = true
	o.mu.Unlock()
	if o.token != "" {
		f.byTok.Delete(o.token)
	}
	uf := f.lookup(o.up)
	uf.mu.Lock()
	delete(uf.m, o.seq)
	uf.mu.Unlock()
}

// noFlights stands for the calls of an upstream that has none recorded.
var noFlights = &upFlights{}

// lookup returns up's calls in flight without recording up: after forget,
// a late call end or notification must not bring a stopped upstream back.
func (f *flights) lookup(up *upstream.Upstream) *upFlights {
	if v, ok := f.byUp.Load(up); ok {
		return v.(*upFlights)
	}
	return noFlights
}

// busy reports whether calls are in flight on up.
func (f *flights) busy(up *upstream.Upstream) bool {
	uf := f.lookup(up)
	uf.mu.Lock()
	defer uf.mu.Unlock()
	return len(uf.m) > 0
}

// forget drops the registry's entry of an upstream that was stopped.
func (f *flights) forget(up *upstream.Upstream) {
	f.byUp.Delete(up)
	f.upLevels.Delete(up)
}

// resolve returns the origin a request from up belongs to: the oldest call
// in flight on up, when every call in flight there comes from one
// downstream session.
func (f *flights) resolve(up *upstream.Upstream, method string) (*origin, error) {
	uf := f.lookup(up)
	uf.mu.Lock()
	defer uf.mu.Unlock()
	var oldest *origin
	sessions := map[any]bool{}
	for _, o := range uf.m {
		sessions[o.destination()] = true
		// A call that is ending cannot carry the request to its client.
		if o.ctx.Err() == nil && (oldest == nil || o.seq < oldest.seq) {
			oldest = o
		}
	}
	switch {
	case oldest == nil:
		return nil, &jsonrpc.Error{Code: codeUnroutable, Message: fmt.Sprintf(
			"manifold: cannot route %s from upstream %q: no client call is in flight on it", method, up.Name())}
	case len(sessions) > 1 || oldest.destination() == nil:
		return nil, &jsonrpc.Error{Code: codeUnroutable, Message: fmt.Sprintf(
			"manifold: cannot route %s from upstream %q: calls from %d client sessions are in flight on its shared session", method, up.Name(), len(sessions))}
	}
	return oldest, nil
}

// logLevelOrder ranks the MCP log levels, most verbose first.
var logLevelOrder = map[mcpx.LoggingLevel]int{
	"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7,
}

// setLogLevel records the level a legacy session asked for. Each shared
// pre-2026 upstream that logs is set to the most verbose level any open
// session asked for (the SDK filters what each session receives by its own
// level); the session's per-client upstream sessions get its level.
func (g *Gateway) setLogLevel(ctx context.Context, ss *mcp.ServerSession, who caller, level mcpx.LoggingLevel) {
	g.flights.levels.Store(ss, sessionLevel{level: level, who: who})
	g.watchSession(ss) // the level is forgotten when the session ends
	for _, d := range g.perClient.owned(ss) {
		g.applyLogLevel(ctx, ss, d.up)
	}
	most := mcpx.LoggingLevel("")
	g.flights.levels.Range(func(_, v any) bool {
		if l := v.(sessionLevel).level; most == "" || logLevelOrder[l] < logLevelOrder[most] {
			most = l
		}
		return true
	})
	for _, up := range g.pool.serving() {
		if up.SessionMode() == config.SessionPerClient {
			continue // its calls go to per-client sessions
		}
		g.setUpstreamLevel(ctx, up, most)
	}
}

// applyLogLevel sets up, a per-client upstream session of ss, to the level
// ss asked for, if any.
func (g *Gateway) applyLogLevel(ctx context.Context, ss *mcp.ServerSession, up *upstream.Upstream) {
	if v, ok := g.flights.levels.Load(ss); ok {
		g.setUpstreamLevel(ctx, up, v.(sessionLevel).level)
	}
}

// setUpstreamLevel sends logging/setLevel to up when it logs, speaks a
// protocol before 2026-07-28 (later ones take the level per request), and
// is not at that level already.
func (g *Gateway) setUpstreamLevel(ctx context.Context, up *upstream.Upstream, level mcpx.LoggingLevel) {
	cat := up.Catalog()
	if level == "" || cat == nil || mcpx.Stateless(cat.ProtocolVersion) || cat.Capabilities == nil || mcpx.Logging(cat.Capabilities) == nil {
		return
	}
	if prev, ok := g.flights.upLevels.Load(up); ok && prev == level {
		return
	}
	if err := up.SetLoggingLevel(ctx, level); err != nil {
		g.log.Warn("setting an upstream's log level", zap.String(keyServer, up.Name()), zap.Error(err))
		return
	}
	g.flights.upLevels.Store(up, level)
}

// relay implements upstream.Relay for the gateway.
type relay struct{ g *Gateway }

var _ upstream.Relay = relay{}

// link returns a context with down's values (the downstream request's
// stream), cancelled when up (the upstream's request) ends. It does not end
// with down: when a client has several calls in flight, the one whose
// stream carries the request may finish first, while the call that caused
// it still waits for the answer. A client's cancellation still reaches it:
// the upstream call is cancelled, which cancels the upstream's request.
func link(down, up context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(context.WithoutCancel(down))
	stop := context.AfterFunc(up, cancel)
	return c, func() { stop(); cancel() }
}

// resolve returns the origin of what from sends for method: the call in
// flight it belongs to (flights.resolve) or, for a per-client upstream
// session with no call in flight, its downstream session, outside any call.
func (r relay) resolve(from *upstream.Upstream, method string) (*origin, error) {
	o, err := r.g.flights.resolve(from, method)
	if err == nil {
		return o, nil
	}
	if d := r.g.perClient.dedicatedOf(from); d != nil && d.owner.ss != nil {
		// A background context: the SDK sends it on the session's own
		// stream (stdio, or the GET stream of streamable HTTP).
		return &origin{up: from, ss: d.owner.ss, ctx: r.g.life.Context(), caps: d.caps, version: d.version}, nil
	}
	return nil, err
}

// target resolves a server→client request of method and checks that its
// client can take it.
func (r relay) target(from *upstream.Upstream, method string, capable func(*mcp.ClientCapabilities) bool) (*origin, error) {
	o, err := r.resolve(from, method)
	if err != nil {
		r.g.log.Warn("server request refused", zap.String(keyServer, from.Name()), zap.String(keyName, method), zap.Error(err))
		return nil, err
	}
	caps, version := o.client()
	if caps == nil || !capable(caps) {
		return nil, &jsonrpc.Error{Code: codeMissingCapability, Message: fmt.Sprintf(
			"manifold: the client of this call does not support %s", method)}
	}
	if mcpx.Stateless(version) {
		// A 2026-07-28 session cannot receive server requests: only a call
		// the bridge runs can ask, with input_required (bridge.go).
		if err := r.bridgeable(from, o, method, version); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func (r relay) CreateMessage(ctx context.Context, from *upstream.Upstream, p *mcpx.CreateMessageWithToolsParams) (*mcpx.CreateMessageWithToolsResult, error) {
	o, err := r.target(from, "sampling/createMessage", func(c *mcp.ClientCapabilities) bool {
		return mcpx.Sampling(c) != nil && (len(p.Tools) == 0 || mcpx.Sampling(c).Tools != nil)
	})
	if err != nil {
		return nil, err
	}
	if bc := bridgedOf(o); bc != nil {
		return bc.createMessage(ctx, p)
	}
	dctx, stop := link(o.ctx, ctx)
	defer stop()
	if o.sink != nil {
		return o.sink.createMessage(dctx, p)
	}
	return mcpx.CreateMessageWithTools(dctx, o.ss, p)
}

func (r relay) Elicit(ctx context.Context, from *upstream.Upstream, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	o, err := r.target(from, "elicitation/create", func(c *mcp.ClientCapabilities) bool {
		return elicitable(c.Elicitation, p)
	})
	if err != nil {
		return nil, err
	}
	if bc := bridgedOf(o); bc != nil {
		return bc.elicit(ctx, p)
	}
	r.rememberURLElicitation(from, p, o)
	dctx, stop := link(o.ctx, ctx)
	defer stop()
	return o.ss.Elicit(dctx, p)
}

func (r relay) ListRoots(ctx context.Context, from *upstream.Upstream, p *mcpx.ListRootsParams) (*mcpx.ListRootsResult, error) {
	o, err := r.target(from, "roots/list", func(c *mcp.ClientCapabilities) bool {
		return mcpx.RootsV2(c) != nil || mcpx.RootsListChanged(c)
	})
	if err != nil {
		return nil, err
	}
	if p == nil {
		p = &mcpx.ListRootsParams{}
	}
	if bc := bridgedOf(o); bc != nil {
		return bc.listRoots(ctx, p)
	}
	dctx, stop := link(o.ctx, ctx)
	defer stop()
	if o.sink != nil {
		return o.sink.listRoots(dctx, p)
	}
	return mcpx.ListRoots(dctx, o.ss, p)
}

// Progress forwards a progress notification to the call it belongs to, with
// the client's own token, unless the call has ended or the token is not
// one the gateway gave this upstream.
func (r relay) Progress(from *upstream.Upstream, p *mcp.ProgressNotificationParams) {
	tok, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := r.g.flights.byTok.Load(tok)
	if !ok {
		return
	}
	o := v.(*origin)
	if o.up != from || o.destination() == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return
	}
	fwd := *p
	if bc := bridgedOf(o); bc != nil {
		r.g.note(bc, heldNote{progress: &fwd}) // to the round serving it (bridgenotes.go)
		return
	}
	fwd.ProgressToken = o.progress
	// Never hold up the upstream's notification queue for long on a slow client.
	var err error
	if o.sink != nil {
		err = o.sink.notify("notifications/progress", &fwd)
	} else {
		err = o.ss.NotifyProgress(o.ctx, &fwd)
	}
	if err != nil {
		r.g.log.Debug("progress not delivered", zap.String(keyServer, from.Name()), zap.Error(err))
	}
}

// destination is whom what belongs to o goes to: its client's session,
// else (a call without one) its HTTP response (sink); nil when neither (no
// relay possible). Calls of one session, on either path, have one
// destination: a server request may go to any of them (flights.resolve).
func (o *origin) destination() any {
	if o.ss != nil {
		return o.ss
	}
	if o.sink != nil {
		return o.sink
	}
	return nil
}

// Log forwards a log message of an upstream, tagged with the server name:
// to the session of the call in flight it belongs to; outside any call, to
// a per-client upstream session's own session, and from a shared upstream
// to every session that asked for logs (logging/setLevel) and whose
// principal may see the server. A message that cannot be tied to one
// session while calls of several are in flight is dropped, never crossed.
func (r relay) Log(from *upstream.Upstream, p *mcpx.LoggingMessageParams) {
	fwd := *p
	fwd.Logger = from.Name()
	if p.Logger != "" {
		fwd.Logger += "/" + p.Logger
	}
	o, err := r.resolve(from, "notifications/message")
	if err == nil {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.done {
			return
		}
		if bc := bridgedOf(o); bc != nil {
			r.g.note(bc, heldNote{log: &fwd}) // to the round serving it (bridgenotes.go)
			return
		}
		if o.sink != nil {
			err = o.sink.notify("notifications/message", &fwd)
		} else {
			err = mcpx.Log(o.ctx, o.ss, &fwd)
		}
		if err != nil {
			r.g.log.Debug("log message not delivered", zap.String(keyServer, from.Name()), zap.Error(err))
		}
		return
	}
	if r.g.flights.busy(from) || r.g.perClient.dedicatedOf(from) != nil {
		return
	}
	// Bounded: this runs on the upstream's notification queue.
	ctx, cancel := context.WithTimeout(r.g.life.Context(), notifyTimeout)
	defer cancel()
	r.g.flights.levels.Range(func(k, v any) bool {
		if pr, _ := v.(sessionLevel).who.principal(r.g.current().access); r.g.sees(pr, from.Name()) {
			_ = mcpx.Log(ctx, k.(*mcp.ServerSession), &fwd)
		}
		return true
	})
}
