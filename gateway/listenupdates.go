package gateway

import (
	"context"
	"maps"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource updates of sessionless 2026-07-28 clients from per-client
// servers (docs/architecture.md, Relay: resource updates). Such a client
// subscribes through a subscriptions/listen stream, whose requests the SDK
// serves on a ServerSession of that stream alone. Its subscription is held
// by its principal's dedicated upstream session (upstreamFor), the one its
// calls use, so that an update that session's server sends (after a call
// that changed the resource, say) is the one it hears of; the update goes
// to the listen streams that subscribed to it through that session
// (subscriptions.through), and to no other principal's.

// through returns the sessions subscribed to uri (the upstream's own)
// through up, as the set onlyFor reads; nil when none is.
func (s *subscriptions) through(up *upstream.Upstream, uri string) map[*mcp.ServerSession]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.refs[subKey{up, uri}]) == 0 {
		return nil
	}
	return maps.Clone(s.refs[subKey{up, uri}])
}

// onlyFor reports whether a resources/updated marked only (onlyForKey: a
// session, or a set of sessions) may go to session.
func onlyFor(only any, session mcp.Session) bool {
	switch o := only.(type) {
	case *mcp.ServerSession:
		return o == session
	case map[*mcp.ServerSession]bool:
		ss, _ := session.(*mcp.ServerSession)
		return o[ss]
	}
	return false
}

// listenDedicated returns the dedicated session of base's server that the
// unsubscribe req of a 2026-07-28 listen stream subscribed through: its
// principal's; nil for any other request.
func (g *Gateway) listenDedicated(ctx context.Context, req *mcp.UnsubscribeRequest, base *upstream.Upstream) *dedicated {
	ip := req.Session.InitializeParams()
	if ip == nil || !mcpx.Stateless(ip.ProtocolVersion) {
		return nil
	}
	pr, known := principal(ctx, g.current().access, req)
	if !known {
		return nil
	}
	return g.perClient.get(owner{principal: pr.Key()}, base)
}
