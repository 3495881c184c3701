package namespacing

import "strings"

// NonCanonicalURI reports whether uri is not in the one form that every URI
// reader resolves to uri itself. Servers do not look resources up by the
// text they are sent: the TypeScript SDK looks them up by
// new URL(uri).toString() (the WHATWG URL Standard), others normalise by
// RFC 3986 §6, or decode and clean paths. A policy that matches exact
// strings can only be enforced on URIs that all of these leave unchanged,
// so a canonical URI is, by the stricter of the WHATWG URL Standard and
// RFC 3986:
//
//   - made of RFC 3986 characters only: no control characters (tab, CR and
//     LF included), space, DEL, non-ASCII, '"', '<', '>', '\', '^', '`',
//     '{', '|', '}', and no '[' or ']' (IP-literal hosts are not accepted);
//   - percent-encoded with two uppercase hex digits, never encoding an
//     unreserved character (RFC 3986 §2.3) or a separator ('/', '\');
//   - with a lowercase scheme, when it has one (and without a ':' in its
//     first segment when it has none);
//   - with an authority ("//…") that has no empty userinfo ("@", ":@"), no
//     empty password ("u:@"), no ';' or '=' in the userinfo, no '@' beyond
//     the one that ends it, a lowercase host, and a port, if any, of
//     digits without leading zeros, at most 65535;
//   - without "." or ".." segments between slashes before the query (their
//     percent-encoded spellings are refused above), and without a second
//     '#';
//   - for the schemes the WHATWG URL Standard treats as special (http,
//     https, ws, wss, ftp, file): written with "//", a path that starts
//     with '/', a host of [a-z0-9._-] that is a canonical dotted-quad IPv4
//     address if it ends in a number, no default port, no "'" in the
//     query; for file, no userinfo, no port and no "localhost" host.
//
// A "manifold://<prefix>/<original>" URI (see [UnwrapURI]) is canonical
// when its scheme is written in lowercase and the original URI is
// canonical; the prefix keeps its case, as the gateway matches it exactly
// and no server sees it. So for every URI NonCanonicalURI accepts, new URL(uri) in a
// WHATWG parser either throws or serialises to uri unchanged, and RFC 3986
// normalisation leaves it unchanged too.
//
// NonCanonicalURI does not allocate; it runs on every resources/read.
func NonCanonicalURI(uri string) bool {
	if _, original, ok := UnwrapURI(uri); ok {
		return uri[:len(URIScheme)] != URIScheme || !canonical(original, false)
	}
	return !canonical(uri, false)
}

// NonCanonicalTemplate is [NonCanonicalURI] for a URI template (RFC 6570):
// the text outside its "{…}" expressions follows the same rules, and an
// expression holds only the characters of RFC 6570 operators, variable
// names and modifiers. Braces do not nest.
func NonCanonicalTemplate(tmpl string) bool {
	if _, original, ok := UnwrapURI(tmpl); ok {
		return tmpl[:len(URIScheme)] != URIScheme || !canonical(original, true)
	}
	return !canonical(tmpl, true)
}

// canonical reports whether s is a canonical URI (or, with template, URI
// template); see NonCanonicalURI.
func canonical(s string, template bool) bool {
	if !canonicalBytes(s, template) {
		return false
	}
	rest, scheme := s, ""
	if n := schemeLen(s); n > 0 {
		scheme, rest = s[:n], s[n+1:]
		for i := 0; i < len(scheme); i++ {
			if 'A' <= scheme[i] && scheme[i] <= 'Z' {
				return false
			}
		}
	} else if i := indexAny(s, ":/?#", template); i >= 0 && s[i] == ':' {
		return false // RFC 3986 parsers read what precedes the ':' as a scheme
	}
	special, defaultPort := specialScheme(scheme)
	hier := rest // all that follows the scheme
	if strings.HasPrefix(rest, "//") {
		rest = rest[2:]
		end := indexAny(rest, "/?#", template)
		if end < 0 {
			end = len(rest)
		}
		if !canonicalAuthority(rest[:end], scheme, special, defaultPort) {
			return false
		}
		rest = rest[end:]
		if special && (rest == "" || rest[0] != '/') {
			return false // a parser adds the "/"
		}
	} else if special {
		return false // "http:x" and "file:/x" gain a "//"
	}
	if end := indexAny(rest, "?#", template); end >= 0 {
		rest = rest[end:]
	} else {
		rest = ""
	}
	// No "." or ".." between slashes before the query, in the path or
	// elsewhere: wrapped, "//./x" is a path segment of the manifold:// URI.
	head := hier[:len(hier)-len(rest)]
	for head != "" {
		seg := head
		if i := indexAny(head, "/", template); i >= 0 {
			seg, head = head[:i], head[i+1:]
		} else {
			head = ""
		}
		if seg == "." || seg == ".." {
			return false
		}
	}
	if strings.HasPrefix(rest, "?") {
		end := indexAny(rest, "#", template)
		if end < 0 {
			end = len(rest)
		}
		if special && strings.IndexByte(rest[:end], '\'') >= 0 {
			return false // percent-encoded in the query of a special URL
		}
		rest = rest[end:]
	}
	// rest is "" or the fragment, with its '#'.
	return rest == "" || indexAny(rest[1:], "#", template) < 0
}

