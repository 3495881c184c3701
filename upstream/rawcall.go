package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/redact"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ErrRawUnsupported: the upstream's connection takes no raw calls (only
// stdio and streamable HTTP upstreams and Options.Pipe do); use the typed
// methods.
var ErrRawUnsupported = errors.New("upstream takes no raw calls")

// errCallTimeout is the end of a raw call's own timeout.
var errCallTimeout = errors.New("call timeout")

// rawCall is one raw call waiting for its response; pooled.
type rawCall struct {
	done chan rawReply // buffered 1: the reader never blocks on it
	// deadline is the end of the call's timeout (expiry.go); zero: none.
	deadline time.Time
	// async, when set, takes the reply instead of done: a call StartRaw
	// started, which no goroutine waits for (stdioasync.go).
	async *RawCall
}

// complete hands rc its reply; the caller has removed rc from the pending
// calls, so that this happens once.
func (rc *rawCall) complete(r rawReply) {
	if rc.async != nil {
		rc.async.finish(r)
		return
	}
	rc.done <- r
}

// rawReply is the outcome of a raw call: the result value (a subslice of
// the response line, which the reply owns), or the upstream's JSON-RPC
// error, or the connection's failure.
type rawReply struct {
	result []byte
	rpcErr *jsonrpc.Error
	err    error
}

var (
	rawCalls = sync.Pool{New: func() any { return &rawCall{done: make(chan rawReply, 1)} }}
	// lineBuffers hold the request lines being written.
	lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
)

// lineBufferKeep: a buffer grown past this is not returned to the pool.
const lineBufferKeep = 64 << 10

// call sends a request for method with params (raw JSON; nil sends none)
// under a raw id and waits for its response, ctx or the connection's end.
// When ctx ends or the deadline passes first (the sweep, expiry.go, then
// ends the call with errCallTimeout), notifications/cancelled is sent for
// the id.
func (c *stdioConn) call(ctx context.Context, deadline time.Time, method string, params []byte) ([]byte, *jsonrpc.Error, error) {
	bp := lineBuffers.Get().(*[]byte)
	c.mu.Lock()
	c.nextID++
	n := c.nextID
	c.mu.Unlock()
	line, _, err := appendRequest((*bp)[:0], n, method, params, c.meta)
	if err != nil {
		lineBuffers.Put(bp)
		return nil, nil, err
	}
	line = append(line, '\n')
	rc := rawCalls.Get().(*rawCall)
	rc.deadline = deadline
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		rawCalls.Put(rc)
		return nil, nil, err
	}
	c.pending[n] = rc
	c.mu.Unlock()
	if !deadline.IsZero() {
		c.expiry.started(sweepTick(time.Until(deadline)))
	}

	err = c.write(line)
	if cap(line) <= lineBufferKeep {
		*bp = line[:0]
		lineBuffers.Put(bp)
	}
	if err != nil {
		// A broken pipe: the connection is over (the SDK's next Read
		// ends). Record it as the cause, which also fails this call, then
		// close: nothing is left to notify.
		c.fail(err)
		c.forget(n, rc, false)
		c.Close()
		return nil, nil, err
	}

	select {
	case r := <-rc.done:
		rawCalls.Put(rc)
		return r.result, r.rpcErr, r.err
	case <-ctx.Done():
		if c.forget(n, rc, true) {
			c.notifyCancelled(n, context.Cause(ctx))
		}
		return nil, nil, ctx.Err()
	}
}

// forget removes raw call n if still pending; a reply that came meanwhile
// is drained, so that rc can be reused. With notify, it reports whether the
// upstream is to be told of the abandoned call (it was pending and the
// connection is up), and then counts the notification in c.notifying: the
// caller must send it (notifyCancelled), which ends the count.
func (c *stdioConn) forget(n uint64, rc *rawCall, notify bool) bool {
	c.mu.Lock()
	pending := c.pending[n] == rc
	if pending {
		delete(c.pending, n)
	}
	notify = notify && pending && c.err == nil
	if notify {
		c.notifying.Add(1) // before Close's Wait: both under mu
	}
	c.mu.Unlock()
	if !pending {
		<-rc.done
	}
	rawCalls.Put(rc)
	return notify
}

// notifyCancelled tells the upstream that raw call n was abandoned, off
// the caller's path (a peer that stops reading must not hold the caller),
// as the SDK does for its own calls. Close waits for it.
func (c *stdioConn) notifyCancelled(n uint64, cause error) {
	go func() {
		defer c.notifying.Done()
		line := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`)
		line = appendRawID(line, n)
		line = append(line, `,"reason":`...)
		line = envelope.AppendString(line, cause.Error())
		_ = c.write(append(line, "}}\n"...))
	}()
}

// CallRaw sends a request for method (tools/call, resources/read,
// prompts/get) with params, a JSON object given as bytes and sent as is,
// and returns the result as the upstream wrote it, never decoded. It
// shares the connection of the SDK session with the typed methods and
// their limits: the concurrency slots, the call timeout, and the errors
// (ErrUnavailable, ErrTimeout, ErrBusy, ErrClosed, ErrTooLarge; a
// JSON-RPC error from the upstream is returned wrapped, code intact). When
// ctx ends first the upstream is sent notifications/cancelled. Only stdio
// and streamable HTTP upstreams (and Options.Pipe) take raw calls; others
// (legacy SSE, Options.Transport) return ErrRawUnsupported before anything
// is sent. Over HTTP, a 404 to the session id is ErrUnavailable and makes
// the Upstream reconnect; another HTTP error status is an error naming it.
func (u *Upstream) CallRaw(ctx context.Context, method string, params []byte) ([]byte, error) {
	// No timer per call: the connection's sweep ends the call at its
	// deadline (expiry.go).
	deadline := time.Now().Add(u.callTimeout)
	l, err := u.acquireLive(ctx, deadline, true)
	if err != nil {
		return nil, err
	}
	defer u.release()
	result, rpcErr, err := l.raw.call(ctx, deadline, method, params)
	return u.rawOutcome(method, result, rpcErr, err, ctx.Err() != nil)
}

// rawOutcome maps the reply to a raw call of method to what CallRaw
// returns; gone: the caller gave up (err is then its context's error).
func (u *Upstream) rawOutcome(method string, result []byte, rpcErr *jsonrpc.Error, err error, gone bool) ([]byte, error) {
	switch {
	case rpcErr != nil:
		return nil, fmt.Errorf("upstream %q: calling %q: %w", u.cfg.Name, method, rpcErr)
	case err == nil:
		return result, nil
	case errors.Is(err, errCallTimeout):
		return nil, fmt.Errorf("upstream %q: %w after %s", u.cfg.Name, ErrTimeout, u.callTimeout)
	case gone:
		return nil, fmt.Errorf("upstream %q: %w", u.cfg.Name, err)
	case errors.Is(err, ErrTooLarge):
		return nil, fmt.Errorf("upstream %q: %w (%d bytes)", u.cfg.Name, ErrTooLarge, u.opts.MaxMessageBytes)
	}
	var status *httpStatusError
	if errors.As(err, &status) {
		return nil, fmt.Errorf("upstream %q: calling %q: %w", u.cfg.Name, method, err)
	}
	// net/http's errors show the upstream's URL, query included.
	return nil, redact.Error(fmt.Errorf("upstream %q: %w (connection lost: %v)", u.cfg.Name, ErrUnavailable, err))
}

// TakesRaw reports whether the current connection takes raw calls
// (CallRaw); false while disconnected.
func (u *Upstream) TakesRaw() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.raw != nil
}
