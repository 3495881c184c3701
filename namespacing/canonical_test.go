package namespacing_test

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/manifold-mcp/manifold/namespacing"
)

// everythingDoc and everythingText are URIs of server-everything (the
// TypeScript reference server) as a gateway with prefix "everything" shows
// them: a static document and an expansion of its text template.
const (
	everythingDoc  = "manifold://everything/demo://resource/static/document/architecture.md"
	everythingText = "manifold://everything/demo://resource/dynamic/text/1"
)

// aliases are spellings that the TypeScript SDK's new URL(uri).toString()
// (or an RFC 3986 normaliser, or a server cleaning paths) resolves to
// everythingDoc or everythingText, so an exact-string policy on those would
// not see them: every alias of issue 13, finding 1, and their relatives.
var aliases = []struct {
	name, uri string
}{
	{"trailing tab", everythingDoc + "\t"},
	{"trailing space", everythingDoc + " "},
	{"trailing SOH", everythingDoc + "\x01"},
	{"trailing NUL", everythingDoc + "\x00"},
	{"trailing LF", everythingDoc + "\n"},
	{"trailing CR", everythingDoc + "\r"},
	{"trailing DEL", everythingDoc + "\x7f"},
	{"leading space of the inner URI", "manifold://everything/ demo://resource/static/document/architecture.md"},
	{"leading tab of the inner URI", "manifold://everything/\tdemo://resource/static/document/architecture.md"},
	{"tab inside the scheme", "manifold://everything/de\tmo://resource/static/document/architecture.md"},
	{"newline inside the host", "manifold://everything/demo://reso\nurce/static/document/architecture.md"},
	{"uppercase scheme", "manifold://everything/DEMO://resource/static/document/architecture.md"},
	{"mixed-case scheme", "manifold://everything/Demo://resource/static/document/architecture.md"},
	{"uppercase manifold scheme", "MANIFOLD://everything/demo://resource/static/document/architecture.md"},
	{"uppercase host", "manifold://everything/demo://RESOURCE/static/document/architecture.md"},
	{"empty userinfo", "manifold://everything/demo://@resource/static/document/architecture.md"},
	{"empty user and password", "manifold://everything/demo://:@resource/static/document/architecture.md"},
	{"empty password", "manifold://everything/demo://u:@resource/static/document/architecture.md"},
	{"userinfo with @", "manifold://everything/demo://a@b@resource/static/document/architecture.md"},
	{"userinfo with ;", "manifold://everything/demo://a;b@resource/static/document/architecture.md"},
	{"empty port", "manifold://everything/demo://resource:/static/document/architecture.md"},
	{"port with leading zero", "manifold://everything/demo://resource:080/static/document/architecture.md"},
	{"tab-split dot segment", "manifold://everything/demo://resource/static/.\t./dynamic/text/1"},
	{"newline-split dot segment", "manifold://everything/demo://resource/static/.\n./dynamic/text/1"},
	{"dot-dot segment", "manifold://everything/demo://resource/static/../dynamic/text/1"},
	{"dot segment", "manifold://everything/demo://resource/static/./document/architecture.md"},
	{"trailing dot segment", "manifold://everything/demo://resource/dynamic/text/1/."},
	{"%2e%2e", "manifold://everything/demo://resource/static/%2e%2e/dynamic/text/1"},
	{"%2E%2E", "manifold://everything/demo://resource/static/%2E%2E/dynamic/text/1"},
	{".%2e", "manifold://everything/demo://resource/static/.%2e/dynamic/text/1"},
	{"%2e.", "manifold://everything/demo://resource/static/%2e./dynamic/text/1"},
	{"%2E", "manifold://everything/demo://resource/static/%2E/document/architecture.md"},
	{"encoded unreserved letter", "manifold://everything/demo://resource/static/document/%61rchitecture.md"},
	{"encoded slash", "manifold://everything/demo://resource/static%2Fdocument/architecture.md"},
	{"lowercase percent-encoding", "manifold://everything/demo://resource/static/document/a%3arch.md"},
	{"malformed percent-encoding", "manifold://everything/demo://resource/static/document/%zz"},
	{"backslash", "manifold://everything/demo://resource/static\\document\\architecture.md"},
	{"backslash dot-dot", "manifold://everything/demo://resource/static/..\\dynamic/text/1"},
	{"encoded backslash", "manifold://everything/demo://resource/static/%5C..%5Cdynamic/text/1"},
	{"non-ASCII", "manifold://everything/demo://resource/static/document/architecture.md\u00a0"},
	{"zero-width space", "manifold://everything/demo://resource/static/document/architecture\u200b.md"},
	{"http empty path", "manifold://web/https://example.com"},
	{"http default port", "manifold://web/https://example.com:443/"},
	{"http uppercase host", "manifold://web/https://Example.com/"},
	{"http encoded host", "manifold://web/https://ex%41mple.com/"},
	{"http one slash", "manifold://web/https:/example.com/"},
	{"http no slash", "manifold://web/https:example.com/"},
	{"http three slashes", "manifold://web/https:///example.com/"},
	{"http IPv4 shorthand", "manifold://web/http://127.1/"},
	{"http IPv4 hex", "manifold://web/http://0x7f.0.0.1/"},
	{"http IPv4 trailing dot", "manifold://web/http://127.0.0.1./"},
	{"http IPv4 leading zero", "manifold://web/http://127.0.0.01/"},
	{"http quote in query", "manifold://web/https://example.com/?a='b'"},
	{"IPv6 literal", "manifold://web/http://[::1]/"},
	{"file localhost", "manifold://fs/file://localhost/etc/passwd"},
	{"file one slash", "manifold://fs/file:/etc/passwd"},
	{"file drive pipe", "manifold://fs/file:///C|/secret.txt"},
	{"second fragment", "manifold://everything/demo://resource/static/document/architecture.md#a#b"},
	{"unprefixed tab", "demo://resource/static/document/architecture.md\t"},
	{"unprefixed scheme", "DEMO://resource/static/document/architecture.md"},
	{"unprefixed dot segment", "demo://resource/static/.\t./dynamic/text/1"},
}

