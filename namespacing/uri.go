package namespacing

import (
	"path"
	"strings"
)

// URIScheme is the scheme of the resource URIs the gateway hands out for servers with a prefix.
const URIScheme = "manifold"

// uriHead is what every wrapped URI starts with.
const uriHead = URIScheme + "://"

// WrapURI rewrites a resource URI (or URI template) of the server with the given prefix into the
// URI clients see:
//
//	WrapURI("everything", "test://static/resource/1") == "manifold://everything/test://static/resource/1"
//
// The original text follows the prefix unchanged (no escaping, no normalisation), so the
// rewrite works on anything textual: query strings, fragments, percent-escapes, RFC 6570
// expressions such as "{id}", already wrapped URIs. WrapURI("", uri) returns uri unchanged.
//
// prefix must satisfy [ValidPrefix] (config validation enforces it); WrapURI does not check, and
// [UnwrapURI] rejects what it would produce from an invalid prefix. Clients should treat the
// result as opaque, as MCP requires: the prefix sits where a URL parser sees a host, and a
// client that lower-cases hosts would change a prefix with capitals.
func WrapURI(prefix, uri string) string {
	if prefix == "" {
		return uri
	}
	return uriHead + prefix + "/" + uri
}

// UnwrapURI reverses [WrapURI]: for "manifold://<prefix>/<original>" with a valid prefix it
// returns (prefix, original, true); the scheme is matched case-insensitively. For any other
// string, including an empty or invalid prefix, it returns ("", uri, false), and the URI belongs
// to an unprefixed server (see [Owners]). UnwrapURI does not allocate.
func UnwrapURI(uri string) (prefix, original string, ok bool) {
	if len(uri) < len(uriHead) || !strings.EqualFold(uri[:len(uriHead)], uriHead) {
		return "", uri, false
	}
	rest := uri[len(uriHead):]
	slash := strings.IndexByte(rest, '/')
	if slash < 0 || !ValidPrefix(rest[:slash]) {
		return "", uri, false
	}
	return rest[:slash], rest[slash+1:], true
}

// NonCanonicalURI reports whether uri has a form that a server could resolve
// to a different string: a backslash (not a URI character; URL parsers read
// it as '/'), a "." or ".." path segment, or a percent-encoding that is
// malformed, uses lowercase hex, or encodes an unreserved character
// (RFC 3986 §2.3) or a separator. Exact-string policy rules cannot account
// for such aliases, so a gateway that enforces them refuses these URIs.
func NonCanonicalURI(uri string) bool {
	if strings.IndexByte(uri, '\\') >= 0 {
		return true
	}
	seg := 0 // start of the current segment
	for i := 0; i <= len(uri); i++ {
		if i == len(uri) || uri[i] == '/' || uri[i] == '\\' || uri[i] == '?' || uri[i] == '#' {
			if s := uri[seg:i]; s == "." || s == ".." {
				return true
			}
			if i < len(uri) && (uri[i] == '?' || uri[i] == '#') {
				break // dot segments are a path matter
			}
			seg = i + 1
		}
	}
	for i := 0; i < len(uri); i++ {
		if uri[i] != '%' {
			continue
		}
		if i+2 >= len(uri) || !isUpperHex(uri[i+1]) || !isUpperHex(uri[i+2]) {
			return true
		}
		c := unhex(uri[i+1])<<4 | unhex(uri[i+2])
		if isUnreserved(c) || c == '/' || c == '\\' {
			return true
		}
		i += 2
	}
	return false
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

// CleanURI returns the form of uri that a server resolving paths would
// read: the query and fragment dropped, and the path after the authority
// cleaned (doubled slashes merged, dot segments resolved, a trailing slash
// removed; see path.Clean). Text is otherwise kept as written (no decoding),
// and '?' or '#' inside a template expression ({?q}) is not a query. An
// opaque URI (no "//" authority) only loses its query and fragment. Policy
// enforcement decides on both forms, so that "…/secret?x" or "…//secret"
// cannot reach what "…/secret" denies.
func CleanURI(uri string) string {
	depth := 0
	for i := 0; i < len(uri); i++ {
		switch c := uri[i]; {
		case c == '{':
			depth++
		case c == '}' && depth > 0:
			depth--
		case (c == '?' || c == '#') && depth == 0:
			uri = uri[:i]
		}
	}
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "/{") {
		return uri
	}
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		return uri
	}
	return scheme + "://" + rest[:slash] + path.Clean(rest[slash:])
}
