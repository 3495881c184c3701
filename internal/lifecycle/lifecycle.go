// Package lifecycle owns goroutines. A Group is the one place a component
// stores whether it runs: its context, its closed state and the wait group
// of every goroutine it started, as Traefik's safe.Pool does. A Gauge counts
// work in progress and signals, without polling, when none is left.
package lifecycle

import (
	"context"
	"sync"

	"go.uber.org/zap"
)

// state is a Group's phase; it only moves forward.
type state uint8

const (
	idle    state = iota // before Start
	running              // between Start and Close
	closed               // Close has begun
)

// Group runs goroutines that end when it closes. The zero value is not
// usable: create one with New. Its methods are safe for concurrent use.
//
// A Group is idle until Start, running until Close, then closed for good.
// Go and Defer are refused (they return false and do nothing) unless it
// runs, so that nothing starts that Close would not wait for.
type Group struct {
	log *zap.Logger

	// mu guards the fields below; Go takes it shared, so goroutines start
	// concurrently, and Start and Close exclusively.
	mu       sync.RWMutex
	state    state
	ctx      context.Context
	cancel   context.CancelFunc
	deferred []func()
	wg       sync.WaitGroup
}

// New returns an idle Group that logs recovered panics to log (nil: no-op).
func New(log *zap.Logger) *Group {
	if log == nil {
		log = zap.NewNop()
	}
	return &Group{log: log}
}

// Start makes the Group run under a context derived from parent's values
// but not its cancellation: only Close ends it. It reports false, and does
// nothing, when the Group was started or closed before.
func (g *Group) Start(parent context.Context) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != idle {
		return false
	}
	g.ctx, g.cancel = context.WithCancel(context.WithoutCancel(parent))
	g.state = running
	return true
}

// Go runs f in a goroutine that Close waits for, and reports true; f must
// return once its ctx (the Group's) is done. A panic in f is recovered and
// logged. Go reports false, and f does not run, unless the Group runs.
func (g *Group) Go(f func(ctx context.Context)) bool {
	g.mu.RLock()
	if g.state != running {
		g.mu.RUnlock()
		return false
	}
	g.wg.Add(1) // under mu: Close has not begun waiting
	ctx := g.ctx
	g.mu.RUnlock()
	go func() {
		defer g.wg.Done()
		defer g.recover()
		f(ctx)
	}()
	return true
}

// Defer registers f to run when Close has waited for the goroutines, in
// the reverse order of registration, and reports true; it reports false,
// and f never runs, unless the Group runs.
func (g *Group) Defer(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != running {
		return false
	}
	g.deferred = append(g.deferred, f)
	return true
}

// Context returns the Group's context, done once Close has begun. Before
// Start it returns a context that is never done (nothing runs under it).
func (g *Group) Context() context.Context {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.ctx == nil {
		return context.Background()
	}
	return g.ctx
}

// Running reports whether the Group was started and not closed.
func (g *Group) Running() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.state == running
}

// Closed reports whether Close has begun.
func (g *Group) Closed() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.state == closed
}

// Close refuses new goroutines, cancels the context, waits for every
// goroutine started by Go to return, then runs the deferred functions. It
// may be called more than once, and before Start; later calls wait too.
func (g *Group) Close() {
	g.mu.Lock()
	g.state = closed
	cancel, deferred := g.cancel, g.deferred
	g.deferred = nil
	g.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	g.wg.Wait()
	for i := len(deferred) - 1; i >= 0; i-- {
		g.run(deferred[i])
	}
}

// run calls f, recovering a panic.
func (g *Group) run(f func()) {
	defer g.recover()
	f()
}

// recover logs a panic of the calling goroutine; deferred directly.
func (g *Group) recover() {
	if p := recover(); p != nil {
		g.log.Error("panic in a goroutine", zap.Any("panic", p), zap.Stack("stack"))
	}
}
