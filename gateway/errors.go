package gateway

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// JSON-RPC error codes of the gateway itself (the -32000…-32099 range is for
// implementations; MCP uses -32002 and -32020…-32042). Errors that an
// upstream returns keep their own code.
const (
	// CodeUpstreamUnavailable: the upstream is not connected (starting, restarting, failed).
	CodeUpstreamUnavailable = -32050
	// CodeUpstreamTimeout: the upstream did not answer within the call timeout.
	CodeUpstreamTimeout = -32051
	// CodeUpstreamBusy: the upstream's concurrency limit stayed full.
	CodeUpstreamBusy = -32052
)

// upstreamError turns an error from an upstream call into the JSON-RPC error
// the client gets: the upstream's own error as it was (code, message, data),
// or one of the gateway's codes naming the server.
func upstreamError(err error) error {
	if rpcErr, ok := mcpx.AsRPCError(err); ok {
		return rpcErr
	}
	code := int64(jsonrpc.CodeInternalError)
	switch {
	case errors.Is(err, upstream.ErrUnavailable), errors.Is(err, upstream.ErrClosed):
		code = CodeUpstreamUnavailable
	case errors.Is(err, upstream.ErrTimeout):
		code = CodeUpstreamTimeout
	case errors.Is(err, upstream.ErrBusy):
		code = CodeUpstreamBusy
	}
	return &jsonrpc.Error{Code: code, Message: err.Error()}
}

// codeLegacyResourceNotFound is the resource-not-found code of protocol
// versions before 2026-07-28, which settled on -32602 (InvalidParams).
const codeLegacyResourceNotFound = -32002

// resourceNotFound is the error for a URI that req may not read or that
// does not exist, with the code of the client's protocol version: -32002
// before 2026-07-28, -32602 since (the SDK's).
//
// It is mcp.ResourceNotFoundError's error, but with its data encoded as
// JSON: the SDK writes the URI with Go's %q, which is not JSON for control
// characters ("\x01"), and an answer that does not encode ends the client's
// connection instead of answering.
func resourceNotFound(req mcp.Request, uri string) error {
	err := mcp.ResourceNotFoundError(uri)
	rpcErr, ok := err.(*jsonrpc.Error)
	if !ok {
		return err
	}
	answer := *rpcErr
	answer.Data, _ = json.Marshal(struct {
		URI string `json:"uri"`
	}{uri})
	if cr, ok := req.(callerRequest); ok && cr.ProtocolVersion() < modernProtocol {
		answer.Code = codeLegacyResourceNotFound
	}
	return &answer
}

// notFound reports whether an upstream's answer to resources/read says the
// resource does not exist.
func notFound(err error) bool {
	rpcErr, ok := mcpx.AsRPCError(err)
	if !ok {
		return false
	}
	switch rpcErr.Code {
	case codeLegacyResourceNotFound:
		return true
	case jsonrpc.CodeInvalidParams:
		return strings.Contains(strings.ToLower(rpcErr.Message), "not found")
	}
	return false
}
