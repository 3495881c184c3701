// Package ratelimit holds the call rate limits of the config's rateLimits list: compiled
// rules, and the token buckets they count calls in. It decides; the gateway's rate limit
// stage (gateway/ratelimit.go) answers the refused calls.
//
// A bucket is a GCRA cell (the generic cell rate algorithm): one atomic "theoretical arrival
// time" per bucket, advanced by compare-and-swap, which is a token bucket without a refill
// timer. A global bucket is touched by atomics alone; per-principal buckets sit in a map split
// into shards, each with its own mutex, so there is no global lock and two principals rarely
// share one. Idle buckets (full again, no call in flight) are dropped when a shard grows past
// its cap, so memory stays bounded whatever the number of principals.
//
// A Limiter is immutable and safe for concurrent use. The buckets of a rule outlive it: a
// Limiter built by a reload takes over the buckets of the previous one's identical rules
// (Inherit), so a reload does not refill them.
package ratelimit

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/policy"
)

// shards is the number of shards of a rule's per-principal buckets (a power of two).
const shards = 64

// shardCap is the number of per-principal buckets a shard keeps before it drops idle ones:
// 64 × 1024 principals per rule.
const shardCap = 1024

// Limiter is the compiled rate limits of one config. The nil *Limiter limits nothing.
type Limiter struct {
	rules  []*rule
	byKind [numKinds][]*rule
}

// numKinds is the number of kinds calls name: tools, prompts, resources.
const numKinds = 3

// rule is one compiled entry of rateLimits.
type rule struct {
	// name is the rule's key, "rateLimits[2]", for logs, audit and metrics.
	name string
	// fingerprint identifies the rule's settings, for Inherit.
	fingerprint string
	everyone    bool
	who         policy.Principals
	// all: no name patterns; every call matches.
	all      bool
	patterns [numKinds][]policy.Pattern
	servers  []policy.Pattern
	// interval is the time one call costs, in nanoseconds; 0 when there is no rate.
	interval int64
	// tolerance is how far ahead of now a bucket's arrival time may run: (burst-1) intervals.
	tolerance int64
	global    bool
	// maxConcurrent caps the calls in flight per bucket; 0 = no cap.
	maxConcurrent int64
	// rate is the rule's rate as configured ("100/m"); shared, when set (Share), is how a
	// global rule counts across replicas (shared.go).
	rate   string
	shared *shared
	state  *state
}

// state is a rule's buckets.
type state struct {
	global bucket
	shards [shards]shard
	shared sharedState
}

type shard struct {
	mu sync.Mutex
	m  map[string]*bucket
}

// bucket is one GCRA cell and its count of calls in flight.
type bucket struct {
	tat      atomic.Int64 // theoretical arrival time, ns since epoch
	inflight atomic.Int64
}

// epoch is the origin of the limiter's clock: monotonic nanoseconds since it.
var epoch = time.Now()

// Now returns the limiter's clock: nanoseconds since the process's epoch, monotonic.
func Now() int64 { return int64(time.Since(epoch)) }

// New compiles the validated rate limits of a config; nil when there are none.
func New(limits []config.RateLimit) *Limiter {
	if len(limits) == 0 {
		return nil
	}
	l := &Limiter{}
	for i, rl := range limits {
		r := &rule{
			name:          fmt.Sprintf("rateLimits[%d]", i),
			fingerprint:   fingerprint(rl),
			everyone:      len(rl.Principals) == 0,
			who:           policy.CompilePrincipals(rl.Principals),
			global:        rl.Scope == config.ScopeGlobal,
			maxConcurrent: int64(rl.MaxConcurrent),
			rate:          strings.TrimSpace(rl.Rate),
			state:         &state{},
		}
		if n, per, err := config.ParseRate(rl.Rate); err == nil {
			r.interval = max(1, int64(per)/int64(n))
			r.tolerance = int64(rl.EffectiveBurst()-1) * r.interval
		}
		for k, list := range [numKinds][]string{rl.Tools, rl.Prompts, rl.Resources} {
			r.patterns[k] = compile(list)
		}
		r.servers = compile(rl.Servers)
		r.all = len(rl.Tools)+len(rl.Prompts)+len(rl.Resources)+len(rl.Servers) == 0
		l.rules = append(l.rules, r)
		for k := range numKinds {
			if r.all || len(r.patterns[k]) > 0 || len(r.servers) > 0 {
				l.byKind[k] = append(l.byKind[k], r)
			}
		}
	}
	return l
}

