package authn

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/manifold-mcp/manifold/config"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Values shared by the tests.
const (
	testIssuer   = "https://issuer.example.com"
	testAudience = "https://mcp.example.com/mcp"
	testSecret   = "an-hmac-secret-of-at-least-32-bytes-0123456789"
	aliceKey     = "alice-key-0123456789abcdef"
	aliceKey2    = "alice-rotated-key-0123456789"
	bobKey       = "bob-key-0123456789abcdef0123"
)

// testNow is the time of the tests' clock (Options.Now), on a whole second as JWT times are.
var testNow = time.Now().Truncate(time.Second)

func fixedNow() time.Time { return testNow }

// Keys generated once per test binary.
var (
	rsaKey   = sync.OnceValue(func() *rsa.PrivateKey { return must(rsa.GenerateKey(rand.Reader, 2048)) })
	rsaOther = sync.OnceValue(func() *rsa.PrivateKey { return must(rsa.GenerateKey(rand.Reader, 2048)) })
	ecKey    = sync.OnceValue(func() *ecdsa.PrivateKey { return must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)) })
	ecOther  = sync.OnceValue(func() *ecdsa.PrivateKey { return must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)) })
	edKey    = sync.OnceValue(func() ed25519.PrivateKey { _, k := must2(ed25519.GenerateKey(rand.Reader)); return k })
	edOther  = sync.OnceValue(func() ed25519.PrivateKey { _, k := must2(ed25519.GenerateKey(rand.Reader)); return k })
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

