package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// subscriptions relays resources/subscribe: the gateway subscribes once per
// upstream and URI, however many sessions asked, and unsubscribes when the
// last one unsubscribes or ends. The SDK delivers resources/updated only to
// the sessions subscribed to the URI as they know it.
type subscriptions struct {
	mu   sync.Mutex
	refs map[subKey]map[*mcp.ServerSession]bool
	// who is the caller of each subscribed session's latest subscribe:
	// updates are checked against its principal under the config in force
	// when they arrive (updateVisible).
	who map[*mcp.ServerSession]caller
}

// subKey is one upstream subscription: the upstream and its own URI.
type subKey struct {
	up  *upstream.Upstream
	uri string
}

// subscribe is the SDK's SubscribeHandler. The interceptor has already
// refused URIs that route nowhere or that the principal may not read.
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	rt, ok := g.routesOf(ctx, req, false).resource(req.Params.URI)
	if !ok {
		return resourceNotFound(req, req.Params.URI)
	}
	rt, err := g.upstreamFor(ctx, req, rt)
	if err != nil {
		return upstreamError(err)
	}
	// The SDK does not unsubscribe a session that ends.
	g.watchSession(req.Session)
	s, key := &g.subs, subKey{rt.up, rt.original}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs == nil {
		s.refs = map[subKey]map[*mcp.ServerSession]bool{}
		s.who = map[*mcp.ServerSession]caller{}
	}
	s.who[req.Session] = callerOf(ctx, req)
	if len(s.refs[key]) == 0 {
		if err := rt.up.Subscribe(ctx, rt.original); err != nil {
			if upstreamNotFound(err, kindResource, rt.original) {
				return nil // acknowledged, as a denied URI is (notfound.go)
			}
			return upstreamError(err)
		}
		s.refs[key] = map[*mcp.ServerSession]bool{}
	}
	s.refs[key][req.Session] = true
	return nil
}

// unsubscribe is the SDK's UnsubscribeHandler.
func (g *Gateway) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	rt, ok := g.routesOf(ctx, req, false).resource(req.Params.URI)
	if !ok {
		return resourceNotFound(req, req.Params.URI)
	}
	if rt.up.SessionMode() == config.SessionPerClient {
		d := g.perClient.find(req.Session, rt.up)
		if d == nil {
			d = g.listenDedicated(ctx, req, rt.up) // a 2026-07-28 listen stream's (listenupdates.go)
		}
		if d == nil {
			return nil // nothing subscribed through it
		}
		rt.up = d.up
	}
	s, key := &g.subs, subKey{rt.up, rt.original}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.refs[key][req.Session] {
		return nil
	}
	delete(s.refs[key], req.Session)
	if len(s.refs[key]) == 0 {
		delete(s.refs, key)
		if err := rt.up.Unsubscribe(ctx, rt.original); err != nil {
			g.log.Debug("unsubscribing upstream", zap.String(keyServer, rt.up.Name()), zap.Error(err))
		}
	}
	return nil
}

// releaseSession drops the subscriptions of a session that ended, and the
// upstream subscriptions no session holds any more.
func (g *Gateway) releaseSession(ss *mcp.ServerSession) {
	s := &g.subs
	s.mu.Lock()
	delete(s.who, ss)
	var gone []subKey
	for key, sessions := range s.refs {
		if sessions[ss] {
			delete(sessions, ss)
			if len(sessions) == 0 {
				delete(s.refs, key)
				gone = append(gone, key)
			}
		}
	}
	s.mu.Unlock()
	for _, key := range gone {
		ctx, cancel := context.WithTimeout(context.Background(), g.current().cfg.Gateway.Timeouts.Call)
		if err := key.up.Unsubscribe(ctx, key.uri); err != nil {
			g.log.Debug("unsubscribing upstream", zap.String(keyServer, key.up.Name()), zap.Error(err))
		}
		cancel()
	}
}

// forget drops the subscriptions held through up, a dedicated upstream
// session being closed: they end with it.
func (s *subscriptions) forget(up *upstream.Upstream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.refs {
		if key.up == up {
			delete(s.refs, key)
		}
	}
}

// moveSubscriptions hands the subscriptions held on old, a shared upstream being
// replaced, to next, and subscribes next to their URIs.
func (g *Gateway) moveSubscriptions(ctx context.Context, old, next *upstream.Upstream) {
	s := &g.subs
	s.mu.Lock()
	var uris []string
	for key, sessions := range s.refs {
		if key.up == old {
			delete(s.refs, key)
			s.refs[subKey{next, key.uri}] = sessions
			uris = append(uris, key.uri)
		}
	}
	s.mu.Unlock()
	for _, uri := range uris {
		if err := next.Subscribe(ctx, uri); err != nil {
			g.log.Warn("renewing a subscription on a replaced upstream", zap.String(keyServer, next.Name()), zap.Error(err))
		}
	}
}

