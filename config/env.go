package config

import (
	"fmt"
	"strings"
)

// Environment overrides.
const (
	envPrefix    = "MANIFOLD_"
	envSeparator = "__"
	envSource    = "environment"
)

// envValue is the value of one override in the merged tree: the decoder uses it literally
// (no ${VAR} expansion) and blames the variable for any problem with it.
type envValue struct {
	Var   string // the variable's name
	Value any    // a string, or []any of strings for a list key
}

// envResolver turns MANIFOLD_<SECTION>__<KEY>… variables into keys of the document, for
// koanf's environment provider (its TransformFunc). The segments between "__" are matched
// case-insensitively against the field tables (envSchema) and, for names the document chooses
// (servers, map entries), against the document's own keys, so an override lands on the key as
// the file spells it. A variable that names no key is an error, never a new key. One
// envResolver serves one load.
type envResolver struct {
	doc  map[string]any // the document before overrides
	errs []*FieldError
}

// resolve returns the koanf key (segments joined by keyDelim) and value of the override
// name=val, or "" when name is not an override (no "__": MANIFOLD_BINARY,
// MANIFOLD_CLUSTER_SECRET) or is in error.
func (r *envResolver) resolve(name, val string) (string, any) {
	rest := strings.TrimPrefix(name, envPrefix)
	if !strings.Contains(rest, envSeparator) {
		return "", nil
	}
	path, leaf, msg := r.walk(strings.Split(rest, envSeparator))
	if msg != "" {
		r.errs = append(r.errs, &FieldError{Source: envSource, Key: name, Msg: msg})
		return "", nil
	}
	var v any = val
	if _, list := leaf.(*[]string); list {
		v = splitList(val)
	}
	return strings.Join(path, keyDelim), envValue{Var: name, Value: v}
}

// walk follows segs from the top of the schema and the document, returning the key path as
// written in files and the destination of the key it ends on, or a message saying why segs
// name no key that can be set.
func (r *envResolver) walk(segs []string) (path []string, leaf any, msg string) {
	fields, doc, key := envSchema(), r.doc, "" // key is dotted, for messages
	for i := 0; i < len(segs); i++ {
		f, ok := fieldFold(fields, segs[i])
		switch {
		case !ok && key == "":
			return nil, nil, fmt.Sprintf("unknown section %q: want MANIFOLD_<SECTION>__<KEY>, the section one of %s", segs[i], strings.Join(fieldNames(fields), ", "))
		case !ok:
			return nil, nil, unknownKey(segs[i], fieldNames(fields)) + ": no key of " + key + " matches this name (see the config reference)"
		case f.each != nil && f.name == keyServers:
			f.name = serversKey(r.doc) // mcpServers, or VS Code's servers: whichever the file uses
		}
		key, path = joinKey(key, f.name), append(path, f.name)
		more := len(segs) - 1 - i // segments after this one
		if _, isMap := f.ptr.(*map[string]string); isMap {
			switch {
			case more == 0:
				return nil, nil, "names the mapping " + key + ": add __ and the name of one of its entries"
			case more > 1:
				return nil, nil, "unknown key: the entries of " + key + " have no keys below them"
			}
			return append(path, entryFold(child(doc, f.name), segs[i+1])), new(string), ""
		}
		switch {
		case f.ptr != nil && more > 0:
			return nil, nil, "unknown key: " + key + " has no keys below it"
		case f.ptr != nil:
			return path, f.ptr, ""
		case f.sub == nil && f.each == nil:
			return nil, nil, key + " is a list of entries, which the environment cannot set: write it in the file (values may use ${VAR}, secrets a file)"
		case more == 0:
			return nil, nil, "names the section " + key + ", not a key: add __ and one of its keys"
		}
		var bad bool
		if doc, bad = childMap(doc, f.name); bad {
			return nil, nil, key + " in the file is not a mapping: fix the file first"
		}
		fields = f.sub
		if f.each != nil { // a mapping of server (or toolset) names, then its keys
			noun := "server"
			if f.name == keyToolsets {
				noun = "toolset"
			}
			i++
			name, msg := namedFold(doc, segs[i], noun)
			if msg != "" {
				return nil, nil, msg
			}
			key, path = joinKey(key, name), append(path, name)
			if i == len(segs)-1 {
				return nil, nil, "names the " + noun + " " + key + ", not a key: add __ and one of its keys"
			}
			if doc, bad = childMap(doc, name); bad {
				return nil, nil, key + " in the file is not a mapping: fix the file first"
			}
			fields = f.each
		}
	}
	return nil, nil, "unknown key" // unreachable: every path above returns at the last segment
}

