package namespacing

import (
	"crypto/sha256"
	"io"
	"strings"
	"unicode/utf8"
)

// Name maps an upstream tool or prompt name to the name clients see.
//
// It qualifies name as prefix + separator + name (just name when prefix is ""), replaces every
// character outside [A-Za-z0-9_-] with '_' (one '_' per UTF-8 rune; each byte of invalid UTF-8
// counts as one rune), and, when the result is longer than the maximum length, keeps its first
// max-9 bytes and appends "_" and the first 8 lowercase hex digits of the SHA-256 of the
// unmapped qualified name. An empty result becomes "_". The result always matches
// ^[A-Za-z0-9_-]{1,max}$ where max is the effective MaxLength of opts (see [Options]).
//
// Name is deterministic and allocates at most the returned string; when prefix is "" and name
// is already a valid exposed name it returns name itself.
//
// Different inputs may give the same result ("a.b" and "a_b"); [Merge] detects that.
func Name(prefix, name string, opts Options) string {
	sep := opts.separator()
	if prefix == "" {
		sep = ""
	}
	maxLen := opts.maxLength()
	if prefix == "" && len(name) <= maxLen && ValidPrefix(name) {
		return name
	}
	n := utf8.RuneCountInString(prefix) + utf8.RuneCountInString(sep) + utf8.RuneCountInString(name)
	if n == 0 {
		return "_"
	}
	var b strings.Builder
	if n <= maxLen {
		b.Grow(n)
		writeMapped(&b, prefix, n)
		writeMapped(&b, sep, n)
		writeMapped(&b, name, n)
		return b.String()
	}
	keep := maxLen - hashLen
	b.Grow(maxLen)
	writeMapped(&b, prefix, keep)
	writeMapped(&b, sep, keep)
	writeMapped(&b, name, keep)
	sum := qualifiedSum(prefix, sep, name)
	const hexDigits = "0123456789abcdef"
	b.WriteByte('_')
	for _, c := range sum[:(hashLen-1)/2] {
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0x0f])
	}
	return b.String()
}

// writeMapped writes s to b with every rune outside [A-Za-z0-9_-] replaced by '_', stopping
// when b holds limit bytes.
func writeMapped(b *strings.Builder, s string, limit int) {
	for i := 0; i < len(s) && b.Len() < limit; {
		// Copy the run of safe bytes at s[i:] in one go.
		j := i
		for j < len(s) && safe[s[j]] {
			j++
		}
		if j > i {
			b.WriteString(s[i:min(j, i+limit-b.Len())])
			i = j
			continue
		}
		if s[i] < utf8.RuneSelf {
			i++
		} else {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
		}
		b.WriteByte('_')
	}
}

// qualifiedSum returns the SHA-256 of prefix+sep+name without allocating for names of
// ordinary length.
func qualifiedSum(prefix, sep, name string) [sha256.Size]byte {
	var buf [512]byte
	if len(prefix)+len(sep)+len(name) <= len(buf) {
		q := append(append(append(buf[:0], prefix...), sep...), name...)
		return sha256.Sum256(q)
	}
	h := sha256.New()
	_, _ = io.WriteString(h, prefix)
	_, _ = io.WriteString(h, sep)
	_, _ = io.WriteString(h, name)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}