func compile(list []string) []policy.Pattern {
	out := make([]policy.Pattern, len(list))
	for i, s := range list {
		out[i] = policy.CompilePattern(s)
	}
	return out
}

// fingerprint is a text of every setting of r that its buckets depend on.
func fingerprint(r config.RateLimit) string {
	return fmt.Sprintf("%q|%q|%q|%q|%q|%s|%d|%s|%d", r.Principals, r.Tools, r.Prompts, r.Resources, r.Servers,
		strings.TrimSpace(r.Rate), r.EffectiveBurst(), r.Scope, r.MaxConcurrent)
}

// Inherit makes l count in the buckets of prev's rules that are identical to its own (same
// position is not required), so that a reload keeps the state of unchanged limits. Call it
// before l serves.
func (l *Limiter) Inherit(prev *Limiter) {
	if l == nil || prev == nil {
		return
	}
	old := make(map[string]*state, len(prev.rules))
	for _, r := range prev.rules {
		if _, dup := old[r.fingerprint]; !dup {
			old[r.fingerprint] = r.state
		}
	}
	for _, r := range l.rules {
		if s, ok := old[r.fingerprint]; ok {
			r.state = s
			delete(old, r.fingerprint) // two identical rules keep two buckets
		}
	}
}

// Refusal says why Take refused a call.
type Refusal struct {
	// Rule is the refusing rule's key, such as "rateLimits[0]".
	Rule string
	// RetryAfter is when a call of the same caller may succeed again: the bucket's next token
	// for a rate, a short interval for a concurrency cap.
	RetryAfter time.Duration
	// Concurrent: the refusal is for maxConcurrent, not the rate.
	Concurrent bool
}

// concurrentRetry is the retry hint of a call refused for maxConcurrent: the end of a call
// in flight cannot be predicted.
const concurrentRetry = 100 * time.Millisecond

// Held is the concurrency slots a call took; Release gives them back when it ends. The zero
// Held holds nothing.
type Held struct {
	slots [4]*bucket
	more  []*bucket
	n     int
}

func (h *Held) add(b *bucket) {
	if h.n < len(h.slots) {
		h.slots[h.n] = b
	} else {
		h.more = append(h.more, b)
	}
	h.n++
}

// Empty reports whether h holds no slot.
func (h *Held) Empty() bool { return h.n == 0 }

// Release gives back every slot h holds; h then holds nothing.
func (h *Held) Release() {
	for i := 0; i < h.n; i++ {
		if i < len(h.slots) {
			h.slots[i].inflight.Add(-1)
			h.slots[i] = nil
		} else {
			h.more[i-len(h.slots)].inflight.Add(-1)
		}
	}
	h.n, h.more = 0, nil
}

