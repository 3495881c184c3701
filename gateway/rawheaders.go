package gateway

import (
	"fmt"
	"net/http"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTP headers of a 2026-07-28 request (SEP-2575 and the standard request
// headers).
const (
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerMethod          = "Mcp-Method"
	headerName            = "Mcp-Name"
)

// checkCallHeaders applies to a call of the raw path, a POST whose
// Mcp-Protocol-Version is version (2026-07-28 or later), what the
// transport requires of its headers and per-request _meta, in the order
// and with the answers of the SDK's own handler, so that both paths refuse
// alike: the body's _meta protocol version present and equal to the
// header's, Mcp-Method equal to the method and Mcp-Name to the name or URI
// (target). It returns nil, or the JSON-RPC error to answer with status
// 400.
func checkCallHeaders(h http.Header, msg []byte, e *envelope.Envelope, version, method, target string) *jsonrpc.Error {
	const metaKey = mcp.MetaKeyProtocolVersion
	metaVersion := string(envelope.Text(e.ProtocolVersion.In(msg)))
	switch {
	case metaVersion == "":
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("missing or invalid _meta field %q", metaKey)}
	case metaVersion != version:
		return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: fmt.Sprintf("%s header %q does not match request %s %q", headerProtocolVersion, version, metaKey, metaVersion)}
	}
	switch m := h.Get(headerMethod); {
	case m == "":
		return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: "missing required Mcp-Method header"}
	case m != method:
		return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: fmt.Sprintf("header mismatch: Mcp-Method header value '%s' does not match body value '%s'", m, method)}
	}
	switch n := h.Get(headerName); {
	case n == "":
		return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: fmt.Sprintf("missing required Mcp-Name header for method %q", method)}
	case n != target:
		return &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: fmt.Sprintf("header mismatch: Mcp-Name header value '%s' does not match body value '%s'", n, target)}
	}
	return nil
}