// canonicalURIs are URIs servers really hand out, which stay readable.
var canonicalURIs = []string{
	everythingDoc,
	everythingText,
	"manifold://everything/demo://resource/static/document/architecture.md?x=1#top",
	"manifold://memory/memory://knowledge-graph",
	"manifold://Caps_Prefix-2/demo://resource/x",
	"manifold://fs/file:///home/me/My%20File.txt",
	"manifold://fs/file://server/share/a.txt",
	"manifold://s/a%3Fb",
	"manifold://s/a..b/c.d",
	"manifold://s/x?path=../y",
	"manifold://s/x#..",
	"manifold://s/x?",
	"manifold://w/https://example.com/",
	"manifold://w/https://example.com:8443/v1?city=Oslo&units=metric",
	"manifold://w/http://127.0.0.1:8080/x",
	"manifold://w/https://api.example.com/v1/it's?q=it",
	"manifold://db/postgres://user:secret@db.internal:5432/app/users",
	"manifold://x/urn:isbn:0451450523",
	"manifold://x/mailto:someone@example.com",
	"manifold://x/notes://caf%C3%A9/%E6%97%A5",
	"manifold://x/demo:",
	"manifold://x/",
	"manifold://x/relative/path",
	"demo://resource/static/document/architecture.md",
	"test://static/resource/1",
}

