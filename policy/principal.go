package policy

import (
	"slices"
	"strconv"
	"strings"

	"github.com/manifold-mcp/manifold/config"
)

// Principal is who makes a request: a name and groups. It is immutable and safe for
// concurrent use. A nil *Principal is anonymous: no name, no groups; rules naming principals
// never match it.
type Principal struct {
	name   string
	groups []string // sorted, without duplicates
	key    string
}

// NewPrincipal returns the principal called name with groups. The groups are copied, sorted
// and de-duplicated; the caller may reuse the slice.
func NewPrincipal(name string, groups []string) *Principal {
	p := &Principal{name: name}
	if len(groups) > 0 {
		p.groups = slices.Compact(slices.Sorted(slices.Values(groups)))
	}
	p.key = principalKey(name, p.groups)
	return p
}

// principalKey encodes a name and sorted groups as one string, each part preceded by its
// length so that no two principals share a key whatever bytes their names hold.
func principalKey(name string, groups []string) string {
	n := len(name) + 4
	for _, g := range groups {
		n += len(g) + 4
	}
	b := make([]byte, 0, n)
	b = appendPart(b, name)
	for _, g := range groups {
		b = appendPart(b, g)
	}
	return string(b)
}

func appendPart(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// Name returns the principal's name; "" for nil.
func (p *Principal) Name() string {
	if p == nil {
		return ""
	}
	return p.name
}

// Groups returns the principal's groups, sorted and without duplicates. Callers must not
// modify the slice.
func (p *Principal) Groups() []string {
	if p == nil {
		return nil
	}
	return p.groups
}

// Key returns a string identifying the principal's name and groups, for use as a cache key:
// two principals have the same key exactly when they have the same name and the same set of
// groups. The encoding is unspecified; nil has the key "", which no other principal has.
func (p *Principal) Key() string {
	if p == nil {
		return ""
	}
	return p.key
}

// InGroup reports whether the principal belongs to group g (exact, case-sensitive). It
// allocates nothing.
func (p *Principal) InGroup(g string) bool {
	if p == nil {
		return false
	}
	_, ok := slices.BinarySearch(p.groups, g)
	return ok
}

// Principals is a compiled list of principal names and "group:<name>" entries, as written in
// a rule's principals or in auth.operators. The zero value contains no one. It is immutable
// and safe for concurrent use.
type Principals struct {
	names  []string // principal names listed
	groups []string // groups listed as "group:<name>"
}

// CompilePrincipals compiles a validated list of principal entries. It keeps no reference to
// list.
func CompilePrincipals(list []string) Principals {
	var ps Principals
	for _, e := range list {
		if g, ok := strings.CutPrefix(e, config.GroupPrefix); ok {
			ps.groups = append(ps.groups, g)
		} else {
			ps.names = append(ps.names, e)
		}
	}
	return ps
}

// Contains reports whether pr is named in ps or belongs to one of its groups; never for a nil
// pr. It allocates nothing.
func (ps Principals) Contains(pr *Principal) bool {
	if pr == nil {
		return false
	}
	if slices.Contains(ps.names, pr.name) {
		return true
	}
	for _, g := range ps.groups {
		if pr.InGroup(g) {
			return true
		}
	}
	return false
}
