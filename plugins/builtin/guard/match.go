package guard

import (
	"fmt"
	"net"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"
)

// regexMatcher blocks values the expression finds a match in (anchor it
// with ^…$ to test the whole value).
type regexMatcher struct{ re *regexp.Regexp }

func (m regexMatcher) match(v string) bool { return m.re.MatchString(v) }

// globMatcher blocks values the glob matches as a whole (path.Match: `*`
// stops at `/`).
type globMatcher string

func (m globMatcher) match(v string) bool {
	ok, _ := path.Match(string(m), v)
	return ok
}

// shellMatcher blocks values holding what a shell reads as more than one
// plain word list: command separators and chaining (; | & newline),
// command substitution ($( and backquotes) and redirection (> <).
type shellMatcher struct{}

func (shellMatcher) match(v string) bool {
	return strings.ContainsAny(v, ";|&`><\n") || strings.Contains(v, "$(")
}

// traversalMatcher blocks values with a `..` path segment, in any of the
// spellings file systems and web servers accept: `/` or `\` separated,
// percent-encoded (also twice, and as overlong UTF-8), IIS's `%u002e`,
// full-width dots and slashes. With roots, it also blocks absolute paths
// at or below one of them.
type traversalMatcher struct {
	roots []string // normalized, without a trailing slash
}

func (m traversalMatcher) match(v string) bool {
	p := normalizePath(v)
	if dotDot(p) {
		return true
	}
	for _, root := range m.roots {
		if underRoot(p, root) {
			return true
		}
	}
	return false
}

// normalizePath undoes the encodings a path may hide in: percent-encoding
// (up to three times), %uXXXX, overlong UTF-8 and full-width forms of `.`,
// `/` and `\`; backslashes become slashes and `/./` and `//` collapse.
func normalizePath(v string) string {
	for range 3 {
		d := percentDecode(v)
		if d == v {
			break
		}
		v = d
	}
	for i := range len(v) {
		if v[i] >= utf8.RuneSelf {
			v = lookalikes.Replace(v)
			break
		}
	}
	v = strings.ReplaceAll(v, `\`, "/")
	for strings.Contains(v, "//") {
		v = strings.ReplaceAll(v, "//", "/")
	}
	for strings.Contains(v, "/./") {
		v = strings.ReplaceAll(v, "/./", "/")
	}
	return v
}

var lookalikes = strings.NewReplacer(
	"\xc0\xae", ".", "\xe0\x80\xae", ".", "\uff0e", ".",
	"\xc0\xaf", "/", "\xe0\x80\xaf", "/", "\uff0f", "/", "\u2215", "/",
	"\xc1\x9c", `\`, "\uff3c", `\`, "\u2216", `\`,
)

// percentDecode decodes %XX and %uXXXX escapes, leaving malformed ones.
func percentDecode(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '%' && i+2 < len(v) && unhex(v[i+1]) >= 0 && unhex(v[i+2]) >= 0 {
			b.WriteByte(byte(unhex(v[i+1])<<4 | unhex(v[i+2])))
			i += 2
			continue
		}
		if c == '%' && i+5 < len(v) && (v[i+1] == 'u' || v[i+1] == 'U') {
			r := 0
			for _, h := range []byte(v[i+2 : i+6]) {
				if r >= 0 && unhex(h) >= 0 {
					r = r<<4 | unhex(h)
				} else {
					r = -1
				}
			}
			if r >= 0 {
				b.WriteRune(rune(r))
				i += 5
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// unhex is the value of the hex digit c, or -1.
func unhex(c byte) int {
	if c < '0' {
		return -1
	}
	return strings.IndexByte("0123456789abcdef", c|0x20) // c|0x20: 'A' to 'a'; digits keep
}

// dotDot reports whether p (normalized) holds `..` as a path segment: not
// inside a file name, so at the start or after a byte that is not part of
// one (a slash, a blank, a quote, `=` as in `--file=../x`), and at the end
// or before a slash, a blank, a quote or `;` (Tomcat's `..;/`); blanks
// after it are ignored as Windows ignores them (`.. /`). Three dots or
// more are not `..`.
func dotDot(p string) bool {
	for i := 0; ; {
		j := strings.Index(p[i:], "..")
		if j < 0 {
			return false
		}
		at := i + j
		end := at + 2
		for end < len(p) && p[end] == ' ' {
			end++
		}
		before := at == 0 || !pathChar(p[at-1])
		after := end == len(p) || strings.IndexByte("/;\t\n\r'\"`", p[end]) >= 0 || p[end-1] == ' '
		if before && after && !strings.HasPrefix(p[at:], "...") {
			return true
		}
		i = at + 1
	}
}

// absolute reports whether p (normalized) is an absolute path: /…, ~/… or
// a drive letter's C:/….
func absolute(p string) bool {
	return strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~/") ||
		len(p) >= 3 && p[1] == ':' && p[2] == '/' && ('a' <= p[0]|0x20 && p[0]|0x20 <= 'z')
}

// underRoot reports whether p (normalized) names root or a path below it,
// as a whole value or as a word in it (`cat /etc/shadow`), also inside a
// file: URL. Drive-letter roots compare without case, as Windows does.
func underRoot(p, root string) bool {
	fold := root[0] != '/' && root[0] != '~'
	if fold {
		p, root = strings.ToLower(p), strings.ToLower(root)
	}
	for i := 0; ; {
		j := strings.Index(p[i:], root)
		if j < 0 {
			return false
		}
		at := i + j
		end := at + len(root)
		before := at == 0 || !pathChar(p[at-1]) || root[0] == '/' && p[at-1] == ':'
		after := end == len(p) || p[end] == '/' || !pathChar(p[end])
		if before && after {
			return true
		}
		i = at + 1
	}
}

