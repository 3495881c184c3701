package gateway

import (
	"context"
	"strings"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// complete forwards completion/complete for a prompt argument or a resource
// template variable.
func (g *Gateway) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	if req.Params == nil || req.Params.Ref == nil {
		return nil, mcpx.RPCError(jsonrpc.CodeInvalidParams, "completion/complete: missing ref")
	}
	params := *req.Params
	ref := *req.Params.Ref
	params.Ref = &ref
	// The stages of the call pipeline (pipeline.go), with its own resolve:
	// a ref names a prompt or a template.
	var c call
	g.pin(ctx, &c)
	g.authenticate(&c, callerOf(ctx, req))
	var ok bool
	switch ref.Type {
	case "ref/prompt":
		c.kind, c.name = policy.Prompt, ref.Name
		c.route, ok = c.routes.prompts[ref.Name]
		ok = ok && g.permit(ctx, &c)
		ref.Name = c.route.original
	case "ref/resource":
		// Only a listed template or resource is completed: an upstream
		// may answer any other with no values rather than an error.
		c.kind, c.name = policy.Template, ref.URI
		c.route, ok = c.routes.resource(ref.URI)
		ok = ok && listedRef(c.routes, ref.URI) && g.canonical(ctx, c.routes, c.kind, ref.URI, c.route) && g.permit(ctx, &c)
		ref.URI = c.route.original
	}
	if !ok {
		return nil, unknownRef(req.Params.Ref)
	}
	c.x.routed(c.route)
	if err := g.upstreamSession(ctx, &c, fromRequest(req)); err != nil {
		return nil, upstreamError(err)
	}
	rt := c.route
	var uc upstreamCall
	ctx, params.Meta, uc = g.beginCall(ctx, "completion/complete", rt, req, forwardMeta(params.Meta))
	res, err := rt.up.Complete(ctx, &params)
	g.endCall(ctx, &uc, err, false)
	if err != nil {
		if refNotFound(err, &ref) {
			return nil, unknownRef(req.Params.Ref) // as for a denied name (notfound.go)
		}
		return nil, upstreamError(err)
	}
	delete(res.Meta, metaServerInfo)
	return res, nil
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
	r := g.routesOf(ctx, req, false) // a principal's own resources too (principallists.go)
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

// interceptor answers the methods the gateway must own before the SDK's
// own handling: resources/read (the SDK rejects URIs it has not registered,
// such as those of resource links) and the instructions of initialize and
// server/discover (merged from upstreams that may connect later, and kept to
// the servers the principal can see something of).
func (g *Gateway) interceptor(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		g.inflight.Add()
		defer g.inflight.Done()
		if res, handled, err := g.discovered(ctx, method, req); handled {
			return res, err
		}
		if res, handled, err := g.list(ctx, req); handled {
			return res, err
		}
		switch method {
		case "tools/call", "prompts/get":
			if res, handled, err := g.aliasCall(ctx, req); handled {
				return res, err
			}
			if res, ok, err := g.sessionOnlyCall(ctx, req); ok {
				return res, err
			}
		case "resources/read":
			if rr, ok := req.(*mcp.ReadResourceRequest); ok && rr.Params != nil {
				return g.readResourceHandler(ctx, rr)
			}
		case "subscriptions/listen":
			if lr, ok := req.(*mcp.SubscriptionsListenRequest); ok {
				g.filterListen(ctx, lr)
				defer g.listening(ctx, lr)() // until the stream ends (listenlists.go)
			}
		case "resources/subscribe", "resources/unsubscribe":
			// A URI that routes nowhere or that the principal may not read
			// is acknowledged and never updated, as subscriptions/listen
			// drops it silently: an error would tell denied URIs apart
			// from those that exist.
			if uri := target(req); uri != "" {
				if rt, ok := g.routesOf(ctx, req, false).resource(uri); !ok || !g.readable(ctx, req, uri, rt) {
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
