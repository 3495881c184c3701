package gateway

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A streamable session's end is reported by its connection, not waited
// for by a goroutine of its own (docs/architecture.md, Sessions): the SDK
// closes a session's connection once, whichever way the session ends (the
// gateway closing it, a broken write), and the gateway learns it there.
// An idle session thus costs no goroutine of the gateway's; the sweeper
// closes the sessions left when the gateway stops (closeStreamable).

// endingTransport is the transport a streamable session connects on: t,
// whose connection calls ended once the SDK closes it.
type endingTransport struct {
	t     mcp.Transport
	ended func()
}

// Connect connects t and wraps its connection.
func (e endingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := e.t.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &endingConn{Connection: c, ended: e.ended}, nil
}

// endingConn is a connection that calls ended after its first Close.
type endingConn struct {
	mcp.Connection
	once  sync.Once
	ended func()
}

// Close closes the connection, then calls ended the first time. The SDK
// calls it with its connection's state locked: ended must not use the
// session.
func (c *endingConn) Close() error {
	err := c.Connection.Close()
	c.once.Do(c.ended)
	return err
}

// trackStreamable records ss, a streamable session just connected, as
// watched without a goroutine: streamableClosed reports its end.
func (g *Gateway) trackStreamable(ss *mcp.ServerSession) {
	p := &g.perClient
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watched == nil {
		p.watched = map[*mcp.ServerSession]bool{}
	}
	p.watched[ss] = true
}

// streamableClosed is called when the SDK closed cl's connection: once the
// session has ended, a goroutine of the gateway releases what it held
// (sessionEnded). While the gateway stops, closeStreamable does.
func (g *Gateway) streamableClosed(cl *client) {
	ss := cl.ss.Load()
	if ss == nil {
		return // Connect failed: no session to release
	}
	g.life.Go(func(context.Context) {
		_ = ss.Wait() // how it ended does not matter here
		g.sessionEnded(ss)
	})
}

// closeStreamable ends every streamable session, as the gateway stops,
// cancelling their calls in flight first, and releases what they held.
func (g *Gateway) closeStreamable() {
	var wg sync.WaitGroup
	g.clients.byID.Range(func(_, v any) bool {
		cl := v.(*client)
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.endClient(cl, errShuttingDown)
			if ss := cl.ss.Load(); ss != nil {
				g.sessionEnded(ss)
			}
		}()
		return true
	})
	wg.Wait()
}
