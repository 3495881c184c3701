package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Keys of the W3C trace context in MCP params._meta, as the OpenTelemetry MCP conventions
// propagate it.
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
	MetaBaggage     = "baggage"
)

// MetaCarrier is a propagation.TextMapCarrier over an MCP params._meta object: Get reads
// string values only, Set writes strings. Set on a nil MetaCarrier panics; see Inject.
type MetaCarrier map[string]any

var _ propagation.TextMapCarrier = MetaCarrier(nil)

// Get returns the string value of key, or "" when it is absent or not a string.
func (c MetaCarrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

// Set stores value under key.
func (c MetaCarrier) Set(key, value string) { c[key] = value }

// Keys lists the keys of the carrier.
func (c MetaCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Extract returns ctx with the trace context (traceparent, tracestate) and baggage found in
// meta, an MCP request's params._meta, as the remote parent. What meta lacks or holds in an
// invalid form leaves ctx as it is, so call ExtractHTTP first and Extract second: _meta,
// which names the exact request, wins over the HTTP headers.
func Extract(ctx context.Context, meta map[string]any) context.Context {
	if len(meta) == 0 {
		return ctx
	}
	c := MetaCarrier(meta)
	ctx = propagation.TraceContext{}.Extract(ctx, c)
	return propagation.Baggage{}.Extract(ctx, c)
}

// ExtractHTTP returns ctx with the trace context and baggage of the W3C headers in h
// (traceparent, tracestate, baggage).
func ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	c := propagation.HeaderCarrier(h)
	ctx = propagation.TraceContext{}.Extract(ctx, c)
	return propagation.Baggage{}.Extract(ctx, c)
}

// Inject writes the trace context of the span in ctx, and the baggage of ctx, into meta, an
// upstream request's params._meta, and returns meta: a new map when meta is nil and there is
// something to write, else meta itself, modified in place (copy a map that is not yours
// first). Without a valid span context, traceparent and tracestate already in meta are left
// as they are; with one, they are replaced.
func Inject(ctx context.Context, meta map[string]any) map[string]any {
	sc := trace.SpanContextFromContext(ctx)
	bag := baggage.FromContext(ctx)
	if !sc.IsValid() && bag.Len() == 0 {
		return meta
	}
	if meta == nil {
		meta = make(map[string]any, 3)
	}
	c := MetaCarrier(meta)
	if sc.IsValid() {
		delete(meta, MetaTracestate) // the injector only writes a non-empty one
		propagation.TraceContext{}.Inject(ctx, c)
	}
	propagation.Baggage{}.Inject(ctx, c)
	return meta
}
