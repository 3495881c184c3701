package redact

import "bytes"

// Detection is one pass over a string's decoded text, cheap where there
// is nothing to find. It visits the start of every run of ASCII letters and
// digits (a "word") and runs the detectors whose format can begin with that
// byte: the prefixed tokens (AKIA…, ghp_…, xoxb-…), JWTs (eyJ…), IBANs (two
// capitals, two digits), phone and card numbers (a digit); a word is then
// skipped as a whole. Between words it stops at the few bytes the other
// formats hinge on: `@` (emails, and passwords in URLs), `-----BEGIN ` (private keys) and `=` or
// `:` (assignments of a secret to a name such as `password` or `api_key`).
// A byte no detector starts with costs one table lookup.

// What a word's first byte may start (Redactor.starts).
const (
	startToken  = 1 << iota // a prefixed token or a JWT (tokenSpecs)
	startNumber             // a phone or card number
	startIBAN
)

// alnum marks ASCII letters and digits: the bytes words are made of.
var alnum = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	return t
}()

func digit(c byte) bool { return '0' <= c && c <= '9' }
func upper(c byte) bool { return 'A' <= c && c <= 'Z' }
func lower(c byte) bool { return 'a' <= c && c <= 'z' }

// prepare fills r's tables from the enabled detectors.
func (r *Redactor) prepare() {
	for _, t := range tokenSpecs {
		if r.enabled[t.kind] {
			r.starts[t.prefix[0]] |= startToken
		}
	}
	if r.enabled[kindJWT] {
		r.starts['e'] |= startToken
	}
	if r.enabled[kindPhone] || r.enabled[kindCardNumber] {
		for c := '0'; c <= '9'; c++ {
			r.starts[c] |= startNumber
		}
	}
	if r.enabled[kindIBAN] {
		for c := 'A'; c <= 'Z'; c++ {
			r.starts[c] |= startIBAN
		}
	}
	r.symbols['@'] = r.enabled[kindEmail] || r.enabled[kindGenericSecret]
	r.symbols['-'] = r.enabled[kindPrivateKey]
	r.symbols['='] = r.enabled[kindGenericSecret] || r.enabled[kindAWSSecretKey]
	r.symbols[':'] = r.symbols['=']
	for k, t := range tokenSpecs {
		if r.enabled[t.kind] {
			r.tokens[t.prefix[0]] = append(r.tokens[t.prefix[0]], uint8(k))
		}
	}
}

// scan appends the findings of the built-in detectors in s.
func (r *Redactor) scan(ms []match, s []byte) []match {
	noEnd := len(s) // see privateKeyAt
	for i := 0; i < len(s); {
		c := s[i]
		if !alnum[c] {
			if r.symbols[c] {
				ms = r.atSymbol(ms, s, i, &noEnd)
			}
			i++
			continue
		}
		if what := r.starts[c]; what != 0 {
			ms = r.atWord(ms, s, i, what)
		}
		for i++; i < len(s) && alnum[s[i]]; i++ {
		}
	}
	return ms
}

// atWord appends what the detectors in what find at the word s[i:].
func (r *Redactor) atWord(ms []match, s []byte, i int, what uint8) []match {
	if what&startToken != 0 {
		if end, kind := r.token(s, i); end > 0 {
			return append(ms, match{start: i, end: end, kind: kind})
		}
		if s[i] == 'e' && r.enabled[kindJWT] {
			if end := jwtAt(s, i); end > 0 {
				return append(ms, match{start: i, end: end, kind: kindJWT})
			}
		}
	}
	if what&startIBAN != 0 {
		if end := ibanAt(s, i); end > 0 {
			return append(ms, match{start: i, end: end, kind: kindIBAN})
		}
	}
	if what&startNumber != 0 {
		if r.enabled[kindCardNumber] {
			if end := cardAt(s, i); end > 0 {
				return append(ms, match{start: i, end: end, kind: kindCardNumber})
			}
		}
		if r.enabled[kindPhone] {
			if start, end := phoneAt(s, i); end > 0 {
				return append(ms, match{start: start, end: end, kind: kindPhone})
			}
		}
	}
	return ms
}

// atSymbol appends what the detectors find at the symbol s[i]; noEnd is
// privateKeyAt's.
func (r *Redactor) atSymbol(ms []match, s []byte, i int, noEnd *int) []match {
	switch s[i] {
	case '@':
		if start, end := urlPasswordAt(s, i); end > 0 {
			if r.enabled[kindGenericSecret] {
				ms = append(ms, match{start: start, end: end, kind: kindGenericSecret})
			}
			return ms // user:password@host is not an address
		}
		if r.enabled[kindEmail] {
			if start, end := emailAt(s, i); end > 0 {
				ms = append(ms, match{start: start, end: end, kind: kindEmail})
			}
		}
	case '-':
		if bytes.HasPrefix(s[i:], []byte(pemBegin)) {
			if end := privateKeyAt(s, i, noEnd); end > 0 {
				ms = append(ms, match{start: i, end: end, kind: kindPrivateKey})
			}
		}
	default: // '=', ':'
		if start, end, kind := r.assignmentAt(s, i); end > 0 {
			ms = append(ms, match{start: start, end: end, kind: kind})
		}
	}
	return ms
}
