package gateway

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/pins"
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"
)

// mergeProblem is something in an upstream's lists that the gateway had to
// skip; reported in logs and status, never fatal.
type mergeProblem struct {
	server, kind, name, reason string
}

func (p mergeProblem) String() string {
	return fmt.Sprintf("%s %q of server %q skipped: %s", p.kind, p.name, p.server, p.reason)
}

// buildRoutes merges the catalogs of ups (sorted by name) into one routing
// generation, leaving out the items pinning holds (pinning.go), with the
// overrides of servers (the config's mcpServers; nil: none) applied next
// (overrides.go). It is pure apart from reading each upstream's Catalog.
func buildRoutes(ups []*upstream.Upstream, servers map[string]config.Server, opts namespacing.Options, header string, held map[heldKey]bool) (*routes, []mergeProblem) {
	r := &routes{
		byPrefix:       map[string]*upstream.Upstream{},
		byName:         map[string]*upstream.Upstream{},
		resourceServer: map[string]string{},
		templateServer: map[string]string{},
	}
	var problems []mergeProblem
	var toolSrc, promptSrc []namespacing.Source
	toolByKey := map[[2]string]*mcp.Tool{}
	promptByKey := map[[2]string]*mcp.Prompt{}
	renamed := map[[2]string]string{} // server, name after overrides → upstream name
	exact, templates := map[string]string{}, map[string]string{}
	var unprefixed []string
	var instructions strings.Builder
	instructions.WriteString(header)

	for _, up := range ups {
		name, prefix := up.Name(), up.Config().Namespace()
		r.byName[name] = up
		if prefix != "" {
			r.byPrefix[prefix] = up
		} else {
			unprefixed = append(unprefixed, name)
		}
		cat := up.Catalog()
		if cat == nil {
			continue
		}
		if cat.Instructions != "" {
			section := fmt.Sprintf("\n\n## %s\n%s", name, strings.TrimSpace(cat.Instructions))
			instructions.WriteString(section)
			r.sections = append(r.sections, instructionSection{server: name, text: section})
		}
		tools := make([]*mcp.Tool, 0, len(cat.Tools))
		for _, t := range cat.Tools {
			if heldItem(held, name, pins.KindTool, t.Name) {
				continue
			}
			if reason := checkSchema(t); reason != "" {
				problems = append(problems, mergeProblem{name, "tool", t.Name, reason})
				continue
			}
			tools = append(tools, t)
		}
		src := namespacing.Source{Server: name, Prefix: prefix}
		problems = applyOverrides(&src, problems, tools, servers[name].Tools, "tool", toolByKey, renamed,
			func(t *mcp.Tool) string { return t.Name }, overrideTool)
		toolSrc = append(toolSrc, src)
		src = namespacing.Source{Server: name, Prefix: prefix}
		prompts := make([]*mcp.Prompt, 0, len(cat.Prompts))
		for _, p := range cat.Prompts {
			if !heldItem(held, name, pins.KindPrompt, p.Name) {
				prompts = append(prompts, p)
			}
		}
		problems = applyOverrides(&src, problems, prompts, servers[name].Prompts, "prompt", promptByKey, renamed,
			func(p *mcp.Prompt) string { return p.Name }, overridePrompt)
		promptSrc = append(promptSrc, src)

		for _, res := range cat.Resources {
			uri := namespacing.WrapURI(prefix, res.URI)
			if reason := checkURI(uri); reason != "" {
				problems = append(problems, mergeProblem{name, "resource", res.URI, reason})
				continue
			}
			if prefix == "" {
				if owner, dup := exact[res.URI]; dup && owner != name {
					problems = append(problems, mergeProblem{name, "resource", res.URI, fmt.Sprintf("URI already exposed by unprefixed server %q", owner)})
					continue
				}
				exact[res.URI] = name
			}
			if _, dup := r.resourceServer[uri]; dup {
				continue // listed twice by the same server
			}
			r.resourceServer[uri] = name
			def := *res
			def.URI = uri
			r.resourceDefs = append(r.resourceDefs, &def)
		}
		for _, t := range cat.Templates {
			tmpl := namespacing.WrapURI(prefix, t.URITemplate)
			if reason := checkTemplate(tmpl); reason != "" {
				problems = append(problems, mergeProblem{name, "resource template", t.URITemplate, reason})
				continue
			}
			if owner, dup := r.templateServer[tmpl]; dup {
				if owner != name {
					problems = append(problems, mergeProblem{name, "resource template", t.URITemplate, fmt.Sprintf("template already exposed by unprefixed server %q", owner)})
				}
				continue
			}
			r.templateServer[tmpl] = name
			if prefix == "" {
				templates[t.URITemplate] = name
			}
			def := *t
			def.URITemplate = tmpl
			r.templateDefs = append(r.templateDefs, &def)
		}
	}
	fallback := ""
	if len(unprefixed) == 1 {
		fallback = unprefixed[0]
	}
	r.owners = namespacing.NewOwners(exact, templates, fallback)

	var p []mergeProblem
	r.tools, r.toolDefs, p = mergeKind(r, "tool", toolSrc, toolByKey, renamed, opts, func(t *mcp.Tool, name string) *mcp.Tool {
		def := *t
		def.Name = name
		return &def
	})
	problems = append(problems, p...)
	r.prompts, r.promptDefs, p = mergeKind(r, "prompt", promptSrc, promptByKey, renamed, opts, func(pr *mcp.Prompt, name string) *mcp.Prompt {
		def := *pr
		def.Name = name
		return &def
	})
	problems = append(problems, p...)
	r.instructions = instructions.String()
	// Sorted by key, as the SDK lists them: clients page through these.
	slices.SortFunc(r.toolDefs, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(r.promptDefs, func(a, b *mcp.Prompt) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(r.resourceDefs, func(a, b *mcp.Resource) int { return strings.Compare(a.URI, b.URI) })
	slices.SortFunc(r.templateDefs, func(a, b *mcp.ResourceTemplate) int { return strings.Compare(a.URITemplate, b.URITemplate) })
	r.header = header
	r.all = view{tools: r.toolDefs, prompts: r.promptDefs, resources: r.resourceDefs, templates: r.templateDefs, instructions: r.instructions}
	return r, problems
}

// mergeKind maps the names of one kind (tools or prompts) of every source
// and returns their routes and exposed definitions, in merge order, and a
// problem per collision. exposed copies a definition under its new name.
func mergeKind[T any](r *routes, kind string, sources []namespacing.Source, defs map[[2]string]T, renamed map[[2]string]string, opts namespacing.Options,
	exposed func(def T, name string) T) (map[string]route, []T, []mergeProblem) {
	opts.Kind = kind
	_, ordered, collisions := namespacing.Merge(sources, opts)
	var problems []mergeProblem
	for _, c := range collisions {
		problems = append(problems, mergeProblem{c.Dropped.Server, kind, c.Dropped.Original, c.Error()})
	}
	table := make(map[string]route, len(ordered))
	out := make([]T, 0, len(ordered))
	for _, e := range ordered {
		up := r.byName[e.Server]
		original := e.Original
		if u, ok := renamed[[2]string{kind + "\x00" + e.Server, e.Original}]; ok {
			original = u // the upstream's own name of a renamed item
		}
		table[e.Exposed] = route{up: up, original: original, prefix: up.Config().Namespace()}
		out = append(out, exposed(defs[[2]string{e.Server, e.Original}], e.Exposed))
	}
	return table, out, problems
}

// checkSchema reports why mcp.Server.AddTool would reject (panic on) t.
func checkSchema(t *mcp.Tool) string {
	m, ok := t.InputSchema.(map[string]any)
	if !ok {
		return "input schema is not a JSON object"
	}
	if m["type"] != "object" {
		return `input schema type is not "object"`
	}
	return ""
}

// checkURI reports why mcp.Server.AddResource would reject (panic on) uri.
func checkURI(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return "invalid URI: " + err.Error()
	}
	if !u.IsAbs() {
		return "URI is not absolute"
	}
	return ""
}

// checkTemplate reports why mcp.Server.AddResourceTemplate would reject tmpl.
func checkTemplate(tmpl string) string {
	if _, err := uritemplate.New(tmpl); err != nil {
		return "invalid URI template: " + err.Error()
	}
	scheme, _, ok := strings.Cut(tmpl, ":")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "{}/") {
		return "URI template is not absolute"
	}
	return ""
}
