package gateway

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Toolsets (the config's "toolsets") are named subsets of the merged
// catalog, each served on its own endpoints: /mcp/<name>, /sse/<name> and
// `serve --stdio --toolset <name>` (docs/architecture.md, Overrides and
// toolsets). A toolset is a view, not a server of its own: its sessions are
// sessions of the gateway's one mcp.Server, opened under a context that
// names the toolset (toolsetKey). Every request of such a session, on both
// call paths, carries that name: the lists it gets are the toolset's items
// the principal may see (the policy applies on top: a toolset never
// widens), and the policy stage refuses a call outside the toolset exactly
// as a name that does not exist (permit). /mcp stays the whole catalog;
// while no toolset was ever configured, nothing here runs per request.

// toolsetKey is the context key of the name of the toolset a request is
// served under; absent on /mcp, /sse and a plain stdio session.
type toolsetKey struct{}

// WithToolset returns ctx naming the toolset that ServeStdio serves: the
// session sees and may use only the toolset's items. A name the config
// does not define serves nothing (Gateway.HasToolset tells).
func WithToolset(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, toolsetKey{}, name)
}

// toolsetName returns the toolset named in ctx, or "".
func toolsetName(ctx context.Context) string {
	s, _ := ctx.Value(toolsetKey{}).(string)
	return s
}

// HasToolset reports whether the config serving defines the toolset name.
func (g *Gateway) HasToolset(name string) bool {
	_, ok := g.current().toolsets[name]
	return ok
}

// toolset is one compiled toolsets entry of a snapshot. It is immutable but
// for its cache of views.
type toolset struct {
	name    string
	servers map[string]bool // nil: every server
	tools   selector
	prompts selector
	// resources selects resource URIs and templates alike.
	resources selector
	// views caches the lists of this toolset per routes generation and
	// principal (the snapshot, and with it the policy, is the toolset's).
	views atomic.Pointer[viewCache]
}

// selector is one kind's patterns of a toolset.
type selector struct {
	all      bool // the key is absent: every item
	patterns []policy.Pattern
	exclude  []bool // patterns[i] was written "!…"
	// dflt is the answer when no pattern matches: in when the list starts
	// with an exclusion.
	dflt bool
}

func newSelector(list []string) selector {
	if list == nil {
		return selector{all: true}
	}
	s := selector{patterns: make([]policy.Pattern, len(list)), exclude: make([]bool, len(list))}
	for i, p := range list {
		rest, neg := strings.CutPrefix(p, "!")
		s.patterns[i], s.exclude[i] = policy.CompilePattern(rest), neg
	}
	s.dflt = len(list) > 0 && s.exclude[0]
	return s
}

// has reports whether name is selected: the last pattern that matches it
// decides.
func (s *selector) has(name string) bool {
	if s.all {
		return true
	}
	for i := len(s.patterns) - 1; i >= 0; i-- {
		if s.patterns[i].Match(name) {
			return !s.exclude[i]
		}
	}
	return s.dflt
}

// compileToolsets compiles the toolsets of cfg; nil when there are none.
func compileToolsets(cfg *config.Config) map[string]*toolset {
	if len(cfg.Toolsets) == 0 {
		return nil
	}
	out := make(map[string]*toolset, len(cfg.Toolsets))
	for name, t := range cfg.Toolsets {
		ts := &toolset{name: name, tools: newSelector(t.Tools), prompts: newSelector(t.Prompts), resources: newSelector(t.Resources)}
		if t.Servers != nil {
			ts.servers = make(map[string]bool, len(t.Servers))
			for _, s := range t.Servers {
				ts.servers[s] = true
			}
		}
		out[name] = ts
	}
	return out
}

// removedToolset is what a session sees whose toolset a reload removed:
// nothing.
var removedToolset = &toolset{name: "(removed)"}