// envSchema lists what overrides can address: the decoder's own field tables, so that a key
// added to a table can be overridden at once. A field with neither ptr, sub nor each is a list
// of entries (auth.apiKeys, policy.rules), which only files set.
func envSchema() []field {
	var (
		s  Server
		sa serverAliases
		g  Gateway
		a  Auth
		j  JWT
		p  Policy
		au Audit
		af *string
		t  Traces
		m  Metrics
		ts Toolset
	)
	return []field{
		{name: keyServers, each: serverFields(&s, &sa)},
		{name: keyToolsets, each: []field{{name: "servers", ptr: &ts.Servers}, {name: "tools", ptr: &ts.Tools}, {name: "prompts", ptr: &ts.Prompts}, {name: "resources", ptr: &ts.Resources}}},
		{name: keyGateway, sub: gatewayFields(&g)},
		{name: keyAuth, sub: append(authFields(&a), field{name: "apiKeys"}, field{name: "jwt", sub: jwtFields(&j)})},
		{name: keyPolicy, sub: policyFields(&p)},
		{name: keyAudit, sub: auditFields(&au, &af)},
		{name: keyTelemetry, sub: []field{{name: "traces", sub: tracesFields(&t)}, {name: "metrics", sub: metricsFields(&m)}}},
	}
}

// serversKey is the top-level key the document's servers are under: "mcpServers", or
// "servers" for a VS Code file that has no "mcpServers" (as document decides).
func serversKey(doc map[string]any) string {
	if _, ok := doc[keyServers]; !ok {
		if _, ok := doc[keyVSCodeServers]; ok {
			return keyVSCodeServers
		}
	}
	return keyServers
}

// fieldFold finds the field named seg, ignoring case; the servers field also answers to
// "servers".
func fieldFold(fields []field, seg string) (field, bool) {
	for _, f := range fields {
		if strings.EqualFold(f.name, seg) || f.name == keyServers && strings.EqualFold(seg, keyVSCodeServers) {
			return f, true
		}
	}
	return field{}, false
}

// namedFold finds the entry of named (the document's servers or toolsets; noun says which)
// named seg, ignoring case. Overrides change entries the file defines; they never add one (a
// misspelt name would serve nothing useful).
func namedFold(named map[string]any, seg, noun string) (string, string) {
	var found []string
	for _, name := range sortedKeys(named) {
		if strings.EqualFold(name, seg) {
			found = append(found, name)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Sprintf("no %s in the file is named %q (matched ignoring case): overrides change %ss the file defines, they do not add %ss", noun, seg, noun, noun)
	case 1:
		return found[0], ""
	}
	return "", fmt.Sprintf("matches the %ss %q, which differ only in case: rename one to override it", noun, found)
}

// entryFold returns the key of mapping m that equals seg ignoring case, or seg itself: an
// entry of a string map (env, headers) that the file does not have is added as written.
func entryFold(m map[string]any, seg string) string {
	for _, k := range sortedKeys(m) {
		if strings.EqualFold(k, seg) {
			return k
		}
	}
	return seg
}

// child returns doc[k] as a mapping, or nil.
func child(doc map[string]any, k string) map[string]any {
	m, _ := asMap(doc[k])
	return m
}

// childMap returns doc[k] as a mapping; bad reports a value that is neither a mapping nor
// absent or null, which an override must not silently replace.
func childMap(doc map[string]any, k string) (m map[string]any, bad bool) {
	v := doc[k]
	if v == nil {
		return nil, false
	}
	m, ok := asMap(v)
	return m, !ok
}

// envOnly returns the first variable (by name) of a mapping whose values all come from
// environment overrides, or "" when the file wrote any of it.
func envOnly(m map[string]any) string {
	first := ""
	for _, k := range sortedKeys(m) {
		switch v := m[k].(type) {
		case envValue:
			if first == "" || v.Var < first {
				first = v.Var
			}
		case map[string]any:
			name := envOnly(v)
			if name == "" {
				return ""
			}
			if first == "" || name < first {
				first = name
			}
		default:
			return ""
		}
	}
	return first
}

// splitList splits a comma-separated value into trimmed, non-empty items.
func splitList(s string) []any {
	var out []any
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
