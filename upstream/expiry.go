package upstream

import (
	"sync/atomic"
	"time"
)

// The timeouts of the calls StartRaw starts (docs/architecture.md, The
// stdio fast path). A timer per call would cost more than the call: arming
// one on a processor whose timers are all stopped (as they are between two
// calls of one session) wakes another thread to watch it, a futex wake-up
// and a context switch per call. Instead one timer per connection sweeps
// the pending calls every tick, an eighth of the call timeout (at least
// minSweepTick, at most maxSweepTick), while calls are being started or
// are pending, and stops when a tick finds neither: a call ends between
// its timeout and a tick after it. CallRaw, whose caller waits anyway,
// keeps a timer of its own.

const (
	minSweepTick = 10 * time.Millisecond
	maxSweepTick = time.Second
)

// expiry states.
const (
	expiryIdle  = iota // the timer is not armed
	expiryQuiet        // armed; no call started since the last tick
	expiryBusy         // armed; calls started since the last tick
)

// expiry is the sweep of one stdio connection's started calls.
type expiry struct {
	c     *stdioConn
	timer *time.Timer
	state atomic.Uint32
	tick  atomic.Int64 // time.Duration between sweeps, set when armed
}

// newExpiry returns c's sweep, not armed.
func newExpiry(c *stdioConn) *expiry {
	e := &expiry{c: c}
	e.timer = time.AfterFunc(time.Hour, e.sweep)
	e.timer.Stop()
	return e
}

// started notes a call that is now pending, with its call timeout; it arms
// the timer if no tick is due.
func (e *expiry) started(timeout time.Duration) {
	if e.state.Load() == expiryBusy || e.state.Swap(expiryBusy) != expiryIdle {
		return
	}
	tick := min(max(timeout/8, minSweepTick), maxSweepTick)
	e.tick.Store(int64(tick))
	e.timer.Reset(tick)
}

// sweep ends the pending started calls whose deadline has passed, then
// arms the timer again unless no call is pending or was started since the
// last tick. A call started while it decides finds the timer either armed
// or idle (it then arms it): the state changes are atomic.
func (e *expiry) sweep() {
	now := time.Now()
	var expired []*RawCall
	waiting := false
	c := e.c
	c.mu.Lock()
	for _, rc := range c.pending {
		switch call := rc.async; {
		case call == nil: // CallRaw's: it has a timer of its own
		case now.Before(call.deadline):
			waiting = true
		default:
			expired = append(expired, call)
		}
	}
	c.mu.Unlock()
	for _, call := range expired {
		c.abandon(call.n, &call.rc, errCallTimeout)
	}
	if e.state.CompareAndSwap(expiryBusy, expiryQuiet) || waiting || !e.state.CompareAndSwap(expiryQuiet, expiryIdle) {
		e.timer.Reset(time.Duration(e.tick.Load()))
	}
}

// stop disarms the timer for good (the connection has closed).
func (e *expiry) stop() { e.timer.Stop() }
