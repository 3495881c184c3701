package gateway

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/manifold-mcp/manifold/internal/audit"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/internal/telemetry"
	"github.com/manifold-mcp/manifold/plugins"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"
)

// recorder is the gateway's audit log and telemetry (Options.Audit and
// Options.Telemetry). It is fixed for the gateway's life: a reload that
// changes the audit or telemetry section applies at restart only.
type recorder struct {
	audit   *audit.Log           // nil: no audit log
	tel     *telemetry.Telemetry // nil: no traces, no metrics
	metrics *telemetry.Metrics   // nil: no metrics
	tracing bool
	// on: something records each request. When false the request path
	// only passes a client's trace context on (see clientTraceContext).
	on bool
}

func newRecorder(a *audit.Log, t *telemetry.Telemetry) recorder {
	o := recorder{audit: a, tel: t, metrics: t.Metrics(), tracing: t.Tracing()}
	o.on = o.audit != nil || o.metrics != nil || o.tracing
	return o
}

// ruleNonCanonical is the audit rule of a URI refused for its spelling
// (see canonicalURI) rather than by a policy rule.
const ruleNonCanonical = "non-canonical URI"

// exchange is what the gateway learns about one downstream request while
// handling it, for its span, metrics and audit record. The observe
// middleware creates it (only while something records) and hands it down in
// the context; the stages of the call pipeline (pipeline.go) fill it in
// through nil-safe methods. One goroutine handles a request, so it needs no
// lock.
type exchange struct {
	// snap and routes are the config snapshot and routing generation the
	// request is decided and recorded under, pinned when it arrives: the
	// call pipeline reads them (pin), so that a reload during the request
	// cannot record it under another policy than the one that decided it.
	snap   *snapshot
	routes *routes
	// server and upstreamName: the upstream the name routes to, and the
	// name (or URI) there; empty when it routes nowhere.
	server, upstreamName string
	// decided: the policy was consulted; denied and rule are its answer.
	decided bool
	denied  bool
	rule    string
	// rounds is the MRTR round of the request, when more than the first;
	// callStart, when set, is when its call began (a bridged call's later
	// round); interim: the request answered input_required for a bridged
	// call, whose one record a later round writes (see mrtr.go).
	rounds    int
	callStart time.Time
	interim   bool
	// plugins are what the hook plugins decided on the call (plugins.go).
	plugins []plugins.Decision
	// rateLimit names the rate limit that refused the call, if one did.
	rateLimit string
}

type exchangeKey struct{}

// exchange returns the exchange of the request being handled in ctx, or nil
// when nothing records.
func (g *Gateway) exchange(ctx context.Context) *exchange {
	if !g.obs.on {
		return nil
	}
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

// routed notes the upstream the request's name routes to.
func (x *exchange) routed(rt route) {
	if x != nil {
		x.server, x.upstreamName = rt.up.Name(), rt.original
	}
}

// decide notes the policy's decision d. A later denial (such as of a URI's
// cleaned form) replaces an allow.
func (x *exchange) decide(p *policy.Policy, d policy.Decision) {
	if x != nil && !x.denied {
		x.decided, x.denied, x.rule = true, !d.Allowed, p.RuleName(d)
	}
}

// deny notes a denial by rule ("" for the default or no rule).
func (x *exchange) deny(rule string) {
	if x != nil {
		x.decided, x.denied, x.rule = true, true, rule
	}
}

// observe is the receiving middleware that records every downstream
// request: a server span, the mcp.server.operation.duration metric and,
// for tools/call, prompts/get and resources/read, one audit record. It is
// the first stage of the call pipeline (pipeline.go): it sits inside
// Recover and outside interceptor, and pins the config snapshot and routing
// generation in the request's exchange, which the later stages fill in.
// With nothing recording it only passes a client's trace context on (and
// the pipeline pins the snapshot itself).
func (g *Gateway) observe(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ctx = clientTraceContext(ctx, req, g.obs.on)
		if !g.obs.on || !isCall(method) {
			return next(ctx, method, req)
		}
		return g.observed(ctx, next, method, req)
	}
}

