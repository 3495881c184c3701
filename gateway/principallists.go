package gateway

import (
	"context"
	"sync"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Per-principal catalogs of sessionless clients (docs/architecture.md,
// Per-client catalogs). A 2026-07-28 client has no session: every request
// stands alone, and its dedicated upstream sessions are its principal's
// (sessions.go, owner.principal). So its lists of a server with per-client
// lists come from its principal's dedicated session, in a routing
// generation of the principal's own, built like a session's
// (buildOwnRoutes): the global generation's upstreams with the principal's
// sessions in place of those servers' pool upstreams, and the sign-in tool
// of a server where it has yet to sign in. Lists and calls of that
// principal's requests read it, on the SDK path and the raw path alike.
//
// A generation is built by the principal's first list, or by its first call
// of a name the global generation does not know when it has none (a
// sessionless client may call what it listed on another replica or before
// a restart: callOwnRoutes), and again by a list once the global generation
// moved, its dedicated sessions' lists changed, or it signed in.
// It is dropped with the principal's last dedicated session (reapIdle),
// which bounds the map by the principals active within the idle timeout.

// principalLists holds the routing generations of sessionless principals.
type principalLists struct {
	byKey sync.Map // principal key → *principalRoutes
}

// principalRoutes is one principal's routing generation.
type principalRoutes struct {
	sessionRoutes
	name string // the principal's name, which sign-ins are stored under
}

// principalRoutes returns the routing generation of the principal of req,
// a sessionless 2026-07-28 request from; see routesOf.
func (g *Gateway) principalRoutes(ctx context.Context, req mcp.Request, from downstream, global *routes, build bool) *routes {
	pr, known := principal(ctx, g.current().access, req)
	if !known {
		return global // the policy refuses it
	}
	var prev *routes
	if v, ok := g.prinLists.byKey.Load(pr.Key()); ok {
		pl := v.(*principalRoutes)
		prev = pl.current()
		switch r := pl.r.Load(); {
		case !build && prev != nil:
			return prev
		case r != nil && pl.base == global && !pl.stale.Load():
			return r
		case !build:
			return global // its first list is being built
		}
	} else if !build {
		return global // it has not listed: names only it knows are callOwnRoutes'
	}
	pl := &principalRoutes{sessionRoutes: sessionRoutes{base: global, prev: prev}, name: pr.Name()}
	g.prinLists.byKey.Store(pr.Key(), pl) // before connecting: a change during it marks it stale
	return g.buildOwnRoutes(ctx, &pl.sessionRoutes, pr, known, from, func(*upstream.Upstream, string) {
		// signedIn marks it stale (principalSignedIn, oauthretry.go)
	})
}

// callOwnRoutes returns the routing generation a call req whose name the
// global one does not know resolves in: the session's, or for a sessionless
// request its principal's, built now when it has none (such a client may
// call what it listed on another replica or before a restart); the global
// one when neither applies.
func (g *Gateway) callOwnRoutes(ctx context.Context, req callerRequest, global *routes) *routes {
	if r := g.builtRoutes(fromRequest(req).ss); r != nil {
		return r
	}
	from := fromRequest(req)
	if _, version := from.client(); !mcpx.Stateless(version) {
		return global
	}
	if r := g.principalRoutes(ctx, req, from, global, false); r != global {
		return r
	}
	return g.principalRoutes(ctx, req, from, global, true)
}

// builtPrincipalRoutes returns the routing generation the principal pr
// has built, or nil: for the raw path, which builds none.
func (g *Gateway) builtPrincipalRoutes(pr *policy.Principal) *routes {
	if v, ok := g.prinLists.byKey.Load(pr.Key()); ok {
		return v.(*principalRoutes).current()
	}
	return nil
}

// principalListsChanged marks the generation of the principal whose
// dedicated session up is stale when its catalog changed since the
// generation was built: the principal's next list rebuilds it.
func (g *Gateway) principalListsChanged(d *dedicated, up *upstream.Upstream) {
	v, ok := g.prinLists.byKey.Load(d.owner.principal)
	if !ok {
		return
	}
	if changed, ok := v.(*principalRoutes).changedBy(up); ok {
		g.notifyPrincipal(d.owner.principal, "", changed) // listenlists.go
	}
}

// forgetPrincipal drops the generation of the principal with key, whose
// last dedicated session closed.
func (g *Gateway) forgetPrincipal(key string) {
	if len(g.perClient.list(func(d *dedicated) bool { return d.owner.principal == key })) == 0 {
		g.prinLists.byKey.Delete(key)
	}
}

// rawPrincipalRoutes sets the routes of c, a call of a sessionless request
// of f on the raw path, to its principal's generation, and reports whether
// there is one; the raw path builds none.
func (g *Gateway) rawPrincipalRoutes(f rawFront, c *call) bool {
	pr, known := f.caller().principal(c.snap.access)
	if !known {
		return true // the policy stage refuses it
	}
	r := g.builtPrincipalRoutes(pr)
	if r != nil {
		c.routes = r
	}
	return r != nil
}

// perClientLists reports whether a server of cfg lists per client: lists
// then depend on who asks, and are marked private (access.cacheScope).
func perClientLists(cfg *config.Config) bool {
	for _, s := range cfg.Enabled() {
		if s.ListsMode() == config.ListsPerClient {
			return true
		}
	}
	return false
}
