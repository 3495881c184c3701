package gateway

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/authn"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// Per-client upstream sessions (`session: per-client`; docs/architecture.md,
// Sessions: upstream sessions; Decisions: exact routing of server→client requests).
//
// A per-client server has one upstream in the pool, connected with the
// gateway's relay capabilities, which supplies its catalog (tools, prompts,
// resources and their list_changed). Calls never use it: each downstream
// session gets its own upstream session of that server, opened lazily on
// its first call, declaring that client's capabilities, and closed when the
// downstream session ends. Everything that upstream session sends toward a
// client therefore has exactly one destination, in a call or outside one.
//
// 2026-07-28 clients have no session: they share one upstream session per
// principal, closed after gateway.limits.sessionIdleTimeout without calls.

// owner is who a dedicated upstream session serves: a downstream session,
// or a principal of sessionless 2026-07-28 clients.
type owner struct {
	ss        *mcp.ServerSession
	principal string
}

// dedicated is one per-client upstream session.
type dedicated struct {
	owner owner
	base  *upstream.Upstream // the pool's upstream of the server
	up    *upstream.Upstream
	// caps and version are the client's, for relaying outside any call.
	caps    *mcp.ClientCapabilities
	version string
	used    atomic.Int64 // unix nanoseconds of the last call
	// principal is the name of the principal it serves, for a per-user
	// credential (upcreds.go); exchange is that credential when the server
	// exchanges tokens.
	principal string
	exchange  *exchangeCredential
}

// perClient is the registry of dedicated upstream sessions. Calls and
// relayed messages read it without a lock (sync.Map); opening, forgetting
// and the bookkeeping below take mu.
type perClient struct {
	byKey sync.Map // dedicatedKey → *dedicated
	byUp  sync.Map // its *upstream.Upstream → *dedicated

	mu sync.Mutex
	// watched are the downstream sessions whose end is awaited.
	watched map[*mcp.ServerSession]bool
	reaping bool // the idle reaper of principal-owned sessions runs
}

// dedicatedKey names a dedicated session: its owner and its server's pool
// upstream.
type dedicatedKey struct {
	owner owner
	base  *upstream.Upstream
}

// get returns o's dedicated session of base's server, or nil.
func (p *perClient) get(o owner, base *upstream.Upstream) *dedicated {
	if v, ok := p.byKey.Load(dedicatedKey{o, base}); ok {
		return v.(*dedicated)
	}
	return nil
}

// dedicatedOf returns the record of a dedicated upstream, or nil for a
// pool upstream.
func (p *perClient) dedicatedOf(up *upstream.Upstream) *dedicated {
	if v, ok := p.byUp.Load(up); ok {
		return v.(*dedicated)
	}
	return nil
}

// find returns ss's dedicated session of base's server, or nil.
func (p *perClient) find(ss *mcp.ServerSession, base *upstream.Upstream) *dedicated {
	return p.get(owner{ss: ss}, base)
}

// list returns the dedicated sessions that keep reports true for.
func (p *perClient) list(keep func(*dedicated) bool) []*dedicated {
	var out []*dedicated
	p.byUp.Range(func(_, v any) bool {
		if d := v.(*dedicated); keep(d) {
			out = append(out, d)
		}
		return true
	})
	return out
}

// owned returns the dedicated sessions of ss.
func (p *perClient) owned(ss *mcp.ServerSession) []*dedicated {
	return p.list(func(d *dedicated) bool { return d.owner.ss == ss })
}

// countByBase returns the number of dedicated upstream sessions open, by
// pool upstream.
func (p *perClient) countByBase() map[*upstream.Upstream]int {
	n := map[*upstream.Upstream]int{}
	for _, d := range p.list(func(*dedicated) bool { return true }) {
		n[d.base]++
	}
	return n
}

// relayCapabilities returns what the gateway declares to the shared
// upstream of s: the capabilities it can relay, as s.Relay allows. Roots
// carry no listChanged: a shared upstream serves many clients, whose roots
// differ.
func relayCapabilities(s config.Server) *mcp.ClientCapabilities {
	caps := &mcp.ClientCapabilities{}
	if s.Relays(config.RelaySampling) {
		mcpx.SetSampling(caps, &mcpx.SamplingCapabilities{Tools: &mcpx.SamplingToolsCapabilities{}})
	}
	if s.Relays(config.RelayElicitation) {
		caps.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}
	}
	if s.Relays(config.RelayRoots) {
		mcpx.SetRootsV2(caps, &mcpx.RootCapabilities{})
	}
	return caps
}

