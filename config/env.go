package config

import (
	"slices"
	"strings"
)

// Environment overrides.
const (
	envPrefix    = "MANIFOLD_"
	envSeparator = "__"
	envSource    = "environment"
)

// applyEnv applies MANIFOLD_GATEWAY__… overrides from environ ("NAME=value" entries) to g,
// appending problems to errs with Source "environment" and Key the variable's name. It returns
// the dotted key each applied override set, mapped to the variable's name, so that validation
// blames the variable rather than the file.
//
// A variable is an override when its name starts with MANIFOLD_ and contains "__"; the
// segments between "__" are matched case-insensitively against the gateway keys. List values
// are comma-separated. Values are used literally (no ${VAR} expansion) and never appear in
// messages.
func applyEnv(environ []string, g *Gateway, errs *[]*FieldError) map[string]string {
	vars := make(map[string]string)
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(name, envPrefix) && strings.Contains(name[len(envPrefix):], envSeparator) {
			vars[name] = val // the last entry wins, as in a shell
		}
	}
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	slices.Sort(names)

	origins := make(map[string]string)
	fields := gatewayFields(g)
	for _, name := range names {
		d := &decoder{source: envSource}
		segs := strings.Split(name[len(envPrefix):], envSeparator)
		if !strings.EqualFold(segs[0], keyGateway) {
			d.fail(name, "only gateway keys can be set from the environment: want MANIFOLD_GATEWAY__<KEY>, with __ between levels")
			*errs = append(*errs, d.errs...)
			continue
		}
		f, key, ok := lookupFold(fields, keyGateway, segs[1:])
		switch {
		case !ok:
			d.fail(name, "unknown key: no gateway key matches this name (see the gateway section of the config reference)")
		case f.sub != nil:
			d.fail(name, "names the section "+key+", not a key: add __ and one of its keys")
		default:
			var v any = vars[name]
			if _, list := f.ptr.(*[]string); list {
				v = splitList(vars[name])
			}
			d.assign(name, f.ptr, v)
			if len(d.errs) == 0 {
				origins[key] = name
			}
		}
		*errs = append(*errs, d.errs...)
	}
	return origins
}

// lookupFold finds the field at path (segments matched case-insensitively) under the section
// key parent, returning it with its dotted key as written in files.
func lookupFold(fields []field, parent string, path []string) (field, string, bool) {
	if len(path) == 0 {
		return field{}, "", false
	}
	for _, f := range fields {
		if !strings.EqualFold(f.name, path[0]) {
			continue
		}
		key := parent + "." + f.name
		if len(path) == 1 {
			return f, key, true
		}
		return lookupFold(f.sub, key, path[1:])
	}
	return field{}, "", false
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
