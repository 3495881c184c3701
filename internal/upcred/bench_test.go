package upcred

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
)

// BenchmarkExchangerStoredToken is what a request to a token-exchange
// upstream costs while its principal's token is stored: the file store's
// check that the file did not change (one stat) and a copy of the token.
func BenchmarkExchangerStoredToken(b *testing.B) {
	ctx := context.Background()
	store, err := NewFileStore(filepath.Join(b.TempDir(), "tokens"), secret)
	if err != nil {
		b.Fatal(err)
	}
	if err := store.Put(ctx, "alice", "up", &Token{AccessToken: "at", Expiry: time.Now().Add(time.Hour)}); err != nil {
		b.Fatal(err)
	}
	ex, err := NewExchanger("up", config.UpstreamAuth{ClientID: "gw", ClientSecret: "s", TokenURL: "http://127.0.0.1:1/token"}, store, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ex.AccessToken(ctx, "alice", ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClientCredentialsCached is the per-request cost of a cached
// client credentials token.
func BenchmarkClientCredentialsCached(b *testing.B) {
	cc, err := NewClientCredentials("up", config.UpstreamAuth{ClientID: "gw", ClientSecret: "s", TokenURL: "http://127.0.0.1:1/token"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	cc.tok = &Token{AccessToken: "at", Expiry: time.Now().Add(time.Hour)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cc.AccessToken(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
