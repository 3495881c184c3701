package authn

import (
	"context"
	"fmt"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/manifold-mcp/manifold/config"
)

func BenchmarkAuthenticateAPIKey(b *testing.B) {
	cfg := &config.Auth{}
	for i := range 10 {
		cfg.APIKeys = append(cfg.APIKeys, config.APIKey{
			Name: fmt.Sprintf("user%d", i), Key: fmt.Sprintf("key-%02d-0123456789abcdef", i), Groups: []string{"dev"},
		})
	}
	a := newAuth(b, cfg, nil)
	for _, bc := range []struct{ name, token string }{
		{"match", cfg.APIKeys[7].Key},
		{"miss", "key-xx-0123456789abcdef"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				_, _ = a.Authenticate(ctx, bc.token)
			}
		})
	}
}

func BenchmarkAuthenticateJWT(b *testing.B) {
	srv := newJWKSServer(b)
	srv.add(b, &rsaKey().PublicKey, "k1", "RS256")
	for _, bc := range []struct {
		name   string
		src    func(*config.JWT)
		method jwt.SigningMethod
		key    any
		kid    string
	}{
		{"RS256", func(j *config.JWT) { j.PublicKey = pemPublic(b, &rsaKey().PublicKey) }, jwt.SigningMethodRS256, rsaKey(), ""},
		{"RS256-JWKS", func(j *config.JWT) { j.JWKSURL = srv.URL }, jwt.SigningMethodRS256, rsaKey(), "k1"},
		{"ES256", func(j *config.JWT) { j.PublicKey = pemPublic(b, &ecKey().PublicKey) }, jwt.SigningMethodES256, ecKey(), ""},
		{"HS256", func(j *config.JWT) { j.Secret = testSecret }, jwt.SigningMethodHS256, []byte(testSecret), ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			a := newAuth(b, jwtAuth(bc.src), &Options{Now: fixedNow})
			token := sign(b, bc.method, bc.key, bc.kid, claims(nil))
			ctx := context.Background()
			if _, err := a.Authenticate(ctx, token); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Authenticate(ctx, token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