// observed handles one request with its exchange, span and records.
func (g *Gateway) observed(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request) (res mcp.Result, err error) {
	start := time.Now()
	x := &exchange{snap: g.current(), routes: g.routes.Load()}
	ctx = context.WithValue(ctx, exchangeKey{}, x)
	ss, _ := req.GetSession().(*mcp.ServerSession)
	info := telemetry.SpanInfo{Method: method}
	if g.obs.tracing {
		info.Target = target(req)
		info.ProtocolVersion = protocolVersion(req, ss)
		info.Transport = telemetry.TransportTCP
		if ctx.Value(localKey{}) != nil {
			info.Transport = telemetry.TransportPipe
		}
		if ss != nil {
			info.SessionID = ss.ID()
		}
	}
	ctx, span := g.obs.tel.StartServer(ctx, info)
	finished := false
	defer func() {
		if !finished { // a panic, which Recover answers as an internal error
			g.finish(ctx, method, req, ss, x, span, start, nil, errInternal)
		}
	}()
	res, err = next(ctx, method, req)
	finished = true
	g.finish(ctx, method, req, ss, x, span, start, res, err)
	return res, err
}

// errInternal is what a client gets for a handler that panicked.
var errInternal = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}

// finish ends the request's span and records its metric and audit record.
func (g *Gateway) finish(ctx context.Context, method string, req mcp.Request, ss *mcp.ServerSession, x *exchange,
	span trace.Span, start time.Time, res mcp.Result, err error) {
	g.endServer(ctx, method, x, span, start, err, isToolError(res))
	if method == "initialize" && err == nil {
		g.sessionOpened(ss)
	}
	if g.obs.audit != nil && audited(method) && !x.interim {
		f := callFacts{method: method, name: target(req), version: protocolVersion(req, ss),
			args: arguments(req), who: callerOf(ctx, req), toolError: isToolError(res)}
		if err == nil {
			f.resultBytes = jsonSize(res)
		}
		g.writeAudit(ctx, ss, x, start, f, err)
	}
}

// endServer ends the server span of a request of method and records its
// metric: an error, or a tools/call result with isError (toolError).
func (g *Gateway) endServer(ctx context.Context, method string, x *exchange, span trace.Span, start time.Time, err error, toolError bool) {
	errType := telemetry.ErrorType(err)
	if toolError {
		errType = telemetry.ErrorTypeToolError
	}
	if x.server != "" && span.IsRecording() {
		span.SetAttributes(telemetry.ServerKey.String(x.server))
	}
	telemetry.EndSpan(span, errType)
	g.obs.metrics.ServerOp(ctx, method, x.server, errType, time.Since(start))
}

// callFacts is what the audit record of a call reads of its request and
// answer, from either path: the SDK's typed request, or the raw path's
// envelope (whose arguments are the bytes as received).
type callFacts struct {
	method, name, version string
	args                  any
	who                   caller
	toolError             bool
	resultBytes           int64 // the result's encoded size
}

// writeAudit writes the audit record of a finished call.
func (g *Gateway) writeAudit(ctx context.Context, ss *mcp.ServerSession, x *exchange, start time.Time, f callFacts, err error) {
	d := time.Since(start)
	if !x.callStart.IsZero() {
		start, d = x.callStart, time.Since(x.callStart)
	}
	rec := g.auditRecord(ctx, ss, x, start, d, f, err)
	g.obs.audit.Write(rec)
	g.auditToPlugins(rec)
}

