package discovery

import (
	"math"
	"slices"
)

// Doc is one searchable tool: its name as clients see it, its title and
// its description.
type Doc struct {
	Name, Title, Description string
}

// Field weights: a word of the name counts for more than one of the title,
// which counts for more than one of the description (BM25F).
const (
	nameWeight  = 3.0
	titleWeight = 2.0
	descWeight  = 1.0
)

// BM25 parameters, the usual ones.
const (
	k1 = 1.2
	b  = 0.75
)

// posting is one document's weighted frequency of a term.
type posting struct {
	doc int32
	tf  float32
}

// Index ranks documents for queries (BM25F over name, title and
// description, with light stemming and synonyms: tokenize.go,
// synonyms.go). It is immutable once built and safe for concurrent use;
// build a new one when the documents change.
type Index struct {
	postings map[string][]posting
	norm     []float32  // per doc: k1 * (1 - b + b*len/avgLen)
	names    [][]string // per doc: the distinct stems of its name
	n        int
}

// New builds the index of docs; a hit's Doc is the index of its document
// in docs.
func New(docs []Doc) *Index {
	ix := &Index{postings: map[string][]posting{}, norm: make([]float32, len(docs)), names: make([][]string, len(docs)), n: len(docs)}
	lengths := make([]float64, len(docs))
	total := 0.0
	tf := map[string]float64{}
	for i, d := range docs {
		clear(tf)
		add := func(w float64) func(string) {
			return func(t string) { tf[t] += w; lengths[i] += w }
		}
		terms(d.Name, func(t string) {
			add(nameWeight)(t)
			if !slices.Contains(ix.names[i], t) {
				ix.names[i] = append(ix.names[i], t)
			}
		})
		terms(d.Title, add(titleWeight))
		terms(d.Description, add(descWeight))
		total += lengths[i]
		for _, t := range slices.Sorted(mapKeys(tf)) {
			ix.postings[t] = append(ix.postings[t], posting{doc: int32(i), tf: float32(tf[t])})
		}
	}
	avg := 1.0
	if len(docs) > 0 && total > 0 {
		avg = total / float64(len(docs))
	}
	for i, l := range lengths {
		ix.norm[i] = float32(k1 * (1 - b + b*l/avg))
	}
	return ix
}

func mapKeys(m map[string]float64) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Len returns the number of documents.
func (ix *Index) Len() int { return ix.n }

// Hit is a ranked document.
type Hit struct {
	Doc   int
	Score float64
}

// Search returns at most k documents for q, best first (ties in document
// order), skipping those keep rejects (nil keeps all). keep is called only
// for documents that score and would make the top k at that point, so a
// filter such as a policy decision runs on few of them.
func (ix *Index) Search(q Query, k int, keep func(doc int) bool) []Hit {
	if k <= 0 || q.Empty() || ix.n == 0 {
		return nil
	}
	scores := make([]float64, ix.n)
	for _, t := range q.Terms {
		ix.accumulate(scores, t, func(s *float64, v float64) { *s += v })
	}
	if len(q.Related) > 0 {
		best := make([]float64, ix.n)
		for _, g := range q.Related {
			clear(best)
			for _, t := range g {
				ix.accumulate(best, t, func(s *float64, v float64) { *s = max(*s, v) })
			}
			for i, v := range best {
				scores[i] += relatedWeight * v
			}
		}
	}
	covered := q.stems()
	top := make([]Hit, 0, k)
	for doc, s := range scores {
		if s <= 0 {
			continue
		}
		s *= 1 + ix.coverage(doc, covered)
		if len(top) == k && !better(Hit{doc, s}, top[k-1]) {
			continue
		}
		if keep != nil && !keep(doc) {
			continue
		}
		h := Hit{Doc: doc, Score: s}
		i, _ := slices.BinarySearchFunc(top, h, func(a, b Hit) int {
			if better(a, b) {
				return -1
			}
			return 1
		})
		if len(top) < k {
			top = append(top, Hit{})
		}
		copy(top[i+1:], top[i:len(top)-1])
		top[i] = h
	}
	return top
}

// coverage returns the share of the distinct stems of doc's name that are
// in covered (the query's stems and related stems): a query that asks for
// every part of a tool's name (its server, its operation, its object) is
// about that tool more than about one sharing only some of its words.
func (ix *Index) coverage(doc int, covered map[string]bool) float64 {
	names := ix.names[doc]
	if len(names) == 0 {
		return 0
	}
	n := 0
	for _, t := range names {
		if covered[t] {
			n++
		}
	}
	return float64(n) / float64(len(names))
}

// better reports whether a ranks before b.
func better(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Doc < b.Doc
}

// accumulate combines the BM25 score of term in each document into
// scores, with combine (a sum, or the best of a group).
func (ix *Index) accumulate(scores []float64, term string, combine func(s *float64, v float64)) {
	ps := ix.postings[term]
	if len(ps) == 0 {
		return
	}
	df := float64(len(ps))
	idf := math.Log(1 + (float64(ix.n)-df+0.5)/(df+0.5))
	for _, p := range ps {
		tf := float64(p.tf)
		combine(&scores[p.doc], idf*tf*(k1+1)/(tf+float64(ix.norm[p.doc])))
	}
}
