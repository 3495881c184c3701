package gateway

import (
	"github.com/manifold-mcp/manifold/discovery"
	"github.com/manifold-mcp/manifold/policy"
)

// searchIndex is the search index of one routing generation under one
// discovery config: the documents are the generation's toolDefs, in order.
// It is immutable.
type searchIndex struct {
	routes *routes
	disc   *discoveryMode
	index  *discovery.Index
	byName map[string]int // tool name → its index in routes.toolDefs
	always []int          // the tools gateway.discovery.always matches
}

// searchIndexFor returns the index of the routing generation serving now
// under snap's discovery config, building it when either changed since the
// last one (merge builds it ahead, so requests rarely do).
func (g *Gateway) searchIndexFor(snap *snapshot) *searchIndex {
	r := g.routes.Load()
	si := g.search.Load()
	if si != nil && si.routes == r && si.disc == snap.disc {
		return si
	}
	fresh := newSearchIndex(r, snap.disc)
	g.search.CompareAndSwap(si, fresh) // a newer one stored meanwhile wins
	return fresh
}

// indexCatalog builds the search index of r ahead of the first search,
// when progressive discovery is configured.
func (g *Gateway) indexCatalog(r *routes) {
	if snap := g.current(); snap.disc != nil {
		g.search.Store(newSearchIndex(r, snap.disc))
	}
}

func newSearchIndex(r *routes, disc *discoveryMode) *searchIndex {
	docs := make([]discovery.Doc, len(r.toolDefs))
	si := &searchIndex{routes: r, disc: disc, byName: make(map[string]int, len(r.toolDefs))}
	for i, t := range r.toolDefs {
		docs[i] = discovery.Doc{Name: t.Name, Title: t.Title, Description: t.Description}
		si.byName[t.Name] = i
		if disc != nil {
			for _, p := range disc.always {
				if p.Match(t.Name) {
					si.always = append(si.always, i)
					break
				}
			}
		}
	}
	si.index = discovery.New(docs)
	return si
}

// allowed reports whether pr may use tool i under snap's policy.
func (si *searchIndex) allowed(snap *snapshot, pr *policy.Principal, i int) bool {
	p := snap.access.policy
	if p.Unrestricted() {
		return true
	}
	name := si.routes.toolDefs[i].Name
	return pr != nil && p.Decide(pr, policy.Tool, name, si.routes.tools[name].up.Name()).Allowed
}
