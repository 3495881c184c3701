package audit

import (
	"strings"
	"sync"
)

// DefaultRingSize is the number of records a Ring keeps when NewRing is given zero.
const DefaultRingSize = 1000

// Ring keeps the most recent audit records in memory, for the operator console. A Log fills
// it from its writer goroutine (Options.Ring), after the records left the call path, so
// keeping them costs a call nothing. A nil *Ring keeps nothing. Its methods are safe for
// concurrent use.
type Ring struct {
	mu    sync.Mutex
	recs  []Entry // circular; len grows to cap, then next wraps
	next  int     // where the next record goes once recs is full
	total uint64  // records ever added: the Seq of the latest
}

// Entry is one record kept by a Ring, without its arguments (Record.Arguments is nil), and
// its sequence number: 1 for the first record the Ring kept, increasing by one.
type Entry struct {
	Seq uint64 `json:"seq"`
	Record
}

// Filter selects records in Ring.Recent. Empty fields match everything; the others match
// exactly, except Name, which matches any name containing it.
type Filter struct {
	Principal string
	Server    string
	Name      string
	// Outcome is one of the Outcome constants, or DecisionDeny for denied requests.
	Outcome string
}

// NewRing returns a Ring keeping the latest n records (DefaultRingSize when n <= 0).
func NewRing(n int) *Ring {
	if n <= 0 {
		n = DefaultRingSize
	}
	return &Ring{recs: make([]Entry, 0, n)}
}

// Add keeps a copy of rec, without its arguments, dropping the oldest record when full.
func (r *Ring) Add(rec *Record) {
	if r == nil || rec == nil {
		return
	}
	e := Entry{Record: *rec}
	e.Arguments = nil
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total++
	e.Seq = r.total
	if len(r.recs) < cap(r.recs) {
		r.recs = append(r.recs, e)
		return
	}
	r.recs[r.next] = e
	r.next = (r.next + 1) % len(r.recs)
}

// Total returns the number of records ever added: the Seq of the latest.
func (r *Ring) Total() uint64 {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// Recent returns up to limit records matching f, newest first (all of them when limit <= 0).
func (r *Ring) Recent(f Filter, limit int) []Entry {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Entry
	n := len(r.recs)
	for i := range n {
		// Newest first: the one before next, going back round the circle.
		e := &r.recs[(r.next-1-i+2*n)%n]
		if !f.matches(&e.Record) {
			continue
		}
		out = append(out, *e)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out
}

func (f Filter) matches(rec *Record) bool {
	switch {
	case f.Principal != "" && rec.Principal != f.Principal,
		f.Server != "" && rec.Server != f.Server,
		f.Name != "" && !strings.Contains(rec.Name, f.Name):
		return false
	case f.Outcome == DecisionDeny:
		return rec.Decision == DecisionDeny
	}
	return f.Outcome == "" || rec.Outcome == f.Outcome
}
