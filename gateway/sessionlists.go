package gateway

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// Per-client catalogs (`lists: per-client`; docs/architecture.md,
// Per-client catalogs). A session's lists of such a server come from its
// own dedicated upstream session, which lists like a pool upstream
// (opened on the session's first list, within the connect timeout, a few
// at a time). The session gets its own routing generation: the global
// one's upstreams with its dedicated sessions in place of those servers'
// pool upstreams, merged as the global one is (buildRoutes), so names,
// URIs, policy and collisions work as everywhere. Its calls resolve in it;
// a name only it knows is taken before the SDK, which knows only the
// global names. A list_changed from its dedicated session rebuilds it and
// reaches that session only. Sessions without such servers use the global
// generation; sessionless 2026-07-28 clients get their principal's own
// (principallists.go).

// maxListOpens bounds the dedicated sessions being opened for lists at
// once, gateway-wide.
const maxListOpens = 8

// sessionRoutes is one session's routing generation.
type sessionRoutes struct {
	base *routes // the global generation it was built from
	// catalogs are those of its dedicated sessions it was built from,
	// written before r is stored.
	catalogs map[*upstream.Upstream]*upstream.Catalog
	r        atomic.Pointer[routes]
	// prev is the generation it replaces, which calls use until r is
	// built.
	prev  *routes
	stale atomic.Bool // its dedicated sessions' lists changed since
}

// perClientListed returns the names of the servers of ups with per-client
// lists, or nil.
func perClientListed(ups []*upstream.Upstream) []string {
	var out []string
	for _, up := range ups {
		if up.Config().ListsMode() == config.ListsPerClient {
			out = append(out, up.Name())
		}
	}
	return out
}

// builtRoutes returns the routing generation ss has built, or nil.
func (g *Gateway) builtRoutes(ss *mcp.ServerSession) *routes {
	if ss == nil {
		return nil
	}
	if v, ok := g.sessLists.Load(ss); ok {
		return v.(*sessionRoutes).current()
	}
	return nil
}

// current returns the generation built, or the one it replaces while it is
// being built (nil for the first).
func (sr *sessionRoutes) current() *routes {
	if r := sr.r.Load(); r != nil {
		return r
	}
	return sr.prev
}

// routesOf returns the routing generation of the session of req: the
// global one, or the session's own when a server has per-client lists,
// built (or rebuilt after a change) now; build is false for calls, which
// use what the session listed from. A sessionless 2026-07-28 request gets
// its principal's own (principallists.go).
func (g *Gateway) routesOf(ctx context.Context, req mcp.Request, build bool) *routes {
	global := g.routes.Load()
	if global.listedPerClient == nil {
		return global
	}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if ss == nil {
		return global
	}
	var prev *routes
	if v, ok := g.sessLists.Load(ss); ok {
		sr := v.(*sessionRoutes)
		prev = sr.current()
		switch r := sr.r.Load(); {
		case !build && prev != nil:
			return prev
		case !build:
			return global // its first list is being built
		case r != nil && sr.base == global && !sr.stale.Load():
			return r
		}
	}
	var from downstream
	if cr, ok := req.(callerRequest); ok {
		from = fromRequest(cr)
	} else if ip := ss.InitializeParams(); ip != nil {
		from = downstream{ss: ss, caps: ip.Capabilities, version: ip.ProtocolVersion}
	}
	switch _, version := from.client(); {
	case version == "":
		return global
	case mcpx.Stateless(version):
		return g.principalRoutes(ctx, req, from, global, build)
	case !build && prev == nil:
		return global
	}
	pr, known := principal(ctx, g.current().access, req)
	sr := &sessionRoutes{base: global, prev: prev}
	g.sessLists.Store(ss, sr) // before connecting: a change during it marks it stale
	return g.buildOwnRoutes(ctx, sr, pr, known, from, func(up *upstream.Upstream, principal string) {
		g.waitSignIn(up.Name(), principal, ss)
	})
}

