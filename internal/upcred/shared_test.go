package upcred

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/cluster"
	"github.com/manifold-mcp/manifold/internal/redistest"
)

// TestSharedStore: a token one replica stores, another reads; the shared
// store holds neither a token nor a name in plaintext; List and Revoke work
// by principal and server; a value moved to another key, or read under
// another secret, is not taken.
func TestSharedStore(t *testing.T) {
	addr := redistest.Start(t)
	ctx := context.Background()
	kvOf := func() *cluster.RedisStore {
		kv, err := cluster.OpenStore("redis://" + addr + "/0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { kv.Close() })
		return kv
	}
	kvA, kvB := kvOf(), kvOf()
	a, err := NewSharedStore(kvA, secret)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSharedStore(kvB, secret)
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	puts := []struct {
		principal, server string
		tok               *Token
	}{
		{"alice", "github", &Token{AccessToken: "at-alice-secret", RefreshToken: "rt-alice-secret", Expiry: exp, Scopes: []string{"read"}}},
		{"alice", "jira", &Token{AccessToken: "at-alice-jira"}},
		{"bob", "github", &Token{AccessToken: "at-bob-secret"}},
	}
	for _, p := range puts {
		if err := a.Put(ctx, p.principal, p.server, p.tok); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.Get(ctx, "alice", "github")
	if err != nil || got.AccessToken != "at-alice-secret" || got.RefreshToken != "rt-alice-secret" || !got.Expiry.Equal(exp) {
		t.Fatalf("Get on another replica: %+v %v", got, err)
	}
	if _, err := b.Get(ctx, "carol", "github"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of no token: %v", err)
	}

	keys, err := kvA.Keys(ctx, "")
	if err != nil || len(keys) != 3 {
		t.Fatalf("keys: %q %v", keys, err)
	}
	for _, k := range keys {
		v, _, _ := kvA.Get(ctx, k)
		if !strings.HasPrefix(k, SharedKeyPrefix) {
			t.Errorf("key %q outside %s", k, SharedKeyPrefix)
		}
		for _, plain := range []string{"at-alice-secret", "rt-alice-secret", "alice", "bob", "github", "jira", "read"} {
			if strings.Contains(k, plain) || bytes.Contains(v, []byte(plain)) {
				t.Errorf("the shared store holds %q in plaintext (key %s)", plain, k)
			}
		}
	}

	list, err := b.List(ctx, "")
	if err != nil || len(list) != 3 || list[0].Principal != "alice" || list[0].Server != "github" || !list[0].Refreshable || list[2].Principal != "bob" {
		t.Errorf("List of everyone: %+v %v", list, err)
	}
	if list, _ := b.List(ctx, "alice"); len(list) != 2 {
		t.Errorf("List of alice: %+v", list)
	}

	// bob's value copied over alice's key is not alice's token.
	bobKey, aliceKey := a.prefix("bob", "github"), a.prefix("alice", "github")
	bobVal, _, _ := kvA.Get(ctx, bobKey)
	aliceVal, _, _ := kvA.Get(ctx, aliceKey)
	kvA.Set(ctx, aliceKey, bobVal, 0)
	if tok, err := b.Get(ctx, "alice", "github"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a value moved to alice's key was taken as hers: %+v %v", tok, err)
	}
	kvA.Set(ctx, aliceKey, aliceVal, 0)

	other, _ := NewSharedStore(kvB, []byte("another secret, at least 32 bytes long"))
	if _, err := other.Get(ctx, "alice", "github"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get under another secret (other key names): %v", err)
	}
	if _, err := other.List(ctx, ""); err == nil || !strings.Contains(err.Error(), "cannot decrypt") {
		t.Errorf("List under another secret: %v", err)
	}

	if n, err := b.Revoke(ctx, "alice", "jira"); n != 1 || err != nil {
		t.Errorf("Revoke alice/jira: %d %v", n, err)
	}
	if n, err := a.Revoke(ctx, "alice", ""); n != 1 || err != nil {
		t.Errorf("Revoke alice: %d %v", n, err)
	}
	if _, err := a.Get(ctx, "alice", "github"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Revoke: %v", err)
	}
	if list, _ := a.List(ctx, ""); len(list) != 1 || list[0].Principal != "bob" {
		t.Errorf("List after revoking alice: %+v", list)
	}
	if _, err := NewSharedStore(kvA, []byte("short")); err == nil {
		t.Error("a short secret accepted")
	}
}
