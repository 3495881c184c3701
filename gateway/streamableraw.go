package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/manifold-mcp/manifold/internal/authn"
	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/telemetry"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The raw path's front on streamable HTTP sessions (docs/architecture.md,
// Two paths): each POST of an existing session is read once and peeked
// with envelope.Scan. A call rawTake takes is served by serveAnswer in the
// POST's own handler, under the request's context (a client that goes
// away cancels it), and answered on the POST: application/json, or SSE
// from the first notification of the call on (callResponse, the origin's
// sink). A notifications/cancelled naming a raw call in flight cancels it
// (202). Everything else goes to the session's SDK transport as before,
// with its body put back. The POST is counted busy on the session by
// servePOST around all of this, whichever path serves it.
//
// The session's request ids in flight are kept per session (sessionIDs)
// for both paths, so that a request reusing an id in flight on either is
// answered 400 as the SDK answers one in flight on its own path (ids
// inside a JSON-RPC batch, which only versions before 2025-06-18 send,
// are seen by the SDK alone).
//
// Server→client requests of a raw call (sampling, roots) are sent on the
// call's response, and the client's answers diverted back to the relay
// (streamableask.go); a session whose client declared elicitation is
// served by the SDK path (httpTakes).

// httpFront is the raw front of one POST of a streamable session.
type httpFront struct {
	ss  *mcp.ServerSession
	who caller
}

var _ rawFront = (*httpFront)(nil)

func (f *httpFront) session() *mcp.ServerSession { return f.ss }
func (f *httpFront) caller() caller              { return f.who }

// transport is the SDK path's value for streamable HTTP (observe.go).
func (f *httpFront) transport() string { return telemetry.TransportTCP }

// requestCaller returns who sent r, as callerOf finds it on the SDK path
// for a request of a streamable session: the identity this request
// authenticated with (the SDK hands it to its handlers in the token info
// built from the same context value), else the local principal.
func requestCaller(ctx context.Context) caller {
	if id, _ := ctx.Value(identityCtxKey{}).(*authn.Identity); id != nil {
		return caller{id: id}
	}
	if p, ok := ctx.Value(principalKey{}).(*policy.Principal); ok {
		return caller{fixed: p}
	}
	return caller{local: ctx.Value(localKey{}) != nil}
}

// sessionIDs is the request ids in flight on one streamable session, on
// either path; the zero value is ready to use.
type sessionIDs struct {
	mu  sync.Mutex
	ids map[string]*idInFlight // by idKey
	// asks are the gateway's requests to the client on raw calls'
	// responses, by id, waiting for its answer (streamableask.go); asked
	// numbers them.
	asks  map[string]chan []byte
	asked uint64
	// raw counts the raw calls in flight; idle, when not nil, is closed
	// when it drops to 0 (waitRaw).
	raw  int
	idle chan struct{}
}

// idInFlight is one request id in flight: a raw call's (cancel set) or
// requests the SDK serves (n of them: the SDK refuses a duplicate among
// its own).
type idInFlight struct {
	cancel context.CancelCauseFunc
	n      int
}

// enterRaw records the id key of a raw call, cancelled by cancel; false
// when the id is in flight already.
func (s *sessionIDs) enterRaw(key string, cancel context.CancelCauseFunc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.ids[key]; dup {
		return false
	}
	if s.ids == nil {
		s.ids = map[string]*idInFlight{}
	}
	s.ids[key] = &idInFlight{cancel: cancel}
	s.raw++
	return true
}

// enterSDK records the id key of a request the SDK serves; false when a
// raw call has that id in flight.
func (s *sessionIDs) enterSDK(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.ids[key]
	switch {
	case ok && e.cancel != nil:
		return false
	case ok:
		e.n++
	default:
		if s.ids == nil {
			s.ids = map[string]*idInFlight{}
		}
		s.ids[key] = &idInFlight{n: 1}
	}
	return true
}

// leave forgets one request of key, entered with enterRaw or enterSDK.
func (s *sessionIDs) leave(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.ids[key]
	if !ok {
		return
	}
	if e.n--; e.n <= 0 {
		delete(s.ids, key)
	}
	if e.cancel != nil {
		if s.raw--; s.raw == 0 && s.idle != nil {
			close(s.idle)
			s.idle = nil
		}
	}
}

