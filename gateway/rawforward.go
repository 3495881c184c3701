package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/internal/telemetry"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"
)

// forwardRaw is the forward stage of the raw path: the client's params go
// to the route's upstream as bytes, with the upstream's own name or URI
// and, in _meta, the gateway's progress token, the trace context and, for
// a 2026-07-28 upstream, the per-request keys of its protocol, as
// sendTool, sendPrompt and sendRead send them on the slow path. For a
// client before 2026-07-28, a 2026-07-28 upstream's input_required answers
// are fulfilled as fulfilRounds does (mrtr.go): the client is asked with
// real requests, and the upstream retried with the answers. The final
// answer goes through rewriteRaw.
func (g *Gateway) forwardRaw(ctx context.Context, r *rawRequest) ([]byte, bool, error) {
	rt := r.c.route
	var progress any
	if tok := r.env.ProgressToken.In(r.msg); tok != nil {
		// Decoded as the slow path's typed _meta holds it: a string or a
		// float64, which the relayed progress carries back.
		if err := json.Unmarshal(tok, &progress); err != nil {
			return nil, false, upstreamError(fmt.Errorf("progress token: %w", err))
		}
	}
	// A legacy client's call to a 2026-07-28 upstream is fulfilled round
	// by round; a 2026-07-28 client's goes once, its input_required answer
	// passing to the client (rawTake sends the other pairs to the bridge).
	fulfilling := !r.stateless && mcpx.Stateless(upstreamVersion(rt.up))
	var input []byte // the answers and requestState of a retry
	for round := 1; ; round++ {
		if fulfilling {
			g.exchange(ctx).setRounds(round)
		}
		res, err := g.roundRaw(ctx, r, rt, progress, input)
		if err != nil || !fulfilling {
			return g.rewriteRaw(r, rt, res, err)
		}
		irs, state, more, err := rawAsks(r.m.kind, res)
		switch {
		case err != nil:
			return nil, false, err
		case !more:
			return g.rewriteRaw(r, rt, res, nil)
		case round >= maxMRTRRounds:
			return nil, false, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
				"manifold: upstream %q still asks for input after %d rounds", rt.up.Name(), round)}
		}
		answers, err := fulfil(ctx, r.ss, r.sink, r.caps, irs)
		if err != nil {
			return nil, false, err
		}
		if input, err = inputMembers(answers, state); err != nil {
			return nil, false, upstreamError(err)
		}
	}
}

// roundRaw is one upstream request of a raw call, inside its client span:
// a flight (relay.go) from before the request leaves until its answer is
// in, so that the upstream's progress, logs and server→client requests
// reach the client of r's session. input, when not nil, is members added
// to the params (a retry's answers).
func (g *Gateway) roundRaw(ctx context.Context, r *rawRequest, rt route, progress any, input []byte) ([]byte, error) {
	ctx, uc, params, err := g.beginRound(ctx, r, rt, progress, input)
	if err != nil {
		return nil, err
	}
	res, err := rt.up.CallRaw(ctx, r.m.name, params)
	g.endRound(ctx, r, &uc, res, err)
	return res, err
}

// beginRound begins an upstream request of roundRaw: the flight, the
// client span and the params to send. On an error the round has ended.
func (g *Gateway) beginRound(ctx context.Context, r *rawRequest, rt route, progress any, input []byte) (context.Context, upstreamCall, []byte, error) {
	o := &origin{up: rt.up, ctx: ctx, ss: r.ss, sink: r.sink, caps: r.caps, version: r.version}
	// Logs asked for by the session (logging/setLevel) or by a 2026-07-28
	// request itself reach the client before the answer.
	o.settle = g.flights.sessionLogs(o.ss) || r.env.LogLevel.Present()
	g.flights.track(o, progress)
	uc := upstreamCall{origin: o}
	if g.obs.on {
		uc.method, uc.server, uc.start = r.m.name, rt.up.Name(), time.Now()
		ctx, uc.span = g.obs.tel.StartClient(ctx, telemetry.SpanInfo{
			Method: r.m.name, Target: rt.original, Server: uc.server, Transport: upstreamTransport(rt.up),
		})
		g.obs.metrics.Inflight(ctx, uc.server, 1)
	}
	params, err := rawParams(ctx, r, rt, o.token, g.logLevelMember(rt.up, r), input)
	if err != nil {
		g.endCall(ctx, &uc, err, false)
		return ctx, uc, nil, err
	}
	return ctx, uc, params, nil
}

