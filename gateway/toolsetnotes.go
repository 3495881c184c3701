package gateway

import (
	"context"
	"hash/fnv"
	"sync"
	"sync/atomic"

	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A toolset's own list_changed. The mcp.Server's registry is the union of
// every toolset, and the SDK tells every session of each change to it; a
// toolset's session is told only when its toolset's list of that kind
// changed. Each merge fingerprints every toolset's lists (names and
// definitions, from the registry) and moves the toolset's generation of a
// list whose fingerprint changed, before registering anything: the SDK
// sends its debounced notifications after. The sending middleware passes a
// list_changed to a toolset's session only when that list's generation
// moved since the last one it passed to it. A reload that changes the
// policy, auth or the toolsets moves every generation: what a principal may
// see of a toolset can change with nothing in the union changing.

// The lists a list_changed names, as indexes of generation arrays.
const (
	listTools = iota
	listPrompts
	listResources // resources and templates: one notification
	numLists
)

// listOf returns the list a list_changed notification method names, or -1.
func listOf(method string) int {
	switch method {
	case "notifications/tools/list_changed":
		return listTools
	case "notifications/prompts/list_changed":
		return listPrompts
	case "notifications/resources/list_changed":
		return listResources
	}
	return -1
}

// toolsetNotes holds the generations of every toolset's lists and what each
// toolset session was last told.
type toolsetNotes struct {
	gens     sync.Map // toolset name → *toolsetGen
	sessions sync.Map // *mcp.ServerSession → *toolsetSession
}

// toolsetGen is one toolset's lists: fingerprints (written under the
// gateway's syncMu) and generations.
type toolsetGen struct {
	fp  [numLists]uint64
	gen [numLists]atomic.Uint64
}

// toolsetSession is a session of a toolset: its toolset, and the generation
// of each list it was last told of (or found at initialize).
type toolsetSession struct {
	toolset string
	seen    [numLists]atomic.Uint64
}

// gen returns the generations of toolset name, made on first use.
func (n *toolsetNotes) gen(name string) *toolsetGen {
	if v, ok := n.gens.Load(name); ok {
		return v.(*toolsetGen)
	}
	v, _ := n.gens.LoadOrStore(name, &toolsetGen{})
	return v.(*toolsetGen)
}

// fingerprint moves the generation of each list of each toolset of the
// config serving whose content changed in r: names and definitions as the
// registry holds them (reg, already updated to r). Called by apply with
// g.syncMu held, before anything is registered.
func (g *Gateway) fingerprint(r *routes, reg *registry) {
	toolsets := g.current().toolsets
	for name, ts := range toolsets {
		var fp [numLists]uint64
		sum := func(list int, kind policy.Kind, key, server string, defs map[string]string) {
			if !ts.allows(kind, key, server) {
				return
			}
			h := fnv.New64a()
			h.Write([]byte(key))
			h.Write([]byte{0})
			h.Write([]byte(defs[key]))
			fp[list] += h.Sum64() // order-free: the lists are sorted anyway
		}
		for _, t := range r.toolDefs {
			sum(listTools, policy.Tool, t.Name, r.tools[t.Name].up.Name(), reg.tools)
		}
		for _, p := range r.promptDefs {
			sum(listPrompts, policy.Prompt, p.Name, r.prompts[p.Name].up.Name(), reg.prompts)
		}
		for _, res := range r.resourceDefs {
			sum(listResources, policy.Resource, res.URI, r.resourceServer[res.URI], reg.resources)
		}
		for _, t := range r.templateDefs {
			sum(listResources, policy.Template, t.URITemplate, r.templateServer[t.URITemplate], reg.templates)
		}
		tg := g.notes.gen(name)
		for list := range numLists {
			if tg.fp[list] != fp[list] {
				tg.fp[list] = fp[list]
				tg.gen[list].Add(1)
			}
		}
	}
}

// moveAll moves every generation of every toolset known: the next
// list_changed reaches every toolset session (a reload changed what they
// may see).
func (n *toolsetNotes) moveAll() {
	n.gens.Range(func(_, v any) bool {
		tg := v.(*toolsetGen)
		for list := range numLists {
			tg.gen[list].Add(1)
		}
		return true
	})
}

// joinToolset is receiving middleware: an initialize (or, in 2026-07-28,
// which has none, the subscriptions/listen that opens the stream
// notifications take) in a toolset's context makes its session a toolset
// session, told of the toolset's own changes only (filterListChanged),
// until it ends.
func (g *Gateway) joinToolset(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "initialize" && method != "subscriptions/listen" || !g.toolsetsSeen.Load() {
			return next(ctx, method, req)
		}
		ss, ok := req.GetSession().(*mcp.ServerSession)
		name := toolsetName(ctx)
		if !ok || name == "" {
			return next(ctx, method, req)
		}
		s := &toolsetSession{toolset: name}
		tg := g.notes.gen(name)
		for list := range numLists {
			s.seen[list].Store(tg.gen[list].Load())
		}
		if _, loaded := g.notes.sessions.LoadOrStore(ss, s); !loaded {
			if !g.awaitSessionEnd(ss, func() { g.notes.sessions.Delete(ss) }) {
				g.notes.sessions.Delete(ss) // the gateway does not run
			}
		}
		return next(ctx, method, req)
	}
}

// filterListChanged is sending middleware: a list_changed to a toolset
// session goes out only when its toolset's list moved since the last one
// it was told of.
func (g *Gateway) filterListChanged(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !g.toolsetsSeen.Load() {
			return next(ctx, method, req)
		}
		list := listOf(method)
		if list < 0 {
			return next(ctx, method, req)
		}
		v, ok := g.notes.sessions.Load(req.GetSession())
		if !ok {
			return next(ctx, method, req) // the whole catalog's session
		}
		s := v.(*toolsetSession)
		now := g.notes.gen(s.toolset).gen[list].Load()
		if prev := s.seen[list].Load(); prev == now || !s.seen[list].CompareAndSwap(prev, now) {
			return nil, nil // nothing of its own changed, or told already
		}
		return next(ctx, method, req)
	}
}
