package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/manifold-mcp/manifold/config"
)

// Redacted replaces the value of an argument whose key matches a redaction pattern.
const Redacted = "[REDACTED]"

// HashPrefix starts a hashed arguments value: "hmac-sha256:" and 64 hex digits.
const HashPrefix = "hmac-sha256:"

// errInvalidArguments is recorded (as "arguments_error") for arguments that are not JSON.
var errInvalidArguments = errors.New("not valid JSON")

// arguments turns a record's arguments into their recorded form. It is used by the writer
// goroutine only, so it keeps its HMAC state and buffers without locking.
type arguments struct {
	mode     string
	patterns []string // lower case
	mac      hash.Hash
	buf      bytes.Buffer
}

func newArguments(mode string, key []byte, patterns []string) *arguments {
	a := &arguments{mode: mode}
	for _, p := range patterns {
		a.patterns = append(a.patterns, strings.ToLower(p))
	}
	if mode == config.ArgumentsHashed {
		a.mac = hmac.New(sha256.New, key)
	}
	return a
}

// encode returns the recorded form of v: nil in none mode or for no arguments; the redacted
// JSON in full mode; the JSON string "hmac-sha256:<hex>" in hashed mode, an HMAC of the RFC 8785
// canonical form of the redacted arguments. The result is only valid until the next call.
func (a *arguments) encode(v any) (json.RawMessage, error) {
	if a.mode == config.ArgumentsNone || v == nil {
		return nil, nil
	}
	var raw []byte
	switch v := v.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("cannot marshal: %w", err)
		}
		raw = b
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, errInvalidArguments
	}
	if len(a.patterns) > 0 {
		var err error
		if raw, err = a.redact(raw); err != nil {
			return nil, err
		}
	}
	a.buf.Reset()
	if a.mode == config.ArgumentsFull {
		if err := json.Compact(&a.buf, raw); err != nil {
			return nil, errInvalidArguments
		}
		return a.buf.Bytes(), nil
	}
	canonical, err := jcs.Transform(raw)
	if err != nil {
		return nil, errInvalidArguments // such as a duplicate key, which JSON allows and RFC 8785 does not
	}
	a.mac.Reset()
	a.mac.Write(canonical)
	var sum [sha256.Size]byte
	a.buf.WriteByte('"')
	a.buf.WriteString(HashPrefix)
	a.buf.WriteString(hex.EncodeToString(a.mac.Sum(sum[:0])))
	a.buf.WriteByte('"')
	return a.buf.Bytes(), nil
}

// redact returns raw with the values of matching keys replaced by Redacted, or raw itself
// when no key matches. Numbers keep their text.
func (a *arguments) redact(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, errInvalidArguments
	}
	if !a.redactValue(tree) {
		return raw, nil
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tree); err != nil {
		return nil, fmt.Errorf("cannot marshal: %w", err)
	}
	return out.Bytes(), nil
}

// redactValue replaces, in place, the values of matching keys at any depth of v, and reports
// whether it replaced any.
func (a *arguments) redactValue(v any) bool {
	changed := false
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if a.matches(k) {
				v[k] = Redacted
				changed = true
			} else if a.redactValue(e) {
				changed = true
			}
		}
	case []any:
		for _, e := range v {
			if a.redactValue(e) {
				changed = true
			}
		}
	}
	return changed
}

// matches reports whether key matches one of the redaction patterns, ignoring case.
func (a *arguments) matches(key string) bool {
	key = strings.ToLower(key)
	for _, p := range a.patterns {
		if glob(p, key) {
			return true
		}
	}
	return false
}

// glob reports whether s matches pattern, where '*' matches any run of characters and '?'
// one character (rune); everything else matches itself. It runs in O(len(pattern)·len(s)).
func glob(pattern, s string) bool {
	px, sx := 0, 0
	starP, starS := -1, 0 // after the last '*': where the pattern resumes, and the text
	for sx < len(s) {
		if px < len(pattern) {
			switch c := pattern[px]; c {
			case '*':
				starP, starS = px+1, sx
				px++
				continue
			case '?':
				_, n := utf8.DecodeRuneInString(s[sx:])
				px, sx = px+1, sx+n
				continue
			default:
				if c == s[sx] {
					px, sx = px+1, sx+1
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last '*' absorb one more character and try again from there.
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		px, sx = starP, starS
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}