// clientRelayCapabilities returns the capabilities a dedicated upstream
// session declares for a client that declared caps: those the gateway
// relays (sampling, elicitation, roots), exactly as the client declared
// them.
func clientRelayCapabilities(caps *mcp.ClientCapabilities) *mcp.ClientCapabilities {
	out := &mcp.ClientCapabilities{}
	if caps == nil {
		return out
	}
	mcpx.SetSampling(out, mcpx.Sampling(caps))
	out.Elicitation = caps.Elicitation
	switch {
	case mcpx.RootsV2(caps) != nil:
		r := *mcpx.RootsV2(caps)
		mcpx.SetRootsV2(out, &r)
	case mcpx.RootsListChanged(caps):
		mcpx.SetRootsV2(out, &mcpx.RootCapabilities{ListChanged: true})
	}
	return out
}

// upstreamSession is the upstream session stage of the call pipeline
// (pipeline.go): the call's route gets the upstream that serves it, the
// pool's for a shared server, the caller's dedicated session for a
// per-client one (opened on first use). from is the caller's downstream
// side, read only for a per-client server.
func (g *Gateway) upstreamSession(ctx context.Context, c *call, from downstream) error {
	if c.route.up.SessionMode() != config.SessionPerClient {
		return nil
	}
	d, err := g.dedicatedFor(ctx, c.principal, c.known, from, c.route.up)
	if err != nil {
		return err
	}
	c.route.up = d.up
	return nil
}

// downstream is the client side of a call, as the upstream session stage
// needs it: the SDK path's typed request, read only when needed (for a
// 2026-07-28 client its capabilities are decoded from _meta), or what the
// raw path knows of its session.
type downstream struct {
	req     callerRequest // nil on the raw path
	ss      *mcp.ServerSession
	caps    *mcp.ClientCapabilities
	version string
}

// fromRequest is the downstream side of req.
func fromRequest(req callerRequest) downstream {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	return downstream{req: req, ss: ss}
}

// client returns the client's capabilities and protocol version.
func (d downstream) client() (*mcp.ClientCapabilities, string) {
	if d.req != nil {
		return d.req.ClientCapabilities(), d.req.ProtocolVersion()
	}
	return d.caps, d.version
}

// upstreamFor returns the route rt with the upstream that serves req, as
// upstreamSession does, under the snapshot serving now: for requests
// outside the call pipeline (resources/subscribe).
func (g *Gateway) upstreamFor(ctx context.Context, req mcp.Request, rt route) (route, error) {
	if rt.up.SessionMode() != config.SessionPerClient {
		return rt, nil
	}
	pr, known := principal(ctx, g.current().access, req)
	var from downstream
	if cr, ok := req.(callerRequest); ok {
		from = fromRequest(cr)
	} else if from.ss, _ = req.GetSession().(*mcp.ServerSession); from.ss != nil {
		if ip := from.ss.InitializeParams(); ip != nil {
			// A 2026-07-28 listen stream's subscription: its principal's session.
			from.caps, from.version = ip.Capabilities, ip.ProtocolVersion
		}
	}
	d, err := g.dedicatedFor(ctx, pr, known, from, rt.up)
	if err != nil {
		return route{}, err
	}
	rt.up = d.up
	return rt, nil
}

// dedicatedFor returns the dedicated session of base's server of the
// client from, opening it when there is none. pr is the caller's
// principal (known: it has one), which owns the sessions of 2026-07-28
// clients.
func (g *Gateway) dedicatedFor(ctx context.Context, pr *policy.Principal, known bool, from downstream, base *upstream.Upstream) (*dedicated, error) {
	caps, version := from.client()
	var o owner
	ss := from.ss
	if mcpx.Stateless(version) || ss == nil {
		if !known {
			return nil, &jsonrpc.Error{Code: codeUnroutable, Message: "manifold: no principal for a per-client upstream session"}
		}
		o.principal = pr.Key()
	} else {
		o.ss = ss
	}

	p := &g.perClient
	d := p.get(o, base)
	if d != nil {
		d.used.Store(time.Now().UnixNano())
		// The reaper forgets only what it saw unused: if it took d before
		// this call marked it, d is gone from the registry now.
		if p.get(o, base) != d {
			d = nil
		}
	}
	opened := false
	if d == nil {
		var err error
		var id *authn.Identity
		if base.Config().Auth.PerPrincipal() {
			id = g.callerIdentity(ctx, from)
		}
		if d, opened, err = g.openDedicated(o, base, caps, version, pr.Name(), id); err != nil {
			return nil, err
		}
	} else if d.exchange != nil {
		d.exchange.setSubject(g.callerIdentity(ctx, from)) // the caller's latest JWT
	}
	if _, err := d.waitReady(ctx); err != nil {
		if ctx.Err() == nil {
			// Its first connection failed: the next call tries afresh. (A
			// caller that gave up leaves it to the others waiting.)
			g.closeDedicated([]*dedicated{d})
		}
		return nil, err
	}
	if opened && o.ss != nil {
		g.applyLogLevel(ctx, o.ss, d.up) // before the first call
	}
	return d, nil
}