func TestNonCanonicalURI(t *testing.T) {
	tests := []struct {
		name string
		uri  string
		want bool
	}{
		{name: "plain", uri: "manifold://memory/notes/today", want: false},
		{name: "encoded space", uri: "file:///home/me/My%20File.txt", want: false},
		{name: "encoded ? is data", uri: "manifold://s/a%3Fb", want: false},
		{name: "dot-dot at the end", uri: "manifold://s/..", want: true},
		{name: "dot-dot", uri: "manifold://s/a/../secret", want: true},
		{name: "dot", uri: "manifold://s/./secret", want: true},
		{name: "backslash dot-dot", uri: "manifold://s/a\\..\\secret", want: true},
		{name: "backslash", uri: "manifold://s/a\\b", want: true},
		{name: "dots inside names", uri: "manifold://s/a..b/c.d", want: false},
		{name: "a query is not a path", uri: "manifold://s/x?path=../y", want: false},
		{name: "a fragment is not a path", uri: "manifold://s/x#..", want: false},
		{name: "encoded s", uri: "manifold://s/%73ecret", want: true},
		{name: "lowercase encoded dots", uri: "manifold://s/%2e%2e/secret", want: true},
		{name: "encoded dots", uri: "manifold://s/%2E%2E/secret", want: true},
		{name: "encoded slash", uri: "manifold://s/a%2Fb", want: true},
		{name: "encoded backslash", uri: "manifold://s/a%5Cb", want: true},
		{name: "lowercase encoded slash", uri: "manifold://s/a%2fb", want: true},
		{name: "bare percent", uri: "manifold://s/100%", want: true},
		{name: "non-hex percent", uri: "manifold://s/%zz", want: true},
		{name: "short percent", uri: "manifold://s/%4", want: true},
		{name: "template braces in a URI", uri: "manifold://s/items/{id}", want: true},
		{name: "opaque dot-dot", uri: "demo:..", want: true},
		{name: "dot host", uri: "demo://./x", want: true},
		{name: "wrapped network-path dot", uri: "manifold://0///.", want: true}, // found by FuzzURIAgainstWHATWG
		{name: "dot-dot host", uri: "manifold://p///../x", want: true},
		{name: "relative dot", uri: "./x", want: true},
		{name: "port", uri: "demo://r:8080/x", want: false},
		{name: "port too large", uri: "demo://r:65536/x", want: true},
		{name: "port not a number", uri: "demo://r:8o/x", want: true},
		{name: "empty host with port", uri: "demo://:80/x", want: true},
		{name: "password", uri: "demo://u:p@r/x", want: false},
		{name: "password only", uri: "demo://:p@r/x", want: false},
		{name: "http default port of another scheme", uri: "https://h:80/", want: false},
		{name: "ws default port", uri: "ws://h:80/", want: true},
		{name: "ftp default port", uri: "ftp://h:21/", want: true},
		{name: "file with port", uri: "file://h:1/x", want: true},
		{name: "file with userinfo", uri: "file://u@h/x", want: true},
		{name: "http host ends in a word", uri: "http://1.2.3.a/", want: false},
		{name: "http host ends in 0x", uri: "http://a.0x/", want: true},
		{name: "http IPv4 octet too large", uri: "http://1.2.3.256/", want: true},
		{name: "http IPv4 five parts", uri: "http://1.2.3.4.5/", want: true},
		{name: "http host with !", uri: "http://a!b/", want: true},
		{name: "empty host of http", uri: "http:///x", want: true},
		{name: "empty host of file", uri: "file:///x", want: false},
		{name: "fragment with quote", uri: "https://h/#it's", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := namespacing.NonCanonicalURI(tt.uri); got != tt.want {
				t.Errorf("NonCanonicalURI(%q) = %v, want %v", tt.uri, got, tt.want)
			}
		})
	}
}

func TestAliasesAreNotCanonical(t *testing.T) {
	for _, tt := range aliases {
		t.Run(tt.name, func(t *testing.T) {
			if !namespacing.NonCanonicalURI(tt.uri) {
				t.Errorf("NonCanonicalURI(%q) = false, want true", tt.uri)
			}
		})
	}
	for _, uri := range canonicalURIs {
		if namespacing.NonCanonicalURI(uri) {
			t.Errorf("NonCanonicalURI(%q) = true, want false", uri)
		}
	}
}

func TestNonCanonicalTemplate(t *testing.T) {
	tests := []struct {
		name string
		tmpl string
		want bool
	}{
		{name: "server-everything's", tmpl: "manifold://everything/demo://resource/dynamic/text/{resourceId}", want: false},
		{name: "level 4", tmpl: "manifold://gh/repo://{owner}/{repo}{/path*}{?ref,depth}", want: false},
		{name: "query expression is not a query", tmpl: "https://h/search{?q}", want: false},
		{name: "host expression", tmpl: "demo://{host}:{port}/x", want: false},
		{name: "prefix modifier", tmpl: "demo://h/{name:3}", want: false},
		{name: "a plain URI", tmpl: "demo://h/x", want: false},
		{name: "dot-dot", tmpl: "demo://h/../{id}", want: true},
		{name: "uppercase scheme", tmpl: "DEMO://h/{id}", want: true},
		{name: "tab", tmpl: "demo://h/{id}\t", want: true},
		{name: "space in an expression", tmpl: "demo://h/{i d}", want: true},
		{name: "nested braces", tmpl: "demo://h/{{id}}", want: true},
		{name: "unclosed brace", tmpl: "demo://h/{id", want: true},
		{name: "stray closing brace", tmpl: "demo://h/id}", want: true},
		{name: "empty userinfo", tmpl: "demo://@h/{id}", want: true},
		{name: "uppercase manifold scheme", tmpl: "MANIFOLD://everything/demo://resource/dynamic/text/{resourceId}", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := namespacing.NonCanonicalTemplate(tt.tmpl); got != tt.want {
				t.Errorf("NonCanonicalTemplate(%q) = %v, want %v", tt.tmpl, got, tt.want)
			}
		})
	}
}

func TestNonCanonicalURIAllocs(t *testing.T) {
	uris := append([]string{}, canonicalURIs...)
	for _, a := range aliases {
		uris = append(uris, a.uri)
	}
	if got := testing.AllocsPerRun(20, func() {
		for _, u := range uris {
			namespacing.NonCanonicalURI(u)
			namespacing.NonCanonicalTemplate(u)
		}
	}); got != 0 {
		t.Errorf("allocs = %v, want 0", got)
	}
}

