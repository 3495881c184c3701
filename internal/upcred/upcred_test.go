package upcred

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/testauth"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var secret = []byte("0123456789abcdef0123456789abcdef-store")

func TestFileStoreKeepsTokensEncrypted(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tokens")
	s, err := NewFileStore(path, secret)
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tok := &Token{AccessToken: "at-alice-secret", RefreshToken: "rt-alice-secret", TokenType: "Bearer", Expiry: exp, Scopes: []string{"read"}}
	if err := s.Put(ctx, "alice", "github", tok); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "bob", "github", &Token{AccessToken: "at-bob-secret"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, plain := range []string{"at-alice-secret", "rt-alice-secret", "alice", "github", "read"} {
		if bytes.Contains(data, []byte(plain)) {
			t.Errorf("the store file holds %q in plaintext", plain)
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}

	// Another instance with the same secret (a restart, or `manifold auth`) reads it.
	again, _ := NewFileStore(path, secret)
	got, err := again.Get(ctx, "alice", "github")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tok, got); diff != "" {
		t.Errorf("token after reopening (-want +got):\n%s", diff)
	}
	list, _ := again.List(ctx, "")
	want := []Entry{{Principal: "alice", Server: "github", Expiry: exp, Scopes: []string{"read"}, Refreshable: true}, {Principal: "bob", Server: "github"}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}

	// A revoke by the other instance is seen by the first at its next read.
	if n, err := again.Revoke(ctx, "alice", ""); err != nil || n != 1 {
		t.Fatalf("revoke = %d, %v", n, err)
	}
	if _, err := s.Get(ctx, "alice", "github"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get after revoke by another instance: %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, "bob", "github"); err != nil {
		t.Errorf("bob's token went with alice's: %v", err)
	}

	wrong, _ := NewFileStore(path, []byte("another secret of at least thirty-two bytes"))
	_, err = wrong.Get(ctx, "bob", "github")
	if err == nil || !strings.Contains(err.Error(), "cannot decrypt") {
		t.Errorf("wrong secret: %v", err)
	}
	if err := wrong.Put(ctx, "eve", "github", &Token{AccessToken: "x"}); err == nil {
		t.Error("a store with the wrong secret overwrote the file")
	}
	if _, err := s.Get(ctx, "bob", "github"); err != nil {
		t.Errorf("the file changed under a wrong secret: %v", err)
	}
}

func TestFileStoreRejectsShortSecret(t *testing.T) {
	if _, err := NewFileStore(filepath.Join(t.TempDir(), "x"), []byte("short")); err == nil {
		t.Fatal("a short secret was accepted")
	}
}

func TestFileStoreConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tokens")
	a, _ := NewFileStore(path, secret)
	b, _ := NewFileStore(path, secret)
	var wg sync.WaitGroup
	for i, s := range []*FileStore{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				if err := s.Put(ctx, string(rune('a'+i)), string(rune('A'+j)), &Token{AccessToken: "x"}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	list, err := a.List(ctx, "")
	if err != nil || len(list) != 40 {
		t.Fatalf("list after concurrent writes from two instances: %d entries, %v; want 40", len(list), err)
	}
}

// authServer starts the test authorization server with a client "gw" for every method.
func authServer(t *testing.T, now func() time.Time) (*testauth.Server, *ecdsa.PrivateKey, string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	as := &testauth.Server{
		Clients: map[string]testauth.Client{"gw": {Secret: "gw-secret"}, "gwkey": {Key: &key.PublicKey}},
		TTL:     time.Minute,
		Now:     now,
		Subject: func(tok string) (string, error) {
			if p, ok := strings.CutPrefix(tok, "jwt-of-"); ok {
				return p, nil
			}
			return "", errors.New("bad subject")
		},
	}
	srv := httptest.NewServer(as)
	t.Cleanup(srv.Close)
	as.TokenURL = srv.URL + "/token"
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return as, key, keyFile
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestClientCredentials(t *testing.T) {
	clk := &clock{t: time.Now()}
	as, _, keyFile := authServer(t, clk.now)
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("gw-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		cfg        config.UpstreamAuth
		wantMethod string
	}{
		{name: "client_secret_basic by default", cfg: config.UpstreamAuth{ClientID: "gw", ClientSecret: "gw-secret"}, wantMethod: "client_secret_basic"},
		{name: "client_secret_post from a file", cfg: config.UpstreamAuth{ClientID: "gw", ClientSecretFile: secretFile, TokenEndpointAuth: config.ClientSecretPost}, wantMethod: "client_secret_post"},
		{name: "private_key_jwt", cfg: config.UpstreamAuth{ClientID: "gwkey", PrivateKeyFile: keyFile, KeyID: "k1"}, wantMethod: "private_key_jwt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			before := len(as.Requests())
			cfg := tt.cfg
			cfg.Type, cfg.TokenURL, cfg.Scopes, cfg.Resource = config.UpstreamAuthClientCredentials, as.TokenURL, []string{"mcp"}, "https://up.test/mcp"
			cc, err := NewClientCredentials("up", cfg, &Options{Now: clk.now})
			if err != nil {
				t.Fatal(err)
			}
			first, err := cc.AccessToken(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if i, ok := as.Lookup(first); !ok || i.Principal != "client:"+cfg.ClientID || i.Resource != "https://up.test/mcp" {
				t.Fatalf("issued %+v, %v", i, ok)
			}
			if again, _ := cc.AccessToken(ctx); again != first {
				t.Error("the token was not cached")
			}
			reqs := as.Requests()[before:]
			if len(reqs) != 1 || reqs[0].ClientAuth != tt.wantMethod || reqs[0].Grant != testauth.GrantClientCredentials || reqs[0].Scope != "mcp" {
				t.Fatalf("token requests = %+v, want one by %s", reqs, tt.wantMethod)
			}
			clk.add(45 * time.Second) // within the early-expiry window of the 1m token
			renewed, err := cc.AccessToken(ctx)
			if err != nil || renewed == first {
				t.Fatalf("token near expiry was not renewed: %v", err)
			}
			cc.Reject(renewed)
			if after, _ := cc.AccessToken(ctx); after == renewed {
				t.Error("a rejected token was used again")
			}
		})
	}
}

func TestClientCredentialsErrorsHoldNoSecret(t *testing.T) {
	as, _, _ := authServer(t, nil)
	cc, err := NewClientCredentials("up", config.UpstreamAuth{ClientID: "gw", ClientSecret: "wrong-secret-value", TokenURL: as.TokenURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cc.AccessToken(context.Background())
	if !errors.Is(err, ErrTokenEndpoint) || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "wrong-secret-value") {
		t.Fatalf("error = %v", err)
	}
}

func TestExchangerPerPrincipal(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Now()}
	as, _, _ := authServer(t, clk.now)
	store, _ := NewFileStore(filepath.Join(t.TempDir(), "tokens"), secret)
	ex, err := NewExchanger("up", config.UpstreamAuth{Type: config.UpstreamAuthTokenExchange, ClientID: "gw", ClientSecret: "gw-secret",
		TokenURL: as.TokenURL, Audience: "https://up.test"}, store, &Options{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	alice, err := ex.AccessToken(ctx, "alice", "jwt-of-alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := ex.AccessToken(ctx, "bob", "jwt-of-bob")
	if err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]string{alice: "alice", bob: "bob"} {
		if i, _ := as.Lookup(tok); i.Principal != want || i.Audience != "https://up.test" {
			t.Errorf("token of %s issued as %+v", want, i)
		}
	}
	if again, _ := ex.AccessToken(ctx, "alice", "jwt-of-alice"); again != alice {
		t.Error("alice's token was not cached")
	}
	if n := as.CountGrants(testauth.GrantTokenExchange); n != 2 {
		t.Errorf("%d exchanges, want 2", n)
	}
	// An expired token is refreshed with its refresh token, without the caller's JWT.
	clk.add(2 * time.Minute)
	renewed, err := ex.AccessToken(ctx, "alice", "")
	if err != nil || renewed == alice {
		t.Fatalf("an expired token was not refreshed: %v", err)
	}
	if i, _ := as.Lookup(renewed); i.Principal != "alice" {
		t.Errorf("the refreshed token is %+v", i)
	}
	if n, m := as.CountGrants(testauth.GrantRefreshToken), as.CountGrants(testauth.GrantTokenExchange); n != 1 || m != 2 {
		t.Errorf("%d refreshes and %d exchanges, want 1 and 2", n, m)
	}
	if got, err := ex.AccessToken(ctx, "alice", ""); err != nil || got != renewed {
		t.Errorf("stored token without a subject: %q, %v", got, err)
	}
	// A refresh token the server no longer knows: a new exchange, which needs the JWT.
	stored, _ := store.Get(ctx, "alice", "up")
	stored.Expiry, stored.RefreshToken = clk.now().Add(-time.Minute), "rt-unknown"
	if err := store.Put(ctx, "alice", "up", stored); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.AccessToken(ctx, "alice", ""); !errors.Is(err, ErrNoSubject) {
		t.Errorf("refused refresh without a subject: %v, want ErrNoSubject", err)
	}
	if got, err := ex.AccessToken(ctx, "alice", "jwt-of-alice"); err != nil || got == renewed {
		t.Errorf("refused refresh with a subject: %q, %v; want a new exchange", got, err)
	}
	_, err = ex.AccessToken(ctx, "mallory", "not-a-valid-subject-jwt")
	if !errors.Is(err, ErrTokenEndpoint) || strings.Contains(err.Error(), "not-a-valid-subject-jwt") {
		t.Errorf("refused exchange: %v", err)
	}
	ex.Reject(ctx, "bob", bob)
	if got, _ := ex.AccessToken(ctx, "bob", "jwt-of-bob"); got == bob {
		t.Error("a rejected token was used again")
	}
}
