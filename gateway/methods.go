package gateway

import (
	"context"

	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// method is what the pipeline needs to know of one call method, with
// request type Q and result type R: the parts that read or build the typed
// payload. Everything else (authenticate, resolve, policy, the upstream
// session) works on the call alone.
type method[Q callerRequest, R mcp.Result] struct {
	name string      // the MCP method
	kind policy.Kind // what the policy decides on
	// target returns the name or URI as the client sent it.
	target func(req Q) string
	// unknown is the answer for a name that does not exist or that the
	// principal may not use (notfound.go).
	unknown func(req Q, name string) error
	// send makes the upstream call of req on rt (forward.go).
	send func(ctx context.Context, g *Gateway, req Q, rt route) (R, error)
	// rewrite turns the upstream's answer into the client's (rewrite.go).
	rewrite func(req Q, rt route, snap *snapshot, res R, err error) (R, error)

	// The MRTR parts (mrtr.go), filled in by withMRTR.

	// input returns the answers and requestState a retry carries.
	input func(req Q) (mcp.InputResponseMap, string)
	// retry returns a copy of req that carries answers and state.
	retry func(req Q, answers mcp.InputResponseMap, state string) Q
	// asks returns the input requests and requestState of res when it is
	// an input_required result.
	asks func(res R) (mcp.InputRequestMap, string, bool)
	// ask returns the input_required result asking for irs.
	ask func(irs mcp.InputRequestMap, state string) R
	// toolError returns res as a tool result with isError, for errors an
	// older client does not know; false for methods without one.
	toolError func(text string) (R, bool)
}

// inputResult constrains the result types that may ask for input.
type inputResult[T any] interface {
	*T
	mcp.Result
	NeedsInput() bool
	UnmarshalJSON([]byte) error
}

// inputParams constrains the params types of calls that may carry answers.
type inputParams[P any] interface {
	*P
	mcp.Params
}

// inputRequiredJSON sets the SDK's unexported resultType when unmarshalled
// into a result: the only way to mark one input_required that does not go
// through the SDK's own handler (resources/read, see interceptor).
var inputRequiredJSON = []byte(`{"resultType":"input_required"}`)

// withMRTR returns m with its MRTR parts, built from where its params keep
// the client's answers (in) and where its result keeps the input requests
// (out): the SDK's params and results have the fields, but no methods to
// reach them.
func withMRTR[P any, PP inputParams[P], T any, R inputResult[T]](m method[*mcp.ServerRequest[PP], R],
	in func(PP) (*mcp.InputResponseMap, *string), out func(R) (*mcp.InputRequestMap, *string)) method[*mcp.ServerRequest[PP], R] {
	m.input = func(req *mcp.ServerRequest[PP]) (mcp.InputResponseMap, string) {
		if req.Params == nil {
			return nil, ""
		}
		answers, state := in(req.Params)
		return *answers, *state
	}
	m.retry = func(req *mcp.ServerRequest[PP], answers mcp.InputResponseMap, state string) *mcp.ServerRequest[PP] {
		r, p := *req, *req.Params
		a, s := in(&p)
		*a, *s = answers, state
		r.Params = &p
		return &r
	}
	m.asks = func(res R) (mcp.InputRequestMap, string, bool) {
		irs, state := out(res)
		return *irs, *state, res.NeedsInput()
	}
	m.ask = func(irs mcp.InputRequestMap, state string) R {
		r := R(new(T))
		_ = r.UnmarshalJSON(inputRequiredJSON)
		i, s := out(r)
		*i, *s = irs, state
		return r
	}
	if m.toolError == nil {
		m.toolError = func(string) (R, bool) { var zero R; return zero, false }
	}
	return m
}

// The three call methods.
var (
	toolMethod = withMRTR(method[*mcp.CallToolRequest, *mcp.CallToolResult]{
		name: "tools/call", kind: policy.Tool,
		target:  func(req *mcp.CallToolRequest) string { return req.Params.Name },
		unknown: func(_ *mcp.CallToolRequest, name string) error { return unknownTool(name) },
		send:    sendTool, rewrite: rewriteTool,
		toolError: func(text string) (*mcp.CallToolResult, bool) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}, true
		},
	},
		func(p *mcp.CallToolParamsRaw) (*mcp.InputResponseMap, *string) {
			return &p.InputResponses, &p.RequestState
		},
		func(r *mcp.CallToolResult) (*mcp.InputRequestMap, *string) { return &r.InputRequests, &r.RequestState })

	promptMethod = withMRTR(method[*mcp.GetPromptRequest, *mcp.GetPromptResult]{
		name: "prompts/get", kind: policy.Prompt,
		target:  func(req *mcp.GetPromptRequest) string { return req.Params.Name },
		unknown: func(_ *mcp.GetPromptRequest, name string) error { return unknownPrompt(name) },
		send:    sendPrompt, rewrite: rewritePrompt,
	},
		func(p *mcp.GetPromptParams) (*mcp.InputResponseMap, *string) {
			return &p.InputResponses, &p.RequestState
		},
		func(r *mcp.GetPromptResult) (*mcp.InputRequestMap, *string) { return &r.InputRequests, &r.RequestState })

	readMethod = withMRTR(method[*mcp.ReadResourceRequest, *mcp.ReadResourceResult]{
		name: "resources/read", kind: policy.Resource,
		target: func(req *mcp.ReadResourceRequest) string { return req.Params.URI },
		// The gateway's own answer, naming the URI as the client wrote it.
		unknown: func(req *mcp.ReadResourceRequest, uri string) error { return resourceNotFound(req, uri) },
		send:    sendRead, rewrite: rewriteRead,
	},
		func(p *mcp.ReadResourceParams) (*mcp.InputResponseMap, *string) {
			return &p.InputResponses, &p.RequestState
		},
		func(r *mcp.ReadResourceResult) (*mcp.InputRequestMap, *string) {
			return &r.InputRequests, &r.RequestState
		})
)