// openDedicated returns o's dedicated session of base's server, opening
// and starting it when there is none; base must be in service.
//
// principal names the principal it serves and id is the caller's identity,
// whose JWT a token-exchange server's credential exchanges (nil: none).
func (g *Gateway) openDedicated(o owner, base *upstream.Upstream, caps *mcp.ClientCapabilities, version, principal string, id *authn.Identity) (_ *dedicated, opened bool, _ error) {
	// Under g.pool.mu (then p.mu, always in that order): a reload that
	// takes base out of service, or Close, cannot miss the new session.
	g.pool.mu.Lock()
	defer g.pool.mu.Unlock()
	if !g.life.Running() {
		return nil, false, fmt.Errorf("upstream %q: %w", base.Name(), upstream.ErrClosed)
	}
	if m := g.pool.members[base.Name()]; m == nil || m.up != base {
		return nil, false, fmt.Errorf("upstream %q: %w (replaced; retry)", base.Name(), upstream.ErrUnavailable)
	}
	p := &g.perClient
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := p.get(o, base); d != nil {
		d.used.Store(time.Now().UnixNano())
		return d, false, nil // another call opened it meanwhile
	}
	d := &dedicated{owner: o, base: base, version: version, caps: caps, principal: principal}
	d.used.Store(time.Now().UnixNano())
	opts := g.upstreamOptions(base.Config(), &g.current().cfg.Gateway)
	if s := base.Config(); s.Auth.Enabled() {
		opts.Credential = g.dedicatedCredential(s, principal)
		if d.exchange, _ = opts.Credential.(*exchangeCredential); d.exchange != nil {
			d.exchange.setSubject(id)
		}
	}
	opts.Standby = "" // its own credential connects it
	opts.Capabilities = clientRelayCapabilities(caps)
	opts.OnChange = nil // its lists are the pool upstream's
	opts.NoLists = true
	if base.Config().ListsMode() == config.ListsPerClient {
		opts.NoLists, opts.OnChange = false, g.sessionListsChanged // its client's own lists
	}
	opts.Logger = opts.Logger.With(zap.String(keySession, config.SessionPerClient))
	d.up = upstream.New(base.Config(), opts)
	p.byUp.Store(d.up, d)
	p.byKey.Store(dedicatedKey{o, base}, d)
	d.up.Start(g.life.Context())
	if o.ss != nil {
		g.watchSessionLocked(o.ss)
	} else if !p.reaping {
		p.reaping = g.life.Go(g.reapIdle)
	}
	g.log.Debug("per-client upstream session opened", zap.String(keyServer, base.Name()))
	return d, true, nil
}

// waitReady waits for d's first connection attempt, and returns d when it
// is ready.
func (d *dedicated) waitReady(ctx context.Context) (*dedicated, error) {
	select {
	case <-d.up.Attempted():
	case <-ctx.Done():
		return d, ctx.Err()
	}
	if s := d.up.Status(); s.State != upstream.StateReady {
		return d, fmt.Errorf("upstream %q: %w: no session for this client (%s)", d.up.Name(), upstream.ErrUnavailable, s.Error)
	}
	return d, nil
}

// watchSession releases what a downstream session holds when it ends: its
// dedicated upstream sessions, resource subscriptions, log level and its
// entry of requests in flight. The SDK has no hook for it: a goroutine of
// the gateway waits for the end (awaitSessionEnd); before Start and once
// Close has begun there is none, and a later request of the session tries
// again.
func (g *Gateway) watchSession(ss *mcp.ServerSession) {
	g.perClient.mu.Lock()
	defer g.perClient.mu.Unlock()
	g.watchSessionLocked(ss)
}

// watchSessionLocked is watchSession with g.perClient.mu held.
func (g *Gateway) watchSessionLocked(ss *mcp.ServerSession) {
	p := &g.perClient
	if p.watched == nil {
		p.watched = map[*mcp.ServerSession]bool{}
	}
	if p.watched[ss] {
		return
	}
	if g.awaitSessionEnd(ss, func() { g.sessionEnded(ss) }) {
		p.watched[ss] = true
	}
}

