package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manifold-mcp/manifold/internal/authn"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// The downstream sessions HTTP clients hold (streamable HTTP sessions and
// legacy SSE streams), by principal: what gateway.limits.maxSessions and
// maxSessionsPerPrincipal count, and the credential each session was
// opened with, which a reload checks again (revokeClients).
//
// For streamable HTTP the registry is the session table itself
// (docs/architecture.md, Sessions): the gateway opens each session from the
// SDK's exported pieces (streamable.go) and finds it again by its
// Mcp-Session-Id (byID) on every request, whichever path serves it; the
// requests of a session move its used and busy, and the gateway ends it
// when it idles (idle.go). A legacy SSE session is registered by the GET
// that opens it, before the SDK creates it, and found again through that
// request's context: the SDK runs every message of the session in a
// context derived from it (trackClient). Stateless (2026-07-28) requests
// hold no session and are not counted; neither is the single stdio
// session.

// Session kinds, for logs.
const (
	kindStreamable = "streamable"
	kindSSE        = "sse"
)

// client is one downstream session an HTTP client holds: the gateway's
// session record.
type client struct {
	owner string          // sessionOwner of id; "local" while auth is off
	id    *authn.Identity // what it was opened with; nil while auth is off
	kind  string
	// toolset is the toolset it was opened on ("": the whole catalog);
	// its requests must come to that toolset's endpoint (toolsets.go).
	toolset string
	// cancel ends an SSE stream (the GET that carries it); nil for
	// streamable sessions, which end by closing ss.
	cancel context.CancelFunc

	// sid and transport are a streamable session's, set before it is in
	// byID; every request of the session is served by transport.
	sid       string
	transport *mcp.StreamableServerTransport

	// ss is set once the SDK session exists: for a streamable session
	// before its id is in byID, for an SSE one at its first message.
	ss atomic.Pointer[mcp.ServerSession]
	// used is when a request of it last started or ended (unix ns).
	used atomic.Int64
	// busy counts its requests in flight: one per request, streamUnit per
	// open GET stream, and one for the request opening it. It is set to
	// ending when the session is chosen to end, so that a session counted
	// idle cannot have begun a request since, and a request that finds it
	// so is refused (begin).
	busy  atomic.Int64
	ended atomic.Bool
	// ids are a streamable session's request ids in flight (streamableraw.go).
	ids sessionIDs
}

// streamUnit is what an open GET stream adds to busy: a session whose
// only requests in flight are streams is idle enough to be ended to make
// room for another (idlest), not to time out (takeIdle).
const streamUnit = 1 << 32

// begin counts a request of cl in flight (unit: 1, or streamUnit for a GET
// stream) from its start, and reports true; false when cl is being ended,
// and the request must not be served. Each begin that reports true is
// matched by one end with the same unit.
func (cl *client) begin(unit int64) bool {
	if cl.busy.Add(unit) < 0 {
		cl.busy.Add(-unit)
		return false
	}
	cl.used.Store(time.Now().UnixNano())
	return true
}

// end counts the end of a request begun with begin(unit). The session's
// last use is stored before busy drops, so that one seen not busy has its
// last use up to date (takeIdle).
func (cl *client) end(unit int64) {
	cl.used.Store(time.Now().UnixNano())
	cl.busy.Add(-unit)
}

// protocolVersion is the protocol version the streamable session
// negotiated in its initialize, as the SDK does: the client's when the
// gateway speaks it, else the newest the gateway speaks with sessions; ""
// before initialize.
func (cl *client) protocolVersion() string {
	ss := cl.ss.Load()
	if ss == nil {
		return ""
	}
	p := ss.InitializeParams()
	if p == nil {
		return ""
	}
	if sessionVersions[p.ProtocolVersion] {
		return p.ProtocolVersion
	}
	return latestSessionVersion
}

// ending marks a client in busy that the gateway is ending.
const ending = math.MinInt64 / 2

// clientKey is the context key of the *client a session-opening request
// registered.
type clientKey struct{}

// clients is the registry of downstream HTTP sessions. Opening, ending and
// counting take mu (once per session, never per message); the requests of
// a session find their client without a lock, by session id (byID) or
// through their context (SSE).
type clients struct {
	mu      sync.Mutex
	byOwner map[string]map[*client]struct{}
	n       int
	// byID is the streamable session table: Mcp-Session-Id → *client,
	// written once when a session opens and once when it ends, read by
	// every request.
	byID sync.Map
	// bySession finds the client of a session when it ends (written once
	// per session).
	bySession sync.Map // *mcp.ServerSession → *client
	// wake makes sweepIdle look again at once (a reload changed the idle
	// timeout); buffered 1.
	wake chan struct{}
}

// errSessionLimit is wrapped by the refusals of admit.
var errSessionLimit = errors.New("too many sessions")

