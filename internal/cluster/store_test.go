package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/redistest"
)

// startRedis runs redis-server for the test (redistest.Start): it skips
// without one, except in CI.
func startRedis(t *testing.T) string { return redistest.Start(t) }

// TestRedisStore: what one replica stores, another reads; values expire;
// counters add across replicas and expire with their window.
func TestRedisStore(t *testing.T) {
	addr := startRedis(t)
	ctx := context.Background()
	a, err := OpenStore("redis://" + addr + "/0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _ := OpenStore("redis://" + addr + "/0")
	defer b.Close()
	if err := a.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.Get(ctx, "k"); ok || err != nil {
		t.Fatalf("Get of a missing key: %v %v", ok, err)
	}
	if err := a.Set(ctx, "k", []byte("v1"), 0); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := b.Get(ctx, "k"); !ok || err != nil || string(v) != "v1" {
		t.Errorf("Get from the other replica: %q %v %v", v, ok, err)
	}
	if err := b.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.Get(ctx, "k"); ok {
		t.Error("deleted key still there")
	}
	if err := a.Set(ctx, "short", []byte("x"), 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 3; i++ {
		s := a
		if i%2 == 0 {
			s = b
		}
		if n, err := s.Incr(ctx, "rate", 2, time.Minute); err != nil || n != 2*i {
			t.Errorf("Incr #%d: %d %v, want %d", i, n, err, 2*i)
		}
	}
	if ttl := a.c.TTL(ctx, "rate").Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("counter TTL %s, want its window (1m) from the first Incr", ttl)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok, _ := b.Get(ctx, "short"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a value with a TTL of 50ms did not expire")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := OpenStore("file:///var/lib/manifold"); err == nil {
		t.Error("OpenStore accepted a file URL")
	}
}
