package gateway

import (
	"errors"
	"fmt"
	"sort"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Overrides (mcpServers.<name>.tools and .prompts) reshape an upstream's
// tools and prompts when the lists are merged (buildRoutes), before
// namespacing and before policy: a renamed tool is named, listed, decided
// on and audited under its new name only, and routes to the upstream's own
// name through the routing table (route.original), on both call paths
// (docs/architecture.md, Overrides and toolsets). They come from the config
// snapshot serving, not from the upstream's spec, so a change applies on
// reload without restarting the server (specOf leaves them out).

// OverrideStatus is one override in force, as GET /status lists it.
type OverrideStatus struct {
	Server string `json:"server"`
	Kind   string `json:"kind"` // "tool" or "prompt"
	// Upstream is the upstream's own name; Exposed the name clients see,
	// empty for a hidden item.
	Upstream string `json:"upstream"`
	Exposed  string `json:"exposed,omitempty"`
	// Changes lists what the override changes: rename, description,
	// appendDescription, title, annotations, hide.
	Changes []string `json:"changes"`
}

// overrider applies one server's overrides of one kind during a merge, and
// records what it did.
type overrider struct {
	server, kind string
	set          map[string]config.Override
	// used are the upstream names the server serves that have an override.
	used map[string]bool
}

func newOverrider(server, kind string, set map[string]config.Override) *overrider {
	return &overrider{server: server, kind: kind, set: set}
}

// name returns the name an item called upstream has before namespacing,
// and false when it is hidden.
func (o *overrider) name(upstream string) (string, bool) {
	ov, ok := o.set[upstream]
	if !ok {
		return upstream, true
	}
	if o.used == nil {
		o.used = map[string]bool{}
	}
	o.used[upstream] = true
	if ov.Hide {
		return "", false
	}
	if ov.Rename != nil {
		return *ov.Rename, true
	}
	return upstream, true
}

// missing returns a problem per override naming an item the server does
// not serve (when its catalog is known).
func (o *overrider) missing() []mergeProblem {
	var out []mergeProblem
	for _, name := range sortedKeys(o.set) {
		if !o.used[name] {
			out = append(out, mergeProblem{o.server, o.kind + " override", name,
				fmt.Sprintf("the server does not serve a %s %q (mcpServers.%s.%ss.%s)", o.kind, name, o.server, o.kind, name)})
		}
	}
	return out
}

// describe applies the text overrides of ov: description, appendDescription.
func describe(desc string, ov config.Override) string {
	if ov.Description != nil {
		desc = *ov.Description
	}
	if ov.AppendDescription != nil {
		if desc != "" {
			desc += "\n\n"
		}
		desc += *ov.AppendDescription
	}
	return desc
}

// overrideTool returns a copy of t reshaped by ov (name left to the merge).
func overrideTool(t *mcp.Tool, ov config.Override) *mcp.Tool {
	c := *t
	c.Description = describe(c.Description, ov)
	if ov.Title != nil {
		c.Title = *ov.Title
	}
	if a := ov.Annotations; a != nil {
		var ann mcp.ToolAnnotations
		if t.Annotations != nil {
			ann = *t.Annotations
		}
		if a.Title != nil {
			ann.Title = *a.Title
		}
		if a.ReadOnlyHint != nil {
			ann.ReadOnlyHint = *a.ReadOnlyHint
		}
		if a.DestructiveHint != nil {
			ann.DestructiveHint = a.DestructiveHint
		}
		if a.IdempotentHint != nil {
			ann.IdempotentHint = *a.IdempotentHint
		}
		if a.OpenWorldHint != nil {
			ann.OpenWorldHint = a.OpenWorldHint
		}
		c.Annotations = &ann
	}
	return &c
}

// overridePrompt returns a copy of p reshaped by ov.
func overridePrompt(p *mcp.Prompt, ov config.Override) *mcp.Prompt {
	c := *p
	c.Description = describe(c.Description, ov)
	if ov.Title != nil {
		c.Title = *ov.Title
	}
	return &c
}

// changes names what ov changes, for status.
func changes(ov config.Override) []string {
	var out []string
	for _, f := range []struct {
		set  bool
		name string
	}{
		{ov.Rename != nil, "rename"}, {ov.Description != nil, "description"},
		{ov.AppendDescription != nil, "appendDescription"}, {ov.Title != nil, "title"},
		{ov.Annotations != nil, "annotations"}, {ov.Hide, "hide"},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// overrideStatus lists the overrides applied in r, sorted by server, kind
// and upstream name.
func overrideStatus(r *routes, servers map[string]config.Server) []OverrideStatus {
	exposed := map[[3]string]string{}
	for name, rt := range r.tools {
		exposed[[3]string{rt.up.Name(), "tool", rt.original}] = name
	}
	for name, rt := range r.prompts {
		exposed[[3]string{rt.up.Name(), "prompt", rt.original}] = name
	}
	var out []OverrideStatus
	for _, server := range sortedKeys(servers) {
		if _, serving := r.byName[server]; !serving {
			continue
		}
		s := servers[server]
		for _, k := range []struct {
			kind string
			set  map[string]config.Override
		}{{"prompt", s.Prompts}, {"tool", s.Tools}} {
			for _, name := range sortedKeys(k.set) {
				out = append(out, OverrideStatus{Server: server, Kind: k.kind, Upstream: name,
					Exposed: exposed[[3]string{server, k.kind, name}], Changes: changes(k.set[name])})
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// CheckCatalog reports what config validation cannot see because it needs
// the gateway's naming (namespacing) and policy patterns: a policy pattern
// that matches the name a renamed tool or prompt had before its rename but
// not the name clients see — a rename must not let an item escape a rule
// written for it. Each problem is a *config.FieldError naming the rule's
// pattern; nil when there is none. New and Reload refuse such a config, and
// `manifold validate` prints the problems.
func CheckCatalog(cfg *config.Config) error {
	if cfg.Policy == nil {
		return nil
	}
	opts := namespacing.Options{Separator: cfg.Gateway.Separator, MaxLength: cfg.Gateway.MaxToolNameLength}
	section := cfg.ServersKey
	if section == "" {
		section = "mcpServers"
	}
	var errs []error
	for _, server := range sortedKeys(cfg.Servers) {
		s := cfg.Servers[server]
		if s.Disabled {
			continue
		}
		s.Name = server
		ns := s.Namespace()
		for _, k := range []struct {
			kind string
			pk   policy.Kind
			set  map[string]config.Override
		}{{"tool", policy.Tool, s.Tools}, {"prompt", policy.Prompt, s.Prompts}} {
			o := opts
			o.Kind = k.kind
			for _, name := range sortedKeys(k.set) {
				ov := k.set[name]
				if ov.Rename == nil || ov.Hide {
					continue
				}
				before, after := namespacing.Name(ns, name, o), namespacing.Name(ns, *ov.Rename, o)
				for i, rule := range cfg.Policy.Rules {
					patterns := rule.Match.Tools
					if k.pk == policy.Prompt {
						patterns = rule.Match.Prompts
					}
					for j, p := range patterns {
						cp := policy.CompilePattern(p)
						if !cp.Match(before) || cp.Match(after) {
							continue
						}
						errs = append(errs, &config.FieldError{Source: cfg.Source,
							Key: fmt.Sprintf("policy.rules[%d].%s.%ss[%d]", i, rule.Effect, k.kind, j),
							Msg: fmt.Sprintf("%q matches %q, the name of %s %q of server %q before its rename (%s.%s.%ss.%s.rename), but not %q, the name clients see: the rule would not apply to it; match the new name",
								p, before, k.kind, name, server, section, server, k.kind, name, after)})
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// applyOverrides adds the items of one kind of one server (src) to the
// merge, reshaped by set (the server's overrides of that kind): each name
// after overrides to src.Names, each definition to defs under it and, for a
// renamed item, its upstream name to renamed. Hidden items are left out.
// Items keeping their name go first, so that a rename onto a name the
// server also serves is what is refused (a problem), never the upstream's
// own item: the renamed item is left out rather than shown under a name
// its rules were not written for. It returns problems with those of this
// kind added: refusals, and overrides naming items the server does not
// serve.
func applyOverrides[T any](src *namespacing.Source, problems []mergeProblem, items []T, set map[string]config.Override, kind string,
	defs map[[2]string]T, renamed map[[2]string]string, nameOf func(T) string, reshape func(T, config.Override) T) []mergeProblem {
	ov := newOverrider(src.Server, kind, set)
	var later []T
	for pass := 0; pass < 2; pass++ {
		list := items
		if pass == 1 {
			list = later
		}
		for _, it := range list {
			upstream := nameOf(it)
			n, shown := ov.name(upstream)
			if !shown {
				continue
			}
			if pass == 0 && n != upstream {
				later = append(later, it)
				continue
			}
			if o, ok := set[upstream]; ok {
				it = reshape(it, o)
			}
			key := [2]string{src.Server, n}
			if _, dup := defs[key]; dup && n != upstream {
				problems = append(problems, mergeProblem{src.Server, kind, upstream,
					fmt.Sprintf("renamed to %q, which the server also serves under that name: rename one of them", n)})
				continue
			}
			defs[key] = it
			if n != upstream {
				renamed[[2]string{kind + "\x00" + src.Server, n}] = upstream
			}
			src.Names = append(src.Names, n)
		}
	}
	return append(problems, ov.missing()...)
}

// CatalogStatus is the catalog's shaping, as GET /status reports it.
type CatalogStatus struct {
	// Overrides are those of the servers serving, applied or not.
	Overrides []OverrideStatus `json:"overrides,omitempty"`
	// Problems are the items the last merge skipped or could not shape:
	// schemas the SDK would reject, name collisions, renames onto a name
	// the server also serves, overrides naming an item the server does not
	// serve.
	Problems []string        `json:"problems,omitempty"`
	Toolsets []ToolsetStatus `json:"toolsets,omitempty"`
	// Held are the items tool pinning holds (pinstatus.go).
	Held []HeldStatus `json:"held,omitempty"`
}

// catalogStatus reports the catalog's shaping under snap, for the servers
// in visible (nil: all).
func (g *Gateway) catalogStatus(snap *snapshot, visible map[string]bool) CatalogStatus {
	r := g.routes.Load()
	var st CatalogStatus
	for _, o := range overrideStatus(r, snap.cfg.Servers) {
		if visible == nil || visible[o.Server] {
			st.Overrides = append(st.Overrides, o)
		}
	}
	g.syncMu.Lock()
	for _, p := range g.lastProblems {
		if visible == nil || visible[p.server] {
			st.Problems = append(st.Problems, p.String())
		}
	}
	for _, h := range g.pinning.held {
		if visible == nil || visible[h.Server] {
			st.Held = append(st.Held, h)
		}
	}
	g.syncMu.Unlock()
	st.Toolsets = toolsetStatus(snap, r)
	return st
}
