// Package pins records the tool and prompt definitions upstream servers serve and the ones an
// operator approved, so that a definition that changes after it was trusted (a "rug pull": a
// new description is a prompt injection reaching every model) is noticed, and held back until
// approved (docs/architecture.md, Tool pinning).
//
// A definition is hashed as the upstream serves it: its JSON object without "_meta",
// canonicalised by RFC 8785 (JSON Canonicalization Scheme), before the gateway's overrides and
// plugins. The pins of every server live in a Set, kept by a Store: a file for one
// instance (FileStore), the cluster's shared store for several replicas (SharedStore). Observe compares what a server serves with
// its pins and says what to do; the gateway acts on it (gateway/pinning.go), and `manifold
// pins` lists, diffs and approves.
package pins

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/gowebpki/jcs"
)

// Kinds of pinned items (Item.Kind).
const (
	KindTool   = "tool"
	KindPrompt = "prompt"
)

// SetVersion is the version of the pin file's format.
const SetVersion = 1

// Set is every pin, by server, then kind, then the item's name as its upstream serves it.
type Set struct {
	Version int                `json:"version"`
	Servers map[string]*Server `json:"servers"`
}

// Server is the pins of one server.
type Server struct {
	Tools   map[string]*Pin `json:"tools,omitempty"`
	Prompts map[string]*Pin `json:"prompts,omitempty"`
}

// Pin is one item's approved definition and, when the upstream serves another one, that one,
// pending approval. An item never approved (held under newTools: hold) has Pending only.
type Pin struct {
	Approved *Definition `json:"approved,omitempty"`
	Pending  *Definition `json:"pending,omitempty"`
}

// Definition is one version of a definition: its hash, its canonical JSON (for diffs) and
// when it was first seen, or approved.
type Definition struct {
	Hash       string          `json:"hash"`
	Definition json.RawMessage `json:"definition"`
	At         time.Time       `json:"at"`
}

// NewSet returns an empty set.
func NewSet() *Set { return &Set{Version: SetVersion, Servers: map[string]*Server{}} }

// Digest returns the canonical JSON of def, a definition as its upstream serves it (an
// *mcp.Tool or *mcp.Prompt, or anything that encodes to a JSON object), without "_meta", and
// its hash, "sha256:<hex>".
func Digest(def any) (canonical []byte, hash string, err error) {
	raw, err := json.Marshal(def)
	if err != nil {
		return nil, "", fmt.Errorf("pins: encoding a definition: %w", err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, "", fmt.Errorf("pins: a definition is not a JSON object: %w", err)
	}
	if _, ok := obj["_meta"]; ok {
		delete(obj, "_meta")
		if raw, err = json.Marshal(obj); err != nil {
			return nil, "", fmt.Errorf("pins: encoding a definition: %w", err)
		}
	}
	canonical, err = jcs.Transform(raw)
	if err != nil {
		return nil, "", fmt.Errorf("pins: canonicalising a definition: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return canonical, "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Item is one definition a server serves now.
type Item struct {
	Server, Kind, Name string
	// Canonical and Hash are Digest's.
	Canonical []byte
	Hash      string
}

// Event is what Observe found new about an item, for logs, audit and metrics.
type Event int

// Events of Observe.
const (
	// EventNone: nothing new.
	EventNone Event = iota
	// EventFirstSeen: an item never seen, approved as it is (newTools: allow).
	EventFirstSeen
	// EventHeld: an item never seen, held until approved (newTools: hold).
	EventHeld
	// EventChanged: the upstream serves a definition other than the approved one, not seen
	// before (each new version is one event).
	EventChanged
	// EventReverted: the upstream serves the approved definition again; the pending one is
	// dropped.
	EventReverted
)

func (e Event) String() string {
	return [...]string{"none", "first seen", "held", "changed", "reverted"}[e]
}

// Observe compares it with its pin in s, records what is new (s is changed then: persist it),
// and reports whether the item is approved as it is served now, and what happened. hold is
// newTools: hold. now stamps new definitions.
func (s *Set) Observe(it Item, hold bool, now time.Time) (approved bool, ev Event) {
	pins := s.pins(it.Server, it.Kind, true)
	p := pins[it.Name]
	cur := &Definition{Hash: it.Hash, Definition: slices.Clone(it.Canonical), At: now}
	switch {
	case p == nil && !hold:
		pins[it.Name] = &Pin{Approved: cur}
		return true, EventFirstSeen
	case p == nil:
		pins[it.Name] = &Pin{Pending: cur}
		return false, EventHeld
	case p.Approved != nil && p.Approved.Hash == it.Hash:
		if p.Pending != nil {
			p.Pending = nil
			return true, EventReverted
		}
		return true, EventNone
	case p.Pending != nil && p.Pending.Hash == it.Hash:
		return false, EventNone // seen already
	case p.Approved == nil:
		p.Pending = cur // held, and changed again while held
		return false, EventHeld
	}
	p.Pending = cur
	return false, EventChanged
}

// Lookup returns the pin of an item, or nil.
func (s *Set) Lookup(server, kind, name string) *Pin {
	return s.pins(server, kind, false)[name]
}

// pins returns the map of pins of server and kind, made when create is set (else maybe nil).
func (s *Set) pins(server, kind string, create bool) map[string]*Pin {
	if s.Servers == nil {
		if !create {
			return nil
		}
		s.Servers = map[string]*Server{}
	}
	sv := s.Servers[server]
	if sv == nil {
		if !create {
			return nil
		}
		sv = &Server{}
		s.Servers[server] = sv
	}
	m := &sv.Tools
	if kind == KindPrompt {
		m = &sv.Prompts
	}
	if *m == nil && create {
		*m = map[string]*Pin{}
	}
	return *m
}

// Entry is one pin with its place, as Entries lists them.
type Entry struct {
	Server, Kind, Name string
	*Pin
}

// State returns "approved", "changed" (approved, another definition pending) or "held" (never
// approved).
func (e Entry) State() string {
	switch {
	case e.Approved == nil:
		return "held"
	case e.Pending != nil:
		return "changed"
	}
	return "approved"
}

// Filter selects entries: empty fields select everything.
type Filter struct {
	Server string
	// Tool and Prompt select by name; with only one of them set, only that kind.
	Tool, Prompt string
}

func (f Filter) matches(e Entry) bool {
	if f.Server != "" && e.Server != f.Server {
		return false
	}
	switch {
	case f.Tool == "" && f.Prompt == "":
		return true
	case e.Kind == KindTool:
		return f.Tool == e.Name
	default:
		return f.Prompt == e.Name
	}
}

// Entries returns the pins f selects, sorted by server, kind and name.
func (s *Set) Entries(f Filter) []Entry {
	var out []Entry
	for server, sv := range s.Servers {
		for kind, m := range map[string]map[string]*Pin{KindTool: sv.Tools, KindPrompt: sv.Prompts} {
			for name, p := range m {
				if e := (Entry{Server: server, Kind: kind, Name: name, Pin: p}); f.matches(e) {
					out = append(out, e)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if a.Server != b.Server {
			return cmpString(a.Server, b.Server)
		}
		if a.Kind != b.Kind {
			return cmpString(a.Kind, b.Kind)
		}
		return cmpString(a.Name, b.Name)
	})
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Approve approves the pending definition of every pin f selects and returns those it
// approved.
func (s *Set) Approve(f Filter, now time.Time) []Entry {
	var done []Entry
	for _, e := range s.Entries(f) {
		if e.Pending == nil {
			continue
		}
		e.Approved, e.Pending = e.Pending, nil
		e.Approved.At = now
		done = append(done, e)
	}
	return done
}