// Take counts a call of pr to name (of kind, on server) at time now (Now) against every
// matching rule, taking a token of each rate and a slot of each concurrency cap into h. When
// a rule refuses, what the earlier rules gave is given back and the refusal returned; nil
// means the call may proceed (and must Release h when it ends). It takes no lock for a
// global rule and one shard's lock for a per-principal rule, and allocates only for a
// principal's first call. A global rule that counts in a shared counter (Share) also takes
// a token there, which waits on the counter (at most its timeout, ctx aside) only when this
// replica's reserved batch is spent.
func (l *Limiter) Take(ctx context.Context, pr *policy.Principal, kind policy.Kind, name, server string, now int64, h *Held) *Refusal {
	k := kind.CallIndex()
	if l == nil || k < 0 {
		return nil
	}
	var taken [8]*rule
	var tokens [8]*bucket
	nt := 0
	for _, r := range l.byKind[k] {
		if !r.matches(pr, k, name, server) {
			continue
		}
		b := r.bucket(pr, now)
		if r.maxConcurrent > 0 {
			if b.inflight.Add(1) > r.maxConcurrent {
				b.inflight.Add(-1)
				giveBack(taken[:min(nt, len(taken))], tokens[:min(nt, len(tokens))])
				h.Release()
				return &Refusal{Rule: r.name, RetryAfter: concurrentRetry, Concurrent: true}
			}
			h.add(b)
		}
		if r.interval > 0 {
			if wait, ok := r.take(b, now); !ok {
				giveBack(taken[:min(nt, len(taken))], tokens[:min(nt, len(tokens))])
				h.Release()
				return &Refusal{Rule: r.name, RetryAfter: time.Duration(wait)}
			}
			if r.shared != nil {
				if wait, ok := r.takeShared(ctx, now); !ok {
					b.tat.Add(-r.interval)
					giveBack(taken[:min(nt, len(taken))], tokens[:min(nt, len(tokens))])
					h.Release()
					return &Refusal{Rule: r.name, RetryAfter: time.Duration(wait)}
				}
			}
			if nt < len(taken) {
				taken[nt], tokens[nt] = r, b
			}
			nt++
		}
	}
	return nil
}

// matches reports whether r counts a call of pr to name (kind index k) on server.
func (r *rule) matches(pr *policy.Principal, k int, name, server string) bool {
	if !r.everyone && !r.who.Contains(pr) {
		return false
	}
	if r.all {
		return true
	}
	for i := range r.patterns[k] {
		if r.patterns[k][i].Match(name) {
			return true
		}
	}
	for i := range r.servers {
		if r.servers[i].Match(server) {
			return true
		}
	}
	return false
}

// bucket returns the bucket of pr under r: the rule's own for a global rule.
func (r *rule) bucket(pr *policy.Principal, now int64) *bucket {
	if r.global {
		return &r.state.global
	}
	key := pr.Name()
	sh := &r.state.shards[shardOf(key)]
	sh.mu.Lock()
	b := sh.m[key]
	if b == nil {
		if sh.m == nil {
			sh.m = make(map[string]*bucket)
		}
		if len(sh.m) >= shardCap {
			sh.evict(now)
		}
		b = &bucket{}
		sh.m[key] = b
	}
	sh.mu.Unlock()
	return b
}

// evict drops the shard's idle buckets: full again (arrival time passed) with no call in
// flight, so that a new bucket for the same principal would be the same. When none is idle
// it drops the bucket nearest to full without a call in flight, which lets that principal
// start again from a full bucket: the price of bounded memory. Called with sh.mu held.
func (sh *shard) evict(now int64) {
	var oldest string
	oldestTAT := int64(1<<63 - 1)
	for k, b := range sh.m {
		if b.inflight.Load() != 0 {
			continue
		}
		tat := b.tat.Load()
		if tat <= now {
			delete(sh.m, k)
			continue
		}
		if tat < oldestTAT {
			oldest, oldestTAT = k, tat
		}
	}
	if len(sh.m) >= shardCap && oldest != "" {
		delete(sh.m, oldest)
	}
}

// shardOf hashes key (FNV-1a) to a shard index.
func shardOf(key string) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h & (shards - 1))
}

// take takes one token of b at now; when it cannot, it returns how long until it could.
func (r *rule) take(b *bucket, now int64) (wait int64, ok bool) {
	for {
		tat := b.tat.Load()
		start := max(tat, now)
		if ahead := start - now; ahead > r.tolerance {
			return ahead - r.tolerance, false
		}
		if b.tat.CompareAndSwap(tat, start+r.interval) {
			return 0, true
		}
	}
}

// giveBack returns the tokens the rules took from their buckets, for a call a later rule
// refused: a refused call costs nothing.
func giveBack(rules []*rule, buckets []*bucket) {
	for i, r := range rules {
		buckets[i].tat.Add(-r.interval)
	}
}

// Rules returns the number of rules of l.
func (l *Limiter) Rules() int {
	if l == nil {
		return 0
	}
	return len(l.rules)
}
