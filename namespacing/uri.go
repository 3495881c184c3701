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

// CleanURI returns the form of uri that a server resolving paths would
// read: the query and fragment dropped, and the path after the authority
// cleaned (doubled slashes merged, dot segments resolved, a trailing slash
// removed, a path of "/" alone too; see path.Clean). Text is otherwise kept as written (no decoding),
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
	clean := path.Clean(rest[slash:])
	if clean == "/" {
		clean = "" // "https://example.com/" is "https://example.com" to RFC 3986 §6.2.3
	}
	return scheme + "://" + rest[:slash] + clean
}
