package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Ending a streamable HTTP session ends its calls. The go-sdk answers a
// DELETE of a session by closing it, and closing waits for the requests in
// flight on it to return without cancelling them: a client that deletes
// its session with a slow call in flight would wait for that call, and the
// upstream would go on working for nobody. So the gateway remembers the
// requests in flight per session and cancels them when the session is
// deleted, before the SDK closes it; their upstream calls are cancelled
// with them (upstream.call), which tells the upstreams.

// errSessionDeleted is the cause of the cancellation of a deleted
// session's requests.
var errSessionDeleted = errors.New("manifold: the client deleted its session")

// sessionCalls is the registry of the requests in flight per session ID.
// Only sessions with an ID (streamable HTTP with sessions) are recorded.
type sessionCalls struct {
	mu sync.Mutex
	m  map[string]map[*sessionCall]struct{}
}

// sessionCall is one request in flight.
type sessionCall struct {
	cancel context.CancelCauseFunc
	user   string // the authenticated user ID, if any
}

// track is receiving middleware that makes each request of a session
// cancellable by cancelSession.
func (c *sessionCalls) track(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if !ok {
			return next(ctx, method, req)
		}
		id := ss.ID()
		if id == "" {
			return next(ctx, method, req)
		}
		ctx, cancel := context.WithCancelCause(ctx)
		call := &sessionCall{cancel: cancel}
		if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
			call.user = extra.TokenInfo.UserID
		}
		c.mu.Lock()
		if c.m == nil {
			c.m = map[string]map[*sessionCall]struct{}{}
		}
		if c.m[id] == nil {
			c.m[id] = map[*sessionCall]struct{}{}
		}
		c.m[id][call] = struct{}{}
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			delete(c.m[id], call)
			if len(c.m[id]) == 0 {
				delete(c.m, id)
			}
			c.mu.Unlock()
			cancel(nil)
		}()
		return next(ctx, method, req)
	}
}

// cancelSession cancels the requests in flight on the session that r, a
// DELETE, ends. Like the SDK, which then refuses the DELETE, it leaves
// alone the requests of a session opened by another authenticated user.
func (c *sessionCalls) cancelSession(r *http.Request) {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		return
	}
	var user string
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		user = ti.UserID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for call := range c.m[id] {
		if call.user == "" || call.user == user {
			call.cancel(errSessionDeleted)
		}
	}
}
