package gateway

import (
	"context"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/upstream"
	"go.uber.org/zap"
)

// pool holds the upstreams of the applied config, by server name. Reloads
// change it under mu, which guards the pool's own fields and nothing else;
// merging and status read the published list, sorted by name, with one
// atomic load. Whether the gateway runs is Gateway.life's to say: code that
// adds an upstream checks it under mu, so that Close, which takes mu after
// life has closed, finds every upstream started.
//
// A server whose spec changes is replaced make-before-break: the new
// upstream connects beside the old one, which keeps serving until the new
// one has finished its first attempt; then the new one is published and the
// old one drained (calls in flight finish, within gateway.timeouts.drain)
// and stopped. A removed server is drained and stopped the same way.
type pool struct {
	mu      sync.Mutex
	members map[string]*member
	// draining are upstreams taken out of service, until they have stopped.
	draining map[*upstream.Upstream]bool
	list     atomic.Pointer[[]*upstream.Upstream]
}

// member is one configured server.
type member struct {
	spec spec
	up   *upstream.Upstream // serving
	// next, while set, is up's replacement built from nextSpec, connecting.
	next     *upstream.Upstream
	nextSpec spec
}

// spec is everything an upstream is built from: the server's entry and the
// gateway settings its client uses. An upstream whose spec is unchanged by
// a reload keeps its process or connection, and its sessions.
type spec struct {
	server   config.Server
	settings upstreamSettings
}

// upstreamSettings are the gateway settings an upstream.Upstream is built
// with (see Gateway.newUpstream).
type upstreamSettings struct {
	connect, call, backoffInitial, backoffMax time.Duration
	maxConcurrentCalls                        int
	maxMessageBytes                           int64
}

func specOf(s config.Server, gw *config.Gateway) spec {
	s.Required = false                 // only readiness reads it: a change restarts nothing
	s.Tools, s.Prompts = nil, nil      // applied at merge (overrides.go): a change restarts nothing
	s.Pinning = config.ServerPinning{} // only merge reads it (pinning.go)
	return spec{server: s, settings: upstreamSettings{
		connect:            gw.Timeouts.Connect,
		call:               gw.Timeouts.Call,
		backoffInitial:     gw.Backoff.Initial,
		backoffMax:         gw.Backoff.Max,
		maxConcurrentCalls: gw.Limits.MaxConcurrentCalls,
		maxMessageBytes:    gw.Limits.MaxMessageBytes,
	}}
}

// equal compares specs; reloads are rare, so reflection is fine here.
func (s spec) equal(o spec) bool {
	return s.settings == o.settings && reflect.DeepEqual(s.server, o.server)
}

// serving returns the upstreams in service, sorted by name. The slice is
// shared: do not modify it.
func (p *pool) serving() []*upstream.Upstream {
	if l := p.list.Load(); l != nil {
		return *l
	}
	return nil
}

// publish makes the members' serving upstreams the list. Called with mu held.
func (p *pool) publish() {
	l := make([]*upstream.Upstream, 0, len(p.members))
	for _, m := range p.members {
		l = append(l, m.up)
	}
	sort.Slice(l, func(i, j int) bool { return l[i].Name() < l[j].Name() })
	p.list.Store(&l)
}

// all returns every upstream that may be running: serving, connecting as a
// replacement, or draining. Called with mu held.
func (p *pool) all() []*upstream.Upstream {
	var out []*upstream.Upstream
	for _, m := range p.members {
		out = append(out, m.up)
		if m.next != nil {
			out = append(out, m.next)
		}
	}
	for up := range p.draining {
		out = append(out, up)
	}
	return out
}

// poolChanges names the servers a reload added, removed and restarted.
type poolChanges struct {
	Added     []string `json:"added,omitempty"`
	Removed   []string `json:"removed,omitempty"`
	Restarted []string `json:"restarted,omitempty"`
}

func (c poolChanges) empty() bool {
	return len(c.Added)+len(c.Removed)+len(c.Restarted) == 0
}

