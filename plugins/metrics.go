package plugins

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// metrics are the plugin host's instruments; nil fields record nothing.
type metrics struct {
	latency  metric.Float64Histogram
	errors   metric.Int64Counter
	restarts metric.Int64Counter
}

func newMetrics(m metric.Meter) *metrics {
	out := &metrics{}
	if m == nil {
		return out
	}
	out.latency, _ = m.Float64Histogram("manifold.plugin.hook.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of plugin hook calls, by plugin and hook."),
		metric.WithExplicitBucketBoundaries(0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1))
	out.errors, _ = m.Int64Counter("manifold.plugin.hook.errors", metric.WithDescription("Plugin hook calls that failed (error, timeout, plugin down)."))
	out.restarts, _ = m.Int64Counter("manifold.plugin.restarts", metric.WithDescription("Plugin process restarts."))
	return out
}

func (m *metrics) hook(ctx context.Context, plugin string, h Hook, d time.Duration, err error) {
	if m.latency == nil {
		return
	}
	attrs := metric.WithAttributes(attribute.String("plugin", plugin), attribute.String("hook", h.String()))
	m.latency.Record(ctx, d.Seconds(), attrs)
	if err != nil {
		m.errors.Add(ctx, 1, attrs)
	}
}

func (m *metrics) restart(plugin string) {
	if m.restarts != nil {
		m.restarts.Add(context.Background(), 1, metric.WithAttributes(attribute.String("plugin", plugin)))
	}
}