// allows reports whether the item of kind, named name as clients see it,
// of server, is in ts.
func (ts *toolset) allows(kind policy.Kind, name, server string) bool {
	if ts == removedToolset || ts.servers != nil && !ts.servers[server] {
		return false
	}
	switch kind {
	case policy.Tool:
		return ts.tools.has(name)
	case policy.Prompt:
		return ts.prompts.has(name)
	}
	return ts.resources.has(name)
}

// toolsetOf returns the toolset ctx is served under, in snap, or nil on the
// whole catalog. A toolset snap does not define (a reload removed it) is
// removedToolset.
func (g *Gateway) toolsetOf(ctx context.Context, snap *snapshot) *toolset {
	if !g.toolsetsSeen.Load() {
		return nil // no session can name one
	}
	name := toolsetName(ctx)
	if name == "" {
		return nil
	}
	if ts, ok := snap.toolsets[name]; ok {
		return ts
	}
	return removedToolset
}

// inToolset reports whether c's route is in the toolset its request is
// served under (always, on the whole catalog). A call outside it is noted
// in the request's exchange as denied by the toolset, and the caller
// answers it as for a name that does not exist.
func (g *Gateway) inToolset(ctx context.Context, c *call) bool {
	ts := g.toolsetOf(ctx, c.snap)
	if ts == nil || ts.allows(c.kind, c.name, c.route.up.Name()) {
		return true
	}
	g.exchange(ctx).deny("toolset " + ts.name)
	return false
}

// toolsetView returns what pr (nil: under an unrestricted policy) may list
// of r in ts, under a, from ts's cache when it can.
func toolsetView(r *routes, a *access, ts *toolset, pr *policy.Principal) *view {
	key := ""
	if pr != nil {
		key = pr.Key()
	}
	vc := ts.views.Load()
	if vc == nil || vc.routes != r {
		fresh := &viewCache{routes: r, access: a}
		if !ts.views.CompareAndSwap(vc, fresh) {
			fresh = ts.views.Load()
		}
		vc = fresh
	}
	if vc.routes == r {
		if v, ok := vc.views.Load(key); ok {
			return v.(*view)
		}
	}
	v := filterIn(r, a.policy, pr, ts)
	if vc.routes == r && vc.size.Add(1) <= maxCachedViews {
		vc.views.Store(key, v)
	}
	return v
}

// listView returns what req's principal may list on the toolset of ctx;
// ok is false on the whole catalog.
func (g *Gateway) listView(ctx context.Context, req mcp.Request) (v *view, ok bool) {
	snap := g.current()
	ts := g.toolsetOf(ctx, snap)
	if ts == nil {
		return nil, false
	}
	r, a := g.routes.Load(), snap.access
	if a.policy.Unrestricted() {
		return toolsetView(r, a, ts, nil), true
	}
	pr, known := principal(ctx, a, req)
	if !known {
		return &view{}, true
	}
	return toolsetView(r, a, ts, pr), true
}

// toolsetPath serves the endpoints under prefix ("/mcp/", "/sse/"): the
// path's rest names a toolset of the config serving, whose name next
// serves in the request's context; any other path is 404.
func (g *Gateway) toolsetPath(prefix string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, prefix)
		if _, ok := g.current().toolsets[name]; !ok || name == "" {
			http.NotFound(w, r)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithToolset(r.Context(), name)))
	})
}

// ToolsetStatus is one toolset, as GET /status lists it: what it holds of
// the current catalog (before policy).
type ToolsetStatus struct {
	Name      string `json:"name"`
	Tools     int    `json:"tools"`
	Prompts   int    `json:"prompts"`
	Resources int    `json:"resources"`
	Templates int    `json:"templates"`
}

// toolsetStatus lists the toolsets of snap with what they hold of r.
func toolsetStatus(snap *snapshot, r *routes) []ToolsetStatus {
	var out []ToolsetStatus
	for _, name := range sortedKeys(snap.toolsets) {
		v := filterIn(r, nil, nil, snap.toolsets[name])
		out = append(out, ToolsetStatus{Name: name, Tools: len(v.tools), Prompts: len(v.prompts),
			Resources: len(v.resources), Templates: len(v.templates)})
	}
	return out
}
