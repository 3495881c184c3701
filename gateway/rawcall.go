package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/internal/telemetry"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// The raw path of the call pipeline (docs/architecture.md, Pipeline): a
// tools/call, prompts/get or resources/read whose envelope is simple runs
// the stages of pipeline.go on the message's bytes, never decoding its
// payload into SDK types. A front (stdioraw.go, streamableraw.go) peeks
// each client message with envelope.Scan, asks rawTake whether the raw
// path serves it, and if so hands it to serveAnswer; everything else goes to
// the SDK (the slow path) as before. The stages are the slow path's own:
// authenticate, resolve, permit and upstreamSession run unchanged on call;
// forward and rewrite have byte-level twins (rawforward.go,
// rawrewrite.go).

// rawFront is what a downstream front knows of the session a raw call
// comes from. The raw path calls it from the call's own goroutine;
// implementations are safe for concurrent use.
type rawFront interface {
	// session is the SDK session of the client: server→client requests
	// and notifications of the call (progress, logs, sampling,
	// elicitation, roots) are relayed through it, on the stream that
	// carries the call's context.
	session() *mcp.ServerSession
	// caller is who sends the calls (authenticate).
	caller() caller
	// transport is the call's network.transport span attribute.
	transport() string
}

// rawMethod is what the raw path needs to know of one call method: where
// the name is, how the upstream's answer comes back (rawrewrite.go).
type rawMethod struct {
	name string
	kind policy.Kind
	// uri: the method names a resource URI (params.uri), not a name.
	uri bool
}

var (
	rawTool   = rawMethod{name: "tools/call", kind: policy.Tool}
	rawPrompt = rawMethod{name: "prompts/get", kind: policy.Prompt}
	rawRead   = rawMethod{name: "resources/read", kind: policy.Resource, uri: true}
)

// rawRequest is one client request the raw path serves: its bytes, what
// Scan found in them, and the call on its way through the stages.
type rawRequest struct {
	msg []byte // the client's message, owned by the call
	env envelope.Envelope
	m   *rawMethod
	c   call
	// ss is the client's SDK session (rawFront.session); version its
	// protocol version and caps its capabilities.
	ss      *mcp.ServerSession
	version string
	caps    *mcp.ClientCapabilities
	// stateless: the request is a 2026-07-28 one, which carries its
	// version and the client's description in _meta (SEP-2575); its result
	// is then the client's protocol's (rewriteRaw), and an input_required
	// answer passes to the client as it is.
	stateless bool
	// sink, when not nil, is the call's own HTTP response, where the
	// upstream's notifications for it go (origin.sink).
	sink *callResponse
	// clientArgs are the arguments the client sent, kept when a plugin
	// replaced them (argsReplaced): the audit records what the client
	// sent, as on the SDK path.
	clientArgs   []byte
	argsReplaced bool
}

// id returns the request's id as the client wrote it.
func (r *rawRequest) id() []byte { return r.env.ID.In(r.msg) }

// rawMethodOf returns the raw method a Scan-ed client message is a simple
// request of, or nil: only a JSON-RPC 2.0 request, with a string id or a
// plain number id (plainID), of a hot method whose
// params hold nothing but the target, arguments (not for reads) and a
// _meta of at most a progress token and the 2026-07-28 per-request
// members (rawVersion checks those). Anything else takes the slow path:
// other params (inputResponses, requestState: MRTR rounds; tasks) and
// other _meta keys (trace context), which forwardMeta and the bridge
// handle on typed values.
func rawMethodOf(msg []byte, env *envelope.Envelope) *rawMethod {
	if !env.ID.Present() || !env.Params.Present() || env.TopOther != 0 || env.ParamsOther != 0 || env.MetaOther != 0 ||
		string(env.JSONRPC.In(msg)) != `"2.0"` {
		return nil
	}
	if id := env.ID.In(msg); id[0] != '"' && !plainID(id) {
		return nil // a number the SDK reads otherwise (1.5, 1e0, -1): its answer carries the id as read
	}
	var m *rawMethod
	switch string(env.Method.In(msg)) {
	case `"tools/call"`:
		m = &rawTool
	case `"prompts/get"`:
		m = &rawPrompt
	case `"resources/read"`:
		m = &rawRead
	default:
		return nil
	}
	if m.uri {
		if !env.URI.Present() || env.Name.Present() || env.Arguments.Present() {
			return nil
		}
	} else if !env.Name.Present() || env.URI.Present() {
		return nil
	}
	return m
}

