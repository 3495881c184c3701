package authn

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/manifold-mcp/manifold/config"
)

// jwtSource is a kind of JWT key source under test.
type jwtSource struct {
	name   string
	auth   func(t *testing.T) *config.Auth
	method jwt.SigningMethod
	key    any    // signs the valid tokens
	other  any    // a key of the same kind the source does not hold
	kid    string // of key in the JWKS
}

func jwtSources() []jwtSource {
	return []jwtSource{
		{
			name: "RSA PEM",
			auth: func(t *testing.T) *config.Auth {
				return jwtAuth(func(j *config.JWT) { j.PublicKey = pemPublic(t, &rsaKey().PublicKey) })
			},
			method: jwt.SigningMethodRS256, key: rsaKey(), other: rsaOther(),
		},
		{
			name: "ECDSA key file",
			auth: func(t *testing.T) *config.Auth {
				path := writeFile(t, "ec.pem", pemPublic(t, &ecKey().PublicKey))
				return jwtAuth(func(j *config.JWT) { j.PublicKeyFile = path })
			},
			method: jwt.SigningMethodES256, key: ecKey(), other: ecOther(),
		},
		{
			name: "Ed25519 PEM",
			auth: func(t *testing.T) *config.Auth {
				return jwtAuth(func(j *config.JWT) { j.PublicKey = pemPublic(t, edKey().Public()) })
			},
			method: jwt.SigningMethodEdDSA, key: edKey(), other: edOther(),
		},
		{
			name: "HMAC secret",
			auth: func(t *testing.T) *config.Auth {
				return jwtAuth(func(j *config.JWT) { j.Secret = testSecret })
			},
			method: jwt.SigningMethodHS256, key: []byte(testSecret), other: []byte("another-secret-of-at-least-32-bytes!!"),
		},
		{
			name: "JWKS",
			auth: func(t *testing.T) *config.Auth {
				srv := newJWKSServer(t)
				srv.add(t, &rsaKey().PublicKey, "k1", "RS256")
				return jwtAuth(func(j *config.JWT) { j.JWKSURL = srv.URL + "/.well-known/jwks.json" })
			},
			method: jwt.SigningMethodRS256, key: rsaKey(), other: rsaOther(), kid: "k1",
		},
	}
}