// endRound ends the upstream request uc of r, which res or err answered.
// Whether a tool result is an error is read only for the span and
// metrics that record it.
func (g *Gateway) endRound(ctx context.Context, r *rawRequest, uc *upstreamCall, res []byte, err error) {
	g.endCall(ctx, uc, err, err == nil && uc.span != nil && r.m.kind == policy.Tool && resultIsError(res))
}

// rawParams returns the params of r as rt's upstream gets them: the
// client's, byte for byte, but for the name or URI (the upstream's own),
// the progress token (token, when the client sent one), a 2026-07-28
// client's per-request members (dropped: they describe the client's hop;
// CallRaw adds the upstream connection's own), and added to _meta: add,
// the log level for a 2026-07-28 upstream (logLevelMember), and the trace
// context of ctx (the client's own trace context never gets here: any
// _meta key but those takes the slow path). input, when not nil, is
// members added last to the params. One rewrite, one allocation.
func rawParams(ctx context.Context, r *rawRequest, rt route, token string, add, input []byte) ([]byte, error) {
	msg, env := r.msg, &r.env
	if trace.SpanContextFromContext(ctx).IsValid() || baggage.FromContext(ctx).Len() > 0 {
		var err error
		if add, err = appendTraceMeta(slices.Clip(add), ctx); err != nil {
			return nil, err
		}
	}
	ed := envelope.Edit{MetaAdd: add}
	if r.stateless {
		ed.MetaDrop = hopMetaPrefix
	}
	if r.m.uri {
		ed.URI, ed.SetURI = rt.original, true
	} else {
		ed.Name, ed.SetName = rt.original, true
	}
	if token != "" {
		ed.ProgressToken = envelope.AppendString(nil, token)
	}
	params, err := env.AppendParams(make([]byte, 0, env.Params.End-env.Params.Start+len(rt.original)+len(add)+len(input)+48), msg, ed)
	if err != nil || input == nil {
		return params, err
	}
	params = bytes.TrimRight(params[:len(params)-1], " \t\r\n") // the closing brace
	if params[len(params)-1] != '{' {
		params = append(params, ',')
	}
	params = append(params, input...)
	return append(params, '}'), nil
}

// appendTraceMeta appends to dst the trace context of ctx (traceparent,
// tracestate, baggage: telemetry.Inject) as _meta members, comma-separated.
func appendTraceMeta(dst []byte, ctx context.Context) ([]byte, error) {
	meta := telemetry.Inject(ctx, nil)
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, ok := meta[k].(string)
		if !ok {
			return nil, fmt.Errorf("trace context %q is a %T, not a string", k, meta[k])
		}
		if len(dst) > 0 {
			dst = append(dst, ',')
		}
		dst = envelope.AppendString(dst, k)
		dst = append(dst, ':')
		dst = envelope.AppendString(dst, v)
	}
	return dst, nil
}

// inputMembers encodes a retry's answers and requestState as params
// members.
func inputMembers(answers mcp.InputResponseMap, state string) ([]byte, error) {
	a, err := json.Marshal(answers)
	if err != nil {
		return nil, fmt.Errorf("encoding the client's answers: %w", err)
	}
	out := append([]byte(`"inputResponses":`), a...)
	if state != "" {
		out = append(out, `,"requestState":`...)
		out = envelope.AppendString(out, state)
	}
	return out, nil
}