// waitRaw returns when no raw call is in flight, or after timeout. The
// gateway closes a session only then, as the SDK's Close waits for the
// SDK path's calls: what the session held (its per-client upstream
// sessions) is released when it ends, and a cancelled call must first
// have told its upstream.
func (s *sessionIDs) waitRaw(timeout time.Duration) {
	s.mu.Lock()
	if s.raw == 0 {
		s.mu.Unlock()
		return
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
}

// errClientCancelled is the cause of a raw call's cancellation by its
// client's notifications/cancelled.
var errClientCancelled = errors.New("manifold: the client cancelled the call")

// cancel cancels the raw call in flight with id (JSON), and reports
// whether there was one.
func (s *sessionIDs) cancel(id []byte) bool {
	s.mu.Lock()
	e, ok := s.ids[idKey(id)]
	s.mu.Unlock()
	if !ok || e.cancel == nil {
		return false
	}
	e.cancel(errClientCancelled)
	return true
}

// serveSessionPOST serves r, a POST to cl's session that servePOST has
// checked and counted busy: on the raw path when it takes it, else with
// the session's transport.
func (g *Gateway) serveSessionPOST(w http.ResponseWriter, r *http.Request, cl *client) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		// The transport's answers (it would read the body alike).
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return
	}
	env, err := envelope.Scan(body)
	ss := cl.ss.Load()
	switch {
	case err != nil || ss == nil || len(r.Header.Values("Last-Event-ID")) > 0:
		toSDK(w, r, cl, body) // the transport answers, or refuses
		return
	case env.IsResponse() && cl.ids.answer(env.ID.In(body), body):
		w.WriteHeader(http.StatusAccepted) // to a request of a raw call's
		return
	case !env.ID.Present():
		if bytes.Equal(env.Method.In(body), []byte(`"notifications/cancelled"`)) && cl.ids.cancel(cancelledID(body)) {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		toSDK(w, r, cl, body)
		return
	}
	f := &httpFront{ss: ss, who: requestCaller(r.Context())}
	var req *rawRequest
	if httpTakes(ss) {
		req = g.rawTake(r.Context(), f, body, &env)
		if req != nil && req.stateless {
			// A 2026-07-28 request on a session: the SDK refuses it (that
			// version is served without sessions).
			req = nil
		}
	}
	key := idKey(env.ID.In(body))
	switch {
	case req != nil:
		g.serveRawPOST(w, r, cl, f, req, key)
	case !env.Method.Present(): // a response to the SDK's own request
		toSDK(w, r, cl, body)
	case !cl.ids.enterSDK(key):
		duplicateID(w, env.ID.In(body))
	default:
		defer cl.ids.leave(key)
		toSDK(w, r, cl, body)
	}
}

// toSDK hands r, whose body was read as body, to cl's transport.
func toSDK(w http.ResponseWriter, r *http.Request, cl *client, body []byte) {
	r.Body = io.NopCloser(bytes.NewReader(body))
	cl.transport.ServeHTTP(w, r)
}

// serveRawPOST serves req, the call r carries (its id's key is key), on
// the raw path, under r's context, and answers it on w.
func (g *Gateway) serveRawPOST(w http.ResponseWriter, r *http.Request, cl *client, f *httpFront, req *rawRequest, key string) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if !cl.ids.enterRaw(key, cancel) {
		duplicateID(w, req.id())
		return
	}
	if _, tp := r.Header["Traceparent"]; tp || r.Header["Baggage"] != nil {
		// The client's trace context, as clientTraceContext takes it on
		// the SDK path (a raw call has none in _meta).
		ctx = telemetry.ExtractHTTP(ctx, r.Header)
	}
	var user string
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		user = ti.UserID
	}
	// A deleted or closed session cancels the call, as its SDK calls.
	done := g.calls.enter(f.ss, user, cancel)
	if cl.ended.Load() {
		// Ended while the body was read, before the call was counted:
		// closeSession found nothing of it to cancel or wait for, so it
		// must not start. Checked after both counts, the call is either
		// refused here or cancelled by closeSession.
		done()
		cl.ids.leave(key)
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	req.sink = &callResponse{w: w, ids: &cl.ids}
	a := g.serveAnswer(ctx, f, req)
	done()
	cl.ids.leave(key)
	req.sink.finishParts(http.StatusOK, a.pieces()...)
}

// httpTakes reports whether the raw path may serve calls of ss: not when
// its client may be asked for elicitation, which the gateway does not send
// on a raw call's response (streamableask.go).
func httpTakes(ss *mcp.ServerSession) bool {
	ip := ss.InitializeParams()
	return ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil
}

// cancelledID returns the requestId of a notifications/cancelled, nil
// when it has none.
func cancelledID(msg []byte) []byte {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(msg, &n) != nil {
		return nil
	}
	return n.Params.RequestID
}

// duplicateID answers a request whose id (JSON) is in flight on its
// session as the SDK's transport does.
func duplicateID(w http.ResponseWriter, id []byte) {
	shown := id
	if len(id) > 0 && id[0] == '"' {
		shown = envelope.Text(id)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(rawResponse(id, nil, &jsonrpc.Error{
		Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("duplicate in-flight request ID %s", shown),
	}))
}
