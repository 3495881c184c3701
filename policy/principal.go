package policy

import (
	"slices"
	"strconv"
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
