package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/cluster"
	"github.com/manifold-mcp/manifold/internal/redistest"
	"github.com/manifold-mcp/manifold/policy"
)

// wall0 is the wall clock (Unix ns) of the tests' limiter clock zero: on a
// minute, so that windows start at now = 0.
const wall0 = 1699999980 * int64(time.Second)

// fakeCounter is a Counter in memory; err makes it fail, block makes it
// wait for its context.
type fakeCounter struct {
	mu    sync.Mutex
	m     map[string]int64
	ttl   map[string]time.Duration
	calls int
	err   error
	block bool
}

func newFakeCounter() *fakeCounter {
	return &fakeCounter{m: map[string]int64{}, ttl: map[string]time.Duration{}}
}

func (f *fakeCounter) Incr(ctx context.Context, key string, n int64, ttl time.Duration) (int64, error) {
	f.mu.Lock()
	f.calls++
	err, block := f.err, f.block
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[key] += n
	f.ttl[key] = ttl
	return f.m[key], nil
}

func (f *fakeCounter) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// replicas compiles limits once per counter, as each replica of a cluster
// does, and shares each in its counter (nil: not shared).
func replicas(limits []config.RateLimit, o SharedOptions, counters ...Counter) []*Limiter {
	o.WallEpoch = wall0
	out := make([]*Limiter, len(counters))
	for i, c := range counters {
		out[i] = New(limits)
		if c != nil {
			out[i].Share(c, &o)
		}
	}
	return out
}

