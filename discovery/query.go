package discovery

// Query is a parsed search query: the stems of its words, and groups of
// stems its words stand for (synonyms.go), which count for less.
type Query struct {
	// Terms are the query's own stems, without duplicates, at most
	// maxTerms of them.
	Terms []string
	// Related are the groups of stems the query's words stand for, none of
	// them in Terms. A document scores the best match of each group, at
	// relatedWeight.
	Related [][]string
}

// relatedWeight is how much a match on a related stem counts, against 1
// for the query's own.
const relatedWeight = 0.5

// ParseQuery parses text as a client sends it to the search tool. It
// accepts any string: only the first maxQueryBytes bytes are read, and at
// most maxTerms words kept, so a query's cost is bounded. A query with no
// word left (empty, punctuation, stop words only) has no Terms and matches
// nothing.
func ParseQuery(text string) Query {
	if len(text) > maxQueryBytes {
		text = text[:maxQueryBytes]
	}
	var q Query
	seen := map[string]bool{}
	var raw []string // the lower-case words, for multi-word synonyms
	words(text, func(w string) {
		if len(raw) < maxTerms {
			raw = append(raw, w)
		}
	})
	for _, w := range raw {
		if stopWords[w] {
			continue
		}
		t := stem(w)
		if !seen[t] {
			seen[t] = true
			q.Terms = append(q.Terms, t)
		}
	}
	related(raw, func(group []string) {
		var g []string
		for _, t := range group {
			if !seen[t] {
				g = append(g, t)
			}
		}
		if len(g) > 0 {
			q.Related = append(q.Related, g)
		}
	})
	return q
}

// Empty reports whether q has nothing to match.
func (q Query) Empty() bool { return len(q.Terms) == 0 && len(q.Related) == 0 }

// stems returns the set of q's stems, its own and related.
func (q Query) stems() map[string]bool {
	m := make(map[string]bool, len(q.Terms)+4*len(q.Related))
	for _, t := range q.Terms {
		m[t] = true
	}
	for _, g := range q.Related {
		for _, t := range g {
			m[t] = true
		}
	}
	return m
}
