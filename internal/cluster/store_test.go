package cluster

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/redistest"
)

// TestRedisStore: what one replica stores, another reads; values expire;
// counters add across replicas and expire with their window.
func TestRedisStore(t *testing.T) {
	addr := redistest.Start(t)
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

// TestRedisStoreUpdate: concurrent read-modify-writes from two replicas
// lose no update; nil writes nothing; an error aborts and writes nothing.
func TestRedisStoreUpdate(t *testing.T) {
	addr := redistest.Start(t)
	ctx := context.Background()
	a, _ := OpenStore("redis://" + addr + "/0")
	defer a.Close()
	b, _ := OpenStore("redis://" + addr + "/0")
	defer b.Close()
	add := func(s *RedisStore) error {
		_, err := s.Update(ctx, "n", func(old []byte, ok bool) ([]byte, error) {
			n := 0
			if ok {
				n, _ = strconv.Atoi(string(old))
			}
			return []byte(strconv.Itoa(n + 1)), nil
		})
		return err
	}
	const each = 50
	errs := make(chan error, 2*each)
	for _, s := range []*RedisStore{a, b} {
		go func() {
			for range each {
				errs <- add(s)
			}
		}()
	}
	for range 2 * each {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if v, _, _ := a.Get(ctx, "n"); string(v) != strconv.Itoa(2*each) {
		t.Errorf("after %d concurrent increments from two replicas: %s", 2*each, v)
	}
	v, err := b.Update(ctx, "n", func([]byte, bool) ([]byte, error) { return nil, nil })
	if err != nil || string(v) != strconv.Itoa(2*each) {
		t.Errorf("Update writing nothing: %q %v", v, err)
	}
	boom := errors.New("boom")
	if _, err := a.Update(ctx, "n", func([]byte, bool) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("Update's change error: %v", err)
	}
	if _, err := a.Update(ctx, "fresh", func(_ []byte, ok bool) ([]byte, error) {
		if ok {
			t.Error("a missing key reported present")
		}
		return []byte("x"), nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestRedisStoreKeys: Keys lists by prefix, with glob characters taken
// literally.
func TestRedisStoreKeys(t *testing.T) {
	addr := redistest.Start(t)
	ctx := context.Background()
	s, _ := OpenStore("redis://" + addr + "/0")
	defer s.Close()
	for _, k := range []string{"p:a", "p:b", "p*:c", "q:a"} {
		if err := s.Set(ctx, k, []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"p:", []string{"p:a", "p:b"}},
		{"p*", []string{"p*:c"}},
		{"p", []string{"p*:c", "p:a", "p:b"}},
		{"z", nil},
	} {
		got, err := s.Keys(ctx, tc.prefix)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Keys(%q) = %q %v, want %q", tc.prefix, got, err, tc.want)
		}
	}
}
