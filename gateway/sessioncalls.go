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
// Requests of different sessions share no lock: a session's entry is
// found in a sync.Map, and only its own requests take its mutex. The
// entry lives as long as the session (forget).
type sessionCalls struct {
	m sync.Map // session ID → *sessionInflight
	// watch is called once per session recorded, so that forget is called
	// when it ends (Gateway.watchSession).
	watch func(*mcp.ServerSession)
}

// sessionInflight is the requests in flight of one session.
type sessionInflight struct {
	mu    sync.Mutex
	calls map[*sessionCall]struct{}
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
		if ss.ID() == "" {
			return next(ctx, method, req)
		}
		ctx, cancel := context.WithCancelCause(ctx)
		var user string
		if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
			user = extra.TokenInfo.UserID
		}
		done := c.enter(ss, user, cancel)
		defer func() {
			done()
			cancel(nil)
		}()
		return next(ctx, method, req)
	}
}

// enter records a request of ss (which has an ID) in flight, made by the
// authenticated user (sessionOwner; "" without auth) and cancelled by
// cancel; the returned function forgets it. The raw path (streamableraw.go)
// records its calls here too.
func (c *sessionCalls) enter(ss *mcp.ServerSession, user string, cancel context.CancelCauseFunc) func() {
	id := ss.ID()
	v, ok := c.m.Load(id)
	if !ok {
		var loaded bool
		v, loaded = c.m.LoadOrStore(id, &sessionInflight{calls: map[*sessionCall]struct{}{}})
		if !loaded && c.watch != nil {
			c.watch(ss)
		}
	}
	in := v.(*sessionInflight)
	call := &sessionCall{cancel: cancel, user: user}
	in.mu.Lock()
	in.calls[call] = struct{}{}
	in.mu.Unlock()
	return func() {
		in.mu.Lock()
		delete(in.calls, call)
		in.mu.Unlock()
	}
}

// forget drops the entry of a session that ended.
func (c *sessionCalls) forget(id string) {
	if id != "" {
		c.m.Delete(id)
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
	v, ok := c.m.Load(id)
	if !ok {
		return
	}
	var user string
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		user = ti.UserID
	}
	in := v.(*sessionInflight)
	in.mu.Lock()
	defer in.mu.Unlock()
	for call := range in.calls {
		if call.user == "" || call.user == user {
			call.cancel(errSessionDeleted)
		}
	}
}

// cancelID cancels every request in flight on the session with id, with
// cause: the gateway is closing it.
func (c *sessionCalls) cancelID(id string, cause error) {
	v, ok := c.m.Load(id)
	if id == "" || !ok {
		return
	}
	in := v.(*sessionInflight)
	in.mu.Lock()
	defer in.mu.Unlock()
	for call := range in.calls {
		call.cancel(cause)
	}
}
