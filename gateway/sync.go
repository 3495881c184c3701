package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// registry remembers what is registered on the mcp.Server, by key, with a
// fingerprint (the definition's JSON) so that a refresh only adds what
// changed and removes what went away: AddTool of 10,000 tools costs
// hundreds of milliseconds, and every change notifies every session.
type registry struct {
	tools, prompts, resources, templates map[string]string
	// registered, in tests, is called after each definition apply
	// registers, with the gateway's syncMu held.
	registered func()
}

func newRegistry() *registry {
	return &registry{
		tools:     map[string]string{},
		prompts:   map[string]string{},
		resources: map[string]string{},
		templates: map[string]string{},
	}
}

// diff returns the keys of next that are new or changed, and the keys of
// prev that are gone; prev is updated to next.
func diff[T any](prev map[string]string, items []T, key func(T) string) (changed []T, gone []string) {
	next := make(map[string]string, len(items))
	for _, it := range items {
		k := key(it)
		fp, err := json.Marshal(it)
		if err != nil {
			fp = fmt.Appendf(nil, "%p", any(it)) // unmarshalable: always re-add
		}
		next[k] = string(fp)
		if prev[k] != string(fp) {
			changed = append(changed, it)
		}
	}
	for k := range prev {
		if _, ok := next[k]; !ok {
			gone = append(gone, k)
		}
	}
	clear(prev)
	for k, v := range next {
		prev[k] = v
	}
	return changed, gone
}

// apply registers on g.server what r has that is new or changed, and
// returns what went away, for unregister: merge registers before r serves
// and unregisters after, so that a name r routes is always one the SDK
// knows (its tools/call refuses the others as unknown), while lists, which
// the gateway answers from the routing table, change at once. First it
// moves the generation of each list that changes, the whole catalog's and
// each toolset's (toolsetnotes.go): the SDK sends its debounced
// list_changed after, and filterListChanged lets one per generation
// through. Called with g.syncMu held.
func (g *Gateway) apply(r *routes) gone {
	reg := g.registry
	tools, goneTools := diff(reg.tools, r.toolDefs, func(t *mcp.Tool) string { return t.Name })
	prompts, gonePrompts := diff(reg.prompts, r.promptDefs, func(p *mcp.Prompt) string { return p.Name })
	resources, goneResources := diff(reg.resources, r.resourceDefs, func(res *mcp.Resource) string { return res.URI })
	templates, goneTemplates := diff(reg.templates, r.templateDefs, func(t *mcp.ResourceTemplate) string { return t.URITemplate })
	g.fingerprint(r, reg)
	g.notes.moveCatalog([numLists]bool{
		listTools:     len(tools)+len(goneTools) > 0,
		listPrompts:   len(prompts)+len(gonePrompts) > 0,
		listResources: len(resources)+len(goneResources)+len(templates)+len(goneTemplates) > 0,
	})
	for _, t := range tools {
		g.safely("tool", t.Name, func() { g.server.AddTool(withoutParamHeaders(t), g.callTool) })
		reg.hook()
	}
	for _, p := range prompts {
		g.safely("prompt", p.Name, func() { g.server.AddPrompt(p, g.getPrompt) })
	}
	for _, res := range resources {
		g.safely("resource", res.URI, func() { g.server.AddResource(res, g.readResourceHandler) })
	}
	for _, t := range templates {
		g.safely("resource template", t.URITemplate, func() { g.server.AddResourceTemplate(t, g.readResourceHandler) })
	}
	return gone{tools: goneTools, prompts: gonePrompts, resources: goneResources, templates: goneTemplates}
}

// gone are the keys of definitions a merge removes: tool and prompt names,
// resource URIs, URI templates.
type gone struct {
	tools, prompts, resources, templates []string
}

// unregister removes what apply found gone from g.server, once the
// routes without it serve. Called with g.syncMu held.
func (g *Gateway) unregister(d gone) {
	if len(d.tools) > 0 {
		g.server.RemoveTools(d.tools...)
	}
	if len(d.prompts) > 0 {
		g.server.RemovePrompts(d.prompts...)
	}
	if len(d.resources) > 0 {
		g.server.RemoveResources(d.resources...)
	}
	if len(d.templates) > 0 {
		g.server.RemoveResourceTemplates(d.templates...)
	}
}

// hook calls registered, if set.
func (reg *registry) hook() {
	if reg.registered != nil {
		reg.registered()
	}
}

// safely runs an mcp.Server registration, which panics on input it cannot
// accept; merge already filters what we know of, this is the backstop.
func (g *Gateway) safely(kind, name string, register func()) {
	defer func() {
		if r := recover(); r != nil {
			g.log.Error("registration rejected by the MCP server library",
				zap.String(keyKind, kind), zap.String(keyName, name), zap.Any("panic", r))
		}
	}()
	register()
}

// paramHeaderKey marks, in a 2026-07-28 tool schema, an argument that the
// client mirrors into an Mcp-Param-* HTTP header.
const paramHeaderKey = "x-mcp-header"

// withoutParamHeaders returns t, or a copy whose input schema has no
// x-mcp-header annotations, for registration with the SDK. The SDK checks
// those headers against its registry before any middleware runs, so for a
// tool the principal may not use it would answer "missing Mcp-Param-…
// header" where an unknown tool gets "unknown tool": denied names would be
// told apart and their parameters named. Clients still see the annotations
// in tools/list, which the gateway answers from its own tables; the gateway
// routes on the JSON-RPC body and does not itself check the mirrors.
func withoutParamHeaders(t *mcp.Tool) *mcp.Tool {
	schema, changed := stripKey(t.InputSchema, paramHeaderKey)
	if !changed {
		return t
	}
	c := *t
	c.InputSchema = schema
	return &c
}

// stripKey returns v without key in any of its JSON objects, copying only
// what changes.
func stripKey(v any, key string) (any, bool) {
	switch v := v.(type) {
	case map[string]any:
		var out map[string]any
		for k, e := range v {
			ne, changed := stripKey(e, key)
			if k != key && !changed {
				continue
			}
			if out == nil {
				out = make(map[string]any, len(v))
				for k2, e2 := range v {
					out[k2] = e2
				}
			}
			if k == key {
				delete(out, k)
			} else {
				out[k] = ne
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	case []any:
		var out []any
		for i, e := range v {
			if ne, changed := stripKey(e, key); changed {
				if out == nil {
					out = append([]any(nil), v...)
				}
				out[i] = ne
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	}
	return v, false
}
