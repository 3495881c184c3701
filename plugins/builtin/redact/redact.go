package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/manifold-mcp/manifold/internal/envelope"
)

// ErrSyntax is returned by JSON for input that is not one JSON value.
var ErrSyntax = errors.New("redact: malformed JSON")

// Counts maps a kind (`email`, `github_token`, a custom name) to how many
// values of that kind were replaced. It never holds the values.
type Counts map[string]int

// Redactor finds secrets and personal data in JSON documents and replaces
// each with `[REDACTED:<kind>]`. It is immutable after New and safe for
// concurrent use.
type Redactor struct {
	enabled   [numBuiltin]bool
	custom    []customDetector
	kinds     []string // kind index → name: the built-ins, then custom
	markers   [][]byte // kind index → its marker
	arguments bool
	// starts marks the bytes at which a word-start detector may begin,
	// symbols those at which one hinges (see scan); tokens lists the
	// enabled tokenSpecs by the first byte of their prefix.
	starts  [256]uint8
	symbols [256]bool
	tokens  [256][]uint8
}

// customDetector is one `custom:` pattern.
type customDetector struct {
	re     *regexp.Regexp
	prefix []byte // the pattern's literal prefix: a cheap test before the regexp runs
	kind   int
}

// markerOpen starts every marker; text inside a marker is never redacted
// again, which keeps JSON idempotent.
const markerOpen = "[REDACTED:"

// Arguments reports whether the config asks to redact tool arguments too
// (`arguments: true`); results, prompt messages and resource text are
// always redacted.
func (r *Redactor) Arguments() bool { return r.arguments }

// Kinds returns the names of the kinds r finds, built-in then custom.
func (r *Redactor) Kinds() []string {
	var names []string
	for k, on := range r.enabled {
		if on {
			names = append(names, builtinKinds[k])
		}
	}
	return append(names, r.kinds[numBuiltin:]...)
}

// scratch holds the per-call buffers, reused through a pool so that a
// document with nothing to redact allocates nothing.
type scratch struct {
	text    []byte  // a string value, decoded
	matches []match // findings in text
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// JSON returns raw with every string value (not object keys) redacted, at
// any depth: a tools/call result, a prompts/get result, a resources/read
// result or tool arguments alike. A value whose member name announces a
// secret ("password", "api_key") is judged as a whole too. Escapes are
// decoded before detection, and a string that changed is re-encoded, so
// out is valid JSON; every other byte of raw is kept as it was. When nothing is found out is raw itself
// and n is nil. Input that is not one JSON value is ErrSyntax. JSON is
// idempotent: text inside a marker is not looked at again.
func (r *Redactor) JSON(raw []byte) (out []byte, n Counts, err error) {
	if err := validate(raw); err != nil {
		return nil, nil, err
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	copied := 0    // raw[:copied] is in out
	var key []byte // the last member name, while its value may follow
	colon := -1    // the colon after key
	for i := 0; i < len(raw); {
		q := bytes.IndexByte(raw[i:], '"')
		if q < 0 {
			break
		}
		start := i + q
		end, escaped := stringEnd(raw, start)
		i = end
		if c := keyColon(raw, end); c >= 0 {
			key, colon = raw[start+1:end-1], c
			continue
		}
		if colon < 0 || !blank(raw[colon+1:start]) {
			key = nil // not the value of the last key
		}
		colon = -1
		inner := raw[start+1 : end-1]
		text := inner
		if escaped {
			sc.text = unescape(sc.text[:0], inner)
			text = sc.text
		}
		if binary(text) {
			continue
		}
		edited, found := r.redactValue(sc, key, text, &n)
		if !found {
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(raw)+len(raw)/8)
		}
		out = append(out, raw[copied:start]...)
		out = envelope.AppendString(out, string(edited))
		copied = end
	}
	if out == nil {
		return raw, nil, nil
	}
	return append(out, raw[copied:]...), n, nil
}

// minBinary is the length from which a string of base64 alone is taken
// for binary data (see binary): 96 bytes encoded.
const minBinary = 128

var base64Std = charset(alnumChars + "+/")

// binary reports whether text is base64 data, such as a resource's blob or
// an image: only the standard alphabet, padded to a multiple of four, at
// least minBinary bytes. The detectors would find only chance matches in
// it, and replacing one would corrupt the data, so it is not searched.
// (Text that was base64-encoded is not decoded either: it is data to the
// gateway.)
func binary(text []byte) bool {
	if len(text) < minBinary || len(text)%4 != 0 {
		return false
	}
	n := len(text)
	for k := 0; k < 2 && text[n-1] == '='; k++ {
		n--
	}
	for _, c := range text[:n] {
		if !base64Std[c] {
			return false
		}
	}
	return true
}

// validate reports whether raw is one JSON value. The envelope scanner is
// the fast check; it declines only documents nested deeper than its limit,
// which encoding/json then decides.
func validate(raw []byte) error {
	err := envelope.Validate(raw)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, envelope.ErrNotSimple) && json.Valid(raw):
		return nil
	}
	return ErrSyntax
}

// stringEnd returns the index just past the string token that opens at
// raw[start] (a valid document's) and whether it holds an escape.
func stringEnd(raw []byte, start int) (end int, escaped bool) {
	i := start + 1
	for {
		q := bytes.IndexByte(raw[i:], '"')
		if q < 0 {
			return len(raw), escaped // unreachable for validated input
		}
		b := bytes.IndexByte(raw[i:i+q], '\\')
		if b < 0 {
			return i + q + 1, escaped
		}
		escaped = true
		i += b + 2
	}
}