func TestJWT(t *testing.T) {
	defaultGroups := []string{"dev", "ops"}
	defaultScopes := []string{"tools:read", "tools:call"}
	for _, src := range jwtSources() {
		t.Run(src.name, func(t *testing.T) {
			a := newAuth(t, src.auth(t), &Options{Now: fixedNow})
			signed := func(mods map[string]any) string { return sign(t, src.method, src.key, src.kid, claims(mods)) }
			tests := []struct {
				name       string
				token      string
				reason     string // "" means accepted
				wantGroups []string
				wantScopes []string
			}{
				{name: "valid", token: signed(nil), wantGroups: defaultGroups, wantScopes: defaultScopes},
				{name: "expired within leeway", token: signed(map[string]any{"exp": testNow.Add(-20 * time.Second).Unix()}),
					wantGroups: defaultGroups, wantScopes: defaultScopes},
				{name: "expired beyond leeway", token: signed(map[string]any{"exp": testNow.Add(-31 * time.Second).Unix()}), reason: "token expired"},
				{name: "not valid yet", token: signed(map[string]any{"nbf": testNow.Add(time.Minute).Unix()}), reason: "token not valid yet"},
				{name: "issued in the future", token: signed(map[string]any{"iat": testNow.Add(time.Minute).Unix()}), reason: "token issued in the future"},
				{name: "wrong issuer", token: signed(map[string]any{"iss": "https://other.example.com"}), reason: "wrong issuer"},
				{name: "no issuer", token: signed(map[string]any{"iss": nil}), reason: "claim iss missing"},
				{name: "wrong audience", token: signed(map[string]any{"aud": "https://other.example.com/mcp"}), reason: "wrong audience"},
				{name: "no audience", token: signed(map[string]any{"aud": nil}), reason: "claim aud missing"},
				{name: "audience in a list", token: signed(map[string]any{"aud": []string{"x", testAudience}}),
					wantGroups: defaultGroups, wantScopes: defaultScopes},
				{name: "no exp", token: signed(map[string]any{"exp": nil}), reason: "claim exp missing"},
				{name: "exp a string", token: signed(map[string]any{"exp": "tomorrow"}), reason: "claim exp malformed"},
				{name: "signed by another key", token: sign(t, src.method, src.other, src.kid, claims(nil)), reason: "signature invalid"},
				{name: "claims tampered", token: tamper(t, signed(nil), signed(map[string]any{"sub": "root"})), reason: "signature invalid"},
				{name: "alg none", token: unsigned(t, src.kid, claims(nil)), reason: "algorithm not allowed"},
				{name: "unknown alg", token: withHeader(t, signed(nil), `{"alg":"XS256","typ":"JWT"}`), reason: "algorithm not allowed"},
				{name: "no alg", token: withHeader(t, signed(nil), `{"typ":"JWT"}`), reason: "malformed token"},
				{name: "malformed", token: "a.b.c", reason: "malformed token"},
				{name: "two parts", token: "abc.def", reason: "malformed token"},
				{name: "groups a number", token: signed(map[string]any{"groups": 42}), reason: "claim groups is neither a list of strings nor a string"},
				{name: "groups an object", token: signed(map[string]any{"groups": map[string]any{"a": "b"}}), reason: "claim groups is neither"},
				{name: "groups with a number", token: signed(map[string]any{"groups": []any{"dev", 1}}), reason: "claim groups is neither"},
				{name: "groups space-separated", token: signed(map[string]any{"groups": " ops  dev ops"}), wantGroups: defaultGroups, wantScopes: defaultScopes},
				{name: "groups null", token: signed(map[string]any{"groups": jsonNull{}}), wantScopes: defaultScopes},
				{name: "groups absent", token: signed(map[string]any{"groups": nil}), wantScopes: defaultScopes},
				{name: "groups empty list", token: signed(map[string]any{"groups": []string{}}), wantScopes: defaultScopes},
				{name: "no sub", token: signed(map[string]any{"sub": nil}), reason: "claim sub missing"},
				{name: "blank sub", token: signed(map[string]any{"sub": " "}), reason: "claim sub missing"},
				{name: "sub a number", token: signed(map[string]any{"sub": 7}), reason: "claim sub is not a string"},
				{name: "sub names a group", token: signed(map[string]any{"sub": "group:admins"}), reason: "claim sub starts with group:"},
				{name: "scp list", token: signed(map[string]any{"scope": nil, "scp": []string{"a", "b"}}), wantGroups: defaultGroups, wantScopes: []string{"a", "b"}},
				{name: "scp string", token: signed(map[string]any{"scope": nil, "scp": "a b"}), wantGroups: defaultGroups, wantScopes: []string{"a", "b"}},
				{name: "no scopes", token: signed(map[string]any{"scope": nil}), wantGroups: defaultGroups},
				{name: "scope a number", token: signed(map[string]any{"scope": 1}), reason: "claim scope is neither"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					id, err := a.Authenticate(context.Background(), tt.token)
					if tt.reason != "" {
						wantRejected(t, id, err, tt.reason)
						return
					}
					if err != nil {
						t.Fatalf("Authenticate: %v", err)
					}
					if id.Principal.Name() != "alice" || id.Method != MethodJWT {
						t.Errorf("principal %q, method %q; want alice, %q", id.Principal.Name(), id.Method, MethodJWT)
					}
					if diff := cmp.Diff(tt.wantGroups, id.Principal.Groups()); diff != "" {
						t.Errorf("groups (-want +got):\n%s", diff)
					}
					if diff := cmp.Diff(tt.wantScopes, id.Scopes); diff != "" {
						t.Errorf("scopes (-want +got):\n%s", diff)
					}
					if exp := claims(nil)["exp"].(int64); !id.Expiry.Equal(time.Unix(exp, 0)) && tt.name == "valid" {
						t.Errorf("expiry %v, want %v", id.Expiry, time.Unix(exp, 0))
					}
				})
			}
		})
	}
}

// jsonNull marshals as JSON null (a nil value in claims() deletes the claim).
type jsonNull struct{}

func (jsonNull) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// tamper returns token with the claims of donor: the signature no longer fits.
func tamper(t testing.TB, token, donor string) string {
	t.Helper()
	tp, dp := strings.Split(token, "."), strings.Split(donor, ".")
	return tp[0] + "." + dp[1] + "." + tp[2]
}

// unsigned returns the token of c with "alg": "none" and no signature.
func unsigned(t testing.TB, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodNone, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// withHeader returns token with its header replaced by the JSON header.
func withHeader(t testing.TB, token, header string) string {
	t.Helper()
	_, rest, _ := strings.Cut(token, ".")
	return base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + rest
}

func TestJWTAlgorithmConfusion(t *testing.T) {
	pub := &rsaKey().PublicKey
	pemKey := pemPublic(t, pub)
	a := newAuth(t, jwtAuth(func(j *config.JWT) { j.PublicKey = pemKey }), &Options{Now: fixedNow})
	tests := []struct {
		name  string
		token string
	}{
		{name: "HS256 keyed with the PEM", token: sign(t, jwt.SigningMethodHS256, []byte(pemKey), "", claims(nil))},
		{name: "HS256 keyed with the DER", token: sign(t, jwt.SigningMethodHS256, rsaPublicDER(t, pub), "", claims(nil))},
		{name: "HS512 keyed with the PEM", token: sign(t, jwt.SigningMethodHS512, []byte(pemKey), "", claims(nil))},
		{name: "ES256", token: sign(t, jwt.SigningMethodES256, ecKey(), "", claims(nil))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := a.Authenticate(context.Background(), tt.token)
			wantRejected(t, id, err, "algorithm not allowed")
		})
	}
	// The source's other algorithms are accepted by default.
	if _, err := a.Authenticate(context.Background(), sign(t, jwt.SigningMethodPS384, rsaKey(), "", claims(nil))); err != nil {
		t.Errorf("PS384 with the RSA key: %v", err)
	}
}

