package telemetry

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"
)

func TestExtract(t *testing.T) {
	const other = "00-11111111111111111111111111111111-2222222222222222-01"
	tests := []struct {
		name      string
		header    http.Header
		meta      map[string]any
		wantTrace string // trace id of the remote parent; "" for none
		wantState string
		wantBag   string
	}{
		{name: "nothing"},
		{name: "meta", meta: map[string]any{MetaTraceparent: traceparent, MetaTracestate: "a=1", MetaBaggage: "user=alice"},
			wantTrace: incomingTrace, wantState: "a=1", wantBag: "user=alice"},
		{name: "headers", header: http.Header{"Traceparent": {traceparent}, "Baggage": {"k=v"}}, wantTrace: incomingTrace, wantBag: "k=v"},
		{name: "meta wins over headers", header: http.Header{"Traceparent": {other}}, meta: map[string]any{MetaTraceparent: traceparent},
			wantTrace: incomingTrace},
		{name: "invalid meta leaves the headers", header: http.Header{"Traceparent": {traceparent}}, meta: map[string]any{MetaTraceparent: "00-zz"},
			wantTrace: incomingTrace},
		{name: "a non-string value is ignored", meta: map[string]any{MetaTraceparent: 42, "progressToken": "p"}},
		{name: "all-zero trace id is invalid", meta: map[string]any{MetaTraceparent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ExtractHTTP(context.Background(), tt.header)
			ctx = Extract(ctx, tt.meta)
			sc := trace.SpanContextFromContext(ctx)
			gotTrace := ""
			if sc.IsValid() {
				gotTrace = sc.TraceID().String()
				if !sc.IsRemote() {
					t.Error("the extracted span context is not remote")
				}
			}
			got := []string{gotTrace, sc.TraceState().String(), baggage.FromContext(ctx).String()}
			if diff := cmp.Diff([]string{tt.wantTrace, tt.wantState, tt.wantBag}, got); diff != "" {
				t.Errorf("trace, state, baggage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInject(t *testing.T) {
	remote := Extract(context.Background(), map[string]any{MetaTraceparent: traceparent, MetaBaggage: "user=alice"})
	tests := []struct {
		name string
		ctx  context.Context
		meta map[string]any
		want map[string]any
	}{
		{name: "nothing to inject keeps nil", ctx: context.Background(), meta: nil, want: nil},
		{name: "nothing to inject keeps the client's values", ctx: context.Background(),
			meta: map[string]any{MetaTraceparent: "client"}, want: map[string]any{MetaTraceparent: "client"}},
		{name: "into nil", ctx: remote, meta: nil,
			want: map[string]any{MetaTraceparent: traceparent, MetaBaggage: "user=alice"}},
		{name: "replaces stale values, keeps the rest", ctx: remote,
			meta: map[string]any{MetaTraceparent: "stale", MetaTracestate: "stale=1", "progressToken": 1.0},
			want: map[string]any{MetaTraceparent: traceparent, MetaBaggage: "user=alice", "progressToken": 1.0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Inject(tt.ctx, tt.meta)); diff != "" {
				t.Errorf("Inject (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetaCarrier(t *testing.T) {
	c := MetaCarrier{"a": "x", "b": 1}
	c.Set("c", "y")
	if c.Get("a") != "x" || c.Get("b") != "" || c.Get("c") != "y" || c.Get("missing") != "" {
		t.Errorf("carrier = %v", c)
	}
	if got := len(c.Keys()); got != 3 {
		t.Errorf("Keys = %v", c.Keys())
	}
}
