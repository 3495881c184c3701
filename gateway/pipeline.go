package gateway

import (
	"context"

	"github.com/manifold-mcp/manifold/internal/ratelimit"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The call pipeline. A tools/call, prompts/get or resources/read (and a
// completion/complete, through the same stages by hand: see complete) goes
// through these stages in this order; each is a function in a file of its
// own:
//
//	observe           observe.go       the span, metrics and audit record of
//	                                   the whole call, denials included; pins
//	                                   the config snapshot of the call
//	authenticate      authenticate.go  the caller's principal under that
//	                                   snapshot
//	resolve           resolve.go       the name or URI as the client sent it
//	                                   → route (upstream and its own name);
//	                                   URIs only in canonical form
//	policy            permit.go        may the principal use the route?
//	rate limit        ratelimit.go     within the rateLimits of the config?
//	upstream session  sessions.go      the upstream session that serves the
//	                                   caller: the pool's, or its own
//	                                   (per-client servers)
//	pre-hooks         plugins.go       the pre hooks of the plugins that
//	                                   cover the call: change, block or answer
//	forward           mrtr.go          the upstream call (forward.go), across
//	                                   protocol versions (the MRTR bridge,
//	                                   bridge.go)
//	rewrite           rewrite.go       names and URIs of the answer into the
//	                                   client's namespace; the upstream's
//	                                   not-found answers as the gateway's own
//	post-hooks        plugins.go       the post hooks: change or block the
//	                                   result (forward has returned: once per
//	                                   call, whatever its rounds)
//
// observe is a receiving middleware of the SDK server, so that it also
// covers the calls the SDK answers itself (a tool name it does not have,
// arguments that fail the input schema); the other stages run in serveCall,
// below, in the SDK's handler. A stage that refuses the call ends it with
// its answer; observe records it either way. A new stage (rate limits,
// plugins, upstream credentials) is one more line in serveCall and in
// callStages, and a field of call if it learns something later stages use.
//
// The raw path (rawcall.go) runs the same stages on a call's bytes, for
// the simple tools/call, prompts/get and resources/read a front hands it
// (rawTake says which; docs/architecture.md, The pipeline: two paths):
// observe in serveAnswer, authenticate, resolve, policy and upstream session
// as here (rawStages), forward and rewrite as byte-level twins
// (rawforward.go, rawrewrite.go). Everything else takes this path, the
// SDK's.
//
// Stages share what they learn through call, which lives on serveCall's
// stack: no allocation per stage, and no closure per call. The typed
// request travels alongside it: forward and rewrite read its payload, and
// the upstream session stage the client's session and capabilities, for a
// per-client server only. authenticate, resolve and policy read call
// alone, so a path that forwards bytes can share every stage but forward
// and rewrite.

// callStages names the stages of the call pipeline, in order.
var callStages = [...]string{"observe", "authenticate", "resolve", "policy", "rate limit", "upstream session", "pre-hooks", "forward", "rewrite", "post-hooks"}

// call is one call on its way through the pipeline: what each stage
// learns, for the stages after it. One goroutine serves a call, so it
// needs no lock; a bridged call's upstream goroutine gets its route and
// snapshot, by value.
type call struct {
	// kind is what the call names, for resolve and the policy.
	kind policy.Kind
	// name is the tool or prompt name or the resource URI as the client
	// sent it.
	name string
	// snap and routes are the config snapshot and the routing generation
	// the call is decided and recorded under (pin): a reload or a list
	// change during the call does not reach it.
	snap   *snapshot
	routes *routes
	// x is the call's exchange, which observe records; nil when nothing
	// records.
	x *exchange
	// principal is the caller (authenticate); known is false when it has
	// no identity that authenticates under snap.
	principal *policy.Principal
	known     bool
	// route is where name goes (resolve), and, after the upstream session
	// stage, the upstream session that serves the call.
	route route
	// held is the concurrency slots of rate limits the call holds (rate
	// limit), released when it ends.
	held ratelimit.Held
}

// serveCall runs the stages after observe for req, a call of method m.
func serveCall[Q callerRequest, R mcp.Result](ctx context.Context, g *Gateway, m *method[Q, R], req Q) (R, error) {
	var zero R
	c := call{kind: m.kind, name: m.target(req)}
	g.pin(ctx, &c)
	if c.routes.listedPerClient != nil {
		c.routes = g.routesOf(ctx, req, false) // the session's lists (sessionlists.go)
	}
	g.authenticate(&c, callerOf(ctx, req))
	if !g.resolve(ctx, &c) || !g.permit(ctx, &c) {
		endRefusedRetry(ctx, g, m, req, c.snap)
		return zero, m.unknown(req, c.name)
	}
	// A retry of a bridged call is the same call: it paid at its first
	// round, and the call still holds its slots.
	if c.snap.limits != nil && !resumesBridged(ctx, g, m, req, c.snap) {
		if ref := g.rateLimit(ctx, &c); ref != nil {
			return limitedAnswer(m, ref)
		}
	}
	defer c.held.Release()
	if !c.held.Empty() {
		ctx = context.WithValue(ctx, slotsKey{}, &c.held) // a bridged call takes them (openBridge)
	}
	if res, done, err := consentRetry(ctx, g, m, &c, &req); done { // after a sign-in (oauthretry.go)
		return res, err
	}
	if err := g.upstreamSession(ctx, &c, fromRequest(req)); err != nil {
		if ce := g.consentRequired(err, c.route.up, c.principal.Name()); ce != nil {
			return askConsent(ctx, g, m, &c, req, ce) // oauthconsent.go, oauthretry.go
		}
		return zero, upstreamError(err)
	}
	if c.route.original == signInMarker {
		return any(signedInResult(c.route.up.Name())).(R), nil
	}
	h := g.hooks(ctx, &c, sessionID(req))
	if h != nil { // pre-hooks
		var res R
		var done bool
		var err error
		if req, res, done, err = pluginPre[Q, R](ctx, h, req); done {
			return res, err
		}
	}
	res, err := forward(ctx, g, m, req, c.route, c.snap)
	if ce := g.consentRequired(err, c.route.up, c.principal.Name()); ce != nil {
		res, err = askConsent(ctx, g, m, &c, req, ce) // a step-up (oauthconsent.go)
	}
	if h != nil { // post-hooks
		return pluginPost(ctx, h, res, err)
	}
	return res, err
}

// roundTrip is one upstream call of forward: send, then rewrite the
// answer. forward calls it once per upstream request a call takes.
func roundTrip[Q callerRequest, R mcp.Result](ctx context.Context, g *Gateway, m *method[Q, R], req Q, rt route, snap *snapshot) (R, error) {
	res, err := m.send(ctx, g, req, rt)
	return m.rewrite(req, rt, snap, res, err)
}

// pin fixes the config snapshot and routing generation of c: those observe
// pinned for the call's record when something records, else the current
// ones.
func (g *Gateway) pin(ctx context.Context, c *call) {
	c.x = g.exchange(ctx)
	if c.x != nil && c.x.snap != nil {
		c.snap, c.routes = c.x.snap, c.x.routes
		return
	}
	c.snap, c.routes = g.current(), g.routes.Load()
}

// The SDK's handlers of the three calls: each is the pipeline for its
// method.

// callTool serves tools/call. A name the principal may not use gets the
// SDK's own answer for a name that does not exist, word for word.
func (g *Gateway) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return serveCall(ctx, g, &toolMethod, req)
}

// getPrompt serves prompts/get.
func (g *Gateway) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	return serveCall(ctx, g, &promptMethod, req)
}

// readResourceHandler serves resources/read. It is registered with every
// resource and template, but reads are intercepted earlier (interceptor)
// so that URIs found only in tool results are readable too.
func (g *Gateway) readResourceHandler(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return serveCall(ctx, g, &readMethod, req)
}
