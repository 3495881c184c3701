package telemetry

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/goleak"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func ptr[T any](v T) *T { return &v }

func newTracing(t *testing.T, endpoint string, ratio float64) *Telemetry {
	t.Helper()
	tel, err := New(context.Background(), &config.Telemetry{Traces: &config.Traces{
		Endpoint: endpoint, Protocol: config.ProtocolHTTP, SampleRatio: ptr(ratio),
		Headers: map[string]string{"X-Tenant": "t1"},
	}}, &Options{ServiceVersion: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	return tel
}

const (
	incomingTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	incomingSpan  = "00f067aa0ba902b7"
	traceparent   = "00-" + incomingTrace + "-" + incomingSpan + "-01"
)

func TestSpansExported(t *testing.T) {
	rcv := testutil.NewOTLPReceiver(t)
	tel := newTracing(t, rcv.URL, 1)
	if !tel.Tracing() {
		t.Fatal("Tracing() = false")
	}

	// A downstream request with a trace context in _meta, and other values in the headers.
	h := http.Header{}
	h.Set("traceparent", "00-11111111111111111111111111111111-2222222222222222-01")
	ctx := ExtractHTTP(context.Background(), h)
	ctx = Extract(ctx, map[string]any{MetaTraceparent: traceparent, MetaTracestate: "rojo=1", "progressToken": 3})

	ctx, server := tel.StartServer(ctx, SpanInfo{
		Method: "tools/call", Target: "weather__forecast", RequestID: "7", SessionID: "sess-1",
		ProtocolVersion: "2025-11-25", Transport: TransportTCP,
	})
	cctx, client := tel.StartClient(ctx, SpanInfo{Method: "tools/call", Target: "forecast", RequestID: "3", Server: "weather", Transport: TransportPipe})
	upstreamMeta := Inject(cctx, map[string]any{"progressToken": 3})
	traceID, spanID := IDs(ctx)
	EndSpan(client, ErrorTypeToolError)
	EndSpan(server, "")
	_, rs := tel.StartServer(context.Background(), SpanInfo{Method: "resources/read", Target: "file:///etc/x"})
	EndSpan(rs, "-32002")

	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	spans, res, headers := rcv.Received()
	if len(spans) != 3 {
		t.Fatalf("received %d spans, want 3", len(spans))
	}
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	srv, cli, read := byName["tools/call weather__forecast"], byName["tools/call forecast"], byName["resources/read"]
	if srv == nil || cli == nil || read == nil {
		t.Fatalf("span names: %v", cmp.Diff(nil, byName))
	}

	if got := hex.EncodeToString(srv.TraceId); got != incomingTrace || hex.EncodeToString(cli.TraceId) != incomingTrace {
		t.Errorf("trace ids %s, %x; want the incoming %s", got, cli.TraceId, incomingTrace)
	}
	if got := hex.EncodeToString(srv.ParentSpanId); got != incomingSpan {
		t.Errorf("server span parent = %s, want the incoming span %s", got, incomingSpan)
	}
	if string(cli.ParentSpanId) != string(srv.SpanId) {
		t.Errorf("client span parent = %x, want the server span %x", cli.ParentSpanId, srv.SpanId)
	}
	if traceID != incomingTrace || spanID != hex.EncodeToString(srv.SpanId) {
		t.Errorf("IDs = %s, %s; want %s, %x", traceID, spanID, incomingTrace, srv.SpanId)
	}
	if srv.Kind != tracepb.Span_SPAN_KIND_SERVER || cli.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("kinds = %v, %v", srv.Kind, cli.Kind)
	}
	if srv.TraceState != "rojo=1" {
		t.Errorf("trace state = %q, want the incoming rojo=1", srv.TraceState)
	}

	wantServer := map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "weather__forecast", "gen_ai.operation.name": "execute_tool",
		"jsonrpc.request.id": "7", "mcp.session.id": "sess-1", "mcp.protocol.version": "2025-11-25", "network.transport": "tcp",
	}
	if diff := cmp.Diff(wantServer, testutil.AttrMap(srv.Attributes)); diff != "" {
		t.Errorf("server span attributes (-want +got):\n%s", diff)
	}
	wantClient := map[string]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "forecast", "gen_ai.operation.name": "execute_tool",
		"jsonrpc.request.id": "3", "manifold.server": "weather", "network.transport": "pipe", "error.type": "tool_error",
	}
	if diff := cmp.Diff(wantClient, testutil.AttrMap(cli.Attributes)); diff != "" {
		t.Errorf("client span attributes (-want +got):\n%s", diff)
	}
	if srv.Status.GetCode() != tracepb.Status_STATUS_CODE_UNSET || cli.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("statuses = %v, %v; want unset, error", srv.Status, cli.Status)
	}
	wantRead := map[string]string{"mcp.method.name": "resources/read", "mcp.resource.uri": "file:///etc/x",
		"error.type": "-32002", "rpc.response.status_code": "-32002"}
	if diff := cmp.Diff(wantRead, testutil.AttrMap(read.Attributes)); diff != "" {
		t.Errorf("resources/read span attributes (-want +got):\n%s", diff)
	}
	if len(read.ParentSpanId) != 0 {
		t.Error("a request without trace context got a parent")
	}

	// The upstream gets the client span as its parent.
	want := "00-" + incomingTrace + "-" + hex.EncodeToString(cli.SpanId) + "-01"
	if upstreamMeta[MetaTraceparent] != want || upstreamMeta[MetaTracestate] != "rojo=1" || upstreamMeta["progressToken"] != 3 {
		t.Errorf("upstream _meta = %v, want traceparent %s", upstreamMeta, want)
	}

	if res["service.name"] != ServiceName || res["service.version"] != "1.2.3" {
		t.Errorf("resource = %v", res)
	}
	if headers.Get("X-Tenant") != "t1" {
		t.Errorf("export headers = %v, want X-Tenant", headers)
	}
}

