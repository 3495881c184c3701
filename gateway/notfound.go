package gateway

import (
	"encoding/json"
	"strings"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Unknown names. A name the principal may not use and a name that does not
// exist get the same answer, whoever decided: the gateway (the name routes
// nowhere, or the policy denies it) or the upstream (it said its own name
// does not exist, in its own words, which the gateway replaces with its
// answer naming what the client sent). Per method:
//
//	tools/call          -32602 unknown tool "<name>"
//	prompts/get         -32602 unknown prompt "<name>"
//	resources/read      resourceNotFound: -32602 (-32002 before 2026-07-28) "Resource not found", data {"uri"}
//	resources/subscribe an empty result, and no update ever (see interceptor)
//	completion/complete -32602 completion/complete: unknown prompt <name> | resource <uri>
//
// What stays different is time: a denied name is answered without
// contacting the upstream, so it is answered faster than a name the
// upstream has to look up, by about one upstream round trip. Equalising it
// would cost an upstream request per denial (and would still differ by the
// upstream's own lookup), so the gateway does not try; the names a
// principal can see are in its lists anyway, and only denied names are
// answered early. An upstream's not-found answer the gateway does not
// recognise (upstreamNotFound) passes through as it came.

// unknownTool is the answer for a tool name that does not exist or that
// the principal may not call: the go-sdk's own answer, word for word.
func unknownTool(name string) error {
	return mcpx.RPCError(jsonrpc.CodeInvalidParams, "unknown tool %q", name)
}

// unknownPrompt is unknownTool's counterpart for prompts.
func unknownPrompt(name string) error {
	return mcpx.RPCError(jsonrpc.CodeInvalidParams, "unknown prompt %q", name)
}

// unknownRef is the answer to completion/complete for a prompt or a
// resource template that does not exist or that the principal may not use.
func unknownRef(ref *mcp.CompleteReference) error {
	return mcpx.RPCError(jsonrpc.CodeInvalidParams, "completion/complete: unknown %s", refLabel(ref))
}

// listedRef reports whether uri, a completion/complete ref/resource as the
// client sent it, is a template or resource some upstream lists.
func listedRef(r *routes, uri string) bool {
	_, ok := r.templateServer[uri]
	if !ok {
		_, ok = r.resourceServer[uri]
	}
	return ok
}

// refNotFound reports whether err, an upstream's answer to
// completion/complete for ref (in the upstream's names), says the prompt
// or template does not exist.
func refNotFound(err error, ref *mcp.CompleteReference) bool {
	if ref.Type == "ref/resource" {
		return upstreamNotFound(err, kindTemplate, ref.URI)
	}
	return upstreamNotFound(err, kindPrompt, ref.Name)
}

// nameKind is what an upstream's not-found answer is about.
type nameKind int

const (
	kindTool nameKind = iota
	kindPrompt
	kindResource
	kindTemplate
)

// kindWords are the nouns upstreams use for each kind in not-found
// messages, lower case.
var kindWords = [...][]string{
	kindTool:     {"tool"},
	kindPrompt:   {"prompt"},
	kindResource: {"resource"},
	kindTemplate: {"resource template", "template", "resource"},
}

// upstreamNotFound reports whether err, an upstream's answer to a request
// about its own name (a tool or prompt name, a resource URI or template),
// says that this name does not exist. It recognises:
//   - for resources, MCP's not-found codes: -32002, and -32602 whose message
//     says the resource is not found (the go-sdk's "Resource not found",
//     with the URI in data; the TypeScript SDK's "Resource <uri> not found");
//   - with any code, a message naming exactly that name as unknown:
//     `unknown tool "x"` (go-sdk), `Tool x not found`, `Prompt x not found`,
//     `Resource template x not found` (TypeScript SDK), `Unknown resource:
//     x` (server-everything's templates).
//
// Anything else (a failing handler, an invalid argument, another name
// being unknown, the upstream being down) is a genuine error and passes
// through.
func upstreamNotFound(err error, kind nameKind, name string) bool {
	rpcErr, ok := mcpx.AsRPCError(err)
	if !ok {
		return false
	}
	msg := strings.ToLower(rpcErr.Message)
	if kind == kindResource && namesURI(rpcErr.Data, name) {
		switch {
		case rpcErr.Code == codeLegacyResourceNotFound:
			return true
		case rpcErr.Code == jsonrpc.CodeInvalidParams && strings.Contains(msg, "resource") && strings.Contains(msg, "not found"):
			return true
		}
	}
	return namesUnknown(msg, kind, strings.ToLower(name))
}

// toolResultNotFound reports whether res, a tool error result, is an
// upstream's way of saying the tool does not exist: the TypeScript SDK
// answers an unknown tool with a result whose only text is "MCP error
// -32602: Tool <name> not found".
func toolResultNotFound(res *mcp.CallToolResult, name string) bool {
	if !res.IsError || len(res.Content) != 1 {
		return false
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	return ok && namesUnknown(strings.ToLower(tc.Text), kindTool, strings.ToLower(name))
}

// namesUnknown reports whether msg (lower case) says that name (lower
// case, bare or quoted) of kind is unknown or not found.
func namesUnknown(msg string, kind nameKind, name string) bool {
	if name == "" || !strings.Contains(msg, name) {
		return false
	}
	for _, w := range kindWords[kind] {
		for _, q := range [...]string{name, `"` + name + `"`, "'" + name + "'", "`" + name + "`"} {
			if strings.Contains(msg, w+" "+q+" not found") ||
				endsName(msg, "unknown "+w+" "+q) || endsName(msg, "unknown "+w+": "+q) ||
				endsName(msg, "no such "+w+": "+q) || endsName(msg, w+" not found: "+q) {
				return true
			}
		}
	}
	return false
}

// endsName reports whether msg contains s followed by the end of msg or a
// character that cannot continue a name, so that "unknown tool x" does not
// match a message about tool "x2".
func endsName(msg, s string) bool {
	for i := 0; i+len(s) <= len(msg); {
		j := strings.Index(msg[i:], s)
		if j < 0 {
			return false
		}
		end := i + j + len(s)
		if end == len(msg) {
			return true
		}
		switch msg[end] {
		case ' ', '\t', '\n', '"', '\'', '`', ')', ',':
			return true
		}
		i += j + 1
	}
	return false
}

// namesURI reports whether data, the data of an upstream's error, names
// uri as the resource it is about, or names none: a not-found answer whose
// data is about another URI (a handler's own lookup failing) is a genuine
// error, not the requested URI missing.
func namesURI(data json.RawMessage, uri string) bool {
	if len(data) == 0 {
		return true
	}
	var d struct {
		URI *string `json:"uri"`
	}
	if json.Unmarshal(data, &d) != nil || d.URI == nil {
		return true
	}
	return *d.URI == uri
}
