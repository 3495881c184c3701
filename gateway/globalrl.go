package gateway

import (
	"context"

	"github.com/manifold-mcp/manifold/internal/ratelimit"
	"go.uber.org/zap"
)

// shareLimits makes the global rate limits of s count across the replicas
// of a cluster, in its shared store (gateway.cluster.store), when there is
// one; without one it changes nothing. Per-principal limits and
// concurrency caps stay per replica (docs/architecture.md, "Rate limits").
func (g *Gateway) shareLimits(s *snapshot) *snapshot {
	if g.store == nil || s.limits == nil {
		return s
	}
	s.limits.Share(g.store, &ratelimit.SharedOptions{OnFallback: g.limitStoreFailed})
	return s
}

// limitStoreFailed logs and counts a failed or slow call of a global rate
// limit to the shared store: the rule then falls back to this replica's
// bucket for a second (ratelimit.SharedOptions.Backoff), so this happens at
// most once a second per rule.
func (g *Gateway) limitStoreFailed(rule string, err error) {
	g.obs.metrics.RateLimitStoreFailed(context.Background(), rule)
	g.log.Warn("the cluster store failed a global rate limit; this replica's bucket decides alone for now",
		zap.String(keyRule, rule), zap.Error(err))
}