func TestSampling(t *testing.T) {
	rcv := testutil.NewOTLPReceiver(t)
	tel := newTracing(t, rcv.URL+"/v1/traces", 0)

	_, root := tel.StartServer(context.Background(), SpanInfo{Method: "tools/list"})
	if root.IsRecording() {
		t.Error("ratio 0: a root span is recording")
	}
	EndSpan(root, "")

	ctx := Extract(context.Background(), map[string]any{MetaTraceparent: traceparent})
	_, child := tel.StartServer(ctx, SpanInfo{Method: "tools/list"})
	if !child.IsRecording() {
		t.Error("ratio 0: a request with a sampled parent is not recording")
	}
	EndSpan(child, "")

	unsampled := Extract(context.Background(), map[string]any{MetaTraceparent: "00-" + incomingTrace + "-" + incomingSpan + "-00"})
	_, child = tel.StartServer(unsampled, SpanInfo{Method: "tools/list"})
	if child.IsRecording() {
		t.Error("a request with an unsampled parent is recording")
	}
	EndSpan(child, "")
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if spans, _, _ := rcv.Received(); len(spans) != 1 {
		t.Errorf("received %d spans, want 1", len(spans))
	}
}

func TestTracingOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		tel  func(t *testing.T) *Telemetry
	}{
		{name: "no traces section", tel: func(t *testing.T) *Telemetry {
			tel, err := New(context.Background(), &config.Telemetry{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return tel
		}},
		{name: "nil config", tel: func(t *testing.T) *Telemetry {
			tel, err := New(context.Background(), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			return tel
		}},
		{name: "nil Telemetry", tel: func(*testing.T) *Telemetry { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tel := tc.tel(t)
			if tel.Tracing() || tel.Metrics() != nil || tel.MetricsHandler() != nil {
				t.Fatal("something is on")
			}
			if tel != nil && tel.exporter != nil {
				t.Fatal("an exporter exists with tracing off")
			}
			ctx := Extract(context.Background(), map[string]any{MetaTraceparent: traceparent})
			sctx, span := tel.StartServer(ctx, SpanInfo{Method: "tools/call", Target: "x"})
			if span.IsRecording() {
				t.Error("span is recording")
			}
			_, span2 := tel.StartClient(sctx, SpanInfo{Method: "tools/call"})
			EndSpan(span2, "tool_error")
			EndSpan(span, "")
			// The client's trace context still reaches the upstream.
			if got := Inject(sctx, nil)[MetaTraceparent]; got != traceparent {
				t.Errorf("injected %v, want the incoming %s", got, traceparent)
			}
			if tid, _ := IDs(sctx); tid != incomingTrace {
				t.Errorf("IDs trace = %q", tid)
			}
			if _, s := tel.Tracer().Start(context.Background(), "x"); s.IsRecording() {
				t.Error("Tracer() records")
			}
			if err := tel.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestExportFailureIsLoggedNotFatal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "bad", http.StatusBadRequest) // not retryable
	}))
	defer srv.Close()
	tel := newTracing(t, srv.URL, 1)
	_, span := tel.StartServer(context.Background(), SpanInfo{Method: "ping"})
	EndSpan(span, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown = %v; a failed export is logged, not returned", err)
	}
}

func TestErrorType(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "nil", err: nil, want: ""},
		{name: "jsonrpc", err: wrapRPC(-32602), want: "-32602"},
		{name: "deadline", err: context.DeadlineExceeded, want: ErrorTypeTimeout},
		{name: "canceled", err: context.Canceled, want: ErrorTypeCanceled},
		{name: "other", err: io.EOF, want: ErrorTypeOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ErrorType(tt.err); got != tt.want {
				t.Errorf("ErrorType = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEndSpanOnNonRecording(t *testing.T) {
	EndSpan(trace.SpanFromContext(context.Background()), "x") // must not panic
}

func wrapRPC(code int64) error {
	return fmt.Errorf("calling upstream: %w", mcpx.RPCError(code, "bad params"))
}