// awaitSessionEnd runs f in a goroutine of the gateway once ss has ended,
// and reports true; Close ends ss, cancelling its calls in flight first
// (the SDK's close waits for them), so that the goroutine ends too. It
// reports false, and f never runs, while the gateway does not run.
func (g *Gateway) awaitSessionEnd(ss *mcp.ServerSession, f func()) bool {
	return g.life.Go(func(ctx context.Context) {
		stop := context.AfterFunc(ctx, func() { g.closeSession(ss, errShuttingDown) })
		defer stop()
		_ = ss.Wait() // how it ended does not matter here
		f()
	})
}

// sessionEnded releases what ss held, once.
func (g *Gateway) sessionEnded(ss *mcp.ServerSession) {
	p := &g.perClient
	p.mu.Lock()
	watched := p.watched[ss]
	delete(p.watched, ss)
	p.mu.Unlock()
	if !watched {
		return // released already (closeStreamable, streamableClosed)
	}
	g.closeDedicated(p.owned(ss)) // first: their subscriptions end with them
	g.releaseSession(ss)
	g.flights.levels.Delete(ss)
	g.sessLists.Delete(ss)
	g.stopWaitingSignIn(ss)
	g.notes.sessions.Delete(ss)
	g.calls.forget(ss.ID())
	g.clients.ended(ss)
}

// closeDedicated forgets ds and stops their upstream sessions.
func (g *Gateway) closeDedicated(ds []*dedicated) {
	if len(ds) == 0 {
		return
	}
	g.perClient.mu.Lock()
	for _, d := range ds {
		g.perClient.forgetLocked(d)
	}
	g.perClient.mu.Unlock()
	g.stopDedicated(ds)
}

// forgetLocked removes d from the registry; p.mu is held.
func (p *perClient) forgetLocked(d *dedicated) {
	p.byKey.CompareAndDelete(dedicatedKey{d.owner, d.base}, d)
	p.byUp.Delete(d.up)
}

// stopDedicated stops the upstream sessions of ds, forgotten already, in
// parallel.
func (g *Gateway) stopDedicated(ds []*dedicated) {
	timeout := g.current().cfg.Gateway.Timeouts.Drain
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := d.up.Close(ctx); err != nil {
				g.log.Warn("stopping a per-client upstream session", zap.String(keyServer, d.up.Name()), zap.Error(err))
			}
			g.flights.forget(d.up)
			g.subs.forget(d.up)
		}()
	}
	wg.Wait()
}

// takeBase removes and returns the dedicated sessions of a pool
// upstream taken out of service; the caller drains them.
func (p *perClient) takeBase(base *upstream.Upstream) []*dedicated {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.list(func(d *dedicated) bool { return d.base == base })
	for _, d := range out {
		p.forgetLocked(d)
	}
	return out
}

// all removes and returns every dedicated session (Close).
func (p *perClient) all() []*upstream.Upstream {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*upstream.Upstream
	for _, d := range p.list(func(*dedicated) bool { return true }) {
		p.forgetLocked(d)
		out = append(out, d.up)
	}
	return out
}

// reapIdle closes the principal-owned dedicated sessions (2026-07-28
// clients) that had no call for gateway.limits.sessionIdleTimeout and have
// none in flight, until ctx is done.
func (g *Gateway) reapIdle(ctx context.Context) {
	for {
		idle := g.current().cfg.Gateway.Limits.SessionIdleTimeout
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(max(idle/4, time.Second), time.Minute)):
		}
		cutoff := time.Now().Add(-idle).UnixNano()
		p := &g.perClient
		p.mu.Lock()
		gone := p.list(func(d *dedicated) bool {
			return d.owner.ss == nil && d.used.Load() < cutoff && d.up.InFlight() == 0
		})
		// Forgotten first, then looked at again: a call marks used and
		// then checks that its session is still registered
		// (dedicatedFor), so one that marked it before this second look
		// keeps it, and one after opens a new session.
		stop := gone[:0]
		for _, d := range gone {
			p.forgetLocked(d)
			if d.used.Load() >= cutoff {
				p.byUp.Store(d.up, d)
				p.byKey.Store(dedicatedKey{d.owner, d.base}, d)
				continue
			}
			stop = append(stop, d)
		}
		p.mu.Unlock()
		g.stopDedicated(stop)
		for _, d := range stop {
			g.forgetPrincipal(d.owner.principal) // its lists (principallists.go)
		}
	}
}

// rootsChanged is the SDK's RootsListChangedHandler: a client's new roots
// are announced to its dedicated upstream sessions, which list them again.
// A shared upstream is not told: it would ask outside any call, and the
// gateway could not tell whose roots it wants.
func (g *Gateway) rootsChanged(_ context.Context, req *mcp.RootsListChangedRequest) {
	for _, d := range g.perClient.owned(req.Session) {
		d.up.NotifyRootsListChanged()
	}
}
