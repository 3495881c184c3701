package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/policy"
)

var (
	alice      = policy.NewPrincipal("alice", []string{"contractor"})
	bob        = policy.NewPrincipal("bob", nil)
	sec        = int64(time.Second)
	echoTool   = "everything__echo"
	githubTool = "github__create_issue"
)

// takeCall is one call of a Take table: who calls which name of which kind.
type takeCall struct {
	who  *policy.Principal
	tool string
	kind policy.Kind
}

func TestTakeCountsCallsAgainstTheirRule(t *testing.T) {
	tests := []struct {
		name   string
		limits []config.RateLimit
		// calls are made at t=0 by who, to tool; want says which are refused.
		calls   []takeCall
		refused []bool
	}{
		{
			name:    "burst calls pass, the next is refused",
			limits:  []config.RateLimit{{Tools: []string{"*"}, Rate: "2/s"}},
			calls:   []takeCall{{alice, echoTool, policy.Tool}, {alice, echoTool, policy.Tool}, {alice, echoTool, policy.Tool}},
			refused: []bool{false, false, true},
		},
		{
			name:    "each principal has its own bucket",
			limits:  []config.RateLimit{{Tools: []string{"*"}, Rate: "1/s"}},
			calls:   []takeCall{{alice, echoTool, policy.Tool}, {bob, echoTool, policy.Tool}, {alice, echoTool, policy.Tool}, {bob, echoTool, policy.Tool}},
			refused: []bool{false, false, true, true},
		},
		{
			name:    "a global bucket is shared",
			limits:  []config.RateLimit{{Tools: []string{"*"}, Rate: "1/s", Scope: config.ScopeGlobal}},
			calls:   []takeCall{{alice, echoTool, policy.Tool}, {bob, echoTool, policy.Tool}},
			refused: []bool{false, true},
		},
		{
			name:    "principals and tools select the calls counted",
			limits:  []config.RateLimit{{Principals: []string{"group:contractor"}, Tools: []string{"github__*"}, Rate: "1/s"}},
			calls:   []takeCall{{alice, githubTool, policy.Tool}, {alice, githubTool, policy.Tool}, {alice, echoTool, policy.Tool}, {bob, githubTool, policy.Tool}, {bob, githubTool, policy.Tool}},
			refused: []bool{false, true, false, false, false},
		},
		{
			name:    "a tools rule does not count prompts; a servers rule counts every kind",
			limits:  []config.RateLimit{{Tools: []string{"*"}, Rate: "1/s"}, {Servers: []string{"docs"}, Rate: "1/s"}},
			calls:   []takeCall{{alice, "everything__p", policy.Prompt}, {alice, "everything__p", policy.Prompt}, {alice, "docs__p", policy.Prompt}, {alice, "docs__p", policy.Prompt}},
			refused: []bool{false, false, false, true},
		},
		{
			name:    "a refused call gives back what the other rules took",
			limits:  []config.RateLimit{{Tools: []string{"*"}, Rate: "2/s", Burst: 2}, {Tools: []string{"github__*"}, Rate: "1/s"}},
			calls:   []takeCall{{alice, githubTool, policy.Tool}, {alice, githubTool, policy.Tool}, {alice, echoTool, policy.Tool}, {alice, echoTool, policy.Tool}},
			refused: []bool{false, true, false, true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(tt.limits)
			for i, c := range tt.calls {
				server, _, _ := cutServer(c.tool)
				var h Held
				ref := l.Take(context.Background(), c.who, c.kind, c.tool, server, 0, &h)
				if got := ref != nil; got != tt.refused[i] {
					t.Errorf("call %d (%s %s): refused = %v, want %v", i, c.who.Name(), c.tool, got, tt.refused[i])
				}
			}
		})
	}
}

func cutServer(name string) (string, string, bool) {
	for i := 0; i+1 < len(name); i++ {
		if name[i] == '_' && name[i+1] == '_' {
			return name[:i], name[i+2:], true
		}
	}
	return "", name, false
}

func TestRetryAfterIsTheNextToken(t *testing.T) {
	l := New([]config.RateLimit{{Tools: []string{"*"}, Rate: "10/s", Burst: 3}})
	var h Held
	for i := range 3 {
		if ref := l.Take(context.Background(), alice, policy.Tool, echoTool, "everything", 0, &h); ref != nil {
			t.Fatalf("call %d refused: %+v", i, ref)
		}
	}
	ref := l.Take(context.Background(), alice, policy.Tool, echoTool, "everything", 0, &h)
	if ref == nil || ref.RetryAfter != 100*time.Millisecond || ref.Rule != "rateLimits[0]" || ref.Concurrent {
		t.Fatalf("refusal = %+v, want rateLimits[0] retry after 100ms", ref)
	}
	// 40 ms later the next token is 60 ms away; at 100 ms it is there.
	if ref := l.Take(context.Background(), alice, policy.Tool, echoTool, "everything", int64(40*time.Millisecond), &h); ref == nil || ref.RetryAfter != 60*time.Millisecond {
		t.Fatalf("refusal at 40ms = %+v, want retry after 60ms", ref)
	}
	if ref := l.Take(context.Background(), alice, policy.Tool, echoTool, "everything", int64(100*time.Millisecond), &h); ref != nil {
		t.Fatalf("call at 100ms refused: %+v", ref)
	}
}

