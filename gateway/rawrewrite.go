package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The rewrite stage of the raw path: what rewrite.go does to typed
// answers, done to the upstream's bytes. Most results pass through
// untouched, never decoded: a tokenizer walk (envelope.Members,
// envelope.HasKey) tells whether one holds anything the slow path would
// change, and the upstream's serverInfo is cut out of its _meta (trim).
// Only a result that holds more is decoded into the SDK's type, rewritten by
// the slow path's own function (rewriteTool, rewritePrompt, rewriteRead)
// and encoded again:
//   - a URI to put into the client's namespace (a resource_link or an
//     embedded resource of a prefixed server; every resources/read result
//     of one, whose contents name their URIs);
//   - a tool result with isError (which may be the upstream's way of
//     saying the tool does not exist: toolResultNotFound);
//   - a resources/read under a policy (its cacheScope);
//   - a result whose top-level keys are not simple.
//
// Rewriting URIs in the bytes themselves is left for later: results with
// links are a small share of the traffic.

// resultKeys are the top-level result keys the raw rewrite looks at.
var resultKeys = []string{"isError", "_meta"}

// resultIsError reports whether res, a tools/call result, has isError
// true; a result whose keys are not simple counts as one, so that it is
// decoded (rewriteRaw).
func resultIsError(res []byte) bool {
	var spans [2]envelope.Span
	if err := envelope.Members(res, resultKeys, spans[:]); err != nil {
		return true
	}
	return string(spans[0].In(res)) == "true"
}

// rewriteRaw is rewrite for the raw path: res or err, the upstream's
// answer to r on rt, becomes the client's result (and whether it is a
// tool error) or error, as on the slow path: the upstream's not-found
// answers become the gateway's own, other errors pass with their code
// (upstreamError), and a -32042 a client does not know is translated
// (translateError).
func (g *Gateway) rewriteRaw(r *rawRequest, rt route, res []byte, err error) ([]byte, bool, error) {
	if err != nil {
		if upstreamNotFound(err, r.notFoundKind(), rt.original) {
			return nil, false, r.unknown()
		}
		text, data, translate := g.urlElicitationError(r.ss, r.version, rt.up, err)
		if !translate {
			return nil, false, upstreamError(err)
		}
		if r.m.kind == policy.Tool {
			out, merr := json.Marshal(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}})
			if merr != nil {
				return nil, false, upstreamError(merr)
			}
			return out, true, nil
		}
		return nil, false, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: text, Data: data}
	}
	res, decode := r.trim(res, rt)
	if !decode {
		return res, false, nil
	}
	var out []byte
	toolErr := false
	switch r.m.kind {
	case policy.Tool:
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: r.c.name}}
		var v *mcp.CallToolResult
		v, out, err = rewriteDecoded(res, func(v *mcp.CallToolResult) (*mcp.CallToolResult, error) {
			return rewriteTool(req, rt, r.c.snap, v, nil)
		})
		toolErr = v != nil && v.IsError
	case policy.Prompt:
		req := &mcp.GetPromptRequest{Params: &mcp.GetPromptParams{Name: r.c.name}}
		_, out, err = rewriteDecoded(res, func(v *mcp.GetPromptResult) (*mcp.GetPromptResult, error) {
			return rewritePrompt(req, rt, r.c.snap, v, nil)
		})
	default:
		req := &mcp.ReadResourceRequest{Params: &mcp.ReadResourceParams{URI: r.c.name}}
		_, out, err = rewriteDecoded(res, func(v *mcp.ReadResourceResult) (*mcp.ReadResourceResult, error) {
			return rewriteRead(req, rt, r.c.snap, v, nil)
		})
	}
	return out, toolErr, err
}

// rewriteDecoded decodes res into a new T, rewrites it, and encodes the
// rewritten result. An error of rewrite (a tool result saying the tool
// does not exist) is the call's.
func rewriteDecoded[T any](res []byte, rewrite func(*T) (*T, error)) (*T, []byte, error) {
	v := new(T)
	if err := json.Unmarshal(res, v); err != nil {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("manifold: the upstream's result does not decode: %v", err)}
	}
	v, err := rewrite(v)
	if err != nil {
		return nil, nil, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, nil, upstreamError(err)
	}
	return v, out, nil
}

// trim returns res, the upstream's result for r on rt, without the
// upstream's serverInfo in its _meta (and without a _meta left empty), as
// rewrite.go's functions drop it, and whether the result still holds
// something the slow path's rewrite changes (see above).
func (r *rawRequest) trim(res []byte, rt route) ([]byte, bool) {
	var spans [2]envelope.Span
	if err := envelope.Members(res, resultKeys, spans[:]); err != nil {
		return res, true
	}
	// A 2026-07-28 client's result names the gateway there instead: it is
	// replaced as the answer is written (statelessResult).
	if spans[1].Present() && !r.stateless {
		meta, removed, err := envelope.RemoveMember(spans[1].In(res), metaServerInfo)
		switch {
		case err != nil:
			return res, true
		case removed && emptyObject(meta):
			if res, _, err = envelope.RemoveMember(res, "_meta"); err != nil {
				return res, true
			}
		case removed:
			out := make([]byte, 0, len(res)-(spans[1].End-spans[1].Start)+len(meta))
			out = append(out, res[:spans[1].Start]...)
			out = append(out, meta...)
			res = append(out, res[spans[1].End:]...)
		}
		if err := envelope.Members(res, resultKeys, spans[:]); err != nil {
			return res, true
		}
	}
	switch {
	case r.m.kind == policy.Tool && string(spans[0].In(res)) == "true":
		return res, true
	case r.m.kind == policy.Resource && !r.c.snap.access.policy.Unrestricted():
		return res, true
	case rt.prefix == "":
		return res, false
	case r.m.kind == policy.Resource:
		return res, true
	}
	has, err := envelope.HasKey(res, "uri")
	return res, has || err != nil
}

// notFoundKind is what an upstream's not-found answer to r is about.
func (r *rawRequest) notFoundKind() nameKind {
	switch r.m.kind {
	case policy.Tool:
		return kindTool
	case policy.Prompt:
		return kindPrompt
	}
	return kindResource
}

// resultTypeKey is the top-level key of a 2026-07-28 result that marks it
// input_required.
var resultTypeKey = []string{"resultType"}

// rawAsks returns the input requests and requestState of res, the result
// of a call of kind, when it is input_required (more); such a result is
// decoded into the SDK's type, others are not.
func rawAsks(kind policy.Kind, res []byte) (irs mcp.InputRequestMap, state string, more bool, err error) {
	var span [1]envelope.Span
	if err := envelope.Members(res, resultTypeKey, span[:]); err == nil && string(span[0].In(res)) != `"input_required"` {
		return nil, "", false, nil
	}
	switch kind {
	case policy.Tool:
		return decodeAsks(&toolMethod, res)
	case policy.Prompt:
		return decodeAsks(&promptMethod, res)
	}
	return decodeAsks(&readMethod, res)
}

// decodeAsks decodes res as m's result and returns what m.asks finds.
func decodeAsks[Q callerRequest, T any, R interface {
	*T
	mcp.Result
}](m *method[Q, R], res []byte) (mcp.InputRequestMap, string, bool, error) {
	v := R(new(T))
	if err := json.Unmarshal(res, v); err != nil {
		return nil, "", false, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("manifold: the upstream's result does not decode: %v", err)}
	}
	irs, state, more := m.asks(v)
	return irs, state, more, nil
}