// rawTake decides whether the raw path serves msg, a client message of the
// session of f that Scan read as env, and returns the request pinned to
// the config snapshot and routes serving now, or nil for the slow path.
// The raw path serves a simple request of a hot method (rawMethodOf) on a
// session initialized with a version before 2026-07-28 (whose calls the
// MRTR bridge never parks: a 2026-07-28 upstream's input_required is
// fulfilled as fulfilRounds does, see forwardRaw), when the name routes
// nowhere or to a name the caller may not use (the raw path answers
// not-found as the slow path does: both must take one path, whatever the
// upstream), or to an upstream whose connection takes raw calls. ctx
// carries the front's toolset. msg must stay unchanged until the call ends
// (the caller may give r a copy).
func (g *Gateway) rawTake(ctx context.Context, f rawFront, msg []byte, env *envelope.Envelope) *rawRequest {
	m := rawMethodOf(msg, env)
	if m == nil {
		return nil
	}
	r := &rawRequest{msg: msg, env: *env, m: m, ss: f.session()}
	if !g.rawVersion(r) {
		return nil
	}
	r.c = call{kind: m.kind, snap: g.current(), routes: g.routes.Load()}
	if r.c.routes.listedPerClient != nil {
		if sr := g.builtRoutes(r.ss); sr != nil {
			r.c.routes = sr // the session's lists (sessionlists.go)
		} else if r.stateless && !g.rawPrincipalRoutes(f, &r.c) {
			return nil // its principal's lists are the slow path's to build (principallists.go)
		}
	}
	if m.uri {
		r.c.name = string(envelope.Text(env.URI.In(msg)))
	} else {
		r.c.name = string(envelope.Text(env.Name.In(msg)))
	}
	if m.kind == policy.Tool && r.c.snap.disc.isMeta(r.c.name) {
		return nil // progressive discovery's meta-tools: the SDK path's (discovery.go)
	}
	rt, ok := r.c.routes.lookup(m.kind, r.c.name)
	switch {
	case !ok && g.listsByPlugins():
		return nil // maybe an alias (aliases.go): the slow path's
	case !ok:
		return r // answered not-found, as the slow path answers it
	case rt.up.TakesRaw() && (!r.stateless || mcpx.Stateless(upstreamVersion(rt.up))):
		return r
	case g.refuses(ctx, f.caller(), &r.c, rt):
		// Answered not-found here too: on the slow path its answer would
		// differ from an unknown name's in its headers.
		return r
	}
	// An upstream that takes no raw calls, or, for a 2026-07-28 request,
	// one before 2026-07-28 (the MRTR bridge): the slow path's.
	return nil
}

// rawVersion sets the protocol version of r, and the client's
// capabilities for one before 2026-07-28, and reports whether the raw path
// serves that version: a session initialized before 2026-07-28, or a
// 2026-07-28 request whose per-request members (SEP-2575) are as the SDK
// requires them (checkStatelessMeta); anything else is the SDK's to
// answer.
func (g *Gateway) rawVersion(r *rawRequest) bool {
	env := &r.env
	if env.ProtocolVersion.Present() || env.ClientCapabilities.Present() || env.ClientInfo.Present() || env.LogLevel.Present() {
		r.version = string(envelope.Text(env.ProtocolVersion.In(r.msg)))
		r.stateless = true
		var ok bool
		r.caps, ok = g.statelessMeta.valid(r.msg, env)
		return ok && r.version == mcpx.StatelessVersion
	}
	if r.ss == nil {
		return false
	}
	ip := r.ss.InitializeParams()
	if ip == nil {
		return false // the SDK answers calls before initialize
	}
	r.version = negotiated(ip.ProtocolVersion)
	r.caps = ip.Capabilities
	return !mcpx.Stateless(r.version)
}

