package gateway

import (
	"context"
	"strings"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// metaServerInfo is the _meta key the SDK fills with the answering server's
// identity only when absent: an upstream's value is removed so that clients
// see the gateway.
const metaServerInfo = "io.modelcontextprotocol/serverInfo"

// callTool forwards tools/call to the upstream owning the name. A name the
// principal may not use gets the SDK's own answer for a name that does not
// exist, word for word.
func (g *Gateway) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	rt, ok := g.routes.Load().tools[req.Params.Name]
	if ok {
		g.exchange(ctx).routed(rt)
	}
	if !ok || !g.allowed(ctx, req, policy.Tool, req.Params.Name, rt.up.Name()) {
		return nil, unknownTool(req.Params.Name)
	}
	rt, err := g.upstreamFor(ctx, req, rt)
	if err != nil {
		return nil, upstreamError(err)
	}
	return g.bridgeTool(ctx, req, rt)
}

// forwardTool sends a routed, allowed tools/call to rt's upstream; bridgeTool
// (mrtr.go) decides how, by the protocol versions of the client and the
// upstream.
func (g *Gateway) forwardTool(ctx context.Context, req *mcp.CallToolRequest, rt route) (*mcp.CallToolResult, error) {
	ctx, meta, c := g.beginCall(ctx, "tools/call", rt, req, forwardMeta(req.Params.Meta))
	// A retry after input_required carries the answers and the upstream's
	// state: they pass through untouched.
	params := &mcp.CallToolParams{Meta: meta, Name: rt.original,
		InputResponses: req.Params.InputResponses, RequestState: req.Params.RequestState}
	if len(req.Params.Arguments) > 0 {
		params.Arguments = req.Params.Arguments
	}
	res, err := rt.up.CallTool(ctx, params)
	g.endCall(ctx, &c, err, err == nil && res.IsError)
	if err != nil {
		if upstreamNotFound(err, kindTool, rt.original) {
			return nil, unknownTool(req.Params.Name) // as for a denied name (notfound.go)
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

// getPrompt forwards prompts/get.
func (g *Gateway) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	rt, ok := g.routes.Load().prompts[req.Params.Name]
	if ok {
		g.exchange(ctx).routed(rt)
	}
	if !ok || !g.allowed(ctx, req, policy.Prompt, req.Params.Name, rt.up.Name()) {
		return nil, unknownPrompt(req.Params.Name)
	}
	rt, err := g.upstreamFor(ctx, req, rt)
	if err != nil {
		return nil, upstreamError(err)
	}
	return g.bridgePrompt(ctx, req, rt)
}

// forwardPrompt sends a routed, allowed prompts/get to rt's upstream (see
// bridgePrompt).
func (g *Gateway) forwardPrompt(ctx context.Context, req *mcp.GetPromptRequest, rt route) (*mcp.GetPromptResult, error) {
	params := *req.Params
	params.Name = rt.original
	var c upstreamCall
	ctx, params.Meta, c = g.beginCall(ctx, "prompts/get", rt, req, forwardMeta(params.Meta))
	res, err := rt.up.GetPrompt(ctx, &params)
	g.endCall(ctx, &c, err, false)
	if err != nil {
		if upstreamNotFound(err, kindPrompt, rt.original) {
			return nil, unknownPrompt(req.Params.Name) // as for a denied name (notfound.go)
		}
		return nil, upstreamError(err)
	}
	delete(res.Meta, metaServerInfo)
	for _, m := range res.Messages {
		rewriteContent(rt.prefix, []mcp.Content{m.Content})
	}
	return res, nil
}

// readResourceHandler forwards resources/read. It is registered with every
// resource and template, but reads are intercepted earlier (readResources)
// so that URIs found only in tool results are readable too.
func (g *Gateway) readResourceHandler(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	rt, ok := g.routes.Load().resource(req.Params.URI)
	if ok {
		g.exchange(ctx).routed(rt)
	}
	if !ok || !g.readable(ctx, req, req.Params.URI, rt) {
		return nil, resourceNotFound(req, req.Params.URI)
	}
	rt, err := g.upstreamFor(ctx, req, rt)
	if err != nil {
		return nil, upstreamError(err)
	}
	return g.bridgeRead(ctx, req, rt)
}

// forwardRead sends a routed, allowed resources/read to rt's upstream (see
// bridgeRead).
func (g *Gateway) forwardRead(ctx context.Context, req *mcp.ReadResourceRequest, rt route) (*mcp.ReadResourceResult, error) {
	params := *req.Params
	params.URI = rt.original
	var c upstreamCall
	ctx, params.Meta, c = g.beginCall(ctx, "resources/read", rt, req, forwardMeta(params.Meta))
	res, err := rt.up.ReadResource(ctx, &params)
	g.endCall(ctx, &c, err, false)
	if err != nil {
		if upstreamNotFound(err, kindResource, rt.original) {
			// The gateway's own answer, naming the URI as the client wrote
			// it: the same as for a URI denied by policy or not routed.
			return nil, resourceNotFound(req, req.Params.URI)
		}
		return nil, upstreamError(err)
	}
	delete(res.Meta, metaServerInfo)
	if a := g.current().access; !a.policy.Unrestricted() {
		res.CacheScope = a.cacheScope
	}
	for _, c := range res.Contents {
		if c != nil && c.URI != "" {
			c.URI = namespacing.WrapURI(rt.prefix, c.URI)
		}
	}
	return res, nil
}

// complete forwards completion/complete for a prompt argument or a resource
// template variable.
func (g *Gateway) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	if req.Params == nil || req.Params.Ref == nil {
		return nil, mcpx.RPCError(jsonrpc.CodeInvalidParams, "completion/complete: missing ref")
	}
	r := g.routes.Load()
	params := *req.Params
	ref := *req.Params.Ref
	params.Ref = &ref
	var rt route
	var ok bool
	switch ref.Type {
	case "ref/prompt":
		rt, ok = r.prompts[ref.Name]
		ok = ok && g.allowed(ctx, req, policy.Prompt, ref.Name, rt.up.Name())
		ref.Name = rt.original
	case "ref/resource":
		// Only a listed template or resource is completed: an upstream
		// may answer any other with no values rather than an error.
		rt, ok = r.resource(ref.URI)
		ok = ok && listedRef(r, ref.URI) && g.uriAllowed(ctx, req, policy.Template, ref.URI, rt)
		ref.URI = rt.original
	}
	if !ok {
		return nil, unknownRef(req.Params.Ref)
	}
	g.exchange(ctx).routed(rt)
	rt, err := g.upstreamFor(ctx, req, rt)
	if err != nil {
		return nil, upstreamError(err)
	}
	var c upstreamCall
	ctx, params.Meta, c = g.beginCall(ctx, "completion/complete", rt, req, forwardMeta(params.Meta))
	res, err := rt.up.Complete(ctx, &params)
	g.endCall(ctx, &c, err, false)
	if err != nil {
		if refNotFound(err, &ref) {
			return nil, unknownRef(req.Params.Ref) // as for a denied name (notfound.go)
		}
		return nil, upstreamError(err)
	}
	delete(res.Meta, metaServerInfo)
	return res, nil
}

// readable reports whether req's principal may read uri, which routes to rt.
func (g *Gateway) readable(ctx context.Context, req mcp.Request, uri string, rt route) bool {
	return g.uriAllowed(ctx, req, policy.Resource, uri, rt)
}

// uriAllowed decides on a resource or template URI, which routes to rt.
// Rules match exact strings, while an upstream may resolve a URI loosely
// (the TypeScript SDK looks resources up by new URL(uri).toString(), which
// drops tabs, lowercases the scheme, resolves dot segments…), so:
//   - a URI that is not in canonical form (namespacing.NonCanonicalURI and
//     NonCanonicalTemplate: the stricter of the WHATWG URL Standard and
//     RFC 3986) is refused as unknown, with or without a policy (see
//     canonicalURI);
//   - the decision is made on the URI as the client wrote it, which is then
//     the URI as the gateway writes it;
//   - while a policy is in force, a deny rule matching its cleaned form
//     (namespacing.CleanURI: no query or fragment, doubled slashes merged)
//     refuses it too, so "…/secret?x" and "…//secret" cannot reach what
//     "…/secret" denies.
func (g *Gateway) uriAllowed(ctx context.Context, req mcp.Request, kind policy.Kind, uri string, rt route) bool {
	if !g.canonicalURI(kind, uri) {
		g.log.Info("refused a non-canonical URI", zap.String(keyKind, kind.String()), zap.String(keyName, uri))
		g.denied(ctx, kind, rt.up.Name(), ruleNonCanonical)
		return false
	}
	a := g.current().access
	if a.policy.Unrestricted() {
		return true
	}
	exact := namespacing.WrapURI(rt.prefix, rt.original)
	if !g.allowedBy(ctx, a, req, kind, exact, rt.up.Name()) {
		return false
	}
	clean := namespacing.WrapURI(rt.prefix, namespacing.CleanURI(rt.original))
	if clean == exact {
		return true
	}
	pr, _ := principal(ctx, a, req) // allowed above, so known
	if d := a.policy.Decide(pr, kind, clean, rt.up.Name()); !d.Allowed && d.Rule >= 0 {
		g.logDenial(pr, kind, uri, rt.up.Name(), a.policy.Describe(d)+" (on the cleaned form "+clean+")")
		g.denied(ctx, kind, rt.up.Name(), a.policy.RuleName(d))
		return false
	}
	return true
}

// canonicalURI reports whether the gateway decides on uri as written: it is
// in canonical form, or it is exactly a URI (for kind Template, a template)
// that an upstream lists, which stays readable however the upstream spells
// it ("https://example.com", which a WHATWG parser reads as
// "https://example.com/"); no other spelling of it is accepted.
//
// The check applies with or without a policy: the routing of unprefixed
// servers, the audit record and the subscription table also key on the
// URI's text, and which URIs are readable must not change when a policy is
// added. A non-canonical URI that an upstream hands out only in a tool
// result is not readable through the gateway.
func (g *Gateway) canonicalURI(kind policy.Kind, uri string) bool {
	if kind == policy.Template {
		if !namespacing.NonCanonicalTemplate(uri) {
			return true
		}
		_, listed := g.routes.Load().templateServer[uri]
		return listed
	}
	if !namespacing.NonCanonicalURI(uri) {
		return true
	}
	_, listed := g.routes.Load().resourceServer[uri]
	return listed
}

// filterListen drops from a subscriptions/listen request the resource URIs
// the principal may not read, silently, as the SDK drops those it cannot
// serve: a refusal would tell denied URIs from unknown ones.
func (g *Gateway) filterListen(ctx context.Context, req *mcp.SubscriptionsListenRequest) {
	if req.Params == nil || req.Params.Notifications == nil || len(req.Params.Notifications.ResourceSubscriptions) == 0 {
		return
	}
	n := *req.Params.Notifications
	n.ResourceSubscriptions = nil
	r := g.routes.Load()
	for _, uri := range req.Params.Notifications.ResourceSubscriptions {
		if rt, ok := r.resource(uri); ok && g.readable(ctx, req, uri, rt) {
			n.ResourceSubscriptions = append(n.ResourceSubscriptions, uri)
		}
	}
	params := *req.Params
	params.Notifications = &n
	req.Params = &params
}

func refLabel(ref *mcp.CompleteReference) string {
	if ref.Type == "ref/resource" {
		return "resource " + ref.URI
	}
	return "prompt " + ref.Name
}

// hopMetaPrefix marks the _meta keys that describe one hop of the
// 2026-07-28 protocol (protocolVersion, clientInfo, clientCapabilities,
// logLevel, subscriptionId): the downstream client's values must not reach
// the upstream, whose client session sets its own.
const hopMetaPrefix = "io.modelcontextprotocol/"

// forwardMeta returns the request _meta to send upstream: everything but the
// hop keys. It copies only when there is something to drop.
func forwardMeta(m mcp.Meta) mcp.Meta {
	drop := false
	for k := range m {
		if strings.HasPrefix(k, hopMetaPrefix) {
			drop = true
			break
		}
	}
	if !drop {
		return m
	}
	out := make(mcp.Meta, len(m))
	for k, v := range m {
		if !strings.HasPrefix(k, hopMetaPrefix) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
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

// interceptor answers the methods the gateway must own before the SDK's
// own handling: resources/read (the SDK rejects URIs it has not registered,
// such as those of resource links) and the instructions of initialize and
// server/discover (merged from upstreams that may connect later, and kept to
// the servers the principal can see something of).
func (g *Gateway) interceptor(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		g.inflight.Add(1)
		defer g.inflight.Add(-1)
		if res, handled, err := g.list(ctx, req); handled {
			return res, err
		}
		switch method {
		case "resources/read":
			if rr, ok := req.(*mcp.ReadResourceRequest); ok && rr.Params != nil {
				return g.readResourceHandler(ctx, rr)
			}
		case "subscriptions/listen":
			if lr, ok := req.(*mcp.SubscriptionsListenRequest); ok {
				g.filterListen(ctx, lr)
			}
		case "resources/subscribe", "resources/unsubscribe":
			// A URI that routes nowhere or that the principal may not read
			// is acknowledged and never updated, as subscriptions/listen
			// drops it silently: an error would tell denied URIs apart
			// from those that exist.
			if uri := target(req); uri != "" {
				if rt, ok := g.routes.Load().resource(uri); !ok || !g.readable(ctx, req, uri, rt) {
					// The SDK's empty result is unexported: its ping
					// handler makes one, without recording anything.
					ss, _ := req.GetSession().(*mcp.ServerSession)
					return next(ctx, "ping", &mcp.ServerRequest[*mcp.PingParams]{Session: ss, Params: &mcp.PingParams{}})
				}
			}
		case "logging/setLevel":
			res, err := next(ctx, method, req)
			if p, ok := req.GetParams().(*mcpx.SetLoggingLevelParams); ok && p != nil && err == nil {
				if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
					g.setLogLevel(ctx, ss, callerOf(ctx, req), p.Level)
				}
			}
			return res, err
		case "initialize":
			res, err := next(ctx, method, req)
			if ir, ok := res.(*mcp.InitializeResult); ok && err == nil {
				ir.Instructions = g.view(ctx, req).instructions
			}
			return res, err
		case "server/discover":
			res, err := next(ctx, method, req)
			if dr, ok := res.(*mcp.DiscoverResult); ok && err == nil {
				dr.Instructions = g.view(ctx, req).instructions
			}
			return res, err
		}
		return next(ctx, method, req)
	}
}