// auditRecord builds the audit record of a finished call.
func (g *Gateway) auditRecord(ctx context.Context, ss *mcp.ServerSession, x *exchange,
	start time.Time, d time.Duration, f callFacts, err error) *audit.Record {
	rec := &audit.Record{
		Time: start, Duration: d, Method: f.method, Name: f.name,
		Server: x.server, UpstreamName: x.upstreamName, Rounds: max(1, x.rounds),
		ProtocolVersion: f.version, Arguments: f.args,
	}
	if len(x.plugins) > 0 {
		rec.Plugins = x.plugins
	}
	if ss != nil {
		rec.SessionID = ss.ID()
		if ip := ss.InitializeParams(); ip != nil && ip.ClientInfo != nil {
			rec.ClientName, rec.ClientVersion = ip.ClientInfo.Name, ip.ClientInfo.Version
		}
	}
	a := x.snap.access
	pr, known := f.who.principal(a)
	rec.Principal, rec.Groups = pr.Name(), pr.Groups()
	switch {
	case x.decided:
		rec.Rule = x.rule
		rec.Decision = audit.DecisionAllow
		if x.denied {
			rec.Decision = audit.DecisionDeny
		}
	case !known:
		rec.Decision = audit.DecisionDeny
	default:
		// A name that routes nowhere: the policy's answer for it, which
		// the client cannot tell from the unknown name's error anyway.
		dec := a.policy.Decide(pr, kindOf(f.method), rec.Name, "")
		rec.Rule = a.policy.RuleName(dec)
		rec.Decision = audit.DecisionAllow
		if !dec.Allowed {
			rec.Decision = audit.DecisionDeny
		}
	}
	switch {
	case err != nil:
		rec.Outcome = audit.OutcomeError
		if rpcErr, ok := mcpx.AsRPCError(err); ok {
			rec.ErrorCode = rpcErr.Code
		}
	case f.toolError:
		rec.Outcome = audit.OutcomeToolError
		rec.ResultBytes = f.resultBytes
	default:
		rec.Outcome = audit.OutcomeOK
		rec.ResultBytes = f.resultBytes
	}
	rec.RateLimit = x.rateLimit
	rec.TraceID, rec.SpanID = telemetry.IDs(ctx)
	return rec
}

// sessionOpened counts a downstream session that completed initialize as
// open, and as closed with its duration when it ends. The goroutine that
// waits for the end lives exactly as long as the session.
func (g *Gateway) sessionOpened(ss *mcp.ServerSession) {
	m := g.obs.metrics
	if m == nil || ss == nil {
		return
	}
	start := time.Now()
	m.SessionOpened(context.Background())
	if !g.awaitSessionEnd(ss, func() { m.SessionClosed(context.Background(), time.Since(start)) }) {
		// The gateway does not run (yet, or any more): nothing can wait
		// for the end, so the session counts as closed now.
		m.SessionClosed(context.Background(), time.Since(start))
	}
}

// upstreamCall is one upstream call in progress, for its client span and
// metrics. The zero value (nothing recording) records nothing.
type upstreamCall struct {
	method, server string
	start          time.Time
	span           trace.Span
	// origin is the call's entry in the flights registry, which routes what
	// the upstream sends back for it (see relay.go).
	origin *origin
}

// beginCall starts the upstream side of a request routed to rt: the
// client span (a child of the request's span) and the in-flight count. It
// returns the context to call the upstream in and the params._meta to send:
// meta itself, or a copy carrying the trace context (of the client span, or
// the client's own when tracing is off), which an http or sse upstream also
// gets as W3C headers.
func (g *Gateway) beginCall(ctx context.Context, method string, rt route, req mcp.Request, meta mcp.Meta) (context.Context, mcp.Meta, upstreamCall) {
	var c upstreamCall
	c.origin, meta = g.flights.begin(ctx, rt.up, req, meta)
	if g.obs.on {
		c = upstreamCall{method: method, server: rt.up.Name(), start: time.Now(), origin: c.origin}
		ctx, c.span = g.obs.tel.StartClient(ctx, telemetry.SpanInfo{
			Method: method, Target: rt.original, Server: c.server, Transport: upstreamTransport(rt.up),
		})
		g.obs.metrics.Inflight(ctx, c.server, 1)
	}
	if trace.SpanContextFromContext(ctx).IsValid() || baggage.FromContext(ctx).Len() > 0 {
		out := make(mcp.Meta, len(meta)+3)
		maps.Copy(out, meta)
		meta = telemetry.Inject(ctx, out)
	}
	return ctx, meta, c
}

