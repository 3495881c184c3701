package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
)

// tokenSpec is a credential format made of a fixed prefix and a body of
// one character set whose length is bounded: the providers' own formats,
// as their documentation and their secret-scanning partners publish them.
type tokenSpec struct {
	kind     int
	prefix   string
	body     *[256]bool
	min, max int // the body's length
}

var (
	awsBody    = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
	alnumBody  = charset(alnumChars)
	wordBody   = charset(alnumChars + "_")
	googleBody = charset(alnumChars + "_-")
	gitlabBody = charset(alnumChars + "_-.")
	slackBody  = charset(alnumChars + "-")
)

const alnumChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

var tokenSpecs = []tokenSpec{
	// AWS access key ids: a four-letter type prefix, then 16 base32 chars.
	{kindAWSAccessKey, "AKIA", awsBody, 16, 16},
	{kindAWSAccessKey, "ASIA", awsBody, 16, 16},
	{kindAWSAccessKey, "ABIA", awsBody, 16, 16},
	{kindAWSAccessKey, "ACCA", awsBody, 16, 16},
	{kindGoogleAPIKey, "AIza", googleBody, 35, 35},
	// GitHub: classic tokens are 36 chars after the prefix; app tokens
	// may grow, so they are bounded loosely.
	{kindGitHubToken, "ghp_", alnumBody, 36, 255},
	{kindGitHubToken, "gho_", alnumBody, 36, 255},
	{kindGitHubToken, "ghu_", alnumBody, 36, 255},
	{kindGitHubToken, "ghs_", alnumBody, 36, 255},
	{kindGitHubToken, "ghr_", alnumBody, 36, 255},
	{kindGitHubToken, "github_pat_", wordBody, 22, 255},
	{kindGitLabToken, "glpat-", gitlabBody, 20, 255},
	{kindGitLabToken, "gldt-", gitlabBody, 20, 255},
	{kindGitLabToken, "glrt-", gitlabBody, 20, 255},
	{kindGitLabToken, "glptt-", gitlabBody, 20, 255},
	{kindSlackToken, "xoxa-", slackBody, 10, 255},
	{kindSlackToken, "xoxb-", slackBody, 10, 255},
	{kindSlackToken, "xoxe-", slackBody, 10, 255},
	{kindSlackToken, "xoxp-", slackBody, 10, 255},
	{kindSlackToken, "xoxr-", slackBody, 10, 255},
	{kindSlackToken, "xoxs-", slackBody, 10, 255},
	{kindSlackToken, "xapp-", slackBody, 10, 255},
	{kindStripeKey, "sk_live_", alnumBody, 16, 255},
	{kindStripeKey, "rk_live_", alnumBody, 16, 255},
	{kindStripeKey, "sk_test_", alnumBody, 16, 255},
	{kindStripeKey, "rk_test_", alnumBody, 16, 255},
}

func charset(chars string) *[256]bool {
	var t [256]bool
	for i := range len(chars) {
		t[chars[i]] = true
	}
	return &t
}

// token returns the end and kind of the prefixed token at the word s[i:],
// or 0. The body must fill its length bounds exactly: a letter or digit
// right after it means a longer word, which is not the token.
func (r *Redactor) token(s []byte, i int) (end, kind int) {
	rest := s[i:]
	for _, k := range r.tokens[s[i]] {
		t := &tokenSpecs[k]
		if !bytes.HasPrefix(rest, []byte(t.prefix)) {
			continue
		}
		j := len(t.prefix)
		for j < len(rest) && j-len(t.prefix) <= t.max && t.body[rest[j]] {
			j++
		}
		for j > len(t.prefix) && (rest[j-1] == '.' || rest[j-1] == '-') {
			j-- // sentence punctuation after a token is not part of it
		}
		n := j - len(t.prefix)
		if n < t.min || n > t.max || j < len(rest) && alnum[rest[j]] {
			continue
		}
		return i + j, t.kind
	}
	return 0, 0
}