// pemPublic returns the PEM "PUBLIC KEY" of a public key.
func pemPublic(t testing.TB, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// writeFile writes data to a file in a temporary directory and returns its path.
func writeFile(t testing.TB, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// claims returns valid claims for the tests' issuer, audience and clock, with mods applied: a
// nil value deletes the claim.
func claims(mods map[string]any) jwt.MapClaims {
	c := jwt.MapClaims{
		"iss":    testIssuer,
		"aud":    testAudience,
		"sub":    "alice",
		"iat":    testNow.Add(-time.Minute).Unix(),
		"nbf":    testNow.Add(-time.Minute).Unix(),
		"exp":    testNow.Add(time.Hour).Unix(),
		"groups": []string{"dev", "ops"},
		"scope":  "tools:read tools:call",
	}
	for k, v := range mods {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// sign returns the token of c signed with key by method, with the header kid unless empty.
func sign(t testing.TB, method jwt.SigningMethod, key any, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jwtAuth returns an auth section with JWT settings for the tests' issuer and audience, the key
// source set by src.
func jwtAuth(src func(*config.JWT)) *config.Auth {
	j := &config.JWT{
		Issuer:         testIssuer,
		Audience:       []string{testAudience},
		PrincipalClaim: "sub",
		GroupsClaim:    "groups",
		Leeway:         30 * time.Second,
	}
	src(j)
	return &config.Auth{JWT: j}
}

// newAuth returns New(cfg, opts), closed when the test ends; the test fails on an error.
func newAuth(t testing.TB, cfg *config.Auth, opts *Options) *Authenticator {
	t.Helper()
	a, err := New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(a.Close)
	return a
}

// wantRejected fails the test unless err rejects a token with a message containing reason.
func wantRejected(t testing.TB, id *Identity, err error, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted as %q, want rejected (%s)", id.Principal.Name(), reason)
	}
	if !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("error %q does not wrap ErrInvalidToken", err)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Errorf("error %q, want it to say %q", err, reason)
	}
}

// apiKeysAuth returns an auth section with alice's two keys (one as a hash) and bob's.
func apiKeysAuth() *config.Auth {
	return &config.Auth{APIKeys: []config.APIKey{
		{Name: "alice", Key: aliceKey, Groups: []string{"ops", "dev", "ops"}},
		{Name: "bob", KeyHash: config.HashAPIKey(bobKey)},
		// Upper-case hex, which config accepts.
		{Name: "alice", KeyHash: config.KeyHashPrefix + strings.ToUpper(config.HashAPIKey(aliceKey2)[len(config.KeyHashPrefix):]), Groups: []string{"dev", "ops"}},
	}}
}

func TestAPIKeys(t *testing.T) {
	a := newAuth(t, apiKeysAuth(), nil)
	if !a.Enabled() {
		t.Fatal("Enabled() = false with API keys")
	}
	tests := []struct {
		name       string
		token      string
		wantName   string // "" means rejected
		wantGroups []string
		reason     string
	}{
		{name: "plain key", token: aliceKey, wantName: "alice", wantGroups: []string{"dev", "ops"}},
		{name: "hashed key", token: bobKey, wantName: "bob"},
		{name: "rotated key of the same principal", token: aliceKey2, wantName: "alice", wantGroups: []string{"dev", "ops"}},
		{name: "wrong key", token: "mallory-key-0123456789abcdef", reason: "unknown API key"},
		{name: "empty", token: "", reason: "empty token"},
		{name: "prefix of a key", token: aliceKey[:len(aliceKey)-1], reason: "unknown API key"},
		{name: "key with a suffix", token: aliceKey + "x", reason: "unknown API key"},
		{name: "key in other case", token: strings.ToUpper(aliceKey), reason: "unknown API key"},
		{name: "the hash instead of the key", token: config.HashAPIKey(bobKey), reason: "unknown API key"},
		{name: "too long", token: strings.Repeat("a", MaxTokenLength+1), reason: "token too long"},
		{name: "looks like a JWT", token: "a.b.c", reason: "unknown API key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := a.Authenticate(context.Background(), tt.token)
			if tt.wantName == "" {
				wantRejected(t, id, err, tt.reason)
				return
			}
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if got := id.Principal.Name(); got != tt.wantName {
				t.Errorf("principal %q, want %q", got, tt.wantName)
			}
			if diff := cmp.Diff(tt.wantGroups, id.Principal.Groups()); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
			if id.Method != MethodAPIKey || !id.Expiry.IsZero() || id.Scopes != nil {
				t.Errorf("identity %+v, want method %q, no expiry, no scopes", id, MethodAPIKey)
			}
		})
	}
}

func TestAPIKeyPrincipalBuiltOnce(t *testing.T) {
	a := newAuth(t, apiKeysAuth(), nil)
	id1 := must(a.Authenticate(context.Background(), aliceKey))
	id2 := must(a.Authenticate(context.Background(), aliceKey))
	if id1.Principal != id2.Principal {
		t.Error("each authentication built a new principal")
	}
}

func TestNotEnabled(t *testing.T) {
	a := newAuth(t, &config.Auth{}, nil)
	if a.Enabled() {
		t.Error("Enabled() = true without keys or JWT")
	}
	id, err := a.Authenticate(context.Background(), aliceKey)
	wantRejected(t, id, err, "no API key or JWT")
}

func TestNewErrors(t *testing.T) {
	small := must(rsa.GenerateKey(rand.Reader, 1024))
	privDER := must(x509.MarshalPKCS8PrivateKey(rsaKey()))
	privPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}))
	p384 := must(ecdsa.GenerateKey(elliptic.P384(), rand.Reader))
	tests := []struct {
		name string
		cfg  *config.Auth
		want string // the start of the error
	}{
		{
			name: "key hash not hex",
			cfg:  &config.Auth{APIKeys: []config.APIKey{{Name: "a", KeyHash: "sha256:xyz"}}},
			want: "auth.apiKeys[0].keyHash: ",
		},
		{
			name: "key and hash",
			cfg:  &config.Auth{APIKeys: []config.APIKey{{Name: "a", Key: aliceKey, KeyHash: config.HashAPIKey(aliceKey)}}},
			want: "auth.apiKeys[0]: set exactly one",
		},
		{
			name: "not PEM",
			cfg:  jwtAuth(func(j *config.JWT) { j.PublicKey = "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA" }),
			want: "auth.jwt.publicKey: not a PEM public key",
		},
		{
			name: "PEM garbage",
			cfg:  jwtAuth(func(j *config.JWT) { j.PublicKey = "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n" }),
			want: "auth.jwt.publicKey: not a PEM public key: ",
		},
		{
			name: "private key",
			cfg:  jwtAuth(func(j *config.JWT) { j.PublicKey = privPEM }),
			want: "auth.jwt.publicKey: a private key",
		},
		{
			name: "small RSA key",
			cfg:  jwtAuth(func(j *config.JWT) { j.PublicKey = pemPublic(t, &small.PublicKey) }),
			want: "auth.jwt.publicKey: an RSA key of 1024 bits",
		},
		{
			name: "missing key file",
			cfg:  jwtAuth(func(j *config.JWT) { j.PublicKeyFile = filepath.Join(t.TempDir(), "absent.pem") }),
			want: "auth.jwt.publicKeyFile: ",
		},
		{
			name: "HMAC algorithm for an RSA key",
			cfg: jwtAuth(func(j *config.JWT) {
				j.PublicKey = pemPublic(t, &rsaKey().PublicKey)
				j.Algorithms = []string{"RS256", "HS256"}
			}),
			want: `auth.jwt.algorithms[1]: "HS256" cannot be verified with the key of auth.jwt.publicKey`,
		},
		{
			name: "ES256 for a P-384 key",
			cfg: jwtAuth(func(j *config.JWT) {
				j.PublicKey = pemPublic(t, &p384.PublicKey)
				j.Algorithms = []string{"ES256"}
			}),
			want: `auth.jwt.algorithms[0]: "ES256" cannot be verified`,
		},
		{
			name: "HMAC algorithm for a JWKS",
			cfg: jwtAuth(func(j *config.JWT) {
				j.JWKSURL = "http://127.0.0.1:1/jwks"
				j.Algorithms = []string{"HS256"}
			}),
			want: `auth.jwt.algorithms[0]: "HS256" cannot be verified with the key of auth.jwt.jwksURL`,
		},
		{
			name: "no issuer",
			cfg:  jwtAuth(func(j *config.JWT) { j.Secret = testSecret; j.Issuer = "" }),
			want: "auth.jwt.issuer: is required",
		},
		{
			name: "no audience",
			cfg:  jwtAuth(func(j *config.JWT) { j.Secret = testSecret; j.Audience = nil }),
			want: "auth.jwt.audience: is required",
		},
		{
			name: "two key sources",
			cfg:  jwtAuth(func(j *config.JWT) { j.Secret = testSecret; j.PublicKey = pemPublic(t, &rsaKey().PublicKey) }),
			want: "auth.jwt: set exactly one key source",
		},
		{
			name: "JWKS URL not a URL",
			cfg:  jwtAuth(func(j *config.JWT) { j.JWKSURL = "jwks.json" }),
			want: "auth.jwt.jwksURL: ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(context.Background(), tt.cfg, nil)
			if err == nil {
				a.Close()
				t.Fatalf("New succeeded, want an error starting %q", tt.want)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("New: %v\nwant an error starting %q", err, tt.want)
			}
			for _, secret := range []string{testSecret, aliceKey, privPEM, "PRIVATE KEY-----\nMI"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q contains a secret", err)
				}
			}
		})
	}
}