// canonicalBytes checks the characters and percent-encodings of s, and the
// braces of a template.
func canonicalBytes(s string, template bool) bool {
	inExpr := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case template && c == '{':
			if inExpr {
				return false
			}
			inExpr = true
		case template && c == '}':
			if !inExpr {
				return false
			}
			inExpr = false
		case inExpr:
			if !exprChar[c] {
				return false
			}
		case c == '%':
			if i+2 >= len(s) || !isUpperHex(s[i+1]) || !isUpperHex(s[i+2]) {
				return false
			}
			if d := unhex(s[i+1])<<4 | unhex(s[i+2]); isUnreserved(d) || d == '/' || d == '\\' {
				return false
			}
			i += 2
		case !uriChar[c]:
			return false
		}
	}
	return !inExpr
}

// canonicalAuthority checks the authority a (between "//" and the path) of a
// URI with the given scheme. An authority holding a template expression is
// only checked for its characters.
func canonicalAuthority(a, scheme string, special bool, defaultPort string) bool {
	if strings.IndexByte(a, '{') >= 0 {
		return true
	}
	file := scheme == "file"
	if at := strings.LastIndexByte(a, '@'); at >= 0 {
		userinfo := a[:at]
		a = a[at+1:]
		if file || userinfo == "" || strings.ContainsAny(userinfo, "@;=") {
			return false
		}
		if colon := strings.IndexByte(userinfo, ':'); colon >= 0 {
			if password := userinfo[colon+1:]; password == "" || strings.IndexByte(password, ':') >= 0 {
				return false
			}
		}
	}
	host := a
	if colon := strings.IndexByte(a, ':'); colon >= 0 {
		host = a[:colon]
		if file || !canonicalPort(a[colon+1:], defaultPort) {
			return false
		}
		if host == "" {
			return false
		}
	}
	for i := 0; i < len(host); i++ {
		if host[i] == '%' {
			i += 2 // uppercase hex, checked already
		} else if 'A' <= host[i] && host[i] <= 'Z' {
			return false
		}
	}
	if !special {
		return true
	}
	if host == "" {
		return file
	}
	if file && host == "localhost" {
		return false
	}
	return canonicalDomain(host)
}

// canonicalPort reports whether port is digits without a leading zero, at
// most 65535, and not the scheme's default port.
func canonicalPort(port, defaultPort string) bool {
	if port == "" || len(port) > 5 || port[0] == '0' && len(port) > 1 || port == defaultPort {
		return false
	}
	n := 0
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return false
		}
		n = n*10 + int(port[i]-'0')
	}
	return n <= 65535
}

// canonicalDomain checks the host of a special URL: [a-z0-9._-], and a
// canonical dotted quad when its last label is a number (which a WHATWG
// parser reads as IPv4, in any of several spellings).
func canonicalDomain(host string) bool {
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	last := strings.TrimSuffix(host, ".")
	if i := strings.LastIndexByte(last, '.'); i >= 0 {
		last = last[i+1:]
	}
	if last == "" || !strings.HasPrefix(last, "0x") && strings.Trim(last, "0123456789") != "" {
		return true
	}
	// IPv4: four decimal numbers 0-255 without leading zeros.
	parts, n, digits := 1, 0, 0
	for i := 0; i <= len(host); i++ {
		if i == len(host) || host[i] == '.' {
			if digits == 0 || n > 255 {
				return false
			}
			if i < len(host) {
				parts++
			}
			n, digits = 0, 0
			continue
		}
		c := host[i]
		if c < '0' || c > '9' || digits > 0 && n == 0 || digits == 3 {
			return false
		}
		n, digits = n*10+int(c-'0'), digits+1
	}
	return parts == 4
}

// schemeLen returns the length of the scheme s starts with (ALPHA then
// ALPHA, DIGIT, '+', '-' or '.', then ':'), or 0 when it has none.
func schemeLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return i
		default:
			return 0
		}
	}
	return 0
}

// specialScheme reports whether the WHATWG URL Standard treats scheme as
// special, and its default port.
func specialScheme(scheme string) (special bool, defaultPort string) {
	switch scheme {
	case "http", "ws":
		return true, "80"
	case "https", "wss":
		return true, "443"
	case "ftp":
		return true, "21"
	case "file":
		return true, ""
	}
	return false, ""
}

// indexAny is strings.IndexAny for ASCII chars, skipping the "{…}"
// expressions of a template.
func indexAny(s, chars string, template bool) int {
	if !template {
		if len(chars) == 1 {
			return strings.IndexByte(s, chars[0])
		}
		return strings.IndexAny(s, chars)
	}
	inExpr := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case template && c == '{':
			inExpr = true
		case template && c == '}':
			inExpr = false
		case !inExpr && strings.IndexByte(chars, c) >= 0:
			return i
		}
	}
	return -1
}

// uriChar marks the characters a canonical URI may hold as they are:
// RFC 3986's unreserved, sub-delims and gen-delims, but '[' and ']'. '%'
// is checked with what follows it.
var uriChar = charSet("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~" + "!$&'()*+,;=" + ":/?#@")

// exprChar marks the characters of an RFC 6570 expression between its
// braces: operators, variable names (with '%' of their pct-encoded form),
// and the ':' and '*' modifiers.
var exprChar = charSet("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.%" + "+#./;?&=,!@|" + ":*")

func charSet(chars string) (t [256]bool) {
	for i := 0; i < len(chars); i++ {
		t[chars[i]] = true
	}
	return t
}

func isUpperHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'A' + 10
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}
