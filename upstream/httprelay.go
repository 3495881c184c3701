package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/internal/redact"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// serverRequests are the server requests of one raw call's stream being
// answered, so that the server can cancel them and the call's end ends
// them. The zero value is empty.
type serverRequests struct {
	mu      sync.Mutex
	cancels map[jsonrpc.ID]context.CancelFunc
}

func (s *serverRequests) add(id jsonrpc.ID, cancel context.CancelFunc) {
	s.mu.Lock()
	if s.cancels == nil {
		s.cancels = map[jsonrpc.ID]context.CancelFunc{}
	}
	s.cancels[id] = cancel
	s.mu.Unlock()
}

// done forgets request id; cancel ends it (the server cancelled it).
func (s *serverRequests) done(id jsonrpc.ID) {
	s.mu.Lock()
	cancel := s.cancels[id]
	delete(s.cancels, id)
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (s *serverRequests) cancelAll() {
	s.mu.Lock()
	cancels := s.cancels
	s.cancels = nil
	s.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}

// serverMessage handles a notification or request of the server met on a
// raw call's stream as the SDK session handles those on its own streams:
// notifications go to Options.Relay (relayNotifications) or mark lists
// changed, requests are answered through it (relayRequests) off the
// stream's reading, and their responses are POSTed back.
func (h *httpRaw) serverMessage(req *jsonrpc.Request, s *serverRequests) {
	u := h.u
	if req.IsCall() {
		ctx, cancel := context.WithCancel(h.group.Context())
		s.add(req.ID, cancel)
		if !h.group.Go(func(context.Context) {
			defer s.done(req.ID)
			h.answerRequest(ctx, req)
		}) {
			s.done(req.ID)
		}
		return
	}
	switch req.Method {
	case "notifications/cancelled":
		var p mcp.CancelledParams
		if json.Unmarshal(req.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
				s.done(id)
			}
		}
	case "notifications/tools/list_changed":
		u.listChangedUnlessNoLists(kindTools)
	case "notifications/prompts/list_changed":
		u.listChangedUnlessNoLists(kindPrompts)
	case "notifications/resources/list_changed":
		u.listChangedUnlessNoLists(kindResources)
	default:
		u.relayNote(req)
	}
}

