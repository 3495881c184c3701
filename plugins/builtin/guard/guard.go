package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"path"
	"sync"

	"github.com/manifold-mcp/manifold/internal/envelope"
)

// ErrArguments is returned by Check for arguments that are not a JSON
// object (or null).
var ErrArguments = errors.New("guard: arguments are not a JSON object")

// Verdict is what Check decided. Blocked calls name the rule that blocked
// them and carry its message, which the client sees as the error.
type Verdict struct {
	Blocked bool
	Rule    string
	Message string
}

// Guard checks tool calls' arguments against its rules. It is immutable
// after New and safe for concurrent use.
type Guard struct {
	rules []rule
}

// rule is one compiled `rules:` entry.
type rule struct {
	name, message string
	tools         []string    // globs over the tool's name; none: every tool
	paths         [][]segment // argument paths; none: every value
	match         matcher
}

// segment is one step of an argument path.
type segment struct {
	key   string // "*": any key or element
	index int    // the array element key names, or -1
}

// matcher tests one argument value: a string's decoded text, or a
// number's literal.
type matcher interface {
	match(v string) bool
}

// Check returns the verdict of the first rule, in config order, that
// applies to tool (the namespaced name as policy sees it) and matches a
// value in arguments (the raw JSON object of the call; empty or `null`
// means no arguments). A rule applies to a value at one of its argument
// paths or anywhere below one (every element of an array there, every
// member of an object there); without paths, to every value. Strings are
// tested decoded; numbers as written; keys, booleans and null never.
// Arguments that are not a JSON object are ErrArguments, whatever the
// rules: the caller decides (the plugin's onError).
func (g *Guard) Check(tool string, arguments []byte) (Verdict, error) {
	arguments = bytes.TrimSpace(arguments)
	if len(arguments) == 0 || bytes.Equal(arguments, []byte("null")) {
		return Verdict{}, nil
	}
	if arguments[0] != '{' || validate(arguments) != nil {
		return Verdict{}, ErrArguments
	}
	w := walkers.Get().(*walker)
	defer walkers.Put(w)
	w.active = w.active[:0]
	for k := range g.rules {
		if g.rules[k].applies(tool) {
			w.active = append(w.active, k)
		}
	}
	if len(w.active) == 0 {
		return Verdict{}, nil
	}
	w.g, w.b, w.i, w.path, w.blocked = g, arguments, 0, w.path[:0], -1
	w.value()
	blocked := w.blocked
	w.g, w.b = nil, nil
	if blocked < 0 {
		return Verdict{}, nil
	}
	r := &g.rules[blocked]
	return Verdict{Blocked: true, Rule: r.name, Message: r.message}, nil
}

// walkers keeps walkers and their buffers between calls.
var walkers = sync.Pool{New: func() any { return new(walker) }}

// validate reports whether raw is one JSON value, as in package redact:
// the envelope scanner, then encoding/json for what it declines (depth).
func validate(raw []byte) error {
	err := envelope.Validate(raw)
	if err != nil && errors.Is(err, envelope.ErrNotSimple) && json.Valid(raw) {
		return nil
	}
	return err
}

// applies reports whether r covers tool.
func (r *rule) applies(tool string) bool {
	if len(r.tools) == 0 {
		return true
	}
	for _, t := range r.tools {
		if ok, _ := path.Match(t, tool); ok {
			return true
		}
	}
	return false
}

// covers reports whether r tests the value at the path p.
func (r *rule) covers(p []step) bool {
	if len(r.paths) == 0 {
		return true
	}
	for _, want := range r.paths {
		if len(want) <= len(p) && prefixMatch(want, p) {
			return true
		}
	}
	return false
}

func prefixMatch(want []segment, p []step) bool {
	for k, s := range want {
		if s.key == "*" {
			continue
		}
		if p[k].index >= 0 {
			if s.index != p[k].index {
				return false
			}
		} else if string(p[k].key) != s.key {
			return false
		}
	}
	return true
}

// step is where a value is in the arguments: a member's key (decoded) or
// an element's index.
type step struct {
	key   []byte
	index int // -1 for a member
}

// walker visits every value of a validated JSON document, depth first,
// keeping its path; it stops early once the first active rule blocked.
type walker struct {
	g       *Guard
	b       []byte
	i       int
	path    []step
	active  []int // rule indexes, ascending
	blocked int   // the first rule that blocked, or -1
}

func (w *walker) ws() {
	for w.i < len(w.b) && (w.b[w.i] == ' ' || w.b[w.i] == '\t' || w.b[w.i] == '\n' || w.b[w.i] == '\r') {
		w.i++
	}
}

// str returns the string token at w.i and moves past it.
func (w *walker) str() []byte {
	start := w.i
	for w.i++; w.b[w.i] != '"'; w.i++ {
		if w.b[w.i] == '\\' {
			w.i++
		}
	}
	w.i++
	return w.b[start:w.i]
}

func (w *walker) value() {
	w.ws()
	switch c := w.b[w.i]; {
	case c == '{':
		w.i++
		for {
			w.ws()
			if w.b[w.i] == '}' {
				w.i++
				return
			}
			if w.b[w.i] == ',' {
				w.i++
				w.ws()
			}
			key := envelope.Text(w.str())
			w.ws()
			w.i++ // ':'
			w.path = append(w.path, step{key: key, index: -1})
			w.value()
			w.path = w.path[:len(w.path)-1]
		}
	case c == '[':
		w.i++
		for n := 0; ; n++ {
			w.ws()
			if w.b[w.i] == ']' {
				w.i++
				return
			}
			if w.b[w.i] == ',' {
				w.i++
			}
			w.path = append(w.path, step{index: n})
			w.value()
			w.path = w.path[:len(w.path)-1]
		}
	case c == '"':
		w.test(envelope.Text(w.str()))
	case c == '-' || '0' <= c && c <= '9':
		start := w.i
		for w.i < len(w.b) && bytes.IndexByte([]byte("+-.eE0123456789"), w.b[w.i]) >= 0 {
			w.i++
		}
		w.test(w.b[start:w.i])
	default: // true, false, null
		for w.i < len(w.b) && 'a' <= w.b[w.i] && w.b[w.i] <= 'z' {
			w.i++
		}
	}
}

// test runs on v the active rules that cover the current path and come
// before the one that blocked so far. v becomes a string (a copy) only
// when a rule covers it.
func (w *walker) test(v []byte) {
	var s string
	copied := false
	for _, k := range w.active {
		if w.blocked >= 0 && k >= w.blocked {
			return
		}
		r := &w.g.rules[k]
		if !r.covers(w.path) {
			continue
		}
		if !copied {
			s, copied = string(v), true
		}
		if r.match.match(s) {
			w.blocked = k
			return
		}
	}
}