// TestNoSecretsInErrorsOrLogs rejects and accepts tokens with debug logging on, and checks that
// no error and no log entry holds a key, the secret or a token.
func TestNoSecretsInErrorsOrLogs(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := jwtAuth(func(j *config.JWT) { j.Secret = testSecret })
	cfg.APIKeys = []config.APIKey{{Name: "alice", Key: aliceKey}}
	a := newAuth(t, cfg, &Options{Logger: zap.New(core), Now: fixedNow})

	hs := func(mods map[string]any) string {
		return sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(mods))
	}
	tokens := []string{
		aliceKey, // accepted
		aliceKey + "-suffix",
		"Xlice-key-0123456789abcdef",
		hs(nil), // accepted
		hs(map[string]any{"exp": testNow.Add(-time.Hour).Unix()}),
		hs(map[string]any{"iss": "https://evil.example.com"}),
		hs(map[string]any{"aud": "https://evil.example.com"}),
		hs(map[string]any{"groups": 42}),
		hs(map[string]any{"sub": nil}),
		hs(map[string]any{"sub": "group:admins"}),
		sign(t, jwt.SigningMethodHS256, []byte(testSecret+"x"), "", claims(nil)),
		sign(t, jwt.SigningMethodHS256, []byte(testSecret), "a-kid-"+aliceKey, claims(map[string]any{"exp": nil})),
		hs(nil)[:40] + "." + "x",
	}
	var errs []string
	for _, tok := range tokens {
		if _, err := a.Authenticate(context.Background(), tok); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if got, want := len(errs), len(tokens)-2; got != want {
		t.Errorf("%d tokens rejected, want %d: %q", got, want, errs)
	}
	var entries []string
	for _, e := range logs.All() {
		entries = append(entries, fmt.Sprint(e.Message, e.ContextMap()))
	}
	if len(entries) < len(tokens) {
		t.Errorf("%d log entries, want at least one per token", len(entries))
	}
	secrets := []string{aliceKey, testSecret, "a-kid-"}
	for _, tok := range tokens {
		secrets = append(secrets, tok)
		for _, part := range strings.Split(tok, ".") {
			if len(part) >= 8 {
				secrets = append(secrets, part)
			}
		}
	}
	for _, s := range append(errs, entries...) {
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				t.Errorf("%q contains the secret or token %q", s, secret)
			}
		}
	}
}

