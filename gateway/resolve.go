package gateway

import (
	"context"

	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/manifold-mcp/manifold/policy"
	"go.uber.org/zap"
)

// resolve is the resolve stage of the call pipeline: the name or URI as
// the client sent it becomes a route, in the call's routing generation. A
// name that routes nowhere, and a URI that is not in canonical form
// (canonicalURI), resolve to nothing; the caller answers as for an unknown
// name.
func (g *Gateway) resolve(ctx context.Context, c *call) bool {
	var ok bool
	switch c.kind {
	case policy.Tool:
		c.route, ok = c.routes.tools[c.name]
	case policy.Prompt:
		c.route, ok = c.routes.prompts[c.name]
	default:
		c.route, ok = c.routes.resource(c.name)
	}
	if !ok {
		c.route, ok = g.resolveAlias(c)
	}
	if !ok {
		return false
	}
	c.x.routed(c.route)
	return c.kind != policy.Resource || g.canonical(ctx, c.routes, c.kind, c.name, c.route)
}

// canonical reports whether uri, which routes to rt in r, is decided on as
// written (canonicalURI). A URI that is not is logged and noted in the
// request's exchange as denied by ruleNonCanonical.
func (g *Gateway) canonical(ctx context.Context, r *routes, kind policy.Kind, uri string, rt route) bool {
	if canonicalURI(r, kind, uri) {
		return true
	}
	g.log.Info("refused a non-canonical URI", zap.String(keyKind, kind.String()), zap.String(keyName, uri))
	g.denied(ctx, kind, rt.up.Name(), ruleNonCanonical)
	return false
}

// canonicalURI reports whether the gateway decides on uri as written: it is
// in canonical form, or it is exactly a URI (for kind Template, a template)
// that an upstream lists in r, which stays readable however the upstream
// spells it ("https://example.com", which a WHATWG parser reads as
// "https://example.com/"); no other spelling of it is accepted.
//
// The check applies with or without a policy: the routing of unprefixed
// servers, the audit record and the subscription table also key on the
// URI's text, and which URIs are readable must not change when a policy is
// added. A non-canonical URI that an upstream hands out only in a tool
// result is not readable through the gateway.
func canonicalURI(r *routes, kind policy.Kind, uri string) bool {
	if kind == policy.Template {
		if !namespacing.NonCanonicalTemplate(uri) {
			return true
		}
		_, listed := r.templateServer[uri]
		return listed
	}
	if !namespacing.NonCanonicalURI(uri) {
		return true
	}
	_, listed := r.resourceServer[uri]
	return listed
}