// takeRound makes calls to echoTool at now on the replicas in turn and
// returns how many each admitted, and the last refusal.
func takeRound(ls []*Limiter, calls int, now int64) (admitted []int, last *Refusal) {
	admitted = make([]int, len(ls))
	for i := range calls {
		var h Held
		if ref := ls[i%len(ls)].Take(context.Background(), alice, policy.Tool, echoTool, "", now, &h); ref != nil {
			last = ref
		} else {
			admitted[i%len(ls)]++
		}
		h.Release()
	}
	return admitted, last
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// redisCounters opens n stores on one redis-server (skipping without one).
func redisCounters(t *testing.T, n int) []Counter {
	addr := redistest.Start(t)
	out := make([]Counter, n)
	for i := range out {
		s, err := cluster.OpenStore("redis://" + addr + "/0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

// TestSharedRuleHoldsAcrossReplicas: two replicas of a global 10/s rule
// admit 10 calls a window together, whatever the batch, in a fake store
// and in Redis; without a shared store each admits its own 10.
func TestSharedRuleHoldsAcrossReplicas(t *testing.T) {
	limits := []config.RateLimit{{Tools: []string{"*"}, Rate: "10/s", Scope: config.ScopeGlobal}}
	stores := map[string]func(t *testing.T) []Counter{
		"fake":  func(*testing.T) []Counter { f := newFakeCounter(); return []Counter{f, f} },
		"redis": func(t *testing.T) []Counter { return redisCounters(t, 2) },
	}
	for _, store := range []string{"fake", "redis"} {
		for _, batch := range []int64{1, 4, 0} {
			t.Run(store+"/batch "+strconv.FormatInt(batch, 10), func(t *testing.T) {
				ls := replicas(limits, SharedOptions{Batch: batch}, stores[store](t)...)
				admitted, last := takeRound(ls, 30, 0)
				if sum(admitted) != 10 || admitted[0] == 0 || admitted[1] == 0 {
					t.Fatalf("window 0 admitted %v, want 10 in all from both", admitted)
				}
				if last == nil || last.Rule != "rateLimits[0]" || last.RetryAfter != time.Second || last.Concurrent {
					t.Errorf("refusal %+v, want rateLimits[0] retry after the window's end (1s)", last)
				}
				// the next window admits again (the local buckets refilled too)
				if admitted, _ := takeRound(ls, 30, 2*sec); sum(admitted) != 10 {
					t.Errorf("window 2 admitted %v, want 10", admitted)
				}
				if ls[0].Fallbacks() != 0 {
					t.Errorf("%d fallbacks with a store that works", ls[0].Fallbacks())
				}
			})
		}
	}
	t.Run("not shared", func(t *testing.T) {
		ls := replicas(limits, SharedOptions{}, nil, nil)
		if admitted, _ := takeRound(ls, 30, 0); sum(admitted) != 20 {
			t.Errorf("two unshared replicas admitted %v, want 10 each", admitted)
		}
	})
}

// TestSharedRuleBatches: a replica asks the store once per batch; the
// counter's key names the rule and the window and lives two windows.
func TestSharedRuleBatches(t *testing.T) {
	f := newFakeCounter()
	ls := replicas([]config.RateLimit{{Tools: []string{"*"}, Rate: "100/m", Scope: config.ScopeGlobal}}, SharedOptions{Batch: 8}, f)
	if admitted, _ := takeRound(ls, 40, 0); admitted[0] != 40 {
		t.Fatalf("admitted %v, want 40", admitted)
	}
	if f.count() != 5 {
		t.Errorf("%d calls to the store for 40 calls in batches of 8, want 5", f.count())
	}
	for k, ttl := range f.ttl {
		win := wall0 / int64(time.Minute)
		if !strings.HasPrefix(k, "manifold:rl:") || !strings.HasSuffix(k, ":"+strconv.FormatInt(win, 10)) || ttl != 2*time.Minute {
			t.Errorf("key %q ttl %s, want manifold:rl:<rule>:%d for 2m", k, ttl, win)
		}
	}
}

// TestSharedRuleFallsBack: when the store fails or is slow, the local
// bucket decides, the failure is counted and told once per backoff, and
// the store is asked again after it.
func TestSharedRuleFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		block bool
	}{
		{name: "error", err: errors.New("connection refused")},
		{name: "slow", block: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCounter()
			f.err, f.block = tc.err, tc.block
			var told []string
			ls := replicas([]config.RateLimit{{Tools: []string{"*"}, Rate: "10/s", Scope: config.ScopeGlobal}},
				SharedOptions{Batch: 1, Timeout: time.Millisecond, OnFallback: func(rule string, err error) {
					if err == nil {
						t.Error("OnFallback without an error")
					}
					told = append(told, rule)
				}}, f)
			// the local bucket (burst 10) decides while the store is down
			if admitted, last := takeRound(ls, 15, 0); admitted[0] != 10 || last == nil {
				t.Fatalf("admitted %v with the store down, want the local bucket's 10", admitted)
			}
			if f.count() != 1 || ls[0].Fallbacks() != 1 || len(told) != 1 || told[0] != "rateLimits[0]" {
				t.Errorf("store asked %d times, %d fallbacks, told %v; want once each within the backoff", f.count(), ls[0].Fallbacks(), told)
			}
			f.mu.Lock()
			f.err, f.block = nil, false
			f.mu.Unlock()
			if admitted, _ := takeRound(ls, 15, 2*sec); admitted[0] != 10 || f.count() != 11 {
				t.Errorf("after the backoff: admitted %v, store asked %d times; want 10 and 1+10", admitted, f.count())
			}
		})
	}
}

// TestUnsharedRulesStayLocal: per-principal rules and concurrency caps
// never ask the store.
func TestUnsharedRulesStayLocal(t *testing.T) {
	f := newFakeCounter()
	ls := replicas([]config.RateLimit{
		{Tools: []string{"*"}, Rate: "10/s"},
		{Tools: []string{"*"}, Scope: config.ScopeGlobal, MaxConcurrent: 100},
	}, SharedOptions{}, f)
	if admitted, _ := takeRound(ls, 15, 0); admitted[0] != 10 || f.count() != 0 {
		t.Errorf("admitted %v, store asked %d times; want 10 and never", admitted, f.count())
	}
}

// TestSharedRateOnRedis: two replicas sharing one redis-server, each
// offered 1000 calls a second for 3 (simulated) seconds under a global
// 200/s rule, admit 600 ± 10% together.
func TestSharedRateOnRedis(t *testing.T) {
	ls := replicas([]config.RateLimit{{Tools: []string{"*"}, Rate: "200/s", Scope: config.ScopeGlobal}}, SharedOptions{}, redisCounters(t, 2)...)
	admitted := make([]int, 2)
	for ms := range int64(3000) {
		a, _ := takeRound(ls, 2, ms*int64(time.Millisecond))
		admitted[0] += a[0]
		admitted[1] += a[1]
	}
	if n := sum(admitted); n < 540 || n > 660 || admitted[0] == 0 || admitted[1] == 0 {
		t.Errorf("admitted %v (%d) in 3 s, want 600 ± 10%% from both", admitted, n)
	}
	t.Logf("admitted %v (%d of 600)", admitted, sum(admitted))
}

// TestSharedRuleConcurrent: many goroutines on two replicas of a global
// rule admit exactly its limit in one window (run with -race).
func TestSharedRuleConcurrent(t *testing.T) {
	f := newFakeCounter()
	ls := replicas([]config.RateLimit{{Tools: []string{"*"}, Rate: "100/s", Scope: config.ScopeGlobal}}, SharedOptions{Batch: 7}, f, f)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for g := range 8 {
		wg.Go(func() {
			a, _ := takeRound(ls[g%2:g%2+1], 50, 0)
			mu.Lock()
			admitted += a[0]
			mu.Unlock()
		})
	}
	wg.Wait()
	if admitted != 100 {
		t.Errorf("admitted %d of 400 calls in one window of a global 100/s rule, want 100", admitted)
	}
}