func TestBearerToken(t *testing.T) {
	tests := []struct {
		name   string
		header string
		want   string // "" means not ok
	}{
		{name: "bearer", header: "Bearer abc.DEF-_~+/9==", want: "abc.DEF-_~+/9=="},
		{name: "lower-case scheme", header: "bearer abc", want: "abc"},
		{name: "upper-case scheme", header: "BEARER abc", want: "abc"},
		{name: "mixed-case scheme", header: "bEaReR abc", want: "abc"},
		{name: "several spaces", header: "Bearer   abc", want: "abc"},
		{name: "max length", header: "Bearer " + strings.Repeat("a", MaxTokenLength), want: strings.Repeat("a", MaxTokenLength)},
		{name: "empty"},
		{name: "scheme only", header: "Bearer"},
		{name: "scheme and space", header: "Bearer "},
		{name: "basic", header: "Basic dXNlcjpwYXNz"},
		{name: "other scheme with bearer prefix", header: "Bearerx abc"},
		{name: "no space", header: "Bearerabc"},
		{name: "tab", header: "Bearer\tabc"},
		{name: "two tokens", header: "Bearer abc def"},
		{name: "trailing space", header: "Bearer abc "},
		{name: "leading space", header: " Bearer abc"},
		{name: "padding only", header: "Bearer =="},
		{name: "padding inside", header: "Bearer ab=c"},
		{name: "comma", header: "Bearer abc,def"},
		{name: "quote", header: `Bearer "abc"`},
		{name: "non-ASCII", header: "Bearer abcé"},
		{name: "NUL", header: "Bearer abc\x00"},
		{name: "Unicode scheme", header: "Bearer\u00a0abc"},
		{name: "oversized", header: "Bearer " + strings.Repeat("a", MaxTokenLength+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := BearerToken(tt.header)
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("BearerToken(%.40q) = %.40q, %v; want %.40q, %v", tt.header, got, ok, tt.want, tt.want != "")
			}
		})
	}
}

func TestCloseStopsBackgroundWork(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := newJWKSServer(t)
	srv.add(t, &rsaKey().PublicKey, "k1", "RS256")
	a, err := New(context.Background(), jwtAuth(func(j *config.JWT) { j.JWKSURL = srv.URL }),
		&Options{Now: fixedNow, timing: jwksTiming{refresh: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	token := sign(t, jwt.SigningMethodRS256, rsaKey(), "k1", claims(nil))
	if _, err := a.Authenticate(context.Background(), token); err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	// Let the refresh loop run a few times.
	for deadline := time.Now().Add(5 * time.Second); srv.hits.Load() < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d JWKS fetches, want periodic ones", srv.hits.Load())
		}
	}
	a.Close()
	a.Close() // idempotent
	hits := srv.hits.Load()
	srv.Close()
	if _, err := a.Authenticate(context.Background(), token); err != nil {
		t.Errorf("Authenticate after Close: %v", err)
	}
	if got := srv.hits.Load(); got != hits {
		t.Errorf("%d JWKS fetches after Close", got-hits)
	}
}
