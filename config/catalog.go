package config

import (
	"fmt"
	"slices"
	"strings"
)

// The catalog settings: per-server overrides of tools and prompts (mcpServers.<name>.tools and
// .prompts) and toolsets (the top-level "toolsets" section). The gateway applies them when it
// merges the upstreams' lists (docs/architecture.md, Overrides and toolsets).

// keyToolsets is the top-level key of the toolsets.
const keyToolsets = "toolsets"

// Override reshapes one tool or prompt of a server, named by the upstream's own name. Nil
// fields leave the upstream's value.
type Override struct {
	// Rename (key "rename") is the name before namespacing: a tool "echo" of server
	// "everything" renamed "say" is listed and called as "everything__say".
	Rename *string
	// Description (key "description") replaces the upstream's description.
	Description *string
	// AppendDescription (key "appendDescription") is appended to the description (after
	// Description when both are set), separated by a blank line.
	AppendDescription *string
	// Title (key "title") replaces the title.
	Title *string
	// Annotations (key "annotations"; tools only) replace the tool's annotations key by key;
	// keys not set keep the upstream's value.
	Annotations *Annotations
	// Hide (key "hide") removes the item: clients never see it and calls to it are answered as
	// for a name that does not exist.
	Hide bool
}

// Annotations are the tool annotations an Override may set (the MCP ToolAnnotations).
type Annotations struct {
	Title           *string
	ReadOnlyHint    *bool
	DestructiveHint *bool
	IdempotentHint  *bool
	OpenWorldHint   *bool
}

// Toolset is one entry of the "toolsets" section: a named subset of the merged catalog, served
// on its own endpoints (/mcp/<name>, /sse/<name>, serve --stdio --toolset <name>). Patterns
// are globs over the names and URIs clients see (as in policy rules); one starting with "!"
// excludes. In each list the last pattern that matches an item decides; an item no pattern
// matches is in the toolset when the list starts with an exclusion ("!…") and out otherwise.
// A nil list (key absent) takes every item of the kind; an empty list ([]) takes none.
type Toolset struct {
	// Name is the toolset's key; the loader fills it in.
	Name string
	// Servers (key "servers") restricts the toolset to these servers; nil means every server.
	Servers []string
	// Tools, Prompts and Resources (keys "tools", "prompts", "resources") select the items of
	// each kind; Resources applies to resource URIs and templates alike.
	Tools     []string
	Prompts   []string
	Resources []string
}

func overrideFields(o *Override) []field {
	return []field{
		{name: "rename", ptr: &o.Rename},
		{name: "description", ptr: &o.Description},
		{name: "appendDescription", ptr: &o.AppendDescription},
		{name: "title", ptr: &o.Title},
		{name: "hide", ptr: &o.Hide},
	}
}

// overrides decodes mcpServers.<name>.tools or .prompts: a mapping of upstream names to
// overrides. Tools may have annotations; prompts have none in MCP.
func (d *decoder) overrides(key string, v any, tools bool) map[string]Override {
	return entries(d, key, v, func(ik, _ string, e map[string]any) Override {
		var o Override
		rest := make(map[string]any, len(e))
		for k, x := range e {
			if k == "annotations" && tools {
				o.Annotations = d.annotations(joinKey(ik, k), x)
				continue
			}
			rest[k] = x
		}
		fields := overrideFields(&o)
		if tools {
			fields = append(fields, field{name: "annotations"})
		}
		d.section(ik, fields, rest)
		return o
	})
}

// entries decodes v, a mapping of names to mappings under key, with entry; nil when empty.
// An entry that is not a mapping is reported and left out.
func entries[T any](d *decoder, key string, v any, entry func(key, name string, e map[string]any) T) map[string]T {
	m, ok := d.mapping(key, v)
	if !ok || len(m) == 0 {
		return nil
	}
	out := make(map[string]T, len(m))
	for _, name := range sortedKeys(m) {
		ik := joinKey(key, name)
		if e, ok := d.mapping(ik, m[name]); ok {
			out[name] = entry(ik, name, e)
		}
	}
	return out
}

// annotations decodes an override's tool annotations.
func (d *decoder) annotations(key string, v any) *Annotations {
	if v == nil {
		return nil
	}
	a := &Annotations{}
	m, ok := d.mapping(key, v)
	if !ok {
		return nil
	}
	hints := map[string]**bool{
		"readOnlyHint": &a.ReadOnlyHint, "destructiveHint": &a.DestructiveHint,
		"idempotentHint": &a.IdempotentHint, "openWorldHint": &a.OpenWorldHint,
	}
	rest := make(map[string]any, len(m))
	for k, x := range m {
		p, ok := hints[k]
		if !ok {
			rest[k] = x
			continue
		}
		if b, ok := asBool(x); ok {
			*p = &b
		} else if x != nil {
			d.fail(joinKey(key, k), "must be true or false")
		}
	}
	d.section(key, []field{{name: "title", ptr: &a.Title},
		{name: "readOnlyHint"}, {name: "destructiveHint"}, {name: "idempotentHint"}, {name: "openWorldHint"}}, rest)
	return a
}

