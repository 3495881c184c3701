package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/manifold-mcp/manifold/internal/envelope"
)

// callResponse is the HTTP response of one call the raw path serves on
// streamable HTTP. It answers with application/json when the result comes
// first, and switches to text/event-stream the moment something of the
// call's must reach the client before its result (a progress or log
// notification, a server→client request), as the transport allows: each
// message is then one event, without an id (a 2026-07-28 stream is not
// resumable, and the gateway stores no events). The relay writes from the
// upstream's side (its notification queue, or a raw call's stream) while
// the call's goroutine waits, hence the lock; after the result nothing
// more is written.
type callResponse struct {
	// ids, when not nil, is the session's, where ask awaits the client's
	// answers (streamableask.go).
	ids  *sessionIDs
	mu   sync.Mutex
	w    http.ResponseWriter
	sse  bool
	done bool
}

// event sends msg, a JSON-RPC notification or request, ahead of the
// result, switching the response to SSE on the first. It reports false
// when the call has already been answered or the client is gone.
func (c *callResponse) event(msg []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return false
	}
	if !c.sse {
		h := c.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache, no-transform")
		c.w.WriteHeader(http.StatusOK)
		c.sse = true
	}
	if err := writeSSE(c.w, msg); err != nil {
		c.done = true // the client is gone: nothing more can reach it
		return false
	}
	return true
}

// errAnswered: a notification of a call that has been answered (or whose
// client is gone) has nowhere to go.
var errAnswered = errors.New("the call has been answered")

// notify sends a notification of the call, method with params, ahead of
// its result.
func (c *callResponse) notify(method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", method, err)
	}
	msg := make([]byte, 0, len(method)+len(p)+40)
	msg = append(msg, `{"jsonrpc":"2.0","method":`...)
	msg = envelope.AppendString(msg, method)
	msg = append(msg, `,"params":`...)
	msg = append(append(msg, p...), '}')
	if !c.event(msg) {
		return errAnswered
	}
	return nil
}

// finish sends msg, the call's JSON-RPC response, with status (for an
// answer before any event: 200, or the status the transport maps an error
// to), and ends the response.
func (c *callResponse) finish(status int, msg []byte) {
	c.finishParts(status, msg)
}

// finishParts is finish for a response in pieces, written one after the
// other (rawAnswer).
func (c *callResponse) finishParts(status int, parts ...[]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	if c.sse {
		_ = writeSSE(c.w, parts...)
		return
	}
	c.w.Header().Set("Content-Type", "application/json")
	c.w.WriteHeader(status)
	for _, p := range parts {
		if _, err := c.w.Write(p); err != nil {
			return
		}
	}
}

// writeSSE writes a message, given in pieces, as one server-sent event
// and flushes it. JSON may hold line breaks only as whitespace between
// tokens (an upstream's pretty printing); each line becomes a data line of
// its own, which the client joins with newlines again.
func writeSSE(w http.ResponseWriter, parts ...[]byte) error {
	if _, err := io.WriteString(w, "event: message\ndata: "); err != nil {
		return err
	}
	if err := writeBroken(w, parts, "\ndata: "); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "\n\n"); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}