// jwtAt returns the end of the JSON Web Token at s[i:] (which starts with
// `e`), or 0: three base64url segments joined by dots (the signature may be
// empty) whose first decodes to a JSON object with an "alg" member.
func jwtAt(s []byte, i int) int {
	if !bytes.HasPrefix(s[i:], []byte("eyJ")) {
		return 0
	}
	// The header first, bounded: a real one is a few dozen bytes, and
	// checking it before reading on keeps a text full of "eyJ" linear.
	h := i
	for h < len(s) && h-i <= maxJWTHeader && googleBody[s[h]] {
		h++
	}
	if h-i < 10 || h-i > maxJWTHeader || h >= len(s) || s[h] != '.' {
		return 0
	}
	var buf [maxJWTHeader * 3 / 4]byte
	n, err := base64.RawURLEncoding.Decode(buf[:], s[i:h])
	if err != nil || !json.Valid(buf[:n]) || !bytes.Contains(buf[:n], []byte(`"alg"`)) {
		return 0
	}
	p := h + 1
	for p < len(s) && googleBody[s[p]] {
		p++
	}
	if p-h-1 < 2 || p >= len(s) || s[p] != '.' {
		return 0
	}
	end := p + 1
	for end < len(s) && googleBody[s[end]] {
		end++
	}
	return end
}

// maxJWTHeader bounds the encoded header of a JWT.
const maxJWTHeader = 512

const pemBegin = "-----BEGIN "

// privateKeyAt returns the end of the PEM private key block at s[start:]
// (which starts with pemBegin), or 0 when its label is not a private key
// (a certificate, a public key). The block ends with its END line; when
// that is missing (output cut short), it runs over what still looks like
// the block's body, so that a truncated key is not shown either. The END
// line is looked for up to maxPEM bytes on, and not past *noEnd, where the
// text holds no END line any more: a text full of BEGIN lines without END
// stays linear.
func privateKeyAt(s []byte, start int, noEnd *int) int {
	i := start + len(pemBegin)
	eol := bytes.Index(s[i:], []byte("-----"))
	if eol < 0 || eol > 64 {
		return 0
	}
	label := s[i : i+eol]
	if !bytes.HasSuffix(label, []byte("PRIVATE KEY")) && !bytes.HasSuffix(label, []byte("PRIVATE KEY BLOCK")) {
		return 0
	}
	body := i + eol + len("-----")
	var buf [96]byte
	end := append(append(append(buf[:0], "-----END "...), label...), "-----"...)
	for from, limit := body, min(len(s), body+maxPEM); from < limit && from < *noEnd; {
		k := bytes.Index(s[from:limit], []byte("-----END "))
		if k < 0 {
			if limit == len(s) {
				*noEnd = from
			}
			break
		}
		if bytes.HasPrefix(s[from+k:], end) {
			return from + k + len(end)
		}
		from += k + 1
	}
	j := body
	for j < len(s) && pemBody[s[j]] {
		j++
	}
	return j
}

// maxPEM bounds how far a private key's END line is looked for: a 4096-bit
// RSA or PGP key takes under 8 KiB.
const maxPEM = 16 << 10

// pemBody marks what the body of a PEM block may hold: base64, line breaks
// (also escaped ones, `\n`, in text that holds JSON), and the headers of
// an encrypted key (`Proc-Type: 4,ENCRYPTED`).
var pemBody = charset(alnumChars + "+/= \t\r\n\\:,-")

// Assignments: a name that says it holds a secret, a separator, a value.
// The value is a secret when it is long and random enough; names and
// values are matched as the config formats, environment files, command
// lines and JSON that tools print them.
const (
	minSecretLen = 8
	maxSecretLen = 512
	// minEntropy is the Shannon entropy, in bits per byte, below which a
	// value is taken for a word or a placeholder rather than a secret:
	// "changeme" has 2.75, "hunter22" 2.75, a random 16-char base64
	// string about 3.8.
	minEntropy = 3.0
)

