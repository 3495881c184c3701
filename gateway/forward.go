package gateway

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The upstream calls of the forward stage (see forward, mrtr.go): each
// sends a routed, allowed request to rt's upstream, in the upstream's
// names, with the _meta the upstream may see, inside the call's client span
// (beginCall, endCall).

// sendTool sends a tools/call. A retry after input_required carries the
// answers and the upstream's state: they pass through untouched.
func sendTool(ctx context.Context, g *Gateway, req *mcp.CallToolRequest, rt route) (*mcp.CallToolResult, error) {
	ctx, meta, c := g.beginCall(ctx, "tools/call", rt, req, forwardMeta(req.Params.Meta))
	params := &mcp.CallToolParams{Meta: meta, Name: rt.original,
		InputResponses: req.Params.InputResponses, RequestState: req.Params.RequestState}
	if len(req.Params.Arguments) > 0 {
		params.Arguments = req.Params.Arguments
	}
	res, err := rt.up.CallTool(ctx, params)
	g.endCall(ctx, &c, err, err == nil && res.IsError)
	return res, err
}

// sendPrompt sends a prompts/get.
func sendPrompt(ctx context.Context, g *Gateway, req *mcp.GetPromptRequest, rt route) (*mcp.GetPromptResult, error) {
	params := *req.Params
	params.Name = rt.original
	var c upstreamCall
	ctx, params.Meta, c = g.beginCall(ctx, "prompts/get", rt, req, forwardMeta(params.Meta))
	res, err := rt.up.GetPrompt(ctx, &params)
	g.endCall(ctx, &c, err, false)
	return res, err
}

// sendRead sends a resources/read.
func sendRead(ctx context.Context, g *Gateway, req *mcp.ReadResourceRequest, rt route) (*mcp.ReadResourceResult, error) {
	params := *req.Params
	params.URI = rt.original
	var c upstreamCall
	ctx, params.Meta, c = g.beginCall(ctx, "resources/read", rt, req, forwardMeta(params.Meta))
	res, err := rt.up.ReadResource(ctx, &params)
	g.endCall(ctx, &c, err, false)
	return res, err
}
