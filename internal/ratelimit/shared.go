package ratelimit

import (
	"context"
	"hash/fnv"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manifold-mcp/manifold/config"
)

// Counter is the counter replicas share, in which a global rule counts its calls across the
// cluster: the Incr of the cluster's store (internal/cluster.Store), which adds n to key and
// returns its new value, a counter it creates expiring after ttl.
type Counter interface {
	Incr(ctx context.Context, key string, n int64, ttl time.Duration) (int64, error)
}

// SharedOptions tunes how the global rules of a Limiter count in a Counter (Share). The zero
// value is the defaults.
type SharedOptions struct {
	// Timeout bounds one call to the counter; past it the call falls back to the local
	// bucket. Default 50 ms.
	Timeout time.Duration
	// Backoff is how long after a failed call to the counter the local buckets alone decide,
	// so that a store that is down costs one timeout per Backoff, not one per call.
	// Default 1 s.
	Backoff time.Duration
	// Batch is how many tokens a replica reserves from the counter at once; 0 picks one per
	// rule: the window's limit / 32, at least 1 and at most 64.
	Batch int64
	// OnFallback, when set, is told of each failed call to the counter (the rule's key and
	// the error); it must not block.
	OnFallback func(rule string, err error)
	// WallEpoch is the Unix time, in nanoseconds, of the limiter's clock's zero (Now() == 0);
	// windows are numbered on it, so that replicas agree. Default: the process's epoch.
	WallEpoch int64
}

// shared is how a global rule counts in the counter replicas share: a fixed window per
// period of its rate (1 s for 5/s, 1 min for 100/m) holding at most the rate's N calls,
// numbered on the wall clock, keyed manifold:rl:<rule hash>:<window>. A replica reserves
// batch tokens at once and spends them locally (grant in the rule's state), so only one call
// in batch waits on the store.
type shared struct {
	counter    Counter
	prefix     string // "manifold:rl:<hash>:"
	window     int64  // ns
	limit      int64  // calls per window, all replicas together
	batch      int64
	timeout    time.Duration
	backoff    int64
	wallEpoch  int64
	onFallback func(string, error)
}

// grant packing: the window number's low 39 bits (the sign bit stays clear), a flag "the
// window is spent", and the tokens left (23 bits) in one int64, so that spending a token is one
// compare-and-swap.
const (
	leftBits  = 23
	leftMask  = 1<<leftBits - 1
	spentFlag = 1 << leftBits
	winShift  = leftBits + 1
	winMask   = 1<<39 - 1
	maxBatch  = 64
)

// sharedState is the part of a rule's state for the counter: the tokens this replica holds
// for the current window, and until when the counter is not asked (after an error).
type sharedState struct {
	grant     atomic.Int64
	downUntil atomic.Int64 // limiter clock, ns
	fallbacks atomic.Int64
	mu        sync.Mutex // held while refilling grant from the counter; never on the fast path
}

// Share makes the global rules (scope: global) of l with a rate count their calls in c as
// well as in their local bucket, so that the rate holds across every replica sharing c.
// Concurrency caps (maxConcurrent) and per-principal rules stay per replica. When c errs or
// is slower than o.Timeout the local bucket alone decides (a fallback, counted and told to
// o.OnFallback); a call never fails because the counter is down. Call it before l serves.
func (l *Limiter) Share(c Counter, o *SharedOptions) {
	if l == nil || c == nil {
		return
	}
	var opts SharedOptions
	if o != nil {
		opts = *o
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 50 * time.Millisecond
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	if opts.WallEpoch == 0 {
		opts.WallEpoch = epoch.UnixNano()
	}
	seen := map[string]int{}
	for _, r := range l.rules {
		if !r.global || r.interval == 0 {
			continue
		}
		n, per, err := config.ParseRate(r.rate)
		if err != nil || n <= 0 || per <= 0 {
			continue
		}
		batch := opts.Batch
		if batch <= 0 {
			batch = min(max(int64(n)/32, 1), maxBatch)
		}
		batch = min(batch, int64(n), leftMask)
		// identical rules get distinct keys, as they get distinct buckets
		h := fnv.New64a()
		h.Write([]byte(r.fingerprint))
		h.Write([]byte{byte(seen[r.fingerprint])})
		seen[r.fingerprint]++
		r.shared = &shared{
			counter:    c,
			prefix:     "manifold:rl:" + strconv.FormatUint(h.Sum64(), 36) + ":",
			window:     int64(per),
			limit:      int64(n),
			batch:      batch,
			timeout:    opts.Timeout,
			backoff:    int64(opts.Backoff),
			wallEpoch:  opts.WallEpoch,
			onFallback: opts.OnFallback,
		}
	}
}

// Fallbacks returns how many times a global rule of l fell back to its local bucket because
// the shared counter failed or was slow.
func (l *Limiter) Fallbacks() int64 {
	if l == nil {
		return 0
	}
	var n int64
	for _, r := range l.rules {
		n += r.state.shared.fallbacks.Load()
	}
	return n
}

// takeShared takes one token of r's window in the shared counter at now (limiter clock).
// It refuses with the time until the window ends when the replicas together spent it; it
// lets the call through, counting a fallback, when the counter fails.
func (r *rule) takeShared(ctx context.Context, now int64) (wait int64, ok bool) {
	s, st := r.shared, &r.state.shared
	if now < st.downUntil.Load() {
		return 0, true
	}
	wall := s.wallEpoch + now
	win := wall / s.window
	if wait, ok, done := st.spend(win, s.window-wall%s.window); done {
		return wait, ok
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	// another call may have refilled, or failed, while this one waited
	if now < st.downUntil.Load() {
		return 0, true
	}
	if wait, ok, done := st.spend(win, s.window-wall%s.window); done {
		return wait, ok
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	v, err := s.counter.Incr(cctx, s.prefix+strconv.FormatInt(win, 10), s.batch, time.Duration(2*s.window))
	cancel()
	if err != nil {
		st.downUntil.Store(now + s.backoff)
		st.fallbacks.Add(1)
		if s.onFallback != nil {
			s.onFallback(r.name, err)
		}
		return 0, true
	}
	granted := min(s.batch, s.limit-(v-s.batch))
	if granted <= 0 {
		st.grant.Store((win&winMask)<<winShift | spentFlag)
		return s.window - wall%s.window, false
	}
	st.grant.Store((win&winMask)<<winShift | (granted - 1))
	return 0, true
}

// spend takes a token of the grant when it is for window win; done is false when the call
// must ask the counter (another window, or no token left). untilEnd is the wait to report
// when the window is spent.
func (st *sharedState) spend(win, untilEnd int64) (wait int64, ok, done bool) {
	for {
		g := st.grant.Load()
		if g>>winShift != win&winMask {
			return 0, false, false
		}
		if g&spentFlag != 0 {
			return untilEnd, false, true
		}
		if g&leftMask == 0 {
			return 0, false, false
		}
		if st.grant.CompareAndSwap(g, g-1) {
			return 0, true, true
		}
	}
}
