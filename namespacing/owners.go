package namespacing

import (
	"maps"
	"slices"
	"strings"
)

// Owners routes the URIs of servers exposed with prefix "", whose URIs are not rewritten (a
// URI that [UnwrapURI] accepts routes by its prefix instead). Build one per merge of the
// resource lists with [NewOwners]; it is immutable and safe for concurrent use.
type Owners struct {
	exact    map[string]string // URI → server
	literal  map[string]string // literal text of a template before its first '{' → server
	lengths  []int             // distinct lengths of the keys of literal, longest first
	fallback string
}

// NewOwners builds the ownership table of unprefixed servers from
//
//   - exact: URI → server, from resources/list;
//   - templates: URI template → server, from resources/templates/list. A template is matched
//     pragmatically by its literal text before the first '{': a URI starting with that text
//     belongs to the template's server. A template without '{' is an exact URI (below those of
//     exact). When several templates share the literal text, the first template in byte order
//     wins;
//   - fallback: the server that owns every other URI, or "" for none. Pass the unprefixed
//     server when there is exactly one, so URIs it hands out in tool results stay readable.
//
// NewOwners copies what it needs; the caller may reuse the maps.
func NewOwners(exact map[string]string, templates map[string]string, fallback string) *Owners {
	o := &Owners{
		exact:    make(map[string]string, len(exact)),
		literal:  make(map[string]string, len(templates)),
		fallback: fallback,
	}
	maps.Copy(o.exact, exact)
	for _, t := range slices.Sorted(maps.Keys(templates)) {
		lit, _, isTemplate := strings.Cut(t, "{")
		table := o.literal
		if !isTemplate {
			table = o.exact
		}
		if _, taken := table[lit]; !taken {
			table[lit] = templates[t]
		}
	}
	for lit := range o.literal {
		o.lengths = append(o.lengths, len(lit))
	}
	slices.Sort(o.lengths)
	o.lengths = slices.Compact(o.lengths)
	slices.Reverse(o.lengths)
	return o
}

// Lookup returns the server that owns uri: the server of the exact URI, else of the template
// with the longest literal text that uri starts with, else the fallback. ok is false when none
// applies. Lookup does not allocate; a nil *Owners owns nothing.
func (o *Owners) Lookup(uri string) (server string, ok bool) {
	if o == nil {
		return "", false
	}
	if server, ok := o.exact[uri]; ok {
		return server, true
	}
	for _, n := range o.lengths {
		if n > len(uri) {
			continue
		}
		if server, ok := o.literal[uri[:n]]; ok {
			return server, true
		}
	}
	if o.fallback != "" {
		return o.fallback, true
	}
	return "", false
}