func TestSteadyRateIsTheLimit(t *testing.T) {
	// 1000 calls per second offered for 10 s against 20/s with a burst of 5: the burst at 0,
	// then a token every 50 ms from 50 ms to 9950 ms.
	l := New([]config.RateLimit{{Rate: "20/s", Burst: 5}})
	passed := 0
	for i := range 10_000 {
		var h Held
		if l.Take(context.Background(), alice, policy.Tool, echoTool, "everything", int64(i)*int64(time.Millisecond), &h) == nil {
			passed++
		}
	}
	if passed != 5+199 {
		t.Fatalf("passed %d calls, want 204", passed)
	}
}

func TestMaxConcurrentHoldsUntilRelease(t *testing.T) {
	l := New([]config.RateLimit{{Tools: []string{"*"}, MaxConcurrent: 2, Scope: config.ScopeGlobal}})
	var h1, h2, h3 Held
	if l.Take(context.Background(), alice, policy.Tool, echoTool, "", 0, &h1) != nil || l.Take(context.Background(), bob, policy.Tool, echoTool, "", 0, &h2) != nil {
		t.Fatal("first two calls refused")
	}
	ref := l.Take(context.Background(), alice, policy.Tool, echoTool, "", 0, &h3)
	if ref == nil || !ref.Concurrent {
		t.Fatalf("third call in flight: refusal = %+v, want a concurrency refusal", ref)
	}
	h1.Release()
	if ref := l.Take(context.Background(), alice, policy.Tool, echoTool, "", 0, &h3); ref != nil {
		t.Fatalf("after a release: refused %+v", ref)
	}
}

func TestInheritKeepsTheBucketsOfUnchangedRules(t *testing.T) {
	limits := []config.RateLimit{{Tools: []string{"*"}, Rate: "1/s"}}
	old := New(limits)
	var h Held
	old.Take(context.Background(), alice, policy.Tool, echoTool, "", 0, &h)

	same := New([]config.RateLimit{{Tools: []string{"x"}, Rate: "5/s"}, limits[0]})
	same.Inherit(old)
	if ref := same.Take(context.Background(), alice, policy.Tool, echoTool, "", 0, &h); ref == nil {
		t.Fatal("an unchanged rule was refilled by the reload")
	}
	changed := New([]config.RateLimit{{Tools: []string{"*"}, Rate: "2/s"}})
	changed.Inherit(old)
	if ref := changed.Take(context.Background(), alice, policy.Tool, echoTool, "", 0, &h); ref != nil {
		t.Fatalf("a changed rule kept the old bucket: %+v", ref)
	}
}

func TestIdlePrincipalsAreEvicted(t *testing.T) {
	l := New([]config.RateLimit{{Rate: "1/s"}})
	r := l.rules[0]
	for i := range 10 * shards * shardCap / 4 {
		pr := policy.NewPrincipal(fmt.Sprintf("p%d", i), nil)
		var h Held
		l.Take(context.Background(), pr, policy.Tool, echoTool, "", int64(i)*sec, &h) // earlier ones are full again
	}
	total := 0
	for i := range r.state.shards {
		n := len(r.state.shards[i].m)
		if n > shardCap {
			t.Fatalf("shard %d holds %d buckets, over its cap %d", i, n, shardCap)
		}
		total += n
	}
	if total > shards*shardCap {
		t.Fatalf("%d buckets kept", total)
	}
}

func TestConcurrentTakesNeverExceedTheBucket(t *testing.T) {
	l := New([]config.RateLimit{{Rate: "100/h", Burst: 100}})
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				var h Held
				if l.Take(context.Background(), alice, policy.Tool, echoTool, "", 0, &h) == nil {
					mu.Lock()
					passed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if passed != 100 {
		t.Fatalf("passed %d of 800 concurrent calls, want the burst, 100", passed)
	}
}

func TestNilLimiterLimitsNothing(t *testing.T) {
	var l *Limiter
	var h Held
	if New(nil) != nil || l.Take(context.Background(), alice, policy.Tool, echoTool, "", 0, &h) != nil {
		t.Fatal("no limits refused a call")
	}
}

// BenchmarkTake is the rate limit stage's cost per call: one per-principal rule and one
// global rule with a cap, both matching, on a bucket that always has tokens.
func BenchmarkTake(b *testing.B) {
	l := New([]config.RateLimit{
		{Principals: []string{"group:contractor"}, Tools: []string{"everything__*"}, Rate: "1000000000/s"},
		{Tools: []string{"*"}, Rate: "1000000000/s", Scope: config.ScopeGlobal, MaxConcurrent: 1 << 30},
	})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			var h Held
			if l.Take(context.Background(), alice, policy.Tool, echoTool, "everything", Now(), &h) != nil {
				b.Fatal("refused")
			}
			h.Release()
		}
	})
}