// updatePool brings the pool to cfg's servers. Added servers start at once
// (failed-and-retrying when they cannot connect, as at startup); changed
// ones get a replacement; removed ones are drained. Called with g.pool.mu
// held, after Start and before Close.
func (g *Gateway) updatePool(cfg *config.Config) poolChanges {
	p := &g.pool
	var ch poolChanges
	want := map[string]spec{}
	servers := map[string]config.Server{}
	for _, s := range cfg.Enabled() {
		want[s.Name] = specOf(s, &cfg.Gateway)
		servers[s.Name] = s
	}
	for name, m := range p.members {
		sp, ok := want[name]
		if !ok {
			delete(p.members, name)
			g.drain(m.up)
			if m.next != nil {
				g.drain(m.next)
			}
			ch.Removed = append(ch.Removed, name)
			continue
		}
		becoming := m.spec
		if m.next != nil {
			becoming = m.nextSpec
		}
		switch {
		case becoming.equal(sp):
			// Unchanged, or already being replaced by this very spec.
		case m.next != nil && m.spec.equal(sp):
			// Changed back before the replacement was ready.
			g.drain(m.next)
			m.next = nil
			ch.Restarted = append(ch.Restarted, name)
		default:
			if m.next != nil {
				g.drain(m.next)
			}
			m.next, m.nextSpec = g.newUpstream(servers[name], &cfg.Gateway), sp
			m.next.Start(g.life.Context())
			g.promoteWhenReady(name, m.next)
			ch.Restarted = append(ch.Restarted, name)
		}
	}
	for name, sp := range want {
		if _, ok := p.members[name]; ok {
			continue
		}
		up := g.newUpstream(servers[name], &cfg.Gateway)
		up.Start(g.life.Context())
		p.members[name] = &member{spec: sp, up: up}
		ch.Added = append(ch.Added, name)
	}
	p.publish()
	sort.Strings(ch.Added)
	sort.Strings(ch.Removed)
	sort.Strings(ch.Restarted)
	return ch
}

// promoteWhenReady puts next in service in place of the member's current
// upstream once next has finished its first connect attempt, unless a
// later reload replaced or removed it meanwhile (and drains it). Called
// with g.pool.mu held, while the gateway runs (else Close stops next with
// the pool's others).
func (g *Gateway) promoteWhenReady(name string, next *upstream.Upstream) {
	wait := g.current().cfg.Gateway.Timeouts.Connect + time.Second
	g.life.Go(func(ctx context.Context) {
		waitFirstAttempts(ctx, []*upstream.Upstream{next}, wait)
		g.pool.mu.Lock()
		m := g.pool.members[name]
		if ctx.Err() != nil || m == nil || m.next != next {
			g.pool.mu.Unlock()
			return
		}
		old := m.up
		m.up, m.spec, m.next = next, m.nextSpec, nil
		g.pool.publish()
		g.pool.markDraining(old)
		g.pool.mu.Unlock()
		// New routes first, so that no new call picks the old upstream.
		g.merge()
		g.moveSubscriptions(ctx, old, next)
		g.moveClientSubscriptions(ctx, old, next)
		g.pool.mu.Lock()
		g.drain(old)
		g.pool.mu.Unlock()
		s := next.Status()
		g.log.Info("upstream replaced", zap.String(keyServer, name), zap.String(keyState, string(s.State)), zap.Int(keyPID, s.PID))
	})
}

// markDraining counts up among the draining upstreams. Called with mu held.
func (p *pool) markDraining(up *upstream.Upstream) {
	if p.draining == nil {
		p.draining = map[*upstream.Upstream]bool{}
	}
	p.draining[up] = true
}

// drainGrace is how long a drain lets pass before it first looks at the
// calls in flight: a call that looked its route up just before the swap
// reaches the upstream (and counts in its InFlight) within it. A single
// timer, not a poll: after it the drain waits for Upstream.Idle.
const drainGrace = 10 * time.Millisecond

// drain takes up out of service: it waits until up has no call in flight,
// at most gateway.timeouts.drain, then stops it. Called with g.pool.mu held,
// after up has left the published list.
func (g *Gateway) drain(up *upstream.Upstream) {
	// The per-client sessions of a server taken out of service go with it;
	// their clients' next calls open sessions of its replacement.
	for _, d := range g.perClient.takeBase(up) {
		g.drain(d.up)
	}
	g.pool.markDraining(up)
	timeout := g.current().cfg.Gateway.Timeouts.Drain
	// Refused once Close has begun: Close stops up with the others.
	g.life.Go(func(ctx context.Context) {
		g.awaitDrained(ctx, up, timeout)
		if ctx.Err() != nil {
			return // Close stops up with the others, within its own deadline
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		if err := up.Close(sctx); err != nil {
			g.log.Warn("stopping a drained upstream", zap.String(keyServer, up.Name()), zap.Error(err))
		}
		g.flights.forget(up)
		g.subs.forget(up)
		g.pool.mu.Lock()
		delete(g.pool.draining, up)
		g.pool.mu.Unlock()
	})
}

// awaitDrained returns once up has no call in flight (after drainGrace),
// when timeout has passed since the drain began, or when ctx is done.
func (g *Gateway) awaitDrained(ctx context.Context, up *upstream.Upstream, timeout time.Duration) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	grace := time.NewTimer(min(drainGrace, timeout))
	defer grace.Stop()
	idle := (<-chan struct{})(nil) // looked at once the grace has passed
	for {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			g.log.Warn("drain timeout: calls still in flight on a replaced upstream are cut",
				zap.String(keyServer, up.Name()), zap.Int("in_flight", up.InFlight()))
			return
		case <-grace.C:
			idle = up.Idle()
		case <-idle:
			return
		}
	}
}
