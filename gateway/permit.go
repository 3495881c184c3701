package gateway

import (
	"context"

	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// permit is the policy stage of the call pipeline: it reports whether the
// call's principal may use its route, under the call's snapshot. A denial
// is logged with the rule that decided it and noted in the call's exchange;
// the caller answers exactly as for a name that does not exist, so that
// denied names cannot be enumerated.
func (g *Gateway) permit(ctx context.Context, c *call) bool {
	if !g.inToolset(ctx, c) {
		return false
	}
	a := c.snap.access
	if c.kind == policy.Resource || c.kind == policy.Template {
		return g.uriPermitted(ctx, a, c.principal, c.known, c.kind, c.name, c.route)
	}
	return g.decide(ctx, a, c.principal, c.known, c.kind, c.name, c.route.up.Name())
}

// refuses reports whether the resolve and policy stages would refuse c,
// whose name routes to rt, to who, under ctx's toolset: what permit and
// resolve's canonical check decide (decision, cleanDenial, canonicalURI,
// the toolset), without recording or logging anything. rawTake asks it
// before handing a call to the SDK path: a name the caller may not use
// must take the path an unknown name takes, or the two answers' headers
// would tell them apart (TestRefusesAgreesWithTheStages keeps it equal to
// the stages).
func (g *Gateway) refuses(ctx context.Context, who caller, c *call, rt route) bool {
	if ts := g.toolsetOf(ctx, c.snap); ts != nil && !ts.allows(c.kind, c.name, rt.up.Name()) {
		return true
	}
	uri := c.kind == policy.Resource || c.kind == policy.Template
	if uri && !canonicalURI(c.routes, c.kind, c.name) {
		return true
	}
	a := c.snap.access
	pr, known := who.principal(a)
	name := c.name
	if uri {
		name = namespacing.WrapURI(rt.prefix, rt.original)
	}
	if !decision(a, pr, known, c.kind, name, rt.up.Name()).Allowed {
		return true
	}
	if uri && !a.policy.Unrestricted() {
		_, _, denied := cleanDenial(a.policy, pr, c.kind, rt, name)
		return denied
	}
	return false
}

// decide reports whether pr (known: it has a principal at all) may use the
// item under a. The decision goes into the request's exchange, for its
// audit record.
func (g *Gateway) decide(ctx context.Context, a *access, pr *policy.Principal, known bool, kind policy.Kind, name, server string) bool {
	d := decision(a, pr, known, kind, name, server)
	switch {
	case d.Allowed:
		g.exchange(ctx).decide(a.policy, d)
		return true
	case !known:
		g.log.Warn("request without identity refused", zap.String(keyKind, kind.String()), zap.String(keyName, name))
		g.denied(ctx, kind, server, "")
	default:
		g.logDenial(pr, kind, name, server, a.policy.Describe(d))
		g.denied(ctx, kind, server, a.policy.RuleName(d))
	}
	return false
}

// decision is decide's ruling, recorded nowhere: everything under an
// unrestricted policy (rule -1), nothing to a caller without a principal
// (refused, rule -1), else the policy's decision.
func decision(a *access, pr *policy.Principal, known bool, kind policy.Kind, name, server string) policy.Decision {
	switch {
	case a.policy.Unrestricted():
		return policy.Decision{Allowed: true, Rule: -1}
	case !known:
		return policy.Decision{Rule: -1}
	}
	return a.policy.Decide(pr, kind, name, server)
}

// readable reports whether req's principal may read uri, which routes to
// rt, under the snapshot serving now, in the toolset of the request's
// endpoint: for requests outside the call pipeline (subscriptions).
func (g *Gateway) readable(ctx context.Context, req mcp.Request, uri string, rt route) bool {
	if ts := g.toolsetOf(ctx, g.current()); ts != nil && !ts.allows(policy.Resource, uri, rt.up.Name()) {
		return false
	}
	return g.uriAllowed(ctx, req, policy.Resource, uri, rt)
}

// uriAllowed decides on a resource or template URI, which routes to rt,
// under the routes and snapshot serving now: its spelling (canonical,
// resolve.go), then the policy (uriPermitted).
func (g *Gateway) uriAllowed(ctx context.Context, req mcp.Request, kind policy.Kind, uri string, rt route) bool {
	if !g.canonical(ctx, g.routes.Load(), kind, uri, rt) {
		return false
	}
	a := g.current().access
	if a.policy.Unrestricted() {
		return true
	}
	pr, known := principal(ctx, a, req)
	return g.uriPermitted(ctx, a, pr, known, kind, uri, rt)
}

// uriPermitted decides on a resource or template URI in canonical form
// (canonicalURI), which routes to rt, for pr under a. Rules match exact
// strings, while an upstream may resolve a URI loosely (the TypeScript SDK
// looks resources up by new URL(uri).toString(), which drops tabs,
// lowercases the scheme, resolves dot segments…), so:
//   - the decision is made on the URI as the client wrote it, which is then
//     the URI as the gateway writes it;
//   - while a policy is in force, a deny rule matching its cleaned form
//     (namespacing.CleanURI: no query or fragment, doubled slashes merged)
//     refuses it too, so "…/secret?x" and "…//secret" cannot reach what
//     "…/secret" denies.
func (g *Gateway) uriPermitted(ctx context.Context, a *access, pr *policy.Principal, known bool, kind policy.Kind, uri string, rt route) bool {
	if a.policy.Unrestricted() {
		return true
	}
	exact := namespacing.WrapURI(rt.prefix, rt.original)
	if !g.decide(ctx, a, pr, known, kind, exact, rt.up.Name()) {
		return false
	}
	if d, clean, denied := cleanDenial(a.policy, pr, kind, rt, exact); denied {
		g.logDenial(pr, kind, uri, rt.up.Name(), a.policy.Describe(d)+" (on the cleaned form "+clean+")")
		g.denied(ctx, kind, rt.up.Name(), a.policy.RuleName(d))
		return false
	}
	return true
}

// cleanDenial reports whether a deny rule of p matches, for pr, the cleaned
// form of rt's URI (namespacing.CleanURI) where it differs from exact, the
// URI as the gateway writes it; it returns the decision and the cleaned
// form, for the log.
func cleanDenial(p *policy.Policy, pr *policy.Principal, kind policy.Kind, rt route, exact string) (d policy.Decision, clean string, denied bool) {
	clean = namespacing.WrapURI(rt.prefix, namespacing.CleanURI(rt.original))
	if clean == exact {
		return policy.Decision{Allowed: true, Rule: -1}, clean, false
	}
	d = p.Decide(pr, kind, clean, rt.up.Name())
	return d, clean, !d.Allowed && d.Rule >= 0
}

// logDenial logs a policy denial with the rule that made it.
func (g *Gateway) logDenial(pr *policy.Principal, kind policy.Kind, name, server, rule string) {
	g.log.Info("policy denied",
		zap.String(keyPrincipal, pr.Name()), zap.Strings(keyGroups, pr.Groups()),
		zap.String(keyKind, kind.String()), zap.String(keyName, name), zap.String(keyServer, server),
		zap.String(keyRule, rule))
}

// denied counts a denial (manifold_policy_denials_total) and notes it, with
// the name of the rule ("" for the default), in the request's exchange.
func (g *Gateway) denied(ctx context.Context, kind policy.Kind, server, rule string) {
	g.obs.metrics.PolicyDenied(ctx, kindLabel(kind), server)
	g.exchange(ctx).deny(rule)
}
