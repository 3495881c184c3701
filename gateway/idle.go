package gateway

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// idleGrain divides gateway.limits.sessionIdleTimeout into the shortest
// wait between two looks for idle sessions: a session ends at most 1/32 of
// the timeout after it reached it, and sessions busy all the time cannot
// make the sweeper wake more often than that.
const idleGrain = 32

// sweepIdle ends the streamable sessions that had no request in flight
// (an open GET stream counts as one) for gateway.limits.sessionIdleTimeout,
// until ctx is done. It reads the timeout from the config serving at each
// look, and sleeps until a session may reach it, or until a reload wakes it
// (clients.wakeSweeper); requests only store their last use (client.begin,
// client.end). When ctx is done it ends the streamable sessions left
// (closeStreamable).
func (g *Gateway) sweepIdle(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		idle := g.current().cfg.Gateway.Limits.SessionIdleTimeout
		gone, next := g.clients.takeIdle(time.Now(), idle)
		for _, cl := range gone {
			g.log.Debug("idle session ended", zap.String(keyPrincipal, ownerName(cl.id)), zap.Duration(keyIdle, idle))
			g.endClient(cl, errSessionIdle)
		}
		t.Reset(next)
		select {
		case <-ctx.Done():
			g.closeStreamable()
			return
		case <-t.C:
		case <-g.clients.wake:
		}
	}
}

// takeIdle removes and returns the streamable sessions last used before
// now-idle with no request in flight, marked ending, and returns how long
// until the next one may be idle that long (at least idle/idleGrain).
func (c *clients) takeIdle(now time.Time, idle time.Duration) (gone []*client, next time.Duration) {
	cutoff := now.Add(-idle).UnixNano()
	next = idle // a session used from now on times out no sooner
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, set := range c.byOwner {
		for cl := range set {
			if cl.kind != kindStreamable || cl.busy.Load() != 0 {
				continue
			}
			// used before busy: end stores used, then lowers busy.
			if used := cl.used.Load(); used > cutoff {
				next = min(next, time.Duration(used-cutoff))
				continue
			}
			if cl.busy.CompareAndSwap(0, ending) { // else a request began: not idle
				gone = append(gone, cl)
			}
		}
	}
	for _, cl := range gone {
		c.removeLocked(cl)
	}
	return gone, max(next, idle/idleGrain)
}

// wakeSweeper makes sweepIdle look again now: the idle timeout changed.
func (c *clients) wakeSweeper() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}