// buildOwnRoutes builds sr's generation: the global one's upstreams with
// the client from's own sessions of the servers with per-client lists in
// place of their pool upstreams, or the sign-in tool of a server where
// the principal pr has yet to sign in (waiting is told of each). sr is
// registered already, so that a change while it connects marks it stale.
func (g *Gateway) buildOwnRoutes(ctx context.Context, sr *sessionRoutes, pr *policy.Principal, known bool, from downstream, waiting func(up *upstream.Upstream, principal string)) *routes {
	global := sr.base
	ups := slices.Clone(g.pool.serving())
	byUp := map[*upstream.Upstream]*upstream.Upstream{}
	var signIn []*upstream.Upstream
	for i, up := range ups {
		if !slices.Contains(global.listedPerClient, up.Name()) {
			continue
		}
		d, err := g.listingSession(ctx, pr, known, from, up)
		if ce := g.consentRequired(err, up, pr.Name()); ce != nil {
			signIn = append(signIn, up) // its sign-in tool instead (oauthconsent.go)
			waiting(up, ce.Principal)
			ups[i] = nil
			continue
		}
		if err != nil {
			g.log.Warn("per-client lists: no session of the server for this client", zap.String(keyServer, up.Name()), zap.Error(err))
			ups[i] = nil
			continue
		}
		ups[i], byUp[d.up] = d.up, up
	}
	ups = slices.DeleteFunc(ups, func(u *upstream.Upstream) bool { return u == nil })
	sr.catalogs = make(map[*upstream.Upstream]*upstream.Catalog, len(byUp))
	for up := range byUp {
		sr.catalogs[up] = up.Catalog() // before the merge reads them: a later change is seen
	}
	snap := g.current()
	r, problems := buildRoutes(ups, snap.cfg.Servers, snap.ns, instructionsHeader, global.held)
	for _, p := range problems {
		// This session's own: not in the gateway's problems, which /status
		// shows to every operator as the shared lists' state.
		g.log.Warn("upstream item skipped in a session's lists", zap.String(keyServer, p.server), zap.String(keyReason, p.String()))
	}
	r.listedPerClient = global.listedPerClient
	rebase(r, byUp)
	addSignInTools(r, signIn, snap.ns)
	sr.r.Store(r)
	return r
}

// isList reports whether req lists (what builds a session's generation:
// initialize and server/discover do not open upstream sessions).
func isList(req mcp.Request) bool {
	switch req.(type) {
	case *mcp.ListToolsRequest, *mcp.ListPromptsRequest, *mcp.ListResourcesRequest, *mcp.ListResourceTemplatesRequest:
		return true
	}
	return false
}