// endCall ends an upstream call begun by beginCall, with its error or, for
// a tools/call result with isError, toolError.
func (g *Gateway) endCall(ctx context.Context, c *upstreamCall, err error, toolError bool) {
	if c.origin != nil {
		g.flights.end(c.origin)
	}
	if c.span == nil {
		return
	}
	errType := telemetry.ErrorType(err)
	if toolError {
		errType = telemetry.ErrorTypeToolError
	}
	telemetry.EndSpan(c.span, errType)
	g.obs.metrics.Inflight(ctx, c.server, -1)
	g.obs.metrics.ClientOp(ctx, c.method, c.server, errType, time.Since(c.start))
}

// upstreamStates reports each upstream serving for the state and restart
// metrics; it runs at every scrape.
func (g *Gateway) upstreamStates() []telemetry.UpstreamState {
	ups := g.pool.serving()
	out := make([]telemetry.UpstreamState, len(ups))
	for i, up := range ups {
		s := up.Status()
		out[i] = telemetry.UpstreamState{Name: s.Name, State: string(s.State), Restarts: int64(s.Restarts)}
	}
	return out
}

// clientTraceContext returns ctx with the client's W3C trace context and
// baggage as the remote parent: from the HTTP headers, then from
// params._meta, which names the exact request and wins. With full false
// (nothing records) only a context sent in headers is taken, so that it
// reaches the upstreams; one in _meta passes on with the rest of _meta.
func clientTraceContext(ctx context.Context, req mcp.Request, full bool) context.Context {
	var h http.Header
	if extra := req.GetExtra(); extra != nil {
		h = extra.Header
	}
	_, tp := h["Traceparent"]
	_, bg := h["Baggage"]
	if !full && !tp && !bg {
		return ctx
	}
	if tp || bg {
		ctx = telemetry.ExtractHTTP(ctx, h)
	}
	if meta := requestMeta(req); len(meta) > 0 {
		ctx = telemetry.Extract(ctx, meta)
	}
	return ctx
}

// isCall reports whether method is a request (which gets a response), not
// a notification.
func isCall(method string) bool {
	return len(method) < len("notifications/") || method[:len("notifications/")] != "notifications/"
}

// audited reports whether the audit log records method.
func audited(method string) bool {
	return method == "tools/call" || method == "prompts/get" || method == "resources/read"
}

func kindOf(method string) policy.Kind {
	switch method {
	case "prompts/get":
		return policy.Prompt
	case "resources/read":
		return policy.Resource
	}
	return policy.Tool
}

// kindLabel is the manifold.kind of a policy denial metric.
func kindLabel(k policy.Kind) string {
	if k == policy.Template {
		return "template"
	}
	return k.String()
}

// target returns the tool or prompt name or the resource URI a request
// names, as the client sent it; "" for other requests.
func target(req mcp.Request) string {
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		if r.Params != nil {
			return r.Params.Name
		}
	case *mcp.GetPromptRequest:
		if r.Params != nil {
			return r.Params.Name
		}
	case *mcp.ReadResourceRequest:
		if r.Params != nil {
			return r.Params.URI
		}
	case *mcp.SubscribeRequest:
		if r.Params != nil {
			return r.Params.URI
		}
	case *mcp.UnsubscribeRequest:
		if r.Params != nil {
			return r.Params.URI
		}
	}
	return ""
}

