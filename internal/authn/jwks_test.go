package authn

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/manifold-mcp/manifold/config"
)

// jwksServer serves a JWK Set on 127.0.0.1 that tests change as they go.
type jwksServer struct {
	*httptest.Server
	hits atomic.Int64 // requests served

	mu   sync.Mutex
	keys []jwkset.JWKMarshal
}

// newJWKSServer starts a jwksServer, closed when the test ends.
func newJWKSServer(t testing.TB) *jwksServer {
	s := &jwksServer{}
	s.Server = httptest.NewServer(s)
	t.Cleanup(s.Close)
	return s
}

// add publishes the public key pub with kid, alg and use "sig".
func (s *jwksServer) add(t testing.TB, pub any, kid, alg string) {
	s.addUse(t, pub, kid, alg, jwkset.UseSig)
}

func (s *jwksServer) addUse(t testing.TB, pub any, kid, alg string, use jwkset.USE) {
	t.Helper()
	jwk, err := jwkset.NewJWKFromKey(pub, jwkset.JWKOptions{
		Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.ALG(alg), USE: use},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, jwk.Marshal())
}

func (s *jwksServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.hits.Add(1)
	s.mu.Lock()
	set := jwkset.JWKSMarshal{Keys: append([]jwkset.JWKMarshal(nil), s.keys...)}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(set)
}

func TestJWKSRotation(t *testing.T) {
	srv := newJWKSServer(t)
	srv.add(t, &rsaKey().PublicKey, "k1", "RS256")
	a := newAuth(t, jwtAuth(func(j *config.JWT) { j.JWKSURL = srv.URL }), &Options{Now: fixedNow})
	if got := srv.hits.Load(); got != 1 {
		t.Fatalf("%d fetches by New, want 1", got)
	}

	// A key published after startup: its unknown kid makes the Authenticator fetch the JWKS.
	srv.add(t, &rsaOther().PublicKey, "k2", "RS256")
	id, err := a.Authenticate(context.Background(), sign(t, jwt.SigningMethodRS256, rsaOther(), "k2", claims(nil)))
	if err != nil {
		t.Fatalf("token of the new key: %v", err)
	}
	if id.Principal.Name() != "alice" {
		t.Errorf("principal %q, want alice", id.Principal.Name())
	}
	if got := srv.hits.Load(); got != 2 {
		t.Errorf("%d fetches, want 2", got)
	}

	// The refresh on an unknown kid is rate-limited: the next one right away does not fetch.
	srv.add(t, &ecKey().PublicKey, "k3", "ES256")
	id, err = a.Authenticate(context.Background(), sign(t, jwt.SigningMethodES256, ecKey(), "k3", claims(nil)))
	wantRejected(t, id, err, "no signing key for kid")
	if got := srv.hits.Load(); got != 2 {
		t.Errorf("%d fetches, want still 2", got)
	}
	// Known keys still work.
	for _, tok := range []string{
		sign(t, jwt.SigningMethodRS256, rsaKey(), "k1", claims(nil)),
		sign(t, jwt.SigningMethodRS256, rsaOther(), "k2", claims(nil)),
	} {
		if _, err := a.Authenticate(context.Background(), tok); err != nil {
			t.Errorf("known key: %v", err)
		}
	}
}

func TestJWKSKeySelection(t *testing.T) {
	srv := newJWKSServer(t)
	srv.add(t, &rsaKey().PublicKey, "rs", "RS256")
	srv.addUse(t, &rsaOther().PublicKey, "enc", "RS256", jwkset.UseEnc)
	srv.add(t, &ecKey().PublicKey, "ec", "")
	weak := must(rsa.GenerateKey(rand.Reader, 1024))
	srv.add(t, &weak.PublicKey, "weak", "RS256")
	a := newAuth(t, jwtAuth(func(j *config.JWT) { j.JWKSURL = srv.URL }), &Options{Now: fixedNow})
	tests := []struct {
		name   string
		token  string
		reason string // "" means accepted
	}{
		{name: "by kid", token: sign(t, jwt.SigningMethodRS256, rsaKey(), "rs", claims(nil))},
		{name: "without kid", token: sign(t, jwt.SigningMethodRS256, rsaKey(), "", claims(nil))},
		{name: "ECDSA without kid", token: sign(t, jwt.SigningMethodES256, ecKey(), "", claims(nil))},
		{name: "key without alg", token: sign(t, jwt.SigningMethodES256, ecKey(), "ec", claims(nil))},
		{name: "alg other than the key's", token: sign(t, jwt.SigningMethodRS512, rsaKey(), "rs", claims(nil)), reason: "no signing key for kid"},
		{name: "encryption key", token: sign(t, jwt.SigningMethodRS256, rsaOther(), "enc", claims(nil)), reason: "no signing key for kid"},
		// Without kid, only the keys a kid could name: the RS256 signing key is tried, not the
		// encryption key that signed the token.
		{name: "encryption key without kid", token: sign(t, jwt.SigningMethodRS256, rsaOther(), "", claims(nil)), reason: "signature invalid"},
		{name: "alg other than the key's without kid", token: sign(t, jwt.SigningMethodRS512, rsaKey(), "", claims(nil)), reason: "signing key does not fit"},
		{name: "RSA key under 2048 bits", token: sign(t, jwt.SigningMethodRS256, weak, "weak", claims(nil)), reason: "signing key does not fit"},
		{name: "RSA key under 2048 bits without kid", token: sign(t, jwt.SigningMethodRS256, weak, "", claims(nil)), reason: "signature invalid"},
		{name: "kid of another family", token: sign(t, jwt.SigningMethodES256, ecKey(), "rs", claims(nil)), reason: "no signing key for kid"},
		{name: "kid not a string", token: withHeader(t, sign(t, jwt.SigningMethodRS256, rsaKey(), "", claims(nil)), `{"alg":"RS256","kid":7}`), reason: "malformed token"},
		{name: "unknown kid", token: sign(t, jwt.SigningMethodRS256, rsaKey(), "nope", claims(nil)), reason: "no signing key for kid"},
		{name: "HS256 keyed with a JWKS key", token: sign(t, jwt.SigningMethodHS256, []byte(pemPublic(t, &rsaKey().PublicKey)), "rs", claims(nil)), reason: "algorithm not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := a.Authenticate(context.Background(), tt.token)
			if tt.reason != "" {
				wantRejected(t, id, err, tt.reason)
			} else if err != nil {
				t.Errorf("Authenticate: %v", err)
			}
		})
	}
}