// secretNames are the name endings that announce a secret, lower-case
// with `_`, `-` and `.` removed ("DB_PASSWORD", "api-key", "client.secret").
var secretNames = []string{
	"password", "passwd", "secret", "token", "apikey", "accesskey", "secretkey",
	"privatekey", "credential", "credentials", "authorization",
}

// assignmentAt returns the value assigned to a secret's name at the
// separator s[sep] (`=` or `:`), and its kind, or end 0.
func (r *Redactor) assignmentAt(s []byte, sep int) (start, end, kind int) {
	vs := sep + 1
	switch {
	case s[sep] == ':' && vs < len(s) && (s[vs] == '/' || s[vs] == ':'):
		return 0, 0, 0 // a URL's scheme, an IPv6 address, a C++ scope
	case s[sep] == ':' && vs < len(s) && s[vs] == '=', s[sep] == '=' && vs < len(s) && s[vs] == '>':
		vs++
	case s[sep] == '=' && (vs < len(s) && s[vs] == '=' || sep > 0 && bytes.IndexByte([]byte("=!<>"), s[sep-1]) >= 0):
		return 0, 0, 0 // a comparison
	}
	var name [32]byte
	n, aws := secretName(s, sep, &name)
	if n == 0 {
		return 0, 0, 0
	}
	start, end = assignedValue(s, vs)
	if kind, ok := r.secretValue(s[start:end], aws); ok {
		return start, end, kind
	}
	return 0, 0, 0
}

// secretValue reports whether v, assigned to a name that announces a
// secret (an AWS secret access key when aws), is one, and of what kind.
func (r *Redactor) secretValue(v []byte, aws bool) (kind int, ok bool) {
	switch {
	case aws && r.enabled[kindAWSSecretKey] && len(v) == 40 && awsSecret(v):
		return kindAWSSecretKey, true
	case !r.enabled[kindGenericSecret] || len(v) < minSecretLen || len(v) > maxSecretLen:
		return 0, false
	case placeholder(v) || entropy(v) < minEntropy:
		return 0, false
	}
	return kindGenericSecret, true
}

// memberSecret reports whether text, the string value of the object
// member named key (raw, between its quotes), is a secret by its name
// ({"api_key": "…"}), and of what kind.
func (r *Redactor) memberSecret(key, text []byte) (kind int, ok bool) {
	if len(key) == 0 || !nameEnds[key[len(key)-1]] {
		return 0, false
	}
	var name [32]byte
	n, aws := secretName(key, len(key), &name)
	if n == 0 {
		return 0, false
	}
	return r.secretValue(text, aws)
}

// nameEnds marks the last letters of secretNames, either case.
var nameEnds = charset("dtnylsDTNYLS")

// secretName reads the name before the separator at s[sep] (past blanks and
// a closing quote) and returns how long its normalized ending in *name is
// when it names a secret (else 0), and whether it names an AWS secret
// access key.
func secretName(s []byte, sep int, name *[32]byte) (n int, aws bool) {
	i := sep
	for i > 0 && (s[i-1] == ' ' || s[i-1] == '\t') {
		i--
	}
	if i > 0 && (s[i-1] == '"' || s[i-1] == '\'' || s[i-1] == '`') {
		i--
		if i > 0 && s[i-1] == '\\' {
			i-- // JSON inside a JSON string: {\"password\": \"…\"}
		}
	}
	if i == 0 || !nameEnds[s[i-1]] {
		return 0, false // the quick answer for most separators
	}
	// Walk the name backwards, keeping its last 32 letters and digits,
	// lower-cased, in order at the end of name; `_`, `-` and `.` are
	// passed over.
	k := len(name)
	for ; i > 0; i-- {
		c := s[i-1]
		if c == '_' || c == '-' || c == '.' {
			continue
		}
		if !alnum[c] {
			break
		}
		if k > 0 {
			if upper(c) {
				c += 'a' - 'A'
			}
			k--
			name[k] = c
		}
	}
	tail := name[k:]
	for _, w := range secretNames {
		if bytes.HasSuffix(tail, []byte(w)) {
			aws = bytes.HasSuffix(tail, []byte("secretaccesskey")) || bytes.HasSuffix(tail, []byte("awssecretkey"))
			return len(tail), aws
		}
	}
	return 0, false
}