// listingSession opens (or finds) the dedicated session of base for the
// client from, within the connect timeout and maxListOpens.
func (g *Gateway) listingSession(ctx context.Context, pr *policy.Principal, known bool, from downstream, base *upstream.Upstream) (*dedicated, error) {
	ctx, cancel := context.WithTimeout(ctx, g.current().cfg.Gateway.Timeouts.Connect)
	defer cancel()
	select {
	case g.listOpens <- struct{}{}:
		defer func() { <-g.listOpens }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.dedicatedFor(ctx, pr, known, from, base)
}

// rebase points the routes of r at the pool upstreams: a route to a
// dedicated session goes to its base, which the upstream session stage
// turns into the caller's dedicated session again.
func rebase(r *routes, byUp map[*upstream.Upstream]*upstream.Upstream) {
	for _, m := range []map[string]route{r.tools, r.prompts} {
		for k, rt := range m {
			if b := byUp[rt.up]; b != nil {
				rt.up = b
				m[k] = rt
			}
		}
	}
	for _, m := range []map[string]*upstream.Upstream{r.byPrefix, r.byName} {
		for k, up := range m {
			if b := byUp[up]; b != nil {
				m[k] = b
			}
		}
	}
}

// sessionListsChanged is the OnChange of a dedicated session that lists:
// the session's generation is rebuilt at its next list, and the session
// alone is told its lists changed.
func (g *Gateway) sessionListsChanged(up *upstream.Upstream) {
	d := g.perClient.dedicatedOf(up)
	if d != nil && d.owner.ss == nil {
		g.principalListsChanged(d, up) // a sessionless principal's (principallists.go)
		return
	}
	if d == nil {
		return
	}
	v, ok := g.sessLists.Load(d.owner.ss)
	if !ok {
		return // it has not listed yet
	}
	changed, ok := v.(*sessionRoutes).changedBy(up)
	if !ok {
		return
	}
	for i, token := range listChangedTokens {
		if changed[i] {
			// Sent as a marked progress notification that sessionNotices
			// turns into the list_changed: the SDK sends those to every
			// session.
			_ = d.owner.ss.NotifyProgress(context.Background(), &mcp.ProgressNotificationParams{ProgressToken: token})
		}
	}
}

// changedBy marks sr stale when the catalog of up, one of its dedicated
// sessions, changed since sr was built, and returns which lists changed;
// ok is false when none did (only the state changed) or sr is being built
// (catalogs is written before r).
func (sr *sessionRoutes) changedBy(up *upstream.Upstream) (_ [3]bool, ok bool) {
	if sr.r.Load() == nil {
		return [3]bool{}, false
	}
	old, cur := sr.catalogs[up], up.Catalog()
	if old == cur {
		return [3]bool{}, false
	}
	sr.stale.Store(true)
	return listsChanged(old, cur), true
}

// listsChanged reports which lists (tools, prompts, resources) differ
// between two catalogs of a session: a refresh keeps the slices of the
// lists it did not fetch again, so comparing slices tells which.
func listsChanged(old, cur *upstream.Catalog) [3]bool {
	if old == nil || cur == nil {
		return [3]bool{true, true, true}
	}
	return [3]bool{!sameSlice(old.Tools, cur.Tools), !sameSlice(old.Prompts, cur.Prompts),
		!sameSlice(old.Resources, cur.Resources) || !sameSlice(old.Templates, cur.Templates)}
}

// sameSlice reports whether a and b are the same slice (not only equal).
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// listChangedTokens mark the progress notifications that sessionNotices
// sends as list_changed: tokens no client can have sent (a client's
// progress tokens are relayed as they are, and these hold a NUL).
var listChangedTokens = []string{"\x00manifold/tools", "\x00manifold/prompts", "\x00manifold/resources"}

// isListChangedToken reports whether token is one of listChangedTokens.
func isListChangedToken(token any) bool {
	t, ok := token.(string)
	return ok && len(t) > 0 && t[0] == 0 && slices.Contains(listChangedTokens, t)
}

// sessionNotices is a sending middleware: a progress notification marked
// by sessionListsChanged leaves as the list_changed it stands for.
func (g *Gateway) sessionNotices(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if method == "notifications/subscriptions/acknowledged" && ss != nil {
			if p, ok := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams); ok && p != nil {
				g.listens.acknowledged(ss, p) // a sessionless principal's stream (listenlists.go)
			}
		}
		if method != "notifications/progress" {
			return next(ctx, method, req)
		}
		p, ok := req.GetParams().(*mcp.ProgressNotificationParams)
		if !ok || ss == nil || !isListChangedToken(p.ProgressToken) {
			return next(ctx, method, req)
		}
		var meta mcp.Meta
		if id := g.listens.subscriptionID(ss); id != nil {
			meta = mcp.Meta{mcp.MetaKeySubscriptionID: id} // a listen stream's
		}
		switch p.ProgressToken {
		case listChangedTokens[0]:
			return next(ctx, "notifications/tools/list_changed", &mcp.ServerRequest[*mcp.ToolListChangedParams]{Session: ss, Params: &mcp.ToolListChangedParams{Meta: meta}})
		case listChangedTokens[1]:
			return next(ctx, "notifications/prompts/list_changed", &mcp.ServerRequest[*mcp.PromptListChangedParams]{Session: ss, Params: &mcp.PromptListChangedParams{Meta: meta}})
		case listChangedTokens[2]:
			return next(ctx, "notifications/resources/list_changed", &mcp.ServerRequest[*mcp.ResourceListChangedParams]{Session: ss, Params: &mcp.ResourceListChangedParams{Meta: meta}})
		}
		return next(ctx, method, req)
	}
}

// sessionOnlyCall serves a tools/call or prompts/get whose name only the
// session's own generation knows (or, for a sessionless 2026-07-28
// request, its principal's: principallists.go): the SDK would refuse it as
// unregistered. ok is false for any other request.
func (g *Gateway) sessionOnlyCall(ctx context.Context, req mcp.Request) (_ mcp.Result, ok bool, _ error) {
	global := g.routes.Load()
	if global.listedPerClient == nil {
		return nil, false, nil
	}
	var name string
	var kind policy.Kind
	var serve func() (mcp.Result, error)
	switch req := req.(type) {
	case *mcp.CallToolRequest:
		if req.Params != nil {
			name, kind = req.Params.Name, policy.Tool
			serve = func() (mcp.Result, error) { return g.callTool(ctx, req) }
		}
	case *mcp.GetPromptRequest:
		if req.Params != nil {
			name, kind = req.Params.Name, policy.Prompt
			serve = func() (mcp.Result, error) { return g.getPrompt(ctx, req) }
		}
	}
	if serve == nil {
		return nil, false, nil
	}
	if _, ok := global.lookup(kind, name); ok {
		return nil, false, nil // the SDK knows it
	}
	r := g.callOwnRoutes(ctx, req.(callerRequest), global) // principallists.go
	if _, ok := r.lookup(kind, name); r == global || !ok {
		return nil, false, nil
	}
	res, err := serve()
	return res, true, err
}
