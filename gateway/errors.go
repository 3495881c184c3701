package gateway

import (
	"encoding/json"
	"errors"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway's own JSON-RPC error codes, the same on every protocol
// version (config/REFERENCE.md, "Error codes", has the table). They lie
// outside −32768…−32000, which JSON-RPC reserves: MCP 2026-07-28 keeps
// −32020…−32099 for the codes it defines and forbids emitting any other
// there, and its earlier codes (−32002, −32042) stay reserved. An error an
// upstream returns reaches the client with its own code, whatever it is.
const (
	// CodeUpstreamUnavailable: the upstream is not connected (starting, restarting, failed).
	CodeUpstreamUnavailable = -31050
	// CodeUpstreamTimeout: the upstream did not answer within the call timeout.
	CodeUpstreamTimeout = -31051
	// CodeUpstreamBusy: the upstream's concurrency limit stayed full.
	CodeUpstreamBusy = -31052
	// codeUnroutable: the gateway cannot tell which client a server→client
	// request is for, or which upstream session a request needs; the
	// upstream (or the client) gets it.
	codeUnroutable = -31053
	// codeClientNoAnswer: a request an upstream parked for a 2026-07-28
	// client will not be answered: the client abandoned the call
	// (cancelled it, or did not retry within the bridge TTL), its retry
	// was refused (the name no longer known or allowed after a reload),
	// or the gateway is shutting down. The upstream gets it.
	codeClientNoAnswer = -31054
)

// codeMissingCapability is MCP's MissingRequiredClientCapability: the
// client a request is for did not declare the capability it needs.
const codeMissingCapability = mcp.CodeMissingRequiredClientCapabilities

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
	cr, ok := req.(callerRequest)
	return resourceNotFoundIn(uri, ok && !mcpx.Stateless(cr.ProtocolVersion()))
}

// resourceNotFoundIn is resourceNotFound for a client whose protocol
// version is before 2026-07-28 (legacy) or not.
func resourceNotFoundIn(uri string, legacy bool) error {
	err := mcp.ResourceNotFoundError(uri)
	rpcErr, ok := err.(*jsonrpc.Error)
	if !ok {
		return err
	}
	answer := *rpcErr
	answer.Data, _ = json.Marshal(struct {
		URI string `json:"uri"`
	}{uri})
	if legacy {
		answer.Code = codeLegacyResourceNotFound
	}
	return &answer
}