// assignedValue returns the value that starts at s[vs] past blanks: up to
// its closing quote when quoted, else up to a blank or a delimiter. An
// `Authorization: Bearer <token>` value is the token.
func assignedValue(s []byte, vs int) (start, end int) {
	for vs < len(s) && (s[vs] == ' ' || s[vs] == '\t') {
		vs++
	}
	var quote byte
	escaped := vs+1 < len(s) && s[vs] == '\\' // JSON inside a JSON string
	if escaped {
		vs++
	}
	if vs < len(s) && (s[vs] == '"' || s[vs] == '\'' || s[vs] == '`') {
		quote = s[vs]
		vs++
	} else if escaped {
		vs--
	}
	for _, scheme := range []string{"Bearer ", "bearer ", "Basic ", "basic ", "Token ", "token "} {
		if bytes.HasPrefix(s[vs:], []byte(scheme)) {
			vs += len(scheme)
			break
		}
	}
	end = vs
	for end < len(s) && end-vs <= maxSecretLen {
		c := s[end]
		if quote != 0 && c == quote || c == '\n' || c == '\r' ||
			quote == 0 && bytes.IndexByte([]byte(" \t,;&\"'`<>()[]{}"), c) >= 0 {
			break
		}
		if quote == 0 && c == '=' && end+1 < len(s) && alnum[s[end+1]] {
			break // the next assignment (a=b=c); base64's padding ends a value
		}
		end++
	}
	if escaped && quote != 0 && end > vs && s[end-1] == '\\' {
		end-- // the backslash of the closing \"
	}
	return vs, end
}

// urlPasswordAt returns the password of the URL whose userinfo ends at the
// `@` at s[at] (`postgres://app:<password>@db:5432/x`, `redis://:<password>@h`),
// or end 0. The password is a secret whatever its entropy; a placeholder
// (`${DB_PASSWORD}`, `****`) is not.
func urlPasswordAt(s []byte, at int) (start, end int) {
	userinfo := func(i int) int { // the start of the userinfo part ending at s[i]
		j := i
		for j > 0 && i-j < maxSecretLen && bytes.IndexByte([]byte("/:@ \t\r\n\"'<>`"), s[j-1]) < 0 {
			j--
		}
		return j
	}
	start = userinfo(at)
	if start == at || start == 0 || s[start-1] != ':' {
		return 0, 0
	}
	user := userinfo(start - 1)
	if user < 3 || string(s[user-3:user]) != "://" || placeholder(s[start:at]) {
		return 0, 0
	}
	return start, at
}

// placeholder reports values that stand in for a secret: `${VAR}`,
// `{{ .Token }}`, `<your token>`, `%s`, `********`, a marker.
func placeholder(v []byte) bool {
	switch v[0] {
	case '$', '{', '<', '%', '[':
		return true
	}
	for _, c := range v[1:] {
		if c != v[0] {
			return false
		}
	}
	return true
}

// entropy is the Shannon entropy of v's bytes, in bits per byte.
func entropy(v []byte) float64 {
	var counts [256]int
	for _, c := range v {
		counts[c]++
	}
	h, n := 0.0, float64(len(v))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// awsSecret reports whether v is in the alphabet of an AWS secret access
// key (40 chars of base64) and not all one letter.
func awsSecret(v []byte) bool {
	for _, c := range v {
		if !alnum[c] && c != '/' && c != '+' && c != '=' {
			return false
		}
	}
	return !placeholder(v)
}
