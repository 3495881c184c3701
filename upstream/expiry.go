package upstream

import (
	"sync/atomic"
	"time"
)

// The timeouts of raw calls (docs/architecture.md, The stdio fast path). A
// timer per call would cost more than the call: arming one on a processor
// whose timers are all stopped (as they are between two calls of one
// session) wakes another thread to watch it, a futex wake-up and a context
// switch per call. Instead one timer per connection sweeps the pending
// calls every tick while calls are being started or are pending, and stops
// when a tick finds neither: a call ends between its timeout and a tick
// after it. A stdio connection ticks at an eighth of the call timeout (at
// least minSweepTick, at most maxSweepTick); an HTTP one at minSweepTick,
// which also bounds the drain of an answer stream (httpraw.go).

const (
	minSweepTick = 10 * time.Millisecond
	maxSweepTick = time.Second
)

// sweepTick is the tick of a stdio connection whose calls time out after
// timeout.
func sweepTick(timeout time.Duration) time.Duration {
	return min(max(timeout/8, minSweepTick), maxSweepTick)
}

// expiry states.
const (
	expiryIdle  = iota // the timer is not armed
	expiryQuiet        // armed; no call started since the last tick
	expiryBusy         // armed; calls started since the last tick
)

// expiry is the sweep of one connection's pending calls.
type expiry struct {
	// expire ends the calls whose deadline is before now and reports
	// whether others are still waiting; it runs on the timer's goroutine.
	expire func(now time.Time) (waiting bool)
	timer  *time.Timer
	state  atomic.Uint32
	tick   atomic.Int64 // time.Duration between sweeps, set when armed
}

// newExpiry returns a sweep that calls expire, not armed.
func newExpiry(expire func(now time.Time) bool) *expiry {
	e := &expiry{expire: expire}
	e.timer = time.AfterFunc(time.Hour, e.sweep)
	e.timer.Stop()
	return e
}

// started notes a call that is now pending; it arms the timer, to tick
// every tick, if no tick is due.
func (e *expiry) started(tick time.Duration) {
	if e.state.Load() == expiryBusy || e.state.Swap(expiryBusy) != expiryIdle {
		return
	}
	e.tick.Store(int64(tick))
	e.timer.Reset(tick)
}

// sweep ends the pending calls whose deadline has passed, then arms the
// timer again unless no call is pending or was started since the last
// tick. A call started while it decides finds the timer either armed or
// idle (it then arms it): the state changes are atomic.
func (e *expiry) sweep() {
	waiting := e.expire(time.Now())
	if e.state.CompareAndSwap(expiryBusy, expiryQuiet) || waiting || !e.state.CompareAndSwap(expiryQuiet, expiryIdle) {
		e.timer.Reset(time.Duration(e.tick.Load()))
	}
}

// stop disarms the timer for good (the connection has closed).
func (e *expiry) stop() { e.timer.Stop() }

// expire ends c's pending calls whose deadline has passed (expiry): their
// upstream is sent notifications/cancelled, and they end with
// errCallTimeout.
func (c *stdioConn) expire(now time.Time) bool {
	type due struct {
		n  uint64
		rc *rawCall
	}
	var expired []due
	waiting := false
	c.mu.Lock()
	for n, rc := range c.pending {
		switch {
		case rc.deadline.IsZero(): // no timeout
		case now.Before(rc.deadline):
			waiting = true
		default:
			expired = append(expired, due{n, rc})
		}
	}
	c.mu.Unlock()
	for _, d := range expired {
		c.abandon(d.n, d.rc, errCallTimeout)
	}
	return waiting
}
