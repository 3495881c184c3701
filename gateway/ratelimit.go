package gateway

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/manifold-mcp/manifold/internal/ratelimit"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// CodeRateLimited is the gateway's JSON-RPC error code for a prompts/get or
// resources/read refused by a rate limit (rateLimits); its data holds
// retryAfter, in seconds. A tools/call is answered with a tool error
// instead, which a model can read and act on.
const CodeRateLimited = -31055

// rateLimit is the rate limit stage of the call pipeline, after policy: it
// counts the call against the rate limits of its snapshot (rateLimits in
// the config) and returns nil, or why it refused the call. A call it lets
// through may hold concurrency slots (c.held), which the caller releases
// when the call ends. With no limits configured it costs one nil check.
func (g *Gateway) rateLimit(ctx context.Context, c *call) *ratelimit.Refusal {
	l := c.snap.limits
	if l == nil {
		return nil
	}
	ref := l.Take(ctx, c.principal, c.kind, c.name, c.route.up.Name(), ratelimit.Now(), &c.held)
	if ref == nil {
		return nil
	}
	server := c.route.up.Name()
	g.obs.metrics.RateLimited(ctx, kindLabel(c.kind), server, ref.Rule)
	if x := c.x; x != nil {
		x.rateLimit = ref.Rule
	}
	if ce := g.log.Check(zap.DebugLevel, "rate limited"); ce != nil {
		ce.Write(zap.String(keyPrincipal, c.principal.Name()), zap.String(keyKind, c.kind.String()),
			zap.String(keyName, c.name), zap.String(keyServer, server), zap.String(keyRule, ref.Rule),
			zap.Duration("retryAfter", ref.RetryAfter))
	}
	return ref
}

// limitedText is what a refused call is told: "rate limited; retry after
// 2.1 s", the wait rounded up to a tenth of a second.
func limitedText(ref *ratelimit.Refusal) string {
	b := make([]byte, 0, 64)
	b = append(b, "rate limited"...)
	if ref.Concurrent {
		b = append(b, " (too many calls in flight)"...)
	}
	b = append(b, "; retry after "...)
	b = strconv.AppendFloat(b, retrySeconds(ref.RetryAfter), 'f', 1, 64)
	return string(append(b, " s"...))
}

// retrySeconds is d in seconds, rounded up to a tenth.
func retrySeconds(d time.Duration) float64 {
	return math.Ceil(d.Seconds()*10) / 10
}

// limitedError is the JSON-RPC error of a refused prompts/get or
// resources/read.
func limitedError(ref *ratelimit.Refusal) error {
	data, _ := json.Marshal(struct {
		RetryAfter float64 `json:"retryAfter"`
		Rule       string  `json:"rule"`
	}{retrySeconds(ref.RetryAfter), ref.Rule})
	return &jsonrpc.Error{Code: CodeRateLimited, Message: limitedText(ref), Data: data}
}

// limitedAnswer is the SDK path's answer to a call of m that ref refused: a
// tool error for tools/call, else CodeRateLimited.
func limitedAnswer[Q callerRequest, R mcp.Result](m *method[Q, R], ref *ratelimit.Refusal) (R, error) {
	if res, ok := m.toolError(limitedText(ref)); ok {
		return res, nil
	}
	var zero R
	return zero, limitedError(ref)
}

// limited is the raw path's answer to r when ref refused it: the encoded
// tool error for tools/call, else CodeRateLimited.
func (r *rawRequest) limited(ref *ratelimit.Refusal) (res []byte, toolErr bool, err error) {
	if r.m.kind != policy.Tool {
		return nil, false, limitedError(ref)
	}
	res, err = json.Marshal(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: limitedText(ref)}}})
	return res, err == nil, err
}
