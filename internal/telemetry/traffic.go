package telemetry

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Attribute keys of the traffic controls' metrics.
const (
	// RuleKey names the rate limit that refused a call: "rateLimits[0]".
	RuleKey = attribute.Key("manifold.rule")
	// ModeKey is the pinning mode in force when a definition changed: "warn" or "block".
	ModeKey = attribute.Key("manifold.mode")
)

// Names of the traffic controls' instruments (Prometheus: manifold_rate_limited_total,
// manifold_definition_changes_total and manifold_rate_limit_store_fallbacks_total).
const (
	MetricRateLimited       = "manifold.rate_limited"
	MetricDefinitionChanges = "manifold.definition_changes"
	MetricRateLimitFallback = "manifold.rate_limit_store_fallbacks"
)

// trafficInstruments are the instruments of rate limits and pinning.
type trafficInstruments struct {
	limited metric.Int64Counter
	changes metric.Int64Counter
	sets    setCache[trafficKey]

	// fallbacks counts the failed calls of global rate limits to the cluster store.
	fallbacks metric.Int64Counter
}

type trafficKey struct{ kind, server, rule, mode string }

func (t *trafficInstruments) init(m metric.Meter) error {
	var err1, err2, err3 error
	t.limited, err1 = m.Int64Counter(MetricRateLimited, metric.WithUnit("{call}"),
		metric.WithDescription("Calls refused by a rate limit, by kind of item, server and rule."))
	t.changes, err2 = m.Int64Counter(MetricDefinitionChanges, metric.WithUnit("{change}"),
		metric.WithDescription("Tool and prompt definitions an upstream changed from the approved (pinned) one, by kind, server and pinning mode."))
	t.fallbacks, err3 = m.Int64Counter(MetricRateLimitFallback, metric.WithUnit("{failure}"),
		metric.WithDescription("Calls of global rate limits to the cluster store that failed or timed out, after which the replica's own bucket decided for a while, by rule."))
	if err1 != nil || err2 != nil || err3 != nil {
		return fmt.Errorf("telemetry: traffic instruments: %w", errors.Join(err1, err2, err3))
	}
	t.sets.build = func(k trafficKey) attribute.Set {
		kv := []attribute.KeyValue{KindKey.String(k.kind), ServerKey.String(k.server)}
		if k.rule != "" {
			kv = append(kv, RuleKey.String(k.rule))
		}
		if k.mode != "" {
			kv = append(kv, ModeKey.String(k.mode))
		}
		return attribute.NewSet(kv...)
	}
	return nil
}

// RateLimited counts one call a rate limit refused: the kind of item ("tool", "prompt",
// "resource"), its server and the rule ("rateLimits[0]").
func (m *Metrics) RateLimited(ctx context.Context, kind, server, rule string) {
	if m == nil {
		return
	}
	m.traffic.limited.Add(ctx, 1, m.traffic.sets.get(trafficKey{kind: kind, server: server, rule: rule}).add...)
}

// RateLimitStoreFailed counts one failed or slow call of a global rate limit (rule,
// "rateLimits[0]") to the cluster store.
func (m *Metrics) RateLimitStoreFailed(ctx context.Context, rule string) {
	if m == nil {
		return
	}
	// rare (at most once a second per rule): no cached attribute set
	m.traffic.fallbacks.Add(ctx, 1, metric.WithAttributes(RuleKey.String(rule)))
}

// DefinitionChanged counts one tool or prompt definition an upstream changed from its
// approved one (kind "tool" or "prompt"), under pinning mode "warn" or "block".
func (m *Metrics) DefinitionChanged(ctx context.Context, kind, server, mode string) {
	if m == nil {
		return
	}
	m.traffic.changes.Add(ctx, 1, m.traffic.sets.get(trafficKey{kind: kind, server: server, mode: mode}).add...)
}