// requestMeta returns the params._meta of the requests whose trace context
// is read from it (those that may reach an upstream, and lists); nil for
// others. A type switch, because the SDK's typed params may be nil
// pointers, on which GetMeta panics.
func requestMeta(req mcp.Request) map[string]any {
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		if r.Params != nil {
			return r.Params.Meta
		}
	case *mcp.GetPromptRequest:
		if r.Params != nil {
			return r.Params.Meta
		}
	case *mcp.ReadResourceRequest:
		if r.Params != nil {
			return r.Params.Meta
		}
	case *mcp.CompleteRequest:
		if r.Params != nil {
			return r.Params.Meta
		}
	case *mcp.ListToolsRequest:
		if r.Params != nil {
			return r.Params.Meta
		}
	case *mcp.ListPromptsRequest:
		if r.Params != nil {
			return r.Params.Meta
		}
	case *mcp.ListResourcesRequest:
		if r.Params != nil {
			return r.Params.Meta
		}
	case *mcp.ListResourceTemplatesRequest:
		if r.Params != nil {
			return r.Params.Meta
		}
	}
	return nil
}

// arguments returns the arguments of a tools/call (JSON as received) or
// prompts/get, for the audit log; nil when there are none.
func arguments(req mcp.Request) any {
	switch r := req.(type) {
	case *mcp.CallToolRequest:
		if r.Params != nil && len(r.Params.Arguments) > 0 {
			return r.Params.Arguments
		}
	case *mcp.GetPromptRequest:
		if r.Params != nil && len(r.Params.Arguments) > 0 {
			return r.Params.Arguments
		}
	}
	return nil
}

// isToolError reports whether res is a tools/call result with isError.
func isToolError(res mcp.Result) bool {
	r, ok := res.(*mcp.CallToolResult)
	return ok && r != nil && r.IsError
}

// Protocol versions for protocolVersion, from the SDK.
var (
	supportedVersions = mcp.SupportedProtocolVersions()
	// latestLegacy is what initialize negotiates for a version the SDK does
	// not support: the newest before mcpx.StatelessVersion.
	latestLegacy = func() string {
		for _, v := range supportedVersions {
			if !mcpx.Stateless(v) {
				return v
			}
		}
		return ""
	}()
)

// protocolVersion returns the MCP version of a request: the per-request
// version of 2026-07-28 (params._meta), else the MCP-Protocol-Version
// header of streamable HTTP, else the version negotiated at initialize
// (computed as the SDK does; the SDK does not expose it).
func protocolVersion(req mcp.Request, ss *mcp.ServerSession) string {
	if v, ok := requestMeta(req)[mcp.MetaKeyProtocolVersion].(string); ok && v != "" {
		return v
	}
	if extra := req.GetExtra(); extra != nil {
		if v := extra.Header["Mcp-Protocol-Version"]; len(v) > 0 && v[0] != "" {
			return v[0]
		}
	}
	if ir, ok := req.(*mcp.InitializeRequest); ok && ir.Params != nil {
		return negotiated(ir.Params.ProtocolVersion)
	}
	return sessionVersion(ss)
}

// sessionVersion is the version ss negotiated at initialize; "" before.
func sessionVersion(ss *mcp.ServerSession) string {
	if ss == nil {
		return ""
	}
	ip := ss.InitializeParams()
	if ip == nil {
		return ""
	}
	return negotiated(ip.ProtocolVersion)
}

// negotiated is the version initialize settles on for a client that asks
// for requested (computed as the SDK does; the SDK does not expose it).
func negotiated(requested string) string {
	if mcpx.Stateless(requested) {
		return requested // set from a 2026-07-28 request's _meta
	}
	if slices.Contains(supportedVersions, requested) {
		return requested
	}
	return latestLegacy
}

// upstreamTransport is the network.transport of calls to up.
func upstreamTransport(up *upstream.Upstream) string {
	if t := up.Config().Type; t == "http" || t == "sse" {
		return telemetry.TransportTCP
	}
	return telemetry.TransportPipe
}

// jsonSize returns the length of v in JSON, without keeping the encoding.
func jsonSize(v any) int64 {
	var n byteCounter
	enc := json.NewEncoder(&n)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return 0
	}
	return int64(n) - 1 // Encode's newline
}

type byteCounter int64

func (c *byteCounter) Write(p []byte) (int, error) {
	*c += byteCounter(len(p))
	return len(p), nil
}
