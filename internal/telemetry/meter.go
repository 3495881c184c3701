package telemetry

import "go.opentelemetry.io/otel/metric"

// Meter returns the meter of the gateway's metrics, for instruments of
// other packages (the plugin host's); nil when metrics are off.
func (t *Telemetry) Meter() metric.Meter {
	if t == nil || t.metrics == nil {
		return nil
	}
	return t.metrics.meter
}