// pathChar marks the bytes a file name is commonly made of.
func pathChar(c byte) bool {
	return 'a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == '~' || c >= utf8.RuneSelf
}

// allowListMatcher blocks values holding a URL whose host is not allowed.
// Hosts are read as browsers and URL libraries read them, so that a URL
// cannot name an allowed host and reach another: userinfo is cut at the
// last `@` (http://allowed@evil), `\` ends the authority like `/`, tabs and
// line breaks are removed, percent-escapes in the host are decoded, case
// and a trailing dot ignored. A URL is a scheme and `:`; for http, https,
// ws, wss and ftp any slashes (even none) may follow, other schemes need
// `//` and a host.
type allowListMatcher struct {
	exact    map[string]bool
	suffixes []string // from "*.example.com": ".example.com"
}

func compileAllowList(hosts []string) (matcher, error) {
	m := allowListMatcher{exact: map[string]bool{}}
	for i, h := range hosts {
		h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
		switch {
		case h == "" || strings.ContainsAny(h, "/@?#\\ :") && net.ParseIP(strings.Trim(h, "[]")) == nil:
			return nil, fmt.Errorf("[%d]: %q is not a host name (no scheme, port or path)", i, hosts[i])
		case strings.HasPrefix(h, "*."):
			m.suffixes = append(m.suffixes, h[1:])
		case strings.Contains(h, "*"):
			return nil, fmt.Errorf("[%d]: %q: a wildcard is only allowed as a leading \"*.\"", i, hosts[i])
		default:
			m.exact[strings.Trim(h, "[]")] = true
		}
	}
	return m, nil
}

func (m allowListMatcher) match(v string) bool {
	if strings.ContainsAny(v, "\t\n\r") {
		v = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(v)
	}
	if t := strings.TrimLeft(v, " "); len(t) > 2 && (t[0] == '/' || t[0] == '\\') && (t[1] == '/' || t[1] == '\\') {
		// A value that is a scheme-relative URL (//evil.com/x): resolved
		// against an http base, it names that host.
		if host, ok := authorityHost(t, 2); ok && !m.allowed(host) {
			return true
		}
	}
	for i := 0; ; {
		j := strings.IndexByte(v[i:], ':')
		if j < 0 {
			return false
		}
		colon := i + j
		i = colon + 1
		host, ok := urlHost(v, colon)
		if ok && !m.allowed(host) {
			return true
		}
	}
}

func (m allowListMatcher) allowed(host string) bool {
	if m.exact[host] {
		return true
	}
	for _, s := range m.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// specialSchemes are the schemes whose URLs always have a host, however
// many slashes follow the colon (WHATWG URL, "special scheme").
var specialSchemes = []string{"http", "https", "ws", "wss", "ftp"}

// urlHost returns the host of the URL whose scheme ends at v[colon], and
// whether there is a URL there with a host.
func urlHost(v string, colon int) (string, bool) {
	s := colon
	for s > 0 && schemeChar(v[s-1]) {
		s--
	}
	for s < colon && !('a' <= v[s]|0x20 && v[s]|0x20 <= 'z') {
		s++ // a scheme starts with a letter
	}
	if s == colon {
		return "", false
	}
	scheme := strings.ToLower(v[s:colon])
	a := colon + 1
	for a < len(v) && (v[a] == '/' || v[a] == '\\') {
		a++
	}
	special := false
	for _, sp := range specialSchemes {
		special = special || scheme == sp
	}
	if !special && !strings.HasPrefix(v[colon+1:], "//") {
		return "", false
	}
	return authorityHost(v, a)
}

// authorityHost returns the host of the authority that starts at v[a] and
// whether it is not empty.
func authorityHost(v string, a int) (string, bool) {
	// A URL's userinfo may hold the quotes that end a URL quoted in prose
	// (net/url reads //'@evil.com as the host evil.com): the host follows
	// the last '@' before the path, else the authority ends at a quote.
	loose := a
	for loose < len(v) && strings.IndexByte("/\\?# ", v[loose]) < 0 {
		loose++
	}
	if at := strings.LastIndexByte(v[a:loose], '@'); at >= 0 {
		a += at + 1
	}
	end := a
	for end < len(v) && strings.IndexByte(authorityEnd, v[end]) < 0 {
		end++
	}
	host := v[a:end]
	if strings.HasPrefix(host, "[") {
		if k := strings.IndexByte(host, ']'); k > 0 {
			host = host[1:k]
		}
	} else if k := strings.LastIndexByte(host, ':'); k >= 0 {
		host = host[:k]
	}
	host = strings.TrimSuffix(strings.ToLower(percentDecode(host)), ".")
	if host == "" {
		return "", false // a URL without a host (file:///x, or prose's "http:") loads from nowhere
	}
	return host, true
}

// authorityEnd are the bytes that end a URL's authority, quotes of prose
// included.
const authorityEnd = "/\\?# \"'<>`"

func schemeChar(c byte) bool {
	return 'a' <= c|0x20 && c|0x20 <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}
