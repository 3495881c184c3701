package namespacing

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Entry is one exposed name and where it routes.
type Entry struct {
	// Exposed is the name clients see, as returned by [Name].
	Exposed string
	// Server is the upstream server that owns the name.
	Server string
	// Original is the name on that server, the one to send upstream.
	Original string
}

// Source is one upstream's names to merge.
type Source struct {
	// Server is the upstream server's name; sources are merged in order of it.
	Server string
	// Prefix is the server's namespace; "" exposes its names unprefixed (still mapped).
	Prefix string
	// Names are the server's tool (or prompt) names, in any order, duplicates allowed.
	Names []string
}

// Collision reports two upstream names that map to the same exposed name. It is an error: the
// Dropped name is not reachable through the gateway until one of them is renamed (or given
// another prefix).
type Collision struct {
	// Exposed is the name both map to.
	Exposed string
	// Kept is the entry in the table, the first in merge order; Dropped is the other.
	Kept, Dropped Entry
	// Kind is what the names are ("tool", "prompt"), from [Options].Kind; "" reads as "tool".
	Kind string
}

// Error describes the collision, for example
//
//	name "a__x" from server "b" (tool "x") collides with server "a" (tool "x"); dropped
func (c *Collision) Error() string {
	kind := Options{Kind: c.Kind}.kind()
	return fmt.Sprintf("name %q from server %q (%s %q) collides with server %q (%s %q); dropped",
		c.Exposed, c.Dropped.Server, kind, c.Dropped.Original, c.Kept.Server, kind, c.Kept.Original)
}

// Merge maps every name of every source with [Name] and returns the routing table (exposed
// name → Entry), the same entries sorted by Exposed, and one *Collision per dropped name, in
// merge order (nil when there are none).
//
// Merge is deterministic whatever the order of sources and names: sources are merged in order
// of Server (then Prefix, then their order in the slice), each source's names in sorted order,
// and the first name to claim an exposed name keeps it. A name that maps to an identical Entry
// again (a duplicate within one source) is skipped silently. Merge does not modify sources.
func Merge(sources []Source, opts Options) (table map[string]Entry, ordered []Entry, collisions []*Collision) {
	order := make([]int, len(sources))
	total, most := 0, 0
	for i := range sources {
		order[i] = i
		total += len(sources[i].Names)
		most = max(most, len(sources[i].Names))
	}
	slices.SortStableFunc(order, func(a, b int) int {
		sa, sb := &sources[a], &sources[b]
		return cmp.Or(strings.Compare(sa.Server, sb.Server), strings.Compare(sa.Prefix, sb.Prefix))
	})

	table = make(map[string]Entry, total)
	ordered = make([]Entry, 0, total)
	names := make([]string, 0, most) // reused: sorted copy of one source's names
	for _, i := range order {
		src := &sources[i]
		names = append(names[:0], src.Names...)
		slices.Sort(names)
		for j, n := range names {
			if j > 0 && n == names[j-1] {
				continue
			}
			e := Entry{Exposed: Name(src.Prefix, n, opts), Server: src.Server, Original: n}
			if kept, taken := table[e.Exposed]; taken {
				if kept != e {
					collisions = append(collisions, &Collision{Exposed: e.Exposed, Kept: kept, Dropped: e, Kind: opts.Kind})
				}
				continue
			}
			table[e.Exposed] = e
			ordered = append(ordered, e)
		}
	}
	slices.SortFunc(ordered, func(a, b Entry) int { return strings.Compare(a.Exposed, b.Exposed) })
	return table, ordered, collisions
}