// moveClientSubscriptions carries the subscriptions held through per-client
// sessions of old, a server being replaced, over to new per-client
// sessions of next for the same clients, opened now rather than on their
// next call: a client that only listens would miss every update otherwise.
func (g *Gateway) moveClientSubscriptions(ctx context.Context, old, next *upstream.Upstream) {
	ds := map[*upstream.Upstream]*dedicated{}
	for _, d := range g.perClient.list(func(d *dedicated) bool { return d.base == old }) {
		ds[d.up] = d
	}
	held := map[*dedicated][]string{}
	g.subs.mu.Lock()
	for key := range g.subs.refs {
		if d := ds[key.up]; d != nil {
			held[d] = append(held[d], key.uri)
		}
	}
	g.subs.mu.Unlock()
	for d, uris := range held {
		nd, _, err := g.openDedicated(d.owner, next, d.caps, d.version, d.principal, nil)
		if err == nil {
			_, err = nd.waitReady(ctx)
		}
		if err != nil {
			g.log.Warn("renewing a client's subscriptions on a replaced upstream", zap.String(keyServer, next.Name()), zap.Error(err))
			continue
		}
		for _, uri := range uris {
			if err := nd.up.Subscribe(ctx, uri); err != nil {
				g.log.Warn("renewing a subscription on a replaced upstream", zap.String(keyServer, next.Name()), zap.Error(err))
				continue
			}
			g.subs.mu.Lock()
			if sessions := g.subs.refs[subKey{d.up, uri}]; sessions != nil {
				delete(g.subs.refs, subKey{d.up, uri})
				g.subs.refs[subKey{nd.up, uri}] = sessions
			}
			g.subs.mu.Unlock()
		}
	}
}

// subscriptionCount is the number of upstream subscriptions held.
func (g *Gateway) subscriptionCount() int {
	g.subs.mu.Lock()
	defer g.subs.mu.Unlock()
	return len(g.subs.refs)
}

// ResourceUpdated delivers an upstream's resources/updated to the sessions
// subscribed to the URI, written as they know it; from a per-client upstream
// session, only to its own session, when subscribed.
func (r relay) ResourceUpdated(from *upstream.Upstream, p *mcp.ResourceUpdatedNotificationParams) {
	uri := namespacing.WrapURI(from.Config().Namespace(), p.URI)
	fwd := &mcp.ResourceUpdatedNotificationParams{URI: uri, Meta: p.Meta}
	if d := r.g.perClient.dedicatedOf(from); d != nil {
		var only any = d.owner.ss
		if d.owner.ss == nil {
			// A principal's: the listen streams that subscribed through it
			// (listenupdates.go).
			through := r.g.subs.through(from, p.URI)
			if through == nil {
				return
			}
			only = through
		}
		meta := make(mcp.Meta, len(p.Meta)+1)
		for k, v := range p.Meta {
			meta[k] = v
		}
		meta[onlyForKey] = only
		fwd.Meta = meta
	}
	// Asynchronous: this runs on the upstream's notification queue. Once Close has
	// begun there are no sessions left to deliver to.
	r.g.life.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := r.g.server.ResourceUpdated(ctx, fwd); err != nil {
			r.g.log.Debug("resources/updated not delivered", zap.String(keyServer, from.Name()), zap.Error(err))
		}
	})
}

// onlyForKey marks, in the _meta of a resources/updated the gateway hands
// the SDK, the one session it is for (a *mcp.ServerSession), or the set of
// listen streams (onlyFor): the SDK sends
// it to every session subscribed to the URI, and filterUpdates drops the others'
// copies. The mark never leaves the process.
const onlyForKey = "manifold/only-for"

// filterUpdates is sending middleware for resources/updated: it drops an
// update that the receiving session may not read under the config in force
// (updateVisible), and one marked for another session (onlyForKey),
// removing the mark from the one it sends.
func (g *Gateway) filterUpdates(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "notifications/resources/updated" {
			return next(ctx, method, req)
		}
		p, ok := req.GetParams().(*mcp.ResourceUpdatedNotificationParams)
		if !ok {
			return next(ctx, method, req)
		}
		if ss, _ := req.GetSession().(*mcp.ServerSession); !g.updateVisible(ss, p.URI) {
			return nil, nil
		}
		if p.Meta[onlyForKey] == nil {
			return next(ctx, method, req)
		}
		if !onlyFor(p.Meta[onlyForKey], req.GetSession()) {
			return nil, nil
		}
		// The params are shared by every session's copy: send a copy.
		fwd := *p
		fwd.Meta = nil
		for k, v := range p.Meta {
			if k != onlyForKey {
				if fwd.Meta == nil {
					fwd.Meta = mcp.Meta{}
				}
				fwd.Meta[k] = v
			}
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		return next(ctx, method, &mcp.ServerRequest[*mcp.ResourceUpdatedNotificationParams]{Session: ss, Params: &fwd, Extra: req.GetExtra()})
	}
}

// updateVisible reports whether a resources/updated for uri (as clients
// know it) may reach ss: while a policy is in force, only when the
// principal that subscribed through ss may read uri under the config in
// force now, so that a reload denying a URI, or moving the principal out of
// a group, stops its updates at once. A session that never subscribed
// through subscribe (a 2026-07-28 listen stream, whose URIs filterListen
// checked when it opened) is not filtered here.
func (g *Gateway) updateVisible(ss *mcp.ServerSession, uri string) bool {
	a := g.current().access
	if a.policy.Unrestricted() {
		return true
	}
	g.subs.mu.Lock()
	who, ok := g.subs.who[ss]
	g.subs.mu.Unlock()
	if !ok {
		return true
	}
	pr, known := who.principal(a)
	rt, routed := g.routes.Load().resource(uri)
	if !known || !routed {
		return false
	}
	exact := namespacing.WrapURI(rt.prefix, rt.original)
	if !a.policy.Decide(pr, policy.Resource, exact, rt.up.Name()).Allowed {
		return false
	}
	_, _, denied := cleanDenial(a.policy, pr, policy.Resource, rt, exact)
	return !denied
}
