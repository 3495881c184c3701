package gateway

import (
	"context"
	"sync"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// list_changed for sessionless 2026-07-28 clients of their principal's own
// lists (principallists.go). Such a client hears of list changes on its
// subscriptions/listen streams, each a ServerSession of its own whose
// notifications carry the listen request's id (subscriptionId). The SDK
// sends its own list_changed only for changes of the global registry, and
// keeps the listen's id to itself; the gateway learns it from the
// acknowledgement the stream begins with, and tells a principal's streams
// of a change of its lists itself: a marked progress notification, which
// sessionNotices turns into the list_changed, with the stream's id.

// listens are the listen streams of sessionless principals.
type listens struct {
	mu      sync.Mutex
	streams map[*mcp.ServerSession]*listenStream
}

// listenStream is one listen stream: its principal, and what its
// acknowledgement said.
type listenStream struct {
	key, name string // the principal's key and name
	id        any    // the subscriptionId; nil until acknowledged
	want      [3]bool
}

// listening registers the listen stream of req, a sessionless principal's,
// until the returned function is called (when the stream ends).
func (g *Gateway) listening(ctx context.Context, req *mcp.SubscriptionsListenRequest) func() {
	ss := req.Session
	ip := ss.InitializeParams()
	if ip == nil || !mcpx.Stateless(ip.ProtocolVersion) {
		return func() {}
	}
	pr, known := principal(ctx, g.current().access, req)
	if !known {
		return func() {}
	}
	l := &g.listens
	l.mu.Lock()
	if l.streams == nil {
		l.streams = map[*mcp.ServerSession]*listenStream{}
	}
	l.streams[ss] = &listenStream{key: pr.Key(), name: pr.Name()}
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.streams, ss)
		l.mu.Unlock()
	}
}

// acknowledged records the subscriptionId and filter of the listen
// stream ss, from its acknowledgement p.
func (l *listens) acknowledged(ss *mcp.ServerSession, p *mcp.SubscriptionsAcknowledgedParams) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.streams[ss]; s != nil {
		s.id = p.Meta[mcp.MetaKeySubscriptionID]
		s.want = [3]bool{p.Notifications.ToolsListChanged, p.Notifications.PromptsListChanged, p.Notifications.ResourcesListChanged}
	}
}

// subscriptionID returns the subscriptionId of the listen stream ss, or
// nil for any other session.
func (l *listens) subscriptionID(ss *mcp.ServerSession) any {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.streams[ss]; s != nil {
		return s.id
	}
	return nil
}

// notifyPrincipal tells the acknowledged listen streams of the principal
// (by key, or by name when key is "") that the lists changed says changed.
func (g *Gateway) notifyPrincipal(key, name string, changed [3]bool) {
	l := &g.listens
	var to []*mcp.ServerSession
	var tokens [][3]bool
	l.mu.Lock()
	for ss, s := range l.streams {
		if s.id == nil || key != "" && s.key != key || key == "" && s.name != name {
			continue
		}
		to = append(to, ss)
		tokens = append(tokens, [3]bool{changed[0] && s.want[0], changed[1] && s.want[1], changed[2] && s.want[2]})
	}
	l.mu.Unlock()
	for i, ss := range to {
		for list, token := range listChangedTokens {
			if tokens[i][list] {
				_ = ss.NotifyProgress(context.Background(), &mcp.ProgressNotificationParams{ProgressToken: token})
			}
		}
	}
}
