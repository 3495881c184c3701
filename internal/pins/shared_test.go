package pins

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/cluster"
	"github.com/manifold-mcp/manifold/internal/redistest"
)

// TestSharedStore: two replicas observing different tools at once lose
// neither pin; an approval made through one is what the other loads; a
// stored set that does not parse is an error and is not overwritten.
func TestSharedStore(t *testing.T) {
	addr := redistest.Start(t)
	ctx := context.Background()
	open := func() *SharedStore {
		kv, err := cluster.OpenStore("redis://" + addr + "/0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { kv.Close() })
		return NewSharedStore(kv)
	}
	a, b := open(), open()
	if s, err := a.Load(ctx); err != nil || len(s.Servers) != 0 {
		t.Fatalf("Load of nothing stored: %v %v", s, err)
	}
	now := time.Now()
	const n = 20
	errs := make(chan error, 2*n)
	for r, st := range []*SharedStore{a, b} {
		go func() {
			for i := range n {
				name := fmt.Sprintf("t%d-%d", r, i)
				_, err := st.Update(ctx, func(s *Set) error {
					s.Observe(Item{Server: "srv", Kind: KindTool, Name: name, Canonical: []byte(`{}`), Hash: "sha256:1"}, false, now)
					return nil
				})
				errs <- err
			}
		}()
	}
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s, err := b.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(s.Servers["srv"].Tools); got != 2*n {
		t.Errorf("%d pins after %d concurrent updates from two replicas", got, 2*n)
	}

	// A change held on both, approved through a.
	if _, err := b.Update(ctx, func(s *Set) error {
		s.Observe(Item{Server: "srv", Kind: KindTool, Name: "t0-0", Canonical: []byte(`{"description":"x"}`), Hash: "sha256:2"}, false, now)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before, _ := a.Raw(ctx)
	if n, err := ApproveIn(ctx, a, Filter{Server: "srv", Tool: "t0-0"}, io.Discard); err != nil || n != 1 {
		t.Fatalf("ApproveIn: %d %v", n, err)
	}
	after, _ := b.Raw(ctx)
	if string(before) == string(after) {
		t.Error("an approval left the stored set's encoding as it was: replicas polling it would miss it")
	}
	s, _ = b.Load(ctx)
	if p := s.Lookup("srv", KindTool, "t0-0"); p.Pending != nil || p.Approved.Hash != "sha256:2" {
		t.Errorf("after approval through another replica: %+v", p)
	}
	if s, err := a.Update(ctx, func(*Set) error { return ErrUnchanged }); err != nil || s == nil {
		t.Errorf("Update with ErrUnchanged: %v %v", s, err)
	}

	kv, _ := cluster.OpenStore("redis://" + addr + "/0")
	defer kv.Close()
	if err := kv.Set(ctx, SharedKey, []byte(`{"version":9}`), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Load(ctx); err == nil || !strings.Contains(err.Error(), SharedKey) {
		t.Errorf("Load of a set of another version: %v", err)
	}
	if _, err := a.Update(ctx, func(*Set) error { return nil }); err == nil {
		t.Error("Update over a set that does not parse succeeded")
	}
	if v, _, _ := kv.Get(ctx, SharedKey); string(v) != `{"version":9}` {
		t.Errorf("a set that does not parse was overwritten: %s", v)
	}
}