// TestJWKSUnreachableAtStartup starts the Authenticator while the JWKS endpoint accepts
// connections but does not answer, then serves the JWKS.
func TestJWKSUnreachableAtStartup(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &jwksServer{}
	srv.add(t, &rsaKey().PublicKey, "k1", "RS256")
	core, logs := observer.New(zapcore.WarnLevel)
	client := &http.Client{Timeout: 200 * time.Millisecond}
	t.Cleanup(client.CloseIdleConnections)
	opts := &Options{
		Logger:     zap.New(core),
		HTTPClient: client,
		Now:        fixedNow,
		timing:     jwksTiming{retryMin: 10 * time.Millisecond, retryMax: 50 * time.Millisecond, unknownKID: time.Hour},
	}
	a := newAuth(t, jwtAuth(func(j *config.JWT) { j.JWKSURL = "http://" + ln.Addr().String() + "/jwks" }), opts)
	if logs.FilterMessageSnippet("no JWKS signing keys yet").Len() == 0 {
		t.Errorf("no warning about the missing keys; logs: %v", logs.All())
	}
	token := sign(t, jwt.SigningMethodRS256, rsaKey(), "k1", claims(nil))
	id, err := a.Authenticate(context.Background(), token)
	wantRejected(t, id, err, "no signing key")

	srv.Server = httptest.NewUnstartedServer(srv)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := a.Authenticate(context.Background(), token)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("token still rejected 10s after the JWKS came up: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if logs.FilterMessageSnippet("JWKS fetch failed").Len() == 0 {
		t.Errorf("no warning about the failed fetches; logs: %v", logs.All())
	}
}

// TestJWKSStartupContext gives New a context that ends before the JWKS endpoint answers: New
// succeeds, and Close stops the fetch still under way.
func TestJWKSStartupContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client := &http.Client{Timeout: time.Minute}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	a, err := New(ctx, jwtAuth(func(j *config.JWT) { j.JWKSURL = "http://" + ln.Addr().String() }), &Options{HTTPClient: client})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("New took %v with a 50ms context", d)
	}
	id, err := a.Authenticate(context.Background(), sign(t, jwt.SigningMethodRS256, rsaKey(), "k1", claims(nil)))
	wantRejected(t, id, err, "no signing keys available yet")

	done := make(chan struct{})
	go func() { a.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s while the first fetch hung")
	}
}

func TestJWKSCanceledContext(t *testing.T) {
	srv := newJWKSServer(t)
	srv.add(t, &rsaKey().PublicKey, "k1", "RS256")
	a := newAuth(t, jwtAuth(func(j *config.JWT) { j.JWKSURL = srv.URL }), &Options{Now: fixedNow})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := a.Authenticate(ctx, sign(t, jwt.SigningMethodRS256, rsaKey(), "unknown", claims(nil)))
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrInvalidToken) {
		t.Errorf("Authenticate with a canceled context: %v; want context.Canceled", err)
	}
	if strings.Contains(err.Error(), "unknown") {
		t.Errorf("error %q holds the kid", err)
	}
	// A known kid needs no fetch.
	if _, err := a.Authenticate(ctx, sign(t, jwt.SigningMethodRS256, rsaKey(), "k1", claims(nil))); err != nil {
		t.Errorf("known kid with a canceled context: %v", err)
	}
}