func BenchmarkNonCanonicalURI(b *testing.B) {
	for b.Loop() {
		namespacing.NonCanonicalURI(everythingDoc)
	}
}

// FuzzNonCanonicalURI checks the RFC 3986 half of the rule: a URI accepted
// as canonical is left unchanged by RFC 3986 normalisation (§6.2.2, and
// §6.2.3 for http and https), and hides no separator or dot segment in a
// percent-encoding. FuzzURIAgainstWHATWG checks the WHATWG half.
func FuzzNonCanonicalURI(f *testing.F) {
	for _, s := range []string{"manifold://s/a/../b", "x://y/%2E", "%", "a%4", "/./", "HTTP://h/", "http://h:80/", "demo://@h/"} {
		f.Add(s)
	}
	for _, a := range aliases {
		f.Add(a.uri)
	}
	for _, u := range canonicalURIs {
		f.Add(u)
	}
	f.Add("manifold://gh/repo://{owner}/{repo}{/path*}{?ref,depth}")
	f.Fuzz(func(t *testing.T, uri string) {
		nonCanonical := namespacing.NonCanonicalURI(uri)
		if !strings.ContainsAny(uri, "{}") && namespacing.NonCanonicalTemplate(uri) != nonCanonical {
			t.Fatalf("NonCanonicalTemplate(%q) differs from NonCanonicalURI for a URI without expressions", uri)
		}
		if nonCanonical {
			return
		}
		// The prefix of a wrapped URI is the gateway's own, matched exactly
		// and never sent to a server: its case is kept.
		if _, inner, ok := namespacing.UnwrapURI(uri); ok {
			uri = inner
		}
		checkRFC3986(t, uri)
	})
}

// rfc3986 splits a URI reference into its components (RFC 3986, Appendix B).
var rfc3986 = regexp.MustCompile(`^(([^:/?#]+):)?(//([^/?#]*))?([^?#]*)(\?([^#]*))?(#(.*))?$`)

func checkRFC3986(t *testing.T, uri string) {
	t.Helper()
	for i := 0; i < len(uri); i++ {
		if c := uri[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"<>\^`+"`{|}[]", c) >= 0 {
			t.Fatalf("canonical %q holds %q", uri, c)
		}
	}
	if _, err := url.PathUnescape(uri); err != nil {
		t.Fatalf("canonical %q does not unescape: %v", uri, err)
	}
	if got := normalizeRFC3986(uri); got != uri {
		t.Fatalf("canonical %q normalises to %q (RFC 3986 §6)", uri, got)
	}
}

// normalizeRFC3986 applies RFC 3986's syntax-based normalisation (§6.2.2:
// case, percent-encoding, dot segments) and, for http and https, its
// scheme-based normalisation (§6.2.3: empty path, default or empty port).
func normalizeRFC3986(uri string) string {
	m := rfc3986.FindStringSubmatch(uri)
	scheme, authority, path := strings.ToLower(m[2]), m[4], m[5]
	var b strings.Builder
	if m[1] != "" {
		b.WriteString(scheme + ":")
	}
	if m[3] != "" {
		userinfo, host := "", authority
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			userinfo, host = authority[:at+1], authority[at+1:]
		}
		port := ""
		if colon := strings.LastIndexByte(host, ':'); colon >= 0 {
			host, port = host[:colon], host[colon:]
		}
		if port == ":" || scheme == "http" && port == ":80" || scheme == "https" && port == ":443" {
			port = ""
		}
		b.WriteString("//" + normalizePercent(userinfo) + normalizePercent(strings.ToLower(host)) + port)
		if path == "" && (scheme == "http" || scheme == "https") {
			path = "/"
		}
	}
	b.WriteString(removeDotSegments(normalizePercent(path)))
	b.WriteString(normalizePercent(m[6]) + normalizePercent(m[8]))
	return b.String()
}

// normalizePercent writes percent-encodings in uppercase and decodes those
// of unreserved characters.
func normalizePercent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := url.PathUnescape(s[i : i+3]); err == nil {
				if c := v[0]; 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
					b.WriteByte(c)
				} else {
					b.WriteString(strings.ToUpper(s[i : i+3]))
				}
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeDotSegments is RFC 3986 §5.2.4.
func removeDotSegments(in string) string {
	var out []string
	for in != "" {
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "/..":
			in = "/"
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "." || in == "..":
			in = ""
		default:
			seg := in
			start := 0
			if in[0] == '/' {
				start = 1
			}
			if i := strings.IndexByte(in[start:], '/'); i >= 0 {
				seg, in = in[:start+i], in[start+i:]
			} else {
				in = ""
			}
			out = append(out, seg)
		}
	}
	return strings.Join(out, "")
}
