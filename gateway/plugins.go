package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/audit"
	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/plugins"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
)

// The plugin stages of the call pipeline (docs/architecture.md, Plugins):
// after the upstream session, the pre hooks of the plugins that cover the
// call (plugin pre-hooks) may change its arguments, block it or answer it
// themselves; after rewrite, the post hooks (plugin post-hooks) may change
// or block its result. Both paths run them: serveCall on typed requests
// (encoded to the raw JSON hooks see), rawStages on the message's bytes. A
// call no plugin covers costs one nil check, or one walk over the plugins'
// compiled matches when some are configured.

// newPluginHost returns the gateway's plugin host; Start applies the
// config's plugins, Reload the new ones, Close stops them.
func (g *Gateway) newPluginHost() *plugins.Host {
	o := &plugins.Options{
		Logger: g.log, Executable: g.opts.GuardPath, GuardPath: g.opts.GuardPath,
		OnListChange: g.pluginListsChanged,
	}
	if t := g.opts.Telemetry; t != nil {
		if t.Tracing() {
			o.Tracer = t.Tracer()
		}
		o.Meter = t.Meter()
	}
	return plugins.New(o)
}

// applyPlugins makes cfg's plugins the ones in force.
func (g *Gateway) applyPlugins(ctx context.Context, cfg *config.Config) {
	if len(cfg.Plugins) == 0 && g.plugins.Chain() == nil {
		return
	}
	g.plugins.Apply(ctx, cfg.Plugins, cfg.Gateway.Limits.MaxMessageBytes)
}

// pluginListsChanged drops the views list_post answers were cached in and
// tells clients their lists changed.
func (g *Gateway) pluginListsChanged() {
	g.views.Store(nil)
	g.notifyListsChanged()
}

// hookCall is a call some plugin covers: the chain it runs and what the
// call names.
type hookCall struct {
	chain *plugins.Chain
	t     plugins.Target
	x     *exchange
}

// hooks returns the hook call of c, nil when no plugin covers it.
func (g *Gateway) hooks(ctx context.Context, c *call, sessionID string) *hookCall {
	ch := g.plugins.Chain()
	if ch == nil {
		return nil
	}
	t := plugins.Target{
		Kind: c.kind, Server: c.route.up.Name(), Name: c.name, Upstream: c.route.original,
		Principal: c.principal, SessionID: sessionID,
	}
	if !ch.Covers(&t) {
		return nil
	}
	h := &hookCall{chain: ch, x: c.x, t: t}
	if g.obs.tracing {
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, carrier)
		h.t.Traceparent = carrier["traceparent"]
	}
	return h
}

// record notes the plugins' decisions in the call's audit record.
func (h *hookCall) record(out plugins.Outcome) {
	if h.x != nil && len(out.Decisions) > 0 {
		h.x.plugins = append(h.x.plugins, out.Decisions...)
	}
}

// pre runs the pre hooks on payload.
func (h *hookCall) pre(ctx context.Context, payload []byte) (plugins.Outcome, error) {
	out, err := h.chain.Pre(ctx, &h.t, payload)
	h.record(out)
	return out, pluginError(err, true)
}

// post runs the post hooks on payload.
func (h *hookCall) post(ctx context.Context, payload []byte) (plugins.Outcome, error) {
	out, err := h.chain.Post(ctx, &h.t, payload)
	h.record(out)
	return out, pluginError(err, false)
}

// pluginError is the client's error for a call a plugin blocked (invalid
// params before the call, the plugin's reason in the message) or that a
// fail-closed plugin could not decide on (internal error).
func pluginError(err error, pre bool) error {
	if err == nil {
		return nil
	}
	var be *plugins.BlockedError
	if errors.As(err, &be) && !be.Unavailable && pre {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: be.Error()}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}

// The SDK path's stages: the typed request and result go to the hooks as
// JSON and come back decoded.

// pluginPre runs the pre hooks of h on req: it returns the request to
// forward, or the result to answer with when a plugin answered
// (done).
func pluginPre[Q callerRequest, R mcp.Result](ctx context.Context, h *hookCall, req Q) (Q, R, bool, error) {
	var zero R
	payload, err := requestPayload(req)
	if err != nil {
		return req, zero, true, err
	}
	out, err := h.pre(ctx, payload)
	switch {
	case err != nil:
		return req, zero, true, err
	case out.Respond:
		res, err := decodeResult[R](out.Payload)
		return req, res, true, err
	case out.Changed:
		req, err = withPayload(req, out.Payload)
		return req, zero, err != nil, err
	}
	return req, zero, false, nil
}

// pluginPost runs the post hooks of h on res, the answer forward gave.
func pluginPost[R mcp.Result](ctx context.Context, h *hookCall, res R, err error) (R, error) {
	if err != nil {
		return res, err
	}
	payload, err := json.Marshal(res)
	if err != nil {
		return res, fmt.Errorf("encoding the result for plugins: %w", err)
	}
	out, err := h.post(ctx, payload)
	if err != nil || !out.Changed {
		return res, err
	}
	return decodeResult[R](out.Payload)
}

// requestPayload is what a pre hook sees of req: a call's or prompt's
// arguments (an object, {} when absent), a read's params.
func requestPayload(req any) ([]byte, error) {
	switch req := req.(type) {
	case *mcp.CallToolRequest:
		if len(req.Params.Arguments) == 0 || string(req.Params.Arguments) == "null" {
			return []byte("{}"), nil
		}
		return req.Params.Arguments, nil
	case *mcp.GetPromptRequest:
		if req.Params.Arguments == nil {
			return []byte("{}"), nil
		}
		return json.Marshal(req.Params.Arguments)
	case *mcp.ReadResourceRequest:
		return json.Marshal(map[string]string{"uri": req.Params.URI})
	}
	return nil, fmt.Errorf("plugins: no payload for %T", req)
}

