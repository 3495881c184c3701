package gateway

import (
	"context"
	"encoding/base64"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/authn"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// access is the identity and policy half of a config snapshot: who sends a
// request, and what that principal may see and use. It is immutable and
// swapped as a whole.
type access struct {
	policy *policy.Policy
	authn  *authn.Authenticator // nil while auth is off
	// local is the principal of stdio sessions, and of every HTTP request
	// while auth is off.
	local *policy.Principal
	// operators may use the console, /status and /reload while auth is on
	// (auth.operators).
	operators policy.Principals
	// cacheScope marks list and read results: "private" when what a client
	// sees depends on who it is, so that no shared cache serves it to others.
	cacheScope string
}

func newAccess(cfg *config.Config, an *authn.Authenticator) *access {
	a := &access{
		policy:     policy.Compile(cfg.Policy),
		local:      policy.NewPrincipal(cfg.Auth.Local.Name, cfg.Auth.Local.Groups),
		operators:  policy.CompilePrincipals(cfg.Auth.Operators),
		cacheScope: "public",
	}
	if an != nil && an.Enabled() {
		a.authn = an
	}
	if !a.policy.Unrestricted() || perClientLists(cfg) {
		a.cacheScope = "private"
	}
	return a
}

// identityKey holds the *authn.Identity in the SDK's auth.TokenInfo.Extra,
// which the streamable HTTP transport hands to every request of a session.
const identityKey = "manifold/identity"

// principalKey is the context key of a principal fixed for the request:
// that of the gateway's own endpoints (/status).
type principalKey struct{}

func withPrincipal(ctx context.Context, p *policy.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// localKey marks the context of a session whose principal is the local
// one of the snapshot serving each request (stdio): a reload that renames
// auth.local applies to its next request.
type localKey struct{}

// principal returns who sent req, under access snapshot a. ok is false when
// auth is on and req holds no identity, or one whose credential no longer
// authenticates under a, which callers treat as "may see nothing".
//
// The principal is resolved from the credential for every request, on
// every transport: a reload that changes a key's groups applies to the
// next request of the sessions opened with it, and one that removes the
// key leaves them nothing (and closes them: revokeClients).
func principal(ctx context.Context, a *access, req mcp.Request) (p *policy.Principal, ok bool) {
	return callerOf(ctx, req).principal(a)
}

// caller is who sent a request, in a form that resolves to a principal
// under any access snapshot: what a session keeps beyond one request (its
// log level) keeps this, not the principal of the moment.
type caller struct {
	id    *authn.Identity   // the credential it authenticated with, if any
	fixed *policy.Principal // else a principal fixed for the request
	local bool              // else: a session of the local principal (stdio)
}

// callerOf returns who sent req.
func callerOf(ctx context.Context, req mcp.Request) caller {
	if id := identity(ctx, req); id != nil {
		return caller{id: id}
	}
	if p, ok := ctx.Value(principalKey{}).(*policy.Principal); ok {
		return caller{fixed: p}
	}
	return caller{local: ctx.Value(localKey{}) != nil}
}

// principal returns c's principal under a; see the package function.
func (c caller) principal(a *access) (*policy.Principal, bool) {
	switch {
	case c.id != nil:
		return a.authn.Resolve(c.id)
	case c.fixed != nil:
		return c.fixed, true
	case a.authn == nil || c.local:
		return a.local, true
	}
	return nil, false
}

// identity returns the identity req was authenticated with, or nil: the
// request's own on streamable HTTP, whose every request carries its token;
// on legacy SSE, whose messages carry none, that of the session's latest
// POST, each authenticated as the principal of the GET that opened the
// session (httpAuth.bindSSE), in whose context its handlers run.
func identity(ctx context.Context, req mcp.Request) *authn.Identity {
	if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
		if id, ok := extra.TokenInfo.Extra[identityKey].(*authn.Identity); ok {
			return id
		}
	}
	if sess, ok := ctx.Value(sseSessionKey{}).(*sseSession); ok {
		return sess.latest.Load()
	}
	id, _ := ctx.Value(identityCtxKey{}).(*authn.Identity)
	return id
}

// view is what one principal may list, in the routes' order, and the
// instructions of the servers it can see something of.
type view struct {
	tools        []*mcp.Tool
	prompts      []*mcp.Prompt
	resources    []*mcp.Resource
	templates    []*mcp.ResourceTemplate
	instructions string
	// servers are the servers with something in the view; nil in the view
	// of everything (routes.all).
	servers map[string]bool
	// aliases are the names list_post hooks listed tools and prompts
	// under (aliases.go); nil without such hooks.
	aliases *aliases
}

// viewCache holds the views of one routes generation under one access
// snapshot, by principal key. A new generation or snapshot starts afresh.
type viewCache struct {
	routes *routes
	access *access
	views  sync.Map // principal key → *view
	size   atomic.Int32
}

// maxCachedViews bounds the cache; principals beyond it get their view
// computed per list request.
const maxCachedViews = 1024

// view returns what req's principal may list.
func (g *Gateway) view(ctx context.Context, req mcp.Request) *view {
	if v, ok := g.listView(ctx, req); ok {
		return v // a toolset's (toolsets.go)
	}
	r, a := g.routesOf(ctx, req, isList(req)), g.current().access
	if a.policy.Unrestricted() && !g.listsByPlugins() {
		return &r.all
	}
	pr, ok := principal(ctx, a, req)
	if !ok {
		return &view{}
	}
	if r.listedPerClient != nil && r != g.routes.Load() {
		return filterView(r, a.policy, pr) // the session's own generation: not cached
	}
	return g.viewOf(r, a, pr)
}

// sees reports whether pr may see something of server under the policy in
// force.
func (g *Gateway) sees(pr *policy.Principal, server string) bool {
	r, a := g.routes.Load(), g.current().access
	if a.policy.Unrestricted() {
		return true
	}
	return pr != nil && g.viewOf(r, a, pr).servers[server]
}

// viewOf returns what pr may list of r under a, from the cache when it can.
func (g *Gateway) viewOf(r *routes, a *access, pr *policy.Principal) *view {
	vc := g.views.Load()
	if vc == nil || vc.routes != r || vc.access != a {
		fresh := &viewCache{routes: r, access: a}
		if !g.views.CompareAndSwap(vc, fresh) {
			fresh = g.views.Load() // another request got there first
		}
		vc = fresh
	}
	if vc.routes == r && vc.access == a {
		if v, ok := vc.views.Load(pr.Key()); ok {
			return v.(*view)
		}
	}
	v := g.pluginView(r, pr, filterView(r, a.policy, pr))
	if vc.routes == r && vc.access == a && vc.size.Add(1) <= maxCachedViews {
		vc.views.Store(pr.Key(), v)
	}
	return v
}

func filterView(r *routes, p *policy.Policy, pr *policy.Principal) *view {
	return filterIn(r, p, pr, nil)
}

// filterIn returns what pr may list of r under p (nil: everything), in
// toolset ts (nil: the whole catalog).
func filterIn(r *routes, p *policy.Policy, pr *policy.Principal, ts *toolset) *view {
	v := &view{}
	seen := map[string]bool{} // servers with something in the view
	allowed := func(kind policy.Kind, name, server string) bool {
		ok := (ts == nil || ts.allows(kind, name, server)) && (p == nil || p.Unrestricted() || p.Decide(pr, kind, name, server).Allowed)
		if ok {
			seen[server] = true
		}
		return ok
	}
	for _, t := range r.toolDefs {
		if allowed(policy.Tool, t.Name, r.tools[t.Name].up.Name()) {
			v.tools = append(v.tools, t)
		}
	}
	for _, pt := range r.promptDefs {
		if allowed(policy.Prompt, pt.Name, r.prompts[pt.Name].up.Name()) {
			v.prompts = append(v.prompts, pt)
		}
	}
	for _, res := range r.resourceDefs {
		if allowed(policy.Resource, res.URI, r.resourceServer[res.URI]) {
			v.resources = append(v.resources, res)
		}
	}
	for _, t := range r.templateDefs {
		if allowed(policy.Template, t.URITemplate, r.templateServer[t.URITemplate]) {
			v.templates = append(v.templates, t)
		}
	}
	var b strings.Builder
	b.WriteString(r.header)
	for _, s := range r.sections {
		if seen[s.server] {
			b.WriteString(s.text)
		}
	}
	v.instructions = b.String()
	v.servers = seen
	return v
}

// pageSize is the number of items per list page, as the SDK's default.
const pageSize = mcp.DefaultPageSize

// page returns the items after cursor (the last key of the previous page),
// at most pageSize of them, and the cursor of the next page ("" at the end).
// items are sorted by key. A cursor names a position, not an index, so
// paging stays correct while the lists change.
func page[T any](items []T, key func(T) string, cursor string) ([]T, string, error) {
	start := 0
	if cursor != "" {
		after, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil {
			return nil, "", mcpx.RPCError(jsonrpc.CodeInvalidParams, "invalid cursor")
		}
		start = sort.Search(len(items), func(i int) bool { return key(items[i]) > string(after) })
	}
	end := min(start+pageSize, len(items))
	out := make([]T, end-start) // a copy: never hand the shared view to the SDK
	copy(out, items[start:end])
	next := ""
	if end < len(items) {
		next = base64.RawURLEncoding.EncodeToString([]byte(key(items[end-1])))
	}
	return out, next, nil
}

// list answers the four list methods from the principal's view; handled is
// false for any other request.
func (g *Gateway) list(ctx context.Context, req mcp.Request) (res mcp.Result, handled bool, err error) {
	v := func() *view { return g.view(ctx, req) }
	c := mcp.Cacheable{CacheScope: g.current().access.cacheScope}
	switch req := req.(type) {
	case *mcp.ListToolsRequest:
		r := &mcp.ListToolsResult{Cacheable: c}
		r.Tools, r.NextCursor, err = page(v().tools, func(t *mcp.Tool) string { return t.Name }, cursor(req.Params))
		return r, true, err
	case *mcp.ListPromptsRequest:
		r := &mcp.ListPromptsResult{Cacheable: c}
		r.Prompts, r.NextCursor, err = page(v().prompts, func(p *mcp.Prompt) string { return p.Name }, cursor(req.Params))
		return r, true, err
	case *mcp.ListResourcesRequest:
		r := &mcp.ListResourcesResult{Cacheable: c}
		r.Resources, r.NextCursor, err = page(v().resources, func(r *mcp.Resource) string { return r.URI }, cursor(req.Params))
		return r, true, err
	case *mcp.ListResourceTemplatesRequest:
		r := &mcp.ListResourceTemplatesResult{Cacheable: c}
		r.ResourceTemplates, r.NextCursor, err = page(v().templates, func(t *mcp.ResourceTemplate) string { return t.URITemplate }, cursor(req.Params))
		return r, true, err
	}
	return nil, false, nil
}

// cursor returns the cursor of a list request's params, which may be nil.
func cursor(p any) string {
	switch p := p.(type) {
	case *mcp.ListToolsParams:
		if p != nil {
			return p.Cursor
		}
	case *mcp.ListPromptsParams:
		if p != nil {
			return p.Cursor
		}
	case *mcp.ListResourcesParams:
		if p != nil {
			return p.Cursor
		}
	case *mcp.ListResourceTemplatesParams:
		if p != nil {
			return p.Cursor
		}
	}
	return ""
}