func TestJWTConfiguredAlgorithms(t *testing.T) {
	cfg := jwtAuth(func(j *config.JWT) {
		j.PublicKey = pemPublic(t, &rsaKey().PublicKey)
		j.Algorithms = []string{"RS256", "RS256"}
	})
	a := newAuth(t, cfg, &Options{Now: fixedNow})
	if _, err := a.Authenticate(context.Background(), sign(t, jwt.SigningMethodRS256, rsaKey(), "", claims(nil))); err != nil {
		t.Errorf("RS256: %v", err)
	}
	for _, m := range []jwt.SigningMethod{jwt.SigningMethodRS512, jwt.SigningMethodPS256} {
		id, err := a.Authenticate(context.Background(), sign(t, m, rsaKey(), "", claims(nil)))
		wantRejected(t, id, err, "algorithm not allowed")
	}
}

func TestJWTAudience(t *testing.T) {
	tests := []struct {
		name     string
		audience []string // auth.jwt.audience
		resource string   // auth.resource
		aud      any      // the token's
		ok       bool
	}{
		{name: "one of several", audience: []string{"a", "b"}, aud: "b", ok: true},
		{name: "several, one matching", audience: []string{"a", "b"}, aud: []string{"c", "a"}, ok: true},
		{name: "several, none matching", audience: []string{"a", "b"}, aud: []string{"c", "d"}},
		{name: "resource by default", resource: testAudience, aud: testAudience, ok: true},
		{name: "resource by default, other aud", resource: testAudience, aud: "a"},
		{name: "audience wins over resource", audience: []string{"a"}, resource: testAudience, aud: testAudience},
		{name: "empty aud", audience: []string{"a"}, aud: ""},
		{name: "aud a number", audience: []string{"a"}, aud: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := jwtAuth(func(j *config.JWT) { j.Secret = testSecret; j.Audience = tt.audience })
			cfg.Resource = tt.resource
			a := newAuth(t, cfg, &Options{Now: fixedNow})
			id, err := a.Authenticate(context.Background(), sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(map[string]any{"aud": tt.aud})))
			if tt.ok && err != nil {
				t.Errorf("Authenticate: %v", err)
			}
			if !tt.ok {
				wantRejected(t, id, err, "aud")
			}
		})
	}
}

func TestJWTCustomClaims(t *testing.T) {
	cfg := jwtAuth(func(j *config.JWT) { j.Secret = testSecret; j.PrincipalClaim = "email"; j.GroupsClaim = "roles" })
	a := newAuth(t, cfg, &Options{Now: fixedNow})
	hs := func(mods map[string]any) string {
		return sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(mods))
	}
	id, err := a.Authenticate(context.Background(), hs(map[string]any{"email": "carol@example.com", "roles": []string{"admin"}}))
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	if id.Principal.Name() != "carol@example.com" || !cmp.Equal(id.Principal.Groups(), []string{"admin"}) {
		t.Errorf("principal %q groups %q, want carol@example.com [admin]", id.Principal.Name(), id.Principal.Groups())
	}
	id, err = a.Authenticate(context.Background(), hs(nil))
	wantRejected(t, id, err, "claim email missing")
	id, err = a.Authenticate(context.Background(), hs(map[string]any{"email": "c", "roles": true}))
	wantRejected(t, id, err, "claim roles is neither")
}

func TestJWTAndAPIKeys(t *testing.T) {
	cfg := jwtAuth(func(j *config.JWT) { j.Secret = testSecret })
	cfg.APIKeys = apiKeysAuth().APIKeys[:1]
	a := newAuth(t, cfg, &Options{Now: fixedNow})
	if id, err := a.Authenticate(context.Background(), aliceKey); err != nil || id.Method != MethodAPIKey {
		t.Errorf("API key: %+v, %v", id, err)
	}
	if id, err := a.Authenticate(context.Background(), sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(nil))); err != nil || id.Method != MethodJWT {
		t.Errorf("JWT: %+v, %v", id, err)
	}
	id, err := a.Authenticate(context.Background(), "not-a-key-nor-a-jwt")
	wantRejected(t, id, err, "unknown API key")
	id, err = a.Authenticate(context.Background(), "x.y.z")
	wantRejected(t, id, err, "malformed token")
}

func rsaPublicDER(t *testing.T, pub *rsa.PublicKey) []byte {
	t.Helper()
	return x509.MarshalPKCS1PublicKey(pub)
}
