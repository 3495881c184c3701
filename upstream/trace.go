package upstream

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracePropagator writes the W3C trace context and baggage of a call into
// the HTTP request to an http or sse upstream (traceparent, tracestate,
// baggage headers), beside the params._meta the gateway fills in.
var tracePropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// withTraceContext returns d carrying the OpenTelemetry span context and
// baggage of ctx, and nothing else of it: these are OpenTelemetry's own
// values, not the go-sdk's, so the upstream call sees no downstream state.
// Without either, d is returned as it is.
func withTraceContext(d, ctx context.Context) context.Context {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		d = trace.ContextWithSpanContext(d, sc)
	}
	if bag := baggage.FromContext(ctx); bag.Len() > 0 {
		d = baggage.ContextWithBaggage(d, bag)
	}
	return d
}

// hasTraceContext reports whether ctx holds something tracePropagator
// would write.
func hasTraceContext(ctx context.Context) bool {
	return trace.SpanContextFromContext(ctx).IsValid() || baggage.FromContext(ctx).Len() > 0
}

// injectTraceHeaders writes the trace context of ctx into h.
func injectTraceHeaders(ctx context.Context, h http.Header) {
	tracePropagator.Inject(ctx, propagation.HeaderCarrier(h))
}
