package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/manifold-mcp/manifold/internal/envelope"
)

// DefaultRingSize is the number of records a Ring keeps when NewRing is given zero.
const DefaultRingSize = 1000

// Ring keeps the most recent audit records in memory, for the operator console. A Log fills
// it from its writer goroutine (Options.Ring), after the records left the call path, so
// keeping them costs a call nothing. Each record is kept as its JSON line, without its
// arguments, in a buffer the slot reuses: bytes without pointers, which the garbage collector
// never scans, so a full ring adds no marking work to the gateway's calls (kept as records,
// 1,000 of them cost each call ~5% more instructions, most of it in the collector). Recent
// decodes them, off the call path. A nil *Ring keeps nothing. Its methods are safe for
// concurrent use.
type Ring struct {
	mu    sync.Mutex
	slots []ringSlot // circular; len grows to cap, then next wraps
	next  int        // where the next record goes once slots is full
	total uint64     // records ever added: the Seq of the latest
}

// ringSlot is one kept record: its sequence number and JSON line.
type ringSlot struct {
	seq  uint64
	line []byte
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
	return &Ring{slots: make([]ringSlot, 0, n)}
}

// Add keeps rec, without its arguments, dropping the oldest record when full. The Log's
// writer adds the lines it has encoded instead (addLine).
func (r *Ring) Add(rec *Record) {
	if r == nil || rec == nil {
		return
	}
	b, err := json.Marshal(&line{Time: rec.Time.UTC(), DurationMS: millis(rec.Duration), Record: rec})
	if err == nil {
		r.addLine(b)
	}
}

// The member addLine leaves out.
var (
	argumentsKey  = []byte(`"arguments":`)
	argumentsName = []string{"arguments"}
)

// addLine keeps ln, a record's JSON line as the Log encodes it, without its arguments
// member, dropping the oldest record when full. Once the ring is full it allocates nothing.
func (r *Ring) addLine(ln []byte) {
	if r == nil {
		return
	}
	ln = bytes.TrimRight(ln, "\n")
	// The encoder writes compact JSON, arguments after every field of the Record:
	// `,"arguments":<value>` is cut out (found by the raw path's tokenizer, which allocates
	// nothing).
	head, tail := ln, []byte(nil)
	var args [1]envelope.Span
	if err := envelope.Members(ln, argumentsName, args[:]); err != nil {
		return // not a line of ours: keep nothing rather than an argument
	}
	if sp := args[0]; sp.Present() {
		key := sp.Start - len(argumentsKey) - 1 // the comma before the key
		if key < 0 || ln[key] != ',' || !bytes.Equal(ln[key+1:sp.Start], argumentsKey) {
			return
		}
		head, tail = ln[:key], ln[sp.End:]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total++
	var slot *ringSlot
	if len(r.slots) < cap(r.slots) {
		r.slots = append(r.slots, ringSlot{})
		slot = &r.slots[len(r.slots)-1]
	} else {
		slot = &r.slots[r.next]
		r.next = (r.next + 1) % len(r.slots)
	}
	slot.seq = r.total
	slot.line = append(append(slot.line[:0], head...), tail...)
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
	n := len(r.slots)
	for i := range n {
		// Newest first: the one before next, going back round the circle.
		slot := &r.slots[(r.next-1-i+2*n)%n]
		e, ok := slot.entry()
		if !ok || !f.matches(&e.Record) {
			continue
		}
		out = append(out, e)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out
}

// entry decodes the slot's record.
func (s *ringSlot) entry() (Entry, bool) {
	var ln struct {
		Time       time.Time `json:"time"`
		DurationMS float64   `json:"duration_ms"`
		Record
	}
	if json.Unmarshal(s.line, &ln) != nil {
		return Entry{}, false
	}
	e := Entry{Seq: s.seq, Record: ln.Record}
	e.Time = ln.Time
	e.Duration = time.Duration(ln.DurationMS * float64(time.Millisecond))
	return e, true
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