// withPayload returns a copy of req with the arguments a pre hook
// returned. A read's params cannot be changed.
func withPayload[Q callerRequest](req Q, payload []byte) (Q, error) {
	if !isObject(payload) {
		return req, errNotObject
	}
	switch r := any(req).(type) {
	case *mcp.CallToolRequest:
		c, p := *r, *r.Params
		p.Arguments = json.RawMessage(payload)
		c.Params = &p
		return any(&c).(Q), nil
	case *mcp.GetPromptRequest:
		c, p := *r, *r.Params
		if err := json.Unmarshal(payload, &p.Arguments); err != nil {
			return req, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "a plugin's prompt arguments are not an object of strings"}
		}
		c.Params = &p
		return any(&c).(Q), nil
	}
	return req, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "a plugin changed the params of a read, which cannot be changed"}
}

// decodeResult decodes a result a plugin returned.
func decodeResult[R mcp.Result](payload []byte) (R, error) {
	var zero R
	var res any
	switch any(zero).(type) {
	case *mcp.CallToolResult:
		res = &mcp.CallToolResult{}
	case *mcp.GetPromptResult:
		res = &mcp.GetPromptResult{}
	case *mcp.ReadResourceResult:
		res = &mcp.ReadResourceResult{}
	default:
		return zero, fmt.Errorf("plugins: no result type %T", zero)
	}
	if err := json.Unmarshal(payload, res); err != nil {
		return zero, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "a plugin returned a result that does not decode: " + err.Error()}
	}
	return res.(R), nil
}

// The raw path's stages: the hooks see the message's bytes.

// rawPreHooks runs the pre hooks of h on r: it changes r's message when a
// plugin changed the arguments, and returns the result to answer with when
// a plugin answered (done).
func (g *Gateway) rawPreHooks(ctx context.Context, h *hookCall, r *rawRequest) (res []byte, done bool, err error) {
	var payload []byte
	if r.m.uri {
		payload, _ = json.Marshal(map[string]string{"uri": r.c.name})
	} else if payload = r.env.Arguments.In(r.msg); payload == nil {
		payload = []byte("{}")
	}
	out, err := h.pre(ctx, payload)
	switch {
	case err != nil:
		return nil, true, err
	case out.Respond:
		return out.Payload, true, nil
	case !out.Changed:
		return nil, false, nil
	case r.m.uri:
		return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "a plugin changed the params of a read, which cannot be changed"}
	}
	return nil, false, r.setArguments(out.Payload)
}

// setArguments replaces r's arguments with args (a JSON object).
func (r *rawRequest) setArguments(args []byte) error {
	// JSON whitespace around the object is the plugin's formatting, not
	// part of the value: the envelope's span of the arguments excludes it.
	args = bytes.Trim(args, jsonSpace)
	if !isObject(args) {
		return errNotObject
	}
	a := r.env.Arguments
	var msg []byte
	if a.Present() {
		msg = make([]byte, 0, len(r.msg)-(a.End-a.Start)+len(args))
		msg = append(append(append(msg, r.msg[:a.Start]...), args...), r.msg[a.End:]...)
	} else {
		// No arguments: add them after the name.
		n := r.env.Name
		msg = make([]byte, 0, len(r.msg)+len(args)+len(`,"arguments":`))
		msg = append(append(append(append(msg, r.msg[:n.End]...), `,"arguments":`...), args...), r.msg[n.End:]...)
	}
	env, err := envelope.Scan(msg)
	if err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "a plugin's arguments do not fit the request: " + err.Error()}
	}
	if !r.argsReplaced { // the client's, for the audit (r.msg is never written to)
		r.clientArgs, r.argsReplaced = r.env.Arguments.In(r.msg), true
	}
	r.msg, r.env = msg, env
	return nil
}

// rawPostHooks runs the post hooks of h on res, a raw result; toolErr is
// recomputed for a changed tool result.
func rawPostHooks(ctx context.Context, h *hookCall, kind policy.Kind, res []byte, toolErr bool) ([]byte, bool, error) {
	out, err := h.post(ctx, res)
	if err != nil {
		return nil, false, err
	}
	if !out.Changed {
		return res, toolErr, nil
	}
	return out.Payload, kind == policy.Tool && resultIsError(out.Payload), nil
}

// sessionID returns the downstream session id of req, "" without one.
func sessionID(req callerRequest) string {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	return sessionIDOf(ss)
}

func sessionIDOf(ss *mcp.ServerSession) string {
	if ss == nil {
		return ""
	}
	return ss.ID()
}

// auditToPlugins hands rec to the plugins' audit_event hooks, when some
// plugin implements one (asynchronously: it never blocks the call).
func (g *Gateway) auditToPlugins(rec *audit.Record) {
	ch := g.plugins.Chain()
	if !ch.Audits() {
		return
	}
	if b, err := json.Marshal(rec); err == nil {
		ch.Audit(b)
	}
}

// errNotObject answers a call whose arguments a plugin changed into
// something other than a JSON object.
var errNotObject = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "a plugin's arguments are not a JSON object"}

// isObject reports whether b, valid JSON, is an object.
func isObject(b []byte) bool {
	b = bytes.TrimLeft(b, jsonSpace)
	return len(b) > 0 && b[0] == '{'
}

// jsonSpace is the whitespace JSON allows between tokens.
const jsonSpace = " \t\r\n"
