package gateway

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/manifold-mcp/manifold/plugins"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// list_post (docs/architecture.md, Plugins): the lists a principal sees go
// through the list_post hooks of the plugins that cover it, once per
// principal per catalog change (the view cache, access.go), and a name a
// plugin listed a tool or prompt under is an alias of the exposed name,
// resolved in the resolve stage for that principal. Policy, match globs
// and the audit record see the exposed name. A call by an alias takes the
// SDK path (the SDK does not know the name: interceptor hands it to
// aliasCall), never the raw one.

// listPostTimeout bounds the list_post hooks of one view.
const listPostTimeout = 5 * time.Second

// aliases are a view's renames: the name a client calls → the exposed
// name, per kind.
type aliases struct {
	tools, prompts map[string]string
}

// listsByPlugins reports whether list_post hooks shape the lists.
func (g *Gateway) listsByPlugins() bool { return g.plugins.Chain().Lists() }

// pluginView returns v as the list_post hooks make it for pr.
func (g *Gateway) pluginView(r *routes, pr *policy.Principal, v *view) *view {
	ch := g.plugins.Chain()
	if !ch.Lists() {
		return v
	}
	ctx, cancel := context.WithTimeout(context.Background(), listPostTimeout)
	defer cancel()
	out := *v
	out.aliases = &aliases{}
	tool := func(name string) string { return r.tools[name].up.Name() }
	prompt := func(name string) string { return r.prompts[name].up.Name() }
	out.tools, out.aliases.tools = postList(ctx, g, ch, "tools", "name", pr, v.tools, func(t *mcp.Tool) string { return t.Name }, tool)
	out.prompts, out.aliases.prompts = postList(ctx, g, ch, "prompts", "name", pr, v.prompts, func(p *mcp.Prompt) string { return p.Name }, prompt)
	out.resources, _ = postList(ctx, g, ch, "resources", "uri", pr, v.resources, func(r *mcp.Resource) string { return r.URI },
		func(uri string) string { return r.resourceServer[uri] })
	out.templates, _ = postList(ctx, g, ch, "templates", "uriTemplate", pr, v.templates, func(t *mcp.ResourceTemplate) string { return t.URITemplate },
		func(uri string) string { return r.templateServer[uri] })
	return &out
}

// postList runs list_post over items and returns them sorted by key (as
// page needs them) with the renames.
func postList[T any](ctx context.Context, g *Gateway, ch *plugins.Chain, list, keyField string, pr *policy.Principal, items []T,
	key func(T) string, server func(string) string) ([]T, map[string]string) {
	in := make([]plugins.ListItem, 0, len(items))
	for _, it := range items {
		raw, err := json.Marshal(it)
		if err != nil {
			continue
		}
		in = append(in, plugins.ListItem{Key: key(it), Raw: raw, Server: server(key(it))})
	}
	out, renames := ch.ListPost(ctx, list, keyField, pr, in)
	res := make([]T, 0, len(out))
	for _, it := range out {
		var t T
		if err := json.Unmarshal(it.Raw, &t); err != nil {
			g.log.Warn("list_post returned an item that does not decode; dropped", zap.String(keyKind, list), zap.String(keyName, it.Key), zap.Error(err))
			continue
		}
		res = append(res, t)
	}
	sort.Slice(res, func(i, j int) bool { return key(res[i]) < key(res[j]) })
	return res, renames
}

// resolveAlias resolves c's name as an alias of c's principal, setting
// c.name to the exposed name; false when it is none.
func (g *Gateway) resolveAlias(c *call) (route, bool) {
	if c.kind != policy.Tool && c.kind != policy.Prompt || c.principal == nil || !g.listsByPlugins() {
		return route{}, false
	}
	v := g.viewOf(c.routes, c.snap.access, c.principal)
	if v.aliases == nil {
		return route{}, false
	}
	m := v.aliases.tools
	if c.kind == policy.Prompt {
		m = v.aliases.prompts
	}
	name, ok := m[c.name]
	if !ok {
		return route{}, false
	}
	rt, ok := c.routes.lookup(c.kind, name)
	if ok {
		c.name = name
	}
	return rt, ok
}

// aliasCall serves a tools/call or prompts/get whose name the SDK does not
// know but that may be an alias (handled false otherwise).
func (g *Gateway) aliasCall(ctx context.Context, req mcp.Request) (mcp.Result, bool, error) {
	if !g.listsByPlugins() {
		return nil, false, nil
	}
	switch req := req.(type) {
	case *mcp.CallToolRequest:
		if req.Params == nil || g.known(policy.Tool, req.Params.Name) {
			return nil, false, nil
		}
		res, err := g.callTool(ctx, req)
		return res, true, err
	case *mcp.GetPromptRequest:
		if req.Params == nil || g.known(policy.Prompt, req.Params.Name) {
			return nil, false, nil
		}
		res, err := g.getPrompt(ctx, req)
		return res, true, err
	}
	return nil, false, nil
}

// known reports whether name routes somewhere as it is.
func (g *Gateway) known(kind policy.Kind, name string) bool {
	_, ok := g.routes.Load().lookup(kind, name)
	return ok
}
