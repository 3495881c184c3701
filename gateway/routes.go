package gateway

import (
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// route is where one exposed name goes: the upstream and its own name.
type route struct {
	up       *upstream.Upstream
	original string
	prefix   string // the upstream's namespace; "" = URIs are not rewritten
}

// routes is one immutable generation of the routing tables, built when the
// upstreams' lists are merged and swapped in atomically. The call path reads
// it with one atomic load and map lookups: no locks, no name parsing.
type routes struct {
	tools    map[string]route
	prompts  map[string]route
	byPrefix map[string]*upstream.Upstream // non-empty namespaces
	owners   *namespacing.Owners           // URIs of unprefixed upstreams
	byName   map[string]*upstream.Upstream

	// resourceServer and templateServer name the server of each exposed
	// resource URI and template, for policies over whole servers.
	resourceServer map[string]string
	templateServer map[string]string

	// The exposed definitions, sorted by name or URI: listed to clients
	// (filtered per principal) and synced into mcp.Server.
	toolDefs     []*mcp.Tool
	promptDefs   []*mcp.Prompt
	resourceDefs []*mcp.Resource
	templateDefs []*mcp.ResourceTemplate
	instructions string
	// header and sections make up instructions: a principal's view keeps
	// only the sections of servers it can see something of.
	header   string
	sections []instructionSection

	// all is the view of everything, for an unrestricted policy.
	all view
	// listedPerClient names the servers with per-client lists; nil: none
	// (sessionlists.go).
	listedPerClient []string
	// held is what pinning holds (checkPins), which a session's own
	// generation (per-client lists) holds too.
	held map[heldKey]bool
}

// resource finds the upstream owning a URI as the client sees it, and the
// URI as that upstream knows it.
func (r *routes) resource(uri string) (route, bool) {
	if prefix, original, ok := namespacing.UnwrapURI(uri); ok {
		if up := r.byPrefix[prefix]; up != nil {
			return route{up: up, original: original, prefix: prefix}, true
		}
	}
	if name, ok := r.owners.Lookup(uri); ok {
		if up := r.byName[name]; up != nil {
			return route{up: up, original: uri}, true
		}
	}
	return route{}, false
}

// instructionSection is one upstream's part of the merged instructions.
type instructionSection struct {
	server, text string
}
