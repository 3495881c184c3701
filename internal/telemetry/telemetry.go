// Package telemetry holds Manifold's OpenTelemetry traces and Prometheus metrics, as the
// "telemetry" config section says: a tracer that exports spans over OTLP (off by default,
// then close to free), spans and metrics named after the OpenTelemetry semantic conventions
// for MCP, W3C trace context carried in HTTP headers and in MCP params._meta, and a
// Prometheus registry of its own served on a separate admin listener.
//
// Nothing here touches the OpenTelemetry globals: the gateway passes the *Telemetry around.
// A nil *Telemetry, like a nil *Metrics, is valid and records nothing.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/redact"
)

// ServiceName is the service.name of Manifold's telemetry, unless OTEL_SERVICE_NAME says
// otherwise.
const ServiceName = "manifold"

// InstrumentationName names the tracer and meter.
const InstrumentationName = "github.com/manifold-mcp/manifold"

// MetricsPath is where ServeMetrics serves the metrics.
const MetricsPath = "/metrics"

// ErrMetricsOff is returned by ServeMetrics when the config has no telemetry.metrics.
var ErrMetricsOff = errors.New("telemetry: metrics are off")

// Timeouts of the admin listener and of exports.
const (
	metricsReadHeaderTimeout = 5 * time.Second
	metricsScrapeTimeout     = 10 * time.Second
	metricsShutdownTimeout   = 5 * time.Second
	metricsIdleTimeout       = 2 * time.Minute
	exportTimeout            = 10 * time.Second
)

// Log field keys.
const (
	logKeyError    = "error"
	logKeyEndpoint = "endpoint"
	logKeyProtocol = "protocol"
	logKeyRatio    = "sample_ratio"
	logKeyListen   = "listen"
	logKeySpans    = "spans"
)

// Options tunes New. A nil *Options, like zero fields, means the defaults.
type Options struct {
	// Logger receives export failures (at most once a minute) and setup messages; nil logs
	// nothing.
	Logger *zap.Logger
	// ServiceVersion is the service.version resource attribute; empty leaves it out.
	ServiceVersion string
}

// Telemetry holds the tracer and meter providers of one configuration. Its methods are safe
// for concurrent use; on a nil *Telemetry they do nothing (tracing off, no metrics).
type Telemetry struct {
	log *zap.Logger

	tracing  bool
	tp       *sdktrace.TracerProvider // nil when tracing is off
	tracer   trace.Tracer
	exporter *exporter // nil when tracing is off

	mp      *sdkmetric.MeterProvider // nil when metrics are off
	metrics *Metrics                 // nil when metrics are off
	handler http.Handler

	shutdownOnce sync.Once
	shutdownErr  error
}

// New builds the providers cfg asks for; nil cfg, like the zero config.Telemetry, turns
// everything off. cfg is expected to be valid (config.Validate), with the trace endpoint and
// protocol resolved by the loader. With traces, spans are batched and exported to the OTLP
// endpoint; new traces are sampled at cfg.Traces.Ratio() and requests with a parent follow
// its sampling decision. With metrics, a MeterProvider feeds a Prometheus registry of its own
// (with the Go runtime and process collectors), served by MetricsHandler. Shutdown releases
// both.
//
// The resource has service.name "manifold" and service.version, which OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES override. The exporter uses its own HTTP client, so
// OTEL_EXPORTER_OTLP_CERTIFICATE and OTEL_EXPORTER_OTLP_TIMEOUT do not apply; other
// OTEL_EXPORTER_OTLP_… variables, such as the compression, do.
func New(ctx context.Context, cfg *config.Telemetry, opts *Options) (*Telemetry, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if cfg == nil {
		cfg = &config.Telemetry{}
	}
	t := &Telemetry{
		log:    o.Logger.Named("telemetry"),
		tracer: noop.NewTracerProvider().Tracer(InstrumentationName),
	}
	if cfg.Traces == nil && cfg.Metrics == nil {
		return t, nil
	}
	res, err := newResource(ctx, o.ServiceVersion)
	if errors.Is(err, resource.ErrPartialResource) {
		// Such as a malformed OTEL_RESOURCE_ATTRIBUTES: not worth refusing to start over.
		t.log.Warn("telemetry resource is incomplete", zap.String(logKeyError, err.Error()))
	} else if err != nil {
		return nil, err
	}
	if cfg.Traces != nil {
		if err := t.startTracing(ctx, cfg.Traces, res, o.ServiceVersion); err != nil {
			return nil, err
		}
	}
	if cfg.Metrics != nil {
		if err := t.startMetrics(res, o.ServiceVersion); err != nil {
			return nil, errors.Join(err, t.Shutdown(context.WithoutCancel(ctx)))
		}
	}
	return t, nil
}

