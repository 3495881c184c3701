package lifecycle

import (
	"sync"
	"sync/atomic"
)

// closedChan is returned by Gauge.Zero when nothing is in progress.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Gauge counts work in progress. Add and Done cost one atomic operation
// each (Done a second one, a load, and a lock only when it brings the count
// to zero while someone waits), so they fit hot paths; Zero hands waiters a
// channel instead of making them poll. The zero value is ready; a Gauge
// must not be copied.
type Gauge struct {
	n atomic.Int64
	// waiting is set, under mu, while zero is non-nil: Done then signals.
	waiting atomic.Bool
	mu      sync.Mutex
	zero    chan struct{}
}

// Add counts one more unit of work in progress.
func (c *Gauge) Add() { c.n.Add(1) }

// Done counts one unit of work as finished; each Add must be matched by
// one Done.
func (c *Gauge) Done() {
	if c.n.Add(-1) != 0 || !c.waiting.Load() {
		return
	}
	c.mu.Lock()
	if c.zero != nil && c.n.Load() == 0 {
		close(c.zero)
		c.zero = nil
		c.waiting.Store(false)
	}
	c.mu.Unlock()
}

// Load returns the number of units in progress.
func (c *Gauge) Load() int64 { return c.n.Load() }

// Zero returns a channel that is closed once no work is in progress: at
// once when none is now, else when the count next reaches zero.
func (c *Gauge) Zero() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	// waiting is set before the count is read: a Done that brings it to
	// zero after this read sees waiting, and closes the channel.
	c.waiting.Store(true)
	if c.n.Load() == 0 {
		if c.zero == nil {
			c.waiting.Store(false)
		}
		return closedChan
	}
	if c.zero == nil {
		c.zero = make(chan struct{})
	}
	return c.zero
}
