package gateway

import (
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The rewrite stage: an upstream's answer becomes the client's. Names and
// URIs go into the client's namespace, the upstream's serverInfo _meta is
// dropped, and an upstream's not-found answer becomes the gateway's own
// (notfound.go), the same as for a name the policy denies.

// metaServerInfo is the _meta key the SDK fills with the answering server's
// identity only when absent: an upstream's value is removed so that clients
// see the gateway.
const metaServerInfo = "io.modelcontextprotocol/serverInfo"

// rewriteTool rewrites the answer to a tools/call.
func rewriteTool(req *mcp.CallToolRequest, rt route, _ *snapshot, res *mcp.CallToolResult, err error) (*mcp.CallToolResult, error) {
	if err != nil {
		if upstreamNotFound(err, kindTool, rt.original) {
			return nil, unknownTool(req.Params.Name)
		}
		return nil, upstreamError(err)
	}
	if res.IsError && toolResultNotFound(res, rt.original) {
		return nil, unknownTool(req.Params.Name)
	}
	delete(res.Meta, metaServerInfo)
	rewriteContent(rt.prefix, res.Content)
	return res, nil
}

// rewritePrompt rewrites the answer to a prompts/get.
func rewritePrompt(req *mcp.GetPromptRequest, rt route, _ *snapshot, res *mcp.GetPromptResult, err error) (*mcp.GetPromptResult, error) {
	if err != nil {
		if upstreamNotFound(err, kindPrompt, rt.original) {
			return nil, unknownPrompt(req.Params.Name)
		}
		return nil, upstreamError(err)
	}
	delete(res.Meta, metaServerInfo)
	for _, m := range res.Messages {
		rewriteContent(rt.prefix, []mcp.Content{m.Content})
	}
	return res, nil
}

// rewriteRead rewrites the answer to a resources/read; its cache scope is
// the one of the snapshot that decided the read.
func rewriteRead(req *mcp.ReadResourceRequest, rt route, snap *snapshot, res *mcp.ReadResourceResult, err error) (*mcp.ReadResourceResult, error) {
	if err != nil {
		if upstreamNotFound(err, kindResource, rt.original) {
			return nil, resourceNotFound(req, req.Params.URI)
		}
		return nil, upstreamError(err)
	}
	delete(res.Meta, metaServerInfo)
	if a := snap.access; !a.policy.Unrestricted() {
		res.CacheScope = a.cacheScope
	}
	for _, c := range res.Contents {
		if c != nil && c.URI != "" {
			c.URI = namespacing.WrapURI(rt.prefix, c.URI)
		}
	}
	return res, nil
}

// rewriteContent puts URIs that an upstream hands out inside content
// (resource links, embedded resources) into the client's namespace, so that
// they can be read back through the gateway.
func rewriteContent(prefix string, content []mcp.Content) {
	if prefix == "" {
		return
	}
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.ResourceLink:
			c.URI = namespacing.WrapURI(prefix, c.URI)
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				c.Resource.URI = namespacing.WrapURI(prefix, c.Resource.URI)
			}
		}
	}
}
