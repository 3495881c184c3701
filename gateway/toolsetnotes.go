package gateway

import (
	"context"
	"hash/fnv"
	"sync"
	"sync/atomic"

	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// One list_changed per change, and a toolset's own. The mcp.Server's
// registry is the union of every toolset, and the SDK tells every session
// of each change to it, debounced by 10 ms per registration: a merge whose
// registrations are further apart than that (a loaded machine, thousands of
// tools) is sent in parts. So each list has generations: the whole
// catalog's, moved by every merge that changes the list, and each
// toolset's, moved when a merge changes the toolset's part of it (apply
// fingerprints each toolset's lists: names and definitions, from the
// registry), both before anything is registered; a reload that changes the
// policy, auth, discovery or the toolsets moves them all
// (notifyListsChanged): what a principal may see can change with nothing in
// the union changing. The sending middleware holds each list_changed until
// the reload or merge in progress is done, then passes it to a session only
// when the generation of its list (its toolset's, or the whole catalog's)
// moved since the last one it passed to it.

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

// toolsetNotes holds the generations of the whole catalog's and every
// toolset's lists and what each session was last told.
type toolsetNotes struct {
	catalog  toolsetGen // the whole catalog's: fp unused
	gens     sync.Map   // toolset name → *toolsetGen
	sessions sync.Map   // *mcp.ServerSession → *toolsetSession
}

// toolsetGen is one toolset's lists: fingerprints (written under the
// gateway's syncMu) and generations.
type toolsetGen struct {
	fp  [numLists]uint64
	gen [numLists]atomic.Uint64
}

// toolsetSession is a session that was told of a list change, or that
// joined a toolset: its toolset ("" for the whole catalog), and the
// generation of each list it was last told of (or found when it joined).
type toolsetSession struct {
	toolset string
	seen    [numLists]atomic.Uint64
}

// gen returns the generations of toolset name ("": the whole catalog's),
// made on first use.
func (n *toolsetNotes) gen(name string) *toolsetGen {
	if name == "" {
		return &n.catalog
	}
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

// moveCatalog moves the whole catalog's generation of each list that
// changed. Called by apply with g.syncMu held.
func (n *toolsetNotes) moveCatalog(changed [numLists]bool) {
	for list, c := range changed {
		if c {
			n.catalog.gen[list].Add(1)
		}
	}
}

// moveAll moves every generation, the whole catalog's and every toolset's:
// the next list_changed reaches every session (what they may see changed).
func (n *toolsetNotes) moveAll() {
	for list := range numLists {
		n.catalog.gen[list].Add(1)
	}
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
		if v, loaded := g.notes.sessions.LoadOrStore(ss, s); !loaded {
			if !g.awaitSessionEnd(ss, func() { g.notes.sessions.Delete(ss) }) {
				g.notes.sessions.Delete(ss) // the gateway does not run
			}
		} else if v.(*toolsetSession).toolset == "" {
			// Told of a change before it joined: sessionEnded forgets it.
			g.notes.sessions.Store(ss, s)
		}
		return next(ctx, method, req)
	}
}

// filterListChanged is sending middleware: a list_changed goes out once
// no reload or merge is changing the lists (settled), and to a session only
// when the generation of that list, its toolset's or the whole catalog's,
// moved since the last one it was told of. So the parts the SDK's debounce
// splits a change into reach each session as one notification, sent when
// the change is complete.
func (g *Gateway) filterListChanged(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		list := listOf(method)
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if list < 0 || ss == nil {
			return next(ctx, method, req)
		}
		s := g.listSession(ss)
		now := g.settled(g.notes.gen(s.toolset), list)
		if prev := s.seen[list].Load(); prev == now || !s.seen[list].CompareAndSwap(prev, now) {
			return nil, nil // nothing of its own changed, or told already
		}
		return next(ctx, method, req)
	}
}

// listSession returns what ss was told of: its toolset session, or the
// whole catalog's record, made on first use and forgotten when ss ends
// (sessionEnded).
func (g *Gateway) listSession(ss *mcp.ServerSession) *toolsetSession {
	if v, ok := g.notes.sessions.Load(ss); ok {
		return v.(*toolsetSession)
	}
	v, loaded := g.notes.sessions.LoadOrStore(ss, &toolsetSession{})
	if !loaded {
		g.watchSession(ss)
	}
	return v.(*toolsetSession)
}

// settled returns the generation of list in tg once no reload or merge is
// changing it: a reload may merge, then notify of a policy change, and a
// merge registers in several steps, each of which the SDK may notify of.
// Never called by a goroutine that holds reloads.run or syncMu: the SDK
// sends list_changed from its own timers.
func (g *Gateway) settled(tg *toolsetGen, list int) uint64 {
	g.reloads.run.Lock()
	defer g.reloads.run.Unlock()
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	return tg.gen[list].Load()
}
