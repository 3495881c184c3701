// Package redact removes what may be a secret from URLs before they are
// printed: in logs, in errors that reach clients, on /status. A URL's
// userinfo, each query value and its fragment can carry a credential (an
// upstream's `?token=${TOKEN}`, a `user:password@`, a session id an
// upstream announces); the scheme, host, port, path and query keys stay, so
// a message still says where a request went.
//
// The functions work on text, not on parsed URLs: what is printed is often
// an error message in which net/http or the go-sdk embedded a URL (quoted,
// or malformed), and a URL that does not parse must not leak either.
package redact

import (
	"strings"
)

// Mask replaces each redacted part.
const Mask = "REDACTED"

// URL returns s, one URL, with its userinfo, every non-empty query value (a
// query parameter without "=" as a whole) and a non-empty fragment replaced
// by Mask. Scheme, host, port, path and query keys are kept. s need not
// parse; URL is idempotent.
func URL(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	rest := s
	if i := strings.Index(rest, "://"); i >= 0 && validScheme(rest[:i]) {
		b.WriteString(rest[:i+3])
		rest = rest[i+3:]
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndexByte(rest[:end], '@'); at > 0 {
			b.WriteString(Mask)
			b.WriteString(rest[at:end])
		} else {
			b.WriteString(rest[:end])
		}
		rest = rest[end:]
	}
	q := strings.IndexAny(rest, "?#")
	if q < 0 {
		q = len(rest)
	}
	b.WriteString(Text(rest[:q])) // a URL inside the path (a proxy's, say)
	rest = rest[q:]
	if rest == "" {
		return b.String()
	}
	if rest[0] == '?' {
		query := rest[1:]
		rest = ""
		if f := strings.IndexByte(query, '#'); f >= 0 {
			query, rest = query[:f], query[f:]
		}
		b.WriteByte('?')
		for i, pair := range strings.Split(query, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			key, value, ok := strings.Cut(pair, "=")
			switch {
			case !ok && pair != "":
				b.WriteString(Mask)
			case !ok:
			case value == "":
				b.WriteString(key)
				b.WriteByte('=')
			default:
				b.WriteString(key)
				b.WriteByte('=')
				b.WriteString(Mask)
			}
		}
	}
	if len(rest) > 1 { // "#" and a fragment
		b.WriteString("#" + Mask)
	} else {
		b.WriteString(rest)
	}
	return b.String()
}

// Text returns s with every URL in it redacted as by URL: each
// "scheme://…", and each quoted reference of a *url.Error (`Post "…"`,
// where net/http puts a redirect's Location as the server sent it, often
// relative). A URL that follows a double quote (Go's %q) runs to the
// closing quote (a space inside stays part of it, unless the next word is a
// URL of its own); any other to the next space, quote, '<' or '>'. Text is
// idempotent, and returns s itself when it holds no URL.
func Text(s string) string {
	return schemeURLs(urlErrors(s))
}

// urlErrorOps are the operations *url.Error names before its quoted URL
// (net/http's request methods, capitalised).
var urlErrorOps = []string{"Get", "Post", "Put", "Delete", "Head", "Patch", "Options", "Connect", "Trace"}

// urlErrors redacts the quoted URL of each `Op "…"` in s.
func urlErrors(s string) string {
	if !strings.Contains(s, ` "`) {
		return s
	}
	var b strings.Builder
	done := 0
	for search := 0; ; {
		q := strings.Index(s[search:], ` "`)
		if q < 0 {
			break
		}
		q += search + 1 // the quote
		search = q + 1
		if !precededByOp(s[:q-1]) {
			continue
		}
		end := urlEnd(s, q+1, true)
		if b.Len() == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[done : q+1])
		b.WriteString(URL(s[q+1 : end]))
		done, search = end, end-1 // the closing quote may open the next
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// precededByOp reports whether s ends with one of urlErrorOps as a word.
func precededByOp(s string) bool {
	for _, op := range urlErrorOps {
		if strings.HasSuffix(s, op) && (len(s) == len(op) || !isAlpha(s[len(s)-len(op)-1])) {
			return true
		}
	}
	return false
}

// schemeURLs redacts each "scheme://…" in s.
func schemeURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	done := 0 // s[:done] is written
	for search := 0; ; {
		i := strings.Index(s[search:], "://")
		if i < 0 {
			break
		}
		i += search
		start := i
		for start > done && isSchemeChar(s[start-1]) {
			start--
		}
		for start < i && !isAlpha(s[start]) { // a scheme starts with a letter
			start++
		}
		if start == i {
			search = i + 3
			continue
		}
		end := urlEnd(s, i+3, start > 0 && s[start-1] == '"')
		b.WriteString(s[done:start])
		b.WriteString(URL(s[start:end]))
		done, search = end, end
	}
	b.WriteString(s[done:])
	return b.String()
}

// urlEnd returns where the URL whose text continues at s[from] ends: for a
// quoted URL at the closing quote (\" and \\ are escapes) or at a space
// before another URL, otherwise at the first space, quote, '<' or '>'.
func urlEnd(s string, from int, quoted bool) int {
	for j := from; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '"':
			return j
		case quoted && c == '\\' && j+1 < len(s) && (s[j+1] == '"' || s[j+1] == '\\'):
			j++
		case quoted && isSpace(c):
			next := s[j+1:]
			if k := strings.IndexFunc(next, func(r rune) bool { return r == '"' || r < 128 && isSpace(byte(r)) }); k >= 0 {
				next = next[:k]
			}
			if strings.Contains(next, "://") {
				return j
			}
		case quoted:
		case isSpace(c), c == '\'', c == '<', c == '>', c == '`':
			return j
		}
	}
	return len(s)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// Error returns err with every URL in its message redacted (see Text),
// still wrapping err for errors.Is and errors.As; err itself when its
// message holds no URL (and nil for nil).
func Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	red := Text(msg)
	if red == msg {
		return err
	}
	return &redactedError{msg: red, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func validScheme(s string) bool {
	if s == "" || !isAlpha(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isSchemeChar(s[i]) {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isSchemeChar(c byte) bool {
	return isAlpha(c) || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}
