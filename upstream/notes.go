package upstream

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The notifications a server sends toward a client (progress, log
// messages, resource updates, elicitation completions) must reach it
// before the answer to the call they belong to: a client drops progress
// for a call that has ended. The SDK runs notification handlers on a
// queue of its own while it hands responses to their callers at once, so
// nothing tells a caller when the notifications read ahead of its answer
// have been relayed. On the connections the gateway reads itself (stdio,
// and legacy SSE through relayConn) they therefore skip the SDK: relayConn
// queues them on the Upstream's noteQueue, which relays them in order on
// a goroutine of its own, and Settle waits for that queue to pass every
// notification read before the answer. Raw calls over streamable HTTP
// relay the notifications of a call's stream as they read them, before
// its answer (httprelay.go), so they need no queue.

// noteQueue relays notifications to Options.Relay in the order they were
// read, off the connection's reading goroutine: a slow client delays
// notifications, never the upstream's answers. Its goroutine runs while
// the queue holds work and exits when it empties. The counters survive
// reconnections, so a Settle that spans one still ends.
type noteQueue struct {
	relay func(*jsonrpc.Request) // must not panic

	mu      sync.Mutex
	items   []*jsonrpc.Request
	running bool
	queued  uint64 // notifications queued, ever
	done    uint64 // of those, relayed
	waiters []noteWaiter
}

// noteWaiter is a Settle waiting for done to reach at.
type noteWaiter struct {
	at uint64
	ch chan struct{}
}

// push queues n; its goroutine relays it.
func (q *noteQueue) push(n *jsonrpc.Request) {
	q.mu.Lock()
	q.items = append(q.items, n)
	q.queued++
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.run()
	}
}

// run relays the queue until it is empty.
func (q *noteQueue) run() {
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			q.running = false
			q.items = nil // let a burst's backing array go
			q.mu.Unlock()
			return
		}
		n := q.items[0]
		q.items[0] = nil
		q.items = q.items[1:]
		q.mu.Unlock()

		q.relay(n)

		q.mu.Lock()
		q.done++
		kept := q.waiters[:0]
		for _, w := range q.waiters {
			if w.at <= q.done {
				close(w.ch)
			} else {
				kept = append(kept, w)
			}
		}
		q.waiters = kept
		q.mu.Unlock()
	}
}

// settle waits until every notification queued before it was called has
// been relayed, or max has passed; it reports whether they all were.
func (q *noteQueue) settle(max time.Duration) bool {
	q.mu.Lock()
	if q.done >= q.queued {
		q.mu.Unlock()
		return true
	}
	w := noteWaiter{at: q.queued, ch: make(chan struct{})}
	q.waiters = append(q.waiters, w)
	q.mu.Unlock()

	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-w.ch:
		return true
	case <-t.C:
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, o := range q.waiters {
		if o.ch == w.ch {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			return false
		}
	}
	return true // relayed as the timer fired
}

// Settle waits until the notifications toward clients that this upstream
// sent before the answer to a call just returned have been relayed
// (Options.Relay), or max has passed; it reports whether they were. Call
// it between a call's answer and the end of what the call's notifications
// go to. It returns at once when nothing is queued, as is the rule.
func (u *Upstream) Settle(max time.Duration) bool {
	return u.notes.settle(max)
}

// relayed reports whether method is one of the notifications Options.Relay
// receives: those relayNote passes on (keep the two lists together).
func relayed(method string) bool {
	switch method {
	case "notifications/progress", "notifications/message",
		"notifications/resources/updated", "notifications/elicitation/complete":
		return true
	}
	return false
}

// relayConn is a connection whose notifications for Options.Relay go to
// the Upstream's noteQueue rather than to the SDK. It wraps only
// connections with no optional methods the SDK looks for (see
// relayTransport).
type relayConn struct {
	mcp.Connection
	q *noteQueue
}

// Read returns the next message for the SDK, queueing the relayed
// notifications met on the way.
func (c relayConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return nil, err
		}
		if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() && relayed(req.Method) {
			c.q.push(req)
			continue
		}
		return msg, nil
	}
}

// relayTransport connects through t and wraps its connection in a
// relayConn.
type relayTransport struct {
	t mcp.Transport
	q *noteQueue
}

func (r relayTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.t.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return relayConn{Connection: c, q: r.q}, nil
}

// withNoteQueue returns t with its relayed notifications going through
// u's noteQueue, when u has a Relay and t's connections can be wrapped:
// the SDK's streamable HTTP connection has unexported methods the SDK
// needs (its session state), which a wrapper would hide; its raw calls
// relay their own streams (httprelay.go), so only notifications outside
// any call's stream reach the SDK's handlers there.
func (u *Upstream) withNoteQueue(t mcp.Transport) mcp.Transport {
	if u.opts.Relay == nil {
		return t
	}
	if _, ok := t.(*mcp.StreamableClientTransport); ok {
		return t
	}
	return relayTransport{t: t, q: &u.notes}
}