// relayNote passes a notification the server sent toward a client on to
// Options.Relay (see relayed); others, and malformed ones, are dropped. A
// panic in the relay is logged, never passed on: it would stop the stream
// or the noteQueue it runs on.
func (u *Upstream) relayNote(req *jsonrpc.Request) {
	r := u.opts.Relay
	defer func() {
		if p := recover(); p != nil {
			u.log.Error("panic relaying a notification", zap.String(keyMethod, req.Method),
				zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
		}
	}()
	switch req.Method {
	case "notifications/progress":
		if p := decodeParams[mcp.ProgressNotificationParams](r, req); p != nil {
			r.Progress(u, p)
		}
	case "notifications/message":
		if p := decodeParams[mcpx.LoggingMessageParams](r, req); p != nil {
			r.Log(u, p)
		}
	case "notifications/resources/updated":
		if p := decodeParams[mcp.ResourceUpdatedNotificationParams](r, req); p != nil {
			r.ResourceUpdated(u, p)
		}
	case "notifications/elicitation/complete":
		if p := decodeParams[mcp.ElicitationCompleteParams](r, req); p != nil {
			r.ElicitationComplete(u, p)
		}
	}
}

// listChangedUnlessNoLists is the SDK session's list_changed handlers
// (newClient): none with Options.NoLists.
func (u *Upstream) listChangedUnlessNoLists(k kind) {
	if !u.opts.NoLists {
		u.listChanged(k)
	}
}

// decodeParams decodes the params of a notification for r; nil when r is
// nil (the notification is dropped) or the params are absent or malformed.
func decodeParams[P any](r Relay, req *jsonrpc.Request) *P {
	if r == nil || len(req.Params) == 0 {
		return nil
	}
	p := new(P)
	if err := json.Unmarshal(req.Params, p); err != nil {
		return nil
	}
	return p
}

// answerRequest answers a server request through Options.Relay, as
// relayRequests does for the SDK session: only what the connection
// declared capabilities for; ping is answered here, anything else refused.
// The answer is POSTed back to the upstream.
func (h *httpRaw) answerRequest(ctx context.Context, req *jsonrpc.Request) {
	res, err := h.u.relayRawRequest(ctx, req.Method, req.Params)
	resp := &jsonrpc.Response{ID: req.ID, Error: err}
	if err == nil {
		if resp.Result, err = json.Marshal(res); err != nil {
			resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
			resp.Result = nil
		}
	}
	data, err := jsonrpc.EncodeMessage(resp)
	if err == nil {
		err = h.post(h.group.Context(), data, "")
	}
	if err != nil {
		h.u.log.Warn("answering a server request on a raw call's stream", zap.String(keyMethod, req.Method), zap.Error(redact.Error(err)))
	}
}

// relayRawRequest is relayRequests for a request with raw params.
func (u *Upstream) relayRawRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	r, caps := u.opts.Relay, u.opts.Capabilities
	declared := r != nil && caps != nil && (method == "sampling/createMessage" && mcpx.Sampling(caps) != nil ||
		method == "elicitation/create" && caps.Elicitation != nil ||
		method == "roots/list" && mcpx.RootsV2(caps) != nil)
	switch {
	case method == "ping":
		return struct{}{}, nil
	case !declared:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%q not supported", method)}
	case method == "sampling/createMessage":
		var p mcpx.CreateMessageWithToolsParams
		if err := unmarshalParams(params, &p); err != nil {
			return nil, err
		}
		return r.CreateMessage(ctx, u, &p)
	case method == "elicitation/create":
		var p mcp.ElicitParams
		if err := unmarshalParams(params, &p); err != nil {
			return nil, err
		}
		return r.Elicit(ctx, u, &p)
	}
	var p mcpx.ListRootsParams
	if len(params) > 0 {
		if err := unmarshalParams(params, &p); err != nil {
			return nil, err
		}
	}
	return r.ListRoots(ctx, u, &p)
}

func unmarshalParams(params json.RawMessage, p any) error {
	if len(params) == 0 {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
	}
	if err := json.Unmarshal(params, p); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	return nil
}

// notifyCancelled tells the upstream that raw call n was abandoned, off
// the caller's path; Close waits for it. The POST outlives the closing of
// the connection (within cancelTimeout): a call is often abandoned because
// its client's session ended, which closes that session's per-client
// upstream right after, and the upstream must still hear of it (its
// session's DELETE does not cancel the calls in flight).
func (h *httpRaw) notifyCancelled(n uint64, cause error) {
	h.group.Go(func(ctx context.Context) {
		ctx = context.WithoutCancel(ctx)
		msg := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`)
		msg = appendRawID(msg, n)
		msg = append(msg, `,"reason":`...)
		msg = envelope.AppendString(msg, cause.Error())
		msg = append(msg, "}}"...)
		if err := h.post(ctx, msg, "notifications/cancelled"); err != nil {
			h.u.log.Debug("notifying a cancelled raw call", zap.Error(redact.Error(err)))
		}
	})
}

// post sends msg, a notification (method) or a response (no method), to
// the upstream with the session's headers, within cancelTimeout.
func (h *httpRaw) post(ctx context.Context, msg []byte, method string) error {
	ctx, cancel := context.WithTimeout(ctx, cancelTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(msg))
	if err != nil {
		return err
	}
	h.setHeaders(req.Header)
	if h.meta != nil && method != "" {
		req.Header["Mcp-Method"] = []string{method}
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &httpStatusError{status: resp.StatusCode}
	}
	return nil
}