// toolsets decodes the toolsets section.
func (d *decoder) toolsets(key string, v any) map[string]Toolset {
	return entries(d, key, v, func(ik, name string, e map[string]any) Toolset {
		ts := Toolset{Name: name}
		lists := map[string]*[]string{"servers": &ts.Servers, "tools": &ts.Tools, "prompts": &ts.Prompts, "resources": &ts.Resources}
		rest := make(map[string]any, len(e))
		for k, x := range e {
			if p, ok := lists[k]; ok {
				d.patternList(joinKey(ik, k), p, x)
			} else {
				rest[k] = x
			}
		}
		d.section(ik, []field{{name: "servers"}, {name: "tools"}, {name: "prompts"}, {name: "resources"}}, rest)
		return ts
	})
}

// patternList decodes a list of strings where, unlike elsewhere, [] (take nothing) differs
// from an absent key or null (take everything).
func (d *decoder) patternList(key string, p *[]string, v any) {
	if v == nil {
		return
	}
	if l, ok := v.([]any); ok && len(l) == 0 {
		*p = []string{}
		return
	}
	if v, ok := d.expand(key, v); ok {
		d.strings(key, p, v)
	}
}

// catalog validates the overrides of every server and the toolsets.
func (v *validator) catalog(c *Config, section string) {
	for _, name := range keysOf(c.Servers) {
		s := c.Servers[name]
		key := joinKey(section, name)
		v.overrides(joinKey(key, "tools"), s.Tools)
		v.overrides(joinKey(key, "prompts"), s.Prompts)
	}
	for _, name := range keysOf(c.Toolsets) {
		ts := c.Toolsets[name]
		key := joinKey(keyToolsets, name)
		if !ValidToolsetName(name) {
			v.add(key, "a toolset name may contain only letters, digits, _ and - (it is a URL path segment: /mcp/<name>)")
		}
		for i, srv := range ts.Servers {
			if _, ok := c.Servers[srv]; !ok {
				v.add(fmt.Sprintf("%s[%d]", joinKey(key, "servers"), i), fmt.Sprintf("no server %q in %s", srv, section))
			}
		}
		for _, l := range []struct {
			k    string
			list []string
		}{{"tools", ts.Tools}, {"prompts", ts.Prompts}, {"resources", ts.Resources}} {
			for i, p := range l.list {
				if strings.TrimPrefix(p, "!") == "" {
					v.add(fmt.Sprintf("%s[%d]", joinKey(key, l.k), i), "an empty pattern matches nothing")
				}
			}
		}
	}
}

// overrides validates one server's tool or prompt overrides: names not empty, renames valid
// and distinct, and no rename onto a name another override of the server keeps or takes.
func (v *validator) overrides(key string, m map[string]Override) {
	taken := map[string]string{} // name after overrides → upstream name
	for _, name := range keysOf(m) {
		o := m[name]
		ik := joinKey(key, name)
		if name == "" {
			v.add(key, "an override needs the upstream's name as its key")
		}
		if o.Hide && (o.Rename != nil || o.Description != nil || o.AppendDescription != nil || o.Title != nil || o.Annotations != nil) {
			v.add(joinKey(ik, "hide"), "a hidden item is not shown: remove the other keys or hide")
		}
		if o.Hide {
			continue
		}
		after := name
		if o.Rename != nil {
			after = *o.Rename
			if after == "" {
				v.add(joinKey(ik, "rename"), "must not be empty")
				continue
			}
			if strings.TrimSpace(after) != after {
				v.add(joinKey(ik, "rename"), "must not start or end with white space")
			}
		}
		if first, dup := taken[after]; dup {
			v.add(joinKey(ik, "rename"), fmt.Sprintf("%q is also the name of %q after overrides: two items cannot share a name", after, first))
			continue
		}
		taken[after] = name
	}
}

// ValidToolsetName reports whether name may name a toolset: one URL path segment of letters,
// digits, '_' and '-'.
func ValidToolsetName(name string) bool {
	return name != "" && !strings.ContainsFunc(name, func(r rune) bool { return !isNameChar(r) })
}

// ToolsetNames returns the names of c's toolsets, sorted.
func (c *Config) ToolsetNames() []string {
	return keysOf(c.Toolsets)
}

// keysOf returns the keys of m, sorted.
func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// serverOverrides decodes mcpServers.<name>.tools (tools) or .prompts into s.
func (d *decoder) serverOverrides(key string, s *Server, tools bool, v any) {
	if tools {
		s.Tools = d.overrides(key, v, true)
	} else {
		s.Prompts = d.overrides(key, v, false)
	}
}
