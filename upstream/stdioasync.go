package upstream

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"
)

// Raw calls without a waiting goroutine (docs/architecture.md, The stdio
// fast path). CallRaw parks its caller until the connection's reading
// goroutine hands it the response over a channel: two goroutine hand-offs
// per call (the caller's goroutine, then its wake-up), each a futex and
// often a thread wake-up. StartRaw sends the request from the caller's
// goroutine without waiting, and the reading goroutine completes the call
// itself, through a callback: the stdio front (gateway) serves a call from
// the goroutine that read it to the one that reads its answer, and no
// goroutine waits in between.

// RawDone receives the outcome of a call StartRaw started: what CallRaw
// would have returned for it.
type RawDone func(result []byte, err error)

// RawCall is a call StartRaw started; Abort ends it early.
type RawCall struct {
	u      *Upstream
	c      *stdioConn
	n      uint64
	method string
	done   RawDone
	rc     rawCall // pending in c under n; rc.deadline ends it (expiry.go)
}

// StartRaw sends a request for method with params, as CallRaw does (the
// same request, limits and errors), without waiting for the response: done
// is called once with the outcome, from the goroutine that reads the
// connection (or from the one that fails, closes or aborts the call, which
// may be StartRaw's caller, before StartRaw returns), and must not block
// for long, since the connection reads nothing else meanwhile. It returns
// nil, having sent nothing and never calling done, when the call cannot
// start at once: the upstream is not connected, its connection is not a
// stdio one, or no concurrency slot is free; the caller then uses CallRaw,
// which waits for those.
//
// StartRaw itself never blocks on the upstream: when the pipe to it is
// full, or the SDK is writing to it, the request is written by a goroutine
// of its own, so that a client that writes without reading cannot
// deadlock its stdio front against the upstream.
func (u *Upstream) StartRaw(method string, params []byte, done RawDone) *RawCall {
	u.mu.Lock()
	c, ok := u.raw.(*stdioConn)
	u.mu.Unlock()
	if !ok {
		return nil
	}
	select {
	case u.slots <- struct{}{}:
		u.inflight.Add()
	default:
		return nil
	}
	call := &RawCall{u: u, c: c, method: method, done: done}
	call.rc.async = call
	call.rc.deadline = time.Now().Add(u.callTimeout)
	if err := c.start(call, params); err != nil {
		u.release()
		return nil
	}
	c.expiry.started(sweepTick(u.callTimeout))
	return call
}

// finish completes the call with its reply: it gives the slot back and
// maps the reply as CallRaw does.
func (call *RawCall) finish(r rawReply) {
	call.u.release()
	call.done(call.u.rawOutcome(call.method, r.result, r.rpcErr, r.err, errors.Is(r.err, context.Canceled) || errors.Is(r.err, context.DeadlineExceeded)))
}

// Abort ends the call if it is still waiting for its response: the
// upstream is sent notifications/cancelled and done gets cause (as CallRaw
// returns ctx.Err() when its ctx ends), on the caller's goroutine, before
// Abort returns. A call already answered is left alone.
func (call *RawCall) Abort(cause error) {
	call.c.abandon(call.n, &call.rc, cause)
}

// start sends call's request and records it as pending; an error means
// nothing was sent and call is not pending (the connection has ended).
func (c *stdioConn) start(call *RawCall, params []byte) error {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	c.nextID++
	call.n = c.nextID
	c.pending[call.n] = &call.rc
	c.mu.Unlock()
	bp := lineBuffers.Get().(*[]byte)
	line, _, err := appendRequest((*bp)[:0], call.n, call.method, params, c.meta)
	if err != nil {
		c.mu.Lock()
		delete(c.pending, call.n)
		c.mu.Unlock()
		lineBuffers.Put(bp)
		return err
	}
	line = append(line, '\n')
	if c.writeAsync(line) && cap(line) <= lineBufferKeep {
		*bp = line[:0]
		lineBuffers.Put(bp)
	}
	return nil
}

// abandon completes raw call n with err if it is still pending, and tells
// the upstream (notifications/cancelled), as call does when its ctx ends.
func (c *stdioConn) abandon(n uint64, rc *rawCall, err error) {
	c.mu.Lock()
	pending := c.pending[n] == rc
	if !pending {
		c.mu.Unlock()
		return
	}
	delete(c.pending, n)
	notify := c.err == nil
	if notify {
		c.notifying.Add(1)
	}
	c.mu.Unlock()
	if notify {
		c.notifyCancelled(n, err)
	}
	rc.complete(rawReply{err: err})
}

// writeAsync writes line, a whole message, without blocking its caller:
// at once when the pipe takes it (one system call), else from a goroutine
// of its own. A write that fails fails the connection, as call's does.
// It reports whether it is done with line (false: a goroutine has it).
func (c *stdioConn) writeAsync(line []byte) bool {
	if c.writeMu.TryLock() {
		rest, err := c.tryWrite(line)
		if err == nil && len(rest) == 0 {
			c.writeMu.Unlock()
			return true
		}
		if err != nil {
			c.writeMu.Unlock()
			c.broken(err)
			return true
		}
		// The pipe is full: the rest goes out from a goroutine that keeps
		// the lock, so that no other message lands inside this one.
		c.writers.Add(1)
		go func() {
			defer c.writers.Done()
			_, err := c.w.Write(rest)
			c.writeMu.Unlock()
			if err != nil {
				c.broken(err)
			}
		}()
		return false
	}
	c.writers.Add(1)
	go func() {
		defer c.writers.Done()
		if err := c.write(line); err != nil {
			c.broken(err)
		}
	}()
	return false
}

// tryWrite makes one attempt to write line to the pipe, without waiting
// for room in it, and returns what it could not write. A writer that
// cannot make one attempt (an in-memory pipe, which might block) is not
// tried.
func (c *stdioConn) tryWrite(line []byte) ([]byte, error) {
	tw, ok := c.w.(interface{ TryWrite([]byte) (int, error) })
	if !ok {
		return line, nil // no way to know whether it would block
	}
	n, err := tw.TryWrite(line)
	if err != nil {
		return nil, err
	}
	return line[n:], nil
}

// broken ends the connection after a failed write, as call does: the
// pending calls fail with err.
func (c *stdioConn) broken(err error) {
	if errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.EPIPE) {
		err = errConnClosed
	}
	c.fail(err)
	go c.Close() // Close waits for the writers, this one among them
}
