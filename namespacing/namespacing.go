// Package namespacing turns the names and URIs of many upstream MCP servers into the names and
// URIs that Manifold's clients see, and builds the tables that route them back. It is pure: no
// I/O, no state beyond the immutable tables it returns, safe for concurrent use.
//
// # Tools and prompts
//
// An upstream name is qualified with its server's prefix, "<prefix><separator><name>" (the
// separator defaults to "__"; an empty prefix exposes the name alone), then made safe for every
// major host and LLM API:
//
//   - every character outside [A-Za-z0-9_-] becomes '_' (one '_' per UTF-8 rune), because hosts
//     and model APIs reject '.', '/', ':' and spaces in tool names;
//   - a name longer than the limit (default 64, as Claude and OpenAI cap tool names at 64
//     characters; Cursor at about 60, hence configurable) keeps its first limit-9 bytes and gets
//     "_" plus 8 hex digits of the SHA-256 of the unmapped qualified name, so it is shortened
//     deterministically and two long names that share a beginning still differ.
//
// The mapping is lossy on purpose. The gateway never parses an exposed name to find its server:
// [Merge] builds a table from exposed name to [Entry] (server and original name) whenever the
// upstream lists change, and requests are routed by looking the name up. Two upstream names
// that map to the same exposed name ("a.b" and "a_b", say) are reported as a [*Collision]; the
// first in a deterministic order is kept, never silently overwritten.
//
// # Resources
//
// Every resource URI of a server with a non-empty prefix is rewritten reversibly and without
// state, wherever it appears (lists, templates, tool results, resources/updated):
//
//	manifold://<prefix>/<original URI>
//
// [UnwrapURI] recovers the prefix and the original text exactly, so two upstreams may hand out
// the same URI and each read still reaches its owner. URI templates (RFC 6570) are rewritten the
// same way, textually; a URI expanded from a wrapped template unwraps to a URI the upstream
// expanded itself. Servers exposed with prefix "" keep their URIs; [Owners] routes those.
// [NonCanonicalURI] and [NonCanonicalTemplate] tell the URIs that every URI reader (WHATWG or
// RFC 3986) leaves unchanged, the only ones the gateway decides on.
package namespacing

import (
	"errors"
	"fmt"
)

// Defaults and limits of [Options].
const (
	// DefaultSeparator joins a prefix and a name.
	DefaultSeparator = "__"
	// DefaultMaxLength is the longest exposed name by default (Claude's and OpenAI's limit).
	DefaultMaxLength = 64
	// MinMaxLength is the smallest MaxLength honoured: room for some text and the 9-byte
	// "_<8 hex>" suffix of shortened names.
	MinMaxLength = 16
	// hashLen is the length of the suffix of a shortened name: '_' and 8 hex digits.
	hashLen = 9
)

// Options configures [Name] and [Merge]. The zero value means the defaults.
type Options struct {
	// Separator joins prefix and name. "" means DefaultSeparator ("__"). Characters outside
	// [A-Za-z0-9_-] are replaced like any other, but [Options.Validate] rejects them.
	Separator string
	// MaxLength is the longest exposed name in bytes. 0 (or negative) means DefaultMaxLength
	// (64); positive values below MinMaxLength (16) are raised to it.
	MaxLength int
	// Kind names what the names are ("tool", "prompt") in collision messages. "" means "tool".
	// Name ignores it.
	Kind string
}

func (o Options) separator() string {
	if o.Separator == "" {
		return DefaultSeparator
	}
	return o.Separator
}

func (o Options) maxLength() int {
	switch {
	case o.MaxLength <= 0:
		return DefaultMaxLength
	case o.MaxLength < MinMaxLength:
		return MinMaxLength
	}
	return o.MaxLength
}

func (o Options) kind() string {
	if o.Kind == "" {
		return "tool"
	}
	return o.Kind
}

// Validate reports every problem of o at once: a negative or too small MaxLength and a
// Separator with characters outside [A-Za-z0-9_-]. Name works with any Options; Validate is for
// values that come from a config file, where silently adjusting them would surprise the user.
func (o Options) Validate() error {
	var errs []error
	if o.MaxLength < 0 || (o.MaxLength > 0 && o.MaxLength < MinMaxLength) {
		errs = append(errs, fmt.Errorf("max length %d: must be 0 (default %d) or at least %d",
			o.MaxLength, DefaultMaxLength, MinMaxLength))
	}
	if o.Separator != "" && !ValidPrefix(o.Separator) {
		errs = append(errs, fmt.Errorf("separator %q: must match ^[A-Za-z0-9_-]+$", o.Separator))
	}
	return errors.Join(errs...)
}

// safe[b] reports whether byte b may appear in an exposed name: [A-Za-z0-9_-].
var safe = func() (t [256]bool) {
	for b := 'a'; b <= 'z'; b++ {
		t[b] = true
		t[b-'a'+'A'] = true
	}
	for b := '0'; b <= '9'; b++ {
		t[b] = true
	}
	t['_'], t['-'] = true, true
	return t
}()

// ValidPrefix reports whether s is non-empty and made of [A-Za-z0-9_-] only: the characters
// allowed in a URI prefix (see [WrapURI]) and in a separator, and the characters that survive
// [Name] unchanged.
func ValidPrefix(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !safe[s[i]] {
			return false
		}
	}
	return true
}