// newResource describes this process: service name and version, the SDK, and whatever
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES add. On an error wrapping
// resource.ErrPartialResource the resource returned is still usable.
func newResource(ctx context.Context, version string) (*resource.Resource, error) {
	attrs := []resource.Option{resource.WithTelemetrySDK(), resource.WithAttributes(semconv.ServiceName(ServiceName))}
	if version != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(version)))
	}
	res, err := resource.New(ctx, append(attrs, resource.WithFromEnv())...)
	if err != nil {
		return res, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

func (t *Telemetry) startTracing(ctx context.Context, cfg *config.Traces, res *resource.Resource, version string) error {
	exp, err := newExporter(ctx, cfg, t.log)
	if err != nil {
		return err
	}
	t.exporter = exp
	t.tp = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Ratio()))),
		sdktrace.WithResource(res),
	)
	t.tracer = t.tp.Tracer(InstrumentationName, trace.WithInstrumentationVersion(version), trace.WithSchemaURL(semconv.SchemaURL))
	t.tracing = true
	t.log.Info("exporting traces", zap.String(logKeyEndpoint, redact.URL(exp.endpoint)), zap.String(logKeyProtocol, cfg.Protocol), zap.Float64(logKeyRatio, cfg.Ratio()))
	return nil
}

func (t *Telemetry) startMetrics(res *resource.Resource, version string) error {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return fmt.Errorf("telemetry: go collector: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return fmt.Errorf("telemetry: process collector: %w", err)
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	m, err := newMetrics(t.mp.Meter(InstrumentationName, metric.WithInstrumentationVersion(version), metric.WithSchemaURL(semconv.SchemaURL)))
	if err != nil {
		return err
	}
	t.metrics = m
	t.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            promLogger{t.log},
		Registry:            reg, // promhttp_metric_handler_errors_total
		EnableOpenMetrics:   true,
		MaxRequestsInFlight: 4,
		Timeout:             metricsScrapeTimeout,
	})
	return nil
}

// Tracing reports whether spans are recorded and exported.
func (t *Telemetry) Tracing() bool { return t != nil && t.tracing }

// Tracer returns the tracer of this configuration: a no-op tracer when tracing is off.
func (t *Telemetry) Tracer() trace.Tracer {
	if t == nil {
		return noop.NewTracerProvider().Tracer(InstrumentationName)
	}
	return t.tracer
}

// Metrics returns the instruments, or nil when metrics are off (a nil *Metrics records
// nothing).
func (t *Telemetry) Metrics() *Metrics {
	if t == nil {
		return nil
	}
	return t.metrics
}

// MetricsHandler returns the Prometheus handler of the private registry (OpenMetrics when the
// scraper asks for it), or nil when metrics are off. Mount it on an admin listener of its
// own, or use ServeMetrics.
func (t *Telemetry) MetricsHandler() http.Handler {
	if t == nil {
		return nil
	}
	return t.handler
}

// ServeOptions tunes ServeMetrics. A nil *ServeOptions, like zero fields, means the defaults.
type ServeOptions struct {
	// Wrap, when set, wraps the metrics handler in the checks the process applies to every
	// listener (Host and Origin against DNS rebinding, request bodies); nil serves it as is.
	Wrap func(http.Handler) http.Handler
	// IdleTimeout closes a keep-alive connection that waits this long for its next request;
	// default 2m.
	IdleTimeout time.Duration
}

// ServeMetrics serves MetricsPath on ln until ctx ends, then shuts the server down (waiting
// up to 5s for scrapes in flight) and returns nil; it returns an error if serving fails. It
// closes ln. With metrics off it closes ln and returns ErrMetricsOff.
func (t *Telemetry) ServeMetrics(ctx context.Context, ln net.Listener, opts *ServeOptions) error {
	h := t.MetricsHandler()
	if h == nil {
		ln.Close()
		return ErrMetricsOff
	}
	var o ServeOptions
	if opts != nil {
		o = *opts
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = metricsIdleTimeout
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, h)
	var handler http.Handler = mux
	if o.Wrap != nil {
		handler = o.Wrap(mux)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: metricsReadHeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		ErrorLog:          zap.NewStdLog(t.log),
	}
	t.log.Info("serving metrics", zap.String(logKeyListen, ln.Addr().String()))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("telemetry: metrics listener: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), metricsShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		srv.Close()
	}
	<-served // http.ErrServerClosed
	if err != nil {
		return fmt.Errorf("telemetry: metrics listener shutdown: %w", err)
	}
	return nil
}

// Shutdown flushes the spans still buffered and releases both providers, within ctx. Later
// calls return the first call's result. After Shutdown, spans and measurements are dropped.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	t.shutdownOnce.Do(func() {
		var errs []error
		if t.tp != nil {
			if err := t.tp.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("telemetry: traces: %w", err))
			}
			t.exporter.closeIdle()
		}
		if t.mp != nil {
			if err := t.mp.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("telemetry: metrics: %w", err))
			}
		}
		t.shutdownErr = errors.Join(errs...)
	})
	return t.shutdownErr
}

// promLogger adapts zap to promhttp's error log.
type promLogger struct{ log *zap.Logger }

func (l promLogger) Println(v ...any) {
	l.log.Error("serving metrics", zap.String(logKeyError, fmt.Sprint(v...)))
}