// lookup returns the route of a name or URI of kind, without deciding on
// it (resolve does).
func (r *routes) lookup(kind policy.Kind, name string) (route, bool) {
	switch kind {
	case policy.Tool:
		rt, ok := r.tools[name]
		return rt, ok
	case policy.Prompt:
		rt, ok := r.prompts[name]
		return rt, ok
	}
	return r.resource(name)
}

// serveAnswer serves r, a request rawTake took, from the front f: observe,
// then the stages. It returns the response for the front to write, one
// complete JSON-RPC message in pieces (rawAnswer: the upstream's result is
// not copied into it), once every notification of the call has been
// relayed; ctx ends the call early (the client's cancellation). The front
// forgets r's id before it writes the response, as the SDK does, so that
// a client may reuse the id at once.
func (g *Gateway) serveAnswer(ctx context.Context, f rawFront, r *rawRequest) rawAnswer {
	g.inflight.Add()
	defer g.inflight.Done()
	ctx, o := g.observeRaw(ctx, f, r)
	res, toolErr, err := g.rawStages(ctx, f, r)
	return g.answerRaw(ctx, f, r, &o, res, toolErr, err)
}

// rawObserved is what observe began for a raw call (observeRaw), for
// answerRaw to end.
type rawObserved struct {
	start time.Time
	x     *exchange
	span  trace.Span
}

// observeRaw begins observe for r: the server span and the exchange the
// stages fill in, when something records.
func (g *Gateway) observeRaw(ctx context.Context, f rawFront, r *rawRequest) (context.Context, rawObserved) {
	g.rawServed.Add(1)
	o := rawObserved{start: time.Now(), span: trace.SpanFromContext(ctx)}
	if g.obs.on {
		o.x = &exchange{snap: r.c.snap, routes: r.c.routes}
		ctx = context.WithValue(ctx, exchangeKey{}, o.x)
		info := telemetry.SpanInfo{Method: r.m.name}
		if g.obs.tracing {
			info.Target, info.ProtocolVersion, info.Transport = r.c.name, r.version, f.transport()
			if r.ss != nil { // a stateless HTTP request has no session
				info.SessionID = r.ss.ID()
			}
		}
		ctx, o.span = g.obs.tel.StartServer(ctx, info)
	}
	return ctx, o
}

// answerRaw ends observe for r, which the stages answered with res (a
// tool error when toolErr) or err, and returns the response.
func (g *Gateway) answerRaw(ctx context.Context, f rawFront, r *rawRequest, o *rawObserved, res []byte, toolErr bool, err error) rawAnswer {
	if x := o.x; x != nil {
		g.endServer(ctx, r.m.name, x, o.span, o.start, err, toolErr)
		if g.obs.audit != nil {
			fa := callFacts{method: r.m.name, name: r.c.name, version: r.version, args: rawArguments(r), who: f.caller(), toolError: toolErr}
			if err == nil {
				fa.resultBytes = int64(len(res))
			}
			g.writeAudit(ctx, r.ss, x, o.start, fa, err)
		}
	}
	if ce := g.log.Check(zap.DebugLevel, "call served"); ce != nil {
		ce.Write(zap.String(keyPath, "raw"), zap.String(keyKind, r.m.name), zap.String(keyName, r.c.name))
	}
	var a rawAnswer
	if err != nil {
		a.add(rawResponse(r.id(), nil, err))
		a.failed = true
		return a
	}
	a.add(rawResultHead(r.id()))
	if r.stateless {
		g.statelessResult(&a, res)
	} else {
		a.add(res)
	}
	a.add(rawResultTail)
	return a
}

