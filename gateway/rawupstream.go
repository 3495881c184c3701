package gateway

import (
	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/upstream"
)

// The per-request _meta of a raw call to a 2026-07-28 upstream. The SEP-2575
// members (protocolVersion, clientInfo, clientCapabilities) are the
// upstream connection's own: CallRaw adds them, as the SDK's client adds
// them to its requests. What the gateway adds is the caller's log level
// (withLogLevel on the slow path): the request's own for a 2026-07-28
// client, which the raw path forwards with the other members it keeps, or
// the level its legacy session set (logging/setLevel).

// logLevelMember returns the _meta member carrying the log level that r's
// caller asked for, for a 2026-07-28 upstream; nil when there is none to
// send.
func (g *Gateway) logLevelMember(up *upstream.Upstream, r *rawRequest) []byte {
	if !mcpx.Stateless(upstreamVersion(up)) {
		return nil
	}
	out := envelope.AppendString(nil, mcpx.MetaKeyLogLevel)
	out = append(out, ':')
	if lv := r.env.LogLevel.In(r.msg); lv != nil {
		return append(out, lv...)
	}
	if r.ss == nil {
		return nil
	}
	lv, ok := g.flights.levels.Load(r.ss)
	if !ok {
		return nil
	}
	return envelope.AppendString(out, string(lv.(sessionLevel).level))
}
