package policy

import (
	"strings"
	"unicode/utf8"
)

// Pattern is a compiled glob pattern over names and URIs. '*' matches any run of characters
// (separators such as "__" and "/" included, possibly none) and '?' exactly one character; every
// other character matches only itself: case-sensitive, no normalisation, no escapes, no
// character classes. A character is one UTF-8 rune, or one byte of invalid UTF-8.
//
// The zero Pattern matches only the empty string. A Pattern is immutable and safe for
// concurrent use; Match allocates nothing and takes time linear in len(pattern)*len(s) at worst.
type Pattern struct {
	src  string // the pattern as written
	op   matchOp
	a, b string // literal parts for the fast paths; the normalised pattern for opGeneral
}

// matchOp selects how a Pattern matches.
type matchOp uint8

const (
	opExact        matchOp = iota // s == a
	opAny                         // "*": anything
	opPrefix                      // "a*"
	opSuffix                      // "*a"
	opInfix                       // "*a*"
	opPrefixSuffix                // "a*b"
	opGeneral                     // anything else: matchGlob(a, s)
)

// CompilePattern compiles the glob pattern s. Every string is a valid pattern; "" matches only
// "". Runs of '*' are equivalent to one.
func CompilePattern(s string) Pattern {
	p := Pattern{src: s, op: opGeneral, a: collapseStars(s)}
	n := p.a
	if !utf8.ValidString(n) {
		// The fast paths compare bytes, which equals comparing characters only when the
		// pattern is valid UTF-8.
		return p
	}
	if strings.IndexByte(n, '?') >= 0 {
		return p
	}
	switch strings.Count(n, "*") {
	case 0:
		p.op, p.a = opExact, n
	case 1:
		i := strings.IndexByte(n, '*')
		switch {
		case n == "*":
			p.op, p.a = opAny, ""
		case i == len(n)-1:
			p.op, p.a = opPrefix, n[:i]
		case i == 0:
			p.op, p.a = opSuffix, n[1:]
		default:
			p.op, p.a, p.b = opPrefixSuffix, n[:i], n[i+1:]
		}
	case 2:
		if n[0] == '*' && n[len(n)-1] == '*' {
			p.op, p.a = opInfix, n[1:len(n)-1]
		}
	}
	return p
}

// collapseStars replaces every run of '*' in s by one '*'.
func collapseStars(s string) string {
	if !strings.Contains(s, "**") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '*' && i > 0 && s[i-1] == '*' {
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.src }

// Match reports whether the whole of s matches the pattern.
func (p Pattern) Match(s string) bool {
	switch p.op {
	case opExact:
		return s == p.a
	case opAny:
		return true
	case opPrefix:
		return strings.HasPrefix(s, p.a)
	case opSuffix:
		return strings.HasSuffix(s, p.a)
	case opInfix:
		return strings.Contains(s, p.a)
	case opPrefixSuffix:
		return len(s) >= len(p.a)+len(p.b) && strings.HasPrefix(s, p.a) && strings.HasSuffix(s, p.b)
	default:
		return matchGlob(p.a, s)
	}
}

// matchGlob matches s against the glob pattern p with the greedy-star algorithm: on a mismatch
// it resumes after the last '*' seen, which then swallows one more character of s. Only the
// last '*' needs revisiting (whatever an earlier one could absorb, the last can too), so the
// cost is at most len(p) steps per character of s: O(len(s)*len(p)), never exponential.
func matchGlob(p, s string) bool {
	px, sx := 0, 0
	starPx, starSx := -1, 0 // pattern position after the last '*', and where its match ends
	for {
		if px < len(p) {
			switch c := p[px]; c {
			case '*':
				px++
				if px == len(p) {
					return true // a trailing '*' matches the rest
				}
				starPx, starSx = px, sx
				continue
			case '?':
				if sx < len(s) {
					px++
					sx += charLen(s, sx)
					continue
				}
			default:
				if sx < len(s) {
					if c < utf8.RuneSelf {
						if s[sx] == c {
							px++
							sx++
							continue
						}
					} else if n := sameChar(p[px:], s[sx:]); n > 0 {
						px += n
						sx += n
						continue
					}
				}
			}
		} else if sx == len(s) {
			return true
		}
		// Mismatch: let the last '*' swallow one more character, if there is one.
		if starPx < 0 || starSx >= len(s) {
			return false
		}
		starSx += charLen(s, starSx)
		px, sx = starPx, starSx
	}
}

// charLen returns the length in bytes of the character starting at s[i]: one rune, or one
// byte of invalid UTF-8.
func charLen(s string, i int) int {
	if s[i] < utf8.RuneSelf {
		return 1
	}
	_, n := utf8.DecodeRuneInString(s[i:])
	return n
}

// sameChar returns the length of the first character of p if s starts with the same
// character, else 0. Characters are compared whole, so an invalid byte of p never matches the
// first byte of a valid rune in s, nor U+FFFD an invalid byte.
func sameChar(p, s string) int {
	n := charLen(p, 0)
	if n != charLen(s, 0) || p[:n] != s[:n] {
		return 0
	}
	return n
}