// rawStages runs the stages after observe for r; it returns the result to
// send (the upstream's bytes, rewritten), whether it is a tool error, or
// the error to answer. A panic becomes an internal error, as the SDK
// path's Recover makes it.
func (g *Gateway) rawStages(ctx context.Context, f rawFront, r *rawRequest) (res []byte, toolErr bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			g.log.Error("raw call panicked", zap.String(keyName, r.c.name), zap.Any("panic", p))
			res, toolErr, err = nil, false, errInternal
		}
	}()
	c := &r.c
	c.x = g.exchange(ctx)
	g.authenticate(c, f.caller())
	if !g.resolve(ctx, c) || !g.permit(ctx, c) {
		return nil, false, r.unknown()
	}
	if ref := g.rateLimit(ctx, c); ref != nil {
		return r.limited(ref)
	}
	defer c.held.Release()
	from := downstream{ss: r.ss, caps: r.caps, version: r.version}
	if err := g.upstreamSession(ctx, c, from); err != nil {
		if ce := g.consentRequired(err, c.route.up, c.principal.Name()); ce != nil {
			return rawConsentAnswer(r.m.name, from, ce, g.rawConsentState(f, r.m.name, c, from)) // oauthconsent.go
		}
		return nil, false, upstreamError(err)
	}
	if c.route.original == signInMarker {
		b, err := json.Marshal(signedInResult(c.route.up.Name()))
		return b, false, err
	}
	h := g.hooks(ctx, c, sessionIDOf(r.ss))
	if h != nil { // plugin pre-hooks
		if res, done, err := g.rawPreHooks(ctx, h, r); done {
			// A plugin's own answer may be a tool error, as the upstream's.
			return res, err == nil && r.m.kind == policy.Tool && resultIsError(res), err
		}
	}
	res, toolErr, err = g.forwardRaw(ctx, r)
	if ce := g.consentRequired(err, c.route.up, c.principal.Name()); ce != nil {
		res, toolErr, err = rawConsentAnswer(r.m.name, from, ce, g.rawConsentState(f, r.m.name, c, from)) // a step-up (oauthconsent.go)
	}
	if h != nil && err == nil { // plugin post-hooks
		return rawPostHooks(ctx, h, r.m.kind, res, toolErr)
	}
	return res, toolErr, err
}

// unknown is the slow path's answer for r's name when it does not exist or
// the principal may not use it (notfound.go), word for word.
func (r *rawRequest) unknown() error {
	switch r.m.kind {
	case policy.Tool:
		return unknownTool(r.c.name)
	case policy.Prompt:
		return unknownPrompt(r.c.name)
	}
	return resourceNotFoundIn(r.c.name, !mcpx.Stateless(r.version))
}

// rawArguments returns r's arguments for the audit log: the bytes as the
// client sent them (the audit writer redacts and canonicalises them), or
// nil as on the slow path: when there are none, or for a prompt, empty.
func rawArguments(r *rawRequest) any {
	args := r.env.Arguments.In(r.msg)
	if r.argsReplaced {
		args = r.clientArgs
	}
	if args == nil || r.m.kind == policy.Prompt && emptyObject(args) {
		return nil
	}
	return json.RawMessage(args)
}

// emptyObject reports whether obj, a JSON object, has no members.
func emptyObject(obj []byte) bool {
	for _, c := range obj[1 : len(obj)-1] {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return false
		}
	}
	return true
}

// rawResultHead is a response with id up to its result; rawResultTail
// closes it.
func rawResultHead(id []byte) []byte {
	out := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":`)+len(id))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	return append(out, `,"result":`...)
}

var rawResultTail = []byte("}")

// rawResponse encodes the response to the request with id: result, or
// err encoded as the SDK encodes a handler's error (a *jsonrpc.Error with
// its code, message and data; any other error as an internal error).
func rawResponse(id, result []byte, err error) []byte {
	if err == nil {
		out := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":}`)+len(id)+len(result)+1) // +1: a front's newline
		out = append(out, `{"jsonrpc":"2.0","id":`...)
		out = append(out, id...)
		out = append(out, `,"result":`...)
		out = append(out, result...)
		return append(out, '}')
	}
	rpcErr, ok := mcpx.AsRPCError(err)
	if !ok {
		rpcErr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	body, merr := json.Marshal(rpcErr)
	if merr != nil {
		body, _ = json.Marshal(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("encoding an error: %v", merr)})
	}
	out := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"error":}`)+len(id)+len(body)+1)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"error":`...)
	out = append(out, body...)
	return append(out, '}')
}
