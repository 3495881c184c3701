package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/redact"
)

// exportLogInterval is the least time between two log entries about failed exports.
const exportLogInterval = time.Minute

// exporter is the OTLP span exporter of one Telemetry. It logs failed exports itself, at most
// once per exportLogInterval, instead of handing them to the OpenTelemetry global error
// handler, and owns the HTTP transport so that Shutdown can close its idle connections.
type exporter struct {
	sdktrace.SpanExporter
	endpoint  string
	log       *zap.Logger
	transport *http.Transport // nil for grpc

	mu      sync.Mutex
	lastLog time.Time
	failed  int // spans not exported since the last log entry
}

// newExporter builds the exporter for cfg.Protocol. For http/protobuf an endpoint without a
// path gets config.OTLPTracesPath; for grpc only the host and port count. An http:// endpoint
// means no TLS.
func newExporter(ctx context.Context, cfg *config.Traces, log *zap.Logger) (*exporter, error) {
	e := &exporter{log: log}
	switch cfg.Protocol {
	case config.ProtocolGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpointURL(cfg.Endpoint), otlptracegrpc.WithTimeout(exportTimeout)}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: otlp grpc exporter: %w", err)
		}
		e.SpanExporter, e.endpoint = exp, cfg.Endpoint
	case config.ProtocolHTTP, "":
		endpoint, err := httpEndpoint(cfg.Endpoint)
		if err != nil {
			return nil, err
		}
		e.transport = http.DefaultTransport.(*http.Transport).Clone()
		opts := []otlptracehttp.Option{
			otlptracehttp.WithEndpointURL(endpoint),
			otlptracehttp.WithHTTPClient(&http.Client{Transport: e.transport, Timeout: exportTimeout}),
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: otlp http exporter: %w", err)
		}
		e.SpanExporter, e.endpoint = exp, endpoint
	default:
		return nil, fmt.Errorf("telemetry: unknown trace protocol %q: want %s or %s", cfg.Protocol, config.ProtocolHTTP, config.ProtocolGRPC)
	}
	return e, nil
}

// httpEndpoint returns the OTLP/HTTP traces URL for endpoint, adding the default path when it
// has none.
func httpEndpoint(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("telemetry: trace endpoint must be an absolute http or https URL")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = config.OTLPTracesPath
	}
	return u.String(), nil
}

// ExportSpans exports spans, logging a failure (rate-limited) rather than returning it: the
// batch processor would otherwise report it to the global error handler.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		return nil
	}
	e.mu.Lock()
	e.failed += len(spans)
	now := time.Now()
	if now.Sub(e.lastLog) >= exportLogInterval {
		e.log.Warn("trace export failed", zap.String(logKeyEndpoint, redact.URL(e.endpoint)), zap.Int(logKeySpans, e.failed), zap.String(logKeyError, redact.Text(err.Error())))
		e.lastLog, e.failed = now, 0
	}
	e.mu.Unlock()
	return nil
}

// closeIdle closes the idle connections of the exporter's HTTP transport, so that nothing of
// it outlives Shutdown.
func (e *exporter) closeIdle() {
	if e != nil && e.transport != nil {
		e.transport.CloseIdleConnections()
	}
}