// admit registers cl, a session its owner opens, within the limits of e. At
// owner's own limit (while auth is on: without, every client is the local
// principal, and only the gateway's limit applies) it ends owner's session
// idle the longest; at the
// gateway's limit, an idle session of the principal holding the most
// sessions, when it holds more than owner. The ended session is returned
// for the caller to close, outside the lock. With nothing idle to end, it
// refuses with an error wrapping errSessionLimit that names the limit.
func (c *clients) admit(e *edge, cl *client) (evicted *client, err error) {
	owner, id := cl.owner, cl.id
	perOwner := e.maxPerOwner
	if perOwner <= 0 || id == nil {
		perOwner = math.MaxInt
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byOwner == nil {
		c.byOwner = map[string]map[*client]struct{}{}
	}
	mine := c.byOwner[owner]
	switch {
	case len(mine) >= perOwner:
		if evicted = idlest(mine); evicted == nil {
			return nil, fmt.Errorf("%w: principal %q holds %d, as many as one principal may, and none is idle (gateway.limits.maxSessionsPerPrincipal)", errSessionLimit, ownerName(id), len(mine))
		}
	case c.n >= e.maxSessions:
		var most map[*client]struct{}
		for o, set := range c.byOwner {
			if o != owner && len(set) > len(mine) && len(set) > len(most) {
				most = set
			}
		}
		if evicted = idlest(most); evicted == nil {
			return nil, fmt.Errorf("%w: the gateway serves at most %d (gateway.limits.maxSessions)", errSessionLimit, e.maxSessions)
		}
	}
	if evicted != nil {
		c.removeLocked(evicted)
	}
	cl.used.Store(time.Now().UnixNano())
	if mine == nil {
		mine = map[*client]struct{}{}
		c.byOwner[owner] = mine
	}
	mine[cl] = struct{}{}
	c.n++
	return evicted, nil
}

// idlest returns the client of set idle the longest, with no request in
// flight but GET streams, marked ending; nil when none is idle. c.mu is
// held.
func idlest(set map[*client]struct{}) *client {
	// A request of the one found may begin before it is marked: then look
	// again, a few times at most (requests keep beginning: nothing is idle).
	for range 3 {
		var best *client
		var busy int64
		for cl := range set {
			// Open GET streams do not make a session busy here.
			if b := cl.busy.Load(); b >= 0 && b%streamUnit == 0 && (best == nil || cl.used.Load() < best.used.Load()) {
				best, busy = cl, b
			}
		}
		if best == nil || best.busy.CompareAndSwap(busy, ending) {
			return best
		}
	}
	return nil
}

// ownerName is the principal's name in messages.
func ownerName(id *authn.Identity) string {
	if id == nil {
		return "local"
	}
	return id.Principal.Name()
}

// removeLocked forgets cl; c.mu is held. It reports whether cl was
// registered.
func (c *clients) removeLocked(cl *client) bool {
	set := c.byOwner[cl.owner]
	if _, ok := set[cl]; !ok {
		return false
	}
	delete(set, cl)
	if len(set) == 0 {
		delete(c.byOwner, cl.owner)
	}
	c.n--
	if cl.sid != "" {
		c.byID.CompareAndDelete(cl.sid, cl) // its next request gets 404
	}
	return true
}

// remove forgets cl, if it is registered.
func (c *clients) remove(cl *client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(cl)
}

// ended forgets the client of ss, a session that ended.
func (c *clients) ended(ss *mcp.ServerSession) {
	if v, ok := c.bySession.LoadAndDelete(ss); ok {
		c.remove(v.(*client))
	}
}

// count returns the number of sessions registered, and of owner's.
func (c *clients) count(owner string) (all, owners int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, len(c.byOwner[owner])
}

// openClient registers the session that r opens (a POST /mcp without a
// session, or a GET /sse), ending another first when a limit requires it.
// It answers 503 itself when no session may open. cancel is the SSE
// stream's, nil for streamable HTTP; sid is the streamable session's id,
// whose opening request counts as busy until settleOpened.
func (g *Gateway) openClient(w http.ResponseWriter, r *http.Request, kind string, cancel context.CancelFunc, sid string) (*client, bool) {
	id, _ := r.Context().Value(identityCtxKey{}).(*authn.Identity)
	cl := &client{owner: "local", id: id, kind: kind, cancel: cancel, sid: sid, toolset: toolsetName(r.Context())}
	if id != nil {
		cl.owner = sessionOwner(id)
	}
	if sid != "" {
		cl.transport = &mcp.StreamableServerTransport{SessionID: sid}
		cl.busy.Store(1) // its opening request, until settleOpened
	}
	evicted, err := g.clients.admit(g.current().edge, cl)
	if err != nil {
		g.log.Warn("session refused", zap.String(keyPrincipal, ownerName(id)), zap.Error(err))
		w.Header().Set("Retry-After", "5")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return nil, false
	}
	if evicted != nil {
		g.log.Debug("idle session ended to make room for a new one",
			zap.String(keyPrincipal, ownerName(evicted.id)), zap.String(keyKind, evicted.kind))
		g.endClient(evicted, errSessionEvicted)
	}
	return cl, true
}

// settleOpened is called when the request that opened cl's streamable
// session has been answered: without a session (none was made), cl is
// forgotten; a session that did not initialize, or was ended meanwhile, is
// ended now.
func (g *Gateway) settleOpened(cl *client) {
	cl.end(1)
	ss := cl.ss.Load()
	switch {
	case ss == nil:
		g.clients.remove(cl)
	case cl.ended.Load():
		g.closeSession(ss, errSessionEnded)
	case ss.InitializeParams() == nil:
		// As the SDK does: a session whose initialize failed is no session.
		g.clients.remove(cl)
		g.endClient(cl, errNotInitialized)
	default:
		if ce := g.log.Check(zap.DebugLevel, "session opened"); ce != nil {
			ce.Write(zap.String(keyPrincipal, ownerName(cl.id)), zap.String(keyVersion, cl.protocolVersion()))
		}
	}
}

// Causes of the cancellation of the requests of a session the gateway ends.
var (
	errSessionEvicted = errors.New("manifold: the session was ended to make room for a new one")
	errSessionEnded   = errors.New("manifold: the credential of the session no longer authenticates")
	errShuttingDown   = errors.New("manifold: the gateway is shutting down")
	errSessionIdle    = errors.New("manifold: the session was idle for gateway.limits.sessionIdleTimeout")
	errNotInitialized = errors.New("manifold: the session did not initialize")
)

// endClient ends cl's session, which is no longer registered: an SSE
// stream by ending its GET, a streamable session by closing it (its next
// request gets 404: it is gone from byID). A streamable session whose SDK
// session is not made yet is closed by settleOpened.
func (g *Gateway) endClient(cl *client, cause error) {
	cl.ended.Store(true)
	if cl.cancel != nil {
		cl.cancel()
		return
	}
	if ss := cl.ss.Load(); ss != nil {
		g.closeSession(ss, cause)
	}
}

// closeSession closes a streamable session, cancelling its requests in
// flight first: the SDK's Close waits for them (sessioncalls.go), and
// the gateway for those of the raw path (within the drain timeout).
func (g *Gateway) closeSession(ss *mcp.ServerSession, cause error) {
	g.calls.cancelID(ss.ID(), cause)
	if v, ok := g.clients.bySession.Load(ss); ok {
		v.(*client).ids.waitRaw(g.current().cfg.Gateway.Timeouts.Drain)
	}
	if err := ss.Close(); err != nil {
		g.log.Debug("closing a session", zap.Error(err))
	}
}

// trackClient is receiving middleware for legacy SSE sessions, whose
// messages carry the client in their context: it links the session to the
// client that opened it on the session's first message, and keeps the
// client's messages in flight and last use, which tell which sessions are
// idle. (Streamable sessions are linked when they open and counted per
// HTTP request: streamable.go.)
func (g *Gateway) trackClient(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		cl, ok := ctx.Value(clientKey{}).(*client)
		if !ok {
			return next(ctx, method, req)
		}
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && cl.ss.Load() == nil && cl.ss.CompareAndSwap(nil, ss) {
			g.clients.bySession.Store(ss, cl)
			g.watchSession(ss) // sessionEnded forgets cl
		}
		cl.busy.Add(1)
		cl.used.Store(time.Now().UnixNano())
		defer func() {
			cl.used.Store(time.Now().UnixNano())
			cl.busy.Add(-1)
		}()
		return next(ctx, method, req)
	}
}

// revokeClients ends the sessions whose credential does not authenticate
// under a (a reload removed the key, changed the JWT settings, or turned
// auth on or off), or now names another principal. It returns how many.
func (g *Gateway) revokeClients(a *access) int {
	c := &g.clients
	c.mu.Lock()
	var gone []*client
	for _, set := range c.byOwner {
		for cl := range set {
			if !a.proves(cl.id) {
				gone = append(gone, cl)
			}
		}
	}
	for _, cl := range gone {
		c.removeLocked(cl)
	}
	c.mu.Unlock()
	for _, cl := range gone {
		g.endClient(cl, errSessionEnded)
	}
	return len(gone)
}

// proves reports whether a session opened with id (nil: while auth was
// off) may go on under a: its credential authenticates, as the same
// principal.
func (a *access) proves(id *authn.Identity) bool {
	if id == nil {
		return a.authn == nil
	}
	p, ok := a.authn.Resolve(id)
	return ok && p.Name() == id.Principal.Name()
}