// keyColon returns the index of the colon after the string token ending
// at raw[end] when the token is an object key (the next byte past blanks
// is a colon), else -1.
func keyColon(raw []byte, end int) int {
	for ; end < len(raw); end++ {
		switch raw[end] {
		case ' ', '\t', '\n', '\r':
		case ':':
			return end
		default:
			return -1
		}
	}
	return -1
}

// blank reports whether b is JSON whitespace only.
func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// unescape appends the decoded value of a validated string token's inner
// bytes to dst. An unpaired surrogate escape becomes U+FFFD, as
// encoding/json decodes it.
func unescape(dst, in []byte) []byte {
	for len(in) > 0 {
		b := bytes.IndexByte(in, '\\')
		if b < 0 {
			return append(dst, in...)
		}
		dst = append(dst, in[:b]...)
		in = in[b:]
		if in[1] != 'u' {
			dst = append(dst, simpleEscapes[in[1]])
			in = in[2:]
			continue
		}
		r := hexRune(in[2:6])
		in = in[6:]
		if 0xD800 <= r && r < 0xDC00 && len(in) >= 6 && in[0] == '\\' && in[1] == 'u' {
			if lo := hexRune(in[2:6]); 0xDC00 <= lo && lo < 0xE000 {
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				in = in[6:]
			}
		}
		if 0xD800 <= r && r < 0xE000 {
			r = utf8.RuneError
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

var simpleEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

func hexRune(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// redactValue is redactText for the string value of the member named key
// (nil for an array element or the whole document): a value whose name
// announces a secret ({"password": "…"}) and that passes the same checks
// as an assignment in text is replaced as a whole.
func (r *Redactor) redactValue(sc *scratch, key, text []byte, n *Counts) ([]byte, bool) {
	if key != nil {
		if kind, ok := r.memberSecret(key, text); ok {
			if *n == nil {
				*n = Counts{}
			}
			(*n)[r.kinds[kind]]++
			return r.markers[kind], true
		}
	}
	return r.redactText(sc, text, n)
}

// match is one finding: text[start:end] is of kind kind.
type match struct {
	start, end, kind int
}

// maxRounds bounds how often redactText looks again at text it changed: a
// replacement can give a neighbour the boundary it lacked (a marker ends
// with `]`, where the original text ended with a letter).
const maxRounds = 8

// redactText returns text with its findings replaced and
// whether there were any, adding them to *n.
func (r *Redactor) redactText(sc *scratch, text []byte, n *Counts) ([]byte, bool) {
	found := false
	for range maxRounds {
		sc.matches = r.find(sc.matches[:0], text)
		if len(sc.matches) == 0 {
			break
		}
		if *n == nil {
			*n = Counts{}
		}
		// Each round builds its text afresh: the previous round's text
		// is what it reads.
		next := make([]byte, 0, len(text)+32*len(sc.matches))
		at := 0
		for _, m := range sc.matches {
			next = append(next, text[at:m.start]...)
			next = append(next, r.markers[m.kind]...)
			(*n)[r.kinds[m.kind]]++
			at = m.end
		}
		text = append(next, text[at:]...)
		found = true
	}
	return text, found
}

// find appends to ms the findings in text, sorted and without overlaps: a
// finding inside another is dropped; of two that overlap in part the kind
// listed first wins. Findings that overlap a marker already in text are
// dropped.
func (r *Redactor) find(ms []match, text []byte) []match {
	ms = r.scan(ms, text)
	for i := range r.custom {
		ms = r.custom[i].find(ms, text)
	}
	if len(ms) == 0 {
		return ms
	}
	slices.SortFunc(ms, func(a, b match) int {
		if a.start != b.start {
			return a.start - b.start
		}
		if a.end != b.end {
			return b.end - a.end
		}
		return a.kind - b.kind
	})
	ms = dropInMarkers(ms, text)
	if len(ms) < 2 {
		return ms
	}
	kept := ms[:1]
	for _, m := range ms[1:] {
		last := &kept[len(kept)-1]
		switch {
		case m.start >= last.end:
			kept = append(kept, m)
		case m.end <= last.end:
			// inside last (or the same span of a later kind): last covers it
		case m.kind < last.kind:
			*last = m
		}
	}
	return kept
}

// dropInMarkers removes the findings (sorted by start) that overlap a
// marker already in text, in one pass over both.
func dropInMarkers(ms []match, text []byte) []match {
	start, end := nextMarker(text, 0)
	if start < 0 {
		return ms
	}
	kept := ms[:0]
	for _, m := range ms {
		for start >= 0 && end <= m.start {
			start, end = nextMarker(text, end)
		}
		if start < 0 || start >= m.end {
			kept = append(kept, m)
		}
	}
	return kept
}

// nextMarker returns where the first marker in text[from:] starts and
// ends, or -1: `[REDACTED:` then a kind name then `]`.
func nextMarker(text []byte, from int) (start, end int) {
	for {
		j := bytes.Index(text[from:], []byte(markerOpen))
		if j < 0 {
			return -1, -1
		}
		start = from + j
		i := start + len(markerOpen)
		k := i
		for k < len(text) && (lower(text[k]) || digit(text[k]) || text[k] == '_') {
			k++
		}
		if k > i && k < len(text) && text[k] == ']' {
			return start, k + 1
		}
		from = start + 1
	}
}

// find appends the pattern's matches in text: the first capturing group's
// text when the pattern has one that took part, else the whole match.
func (c *customDetector) find(ms []match, text []byte) []match {
	if len(c.prefix) > 0 && !bytes.Contains(text, c.prefix) {
		return ms
	}
	for _, loc := range c.re.FindAllSubmatchIndex(text, -1) {
		start, end := loc[0], loc[1]
		if len(loc) >= 4 && loc[2] >= 0 {
			start, end = loc[2], loc[3]
		}
		if end > start {
			ms = append(ms, match{start: start, end: end, kind: c.kind})
		}
	}
	return ms
}
