package authn

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/manifold-mcp/manifold/config"
)

// b64token is RFC 6750's b64token, as a reference for BearerToken.
var b64token = regexp.MustCompile(`^[A-Za-z0-9\-._~+/]+=*$`)

func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{
		"Bearer abc", "bearer a.b.c", "BEARER x==", "Bearer   abc", "Bearer", "Bearer ", "Basic dXNlcg==",
		"Bearer a b", "Bearer\tabc", "Bearer ab=c", "Bearer ==", " Bearer abc", "Bearer abc ", "",
		"Bearer " + strings.Repeat("a", MaxTokenLength), "Bearer é", "Bearer\x00abc",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		token, ok := BearerToken(header)
		if !ok {
			if token != "" {
				t.Fatalf("BearerToken(%q) = %q, false; want \"\" with false", header, token)
			}
			return
		}
		if !b64token.MatchString(token) || len(token) > MaxTokenLength {
			t.Fatalf("BearerToken(%q) = %q: not a b64token of at most %d bytes", header, token, MaxTokenLength)
		}
		if !strings.HasSuffix(header, token) || !strings.EqualFold(header[:len("bearer ")], "bearer ") {
			t.Fatalf("BearerToken(%q) = %q: not the header's token", header, token)
		}
		if again, ok := BearerToken("Bearer " + token); !ok || again != token {
			t.Fatalf("BearerToken(%q) = %q, %v; want %q back", "Bearer "+token, again, ok, token)
		}
	})
}

// fuzzMessages are all the errors FuzzAuthenticate's Authenticator may return.
var fuzzMessages = []string{
	"empty token", "token too long", "unknown API key", "malformed token", "algorithm not allowed",
	"signature invalid", "signing key does not fit the algorithm", "token expired",
	"token not valid yet", "token issued in the future", "wrong issuer", "wrong audience",
	"invalid claims", "claim exp missing", "claim iss missing", "claim aud missing",
	"claim exp malformed", "claim nbf malformed", "claim iat malformed", "claim iss malformed",
	"claim aud malformed", "claim sub missing", "claim sub is not a string",
	"claim sub starts with group:", "claim groups is neither a list of strings nor a string",
	"claim scope is neither a string nor a list of strings",
	"claim scp is neither a string nor a list of strings",
}

func FuzzAuthenticate(f *testing.F) {
	cfg := jwtAuth(func(j *config.JWT) { j.Secret = testSecret })
	cfg.APIKeys = []config.APIKey{{Name: "alice", Key: aliceKey, Groups: []string{"dev"}}}
	a, err := New(context.Background(), cfg, &Options{Now: fixedNow})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(a.Close)
	hs := func(key string, mods map[string]any) string {
		return sign(f, jwt.SigningMethodHS256, []byte(key), "", claims(mods))
	}
	for _, s := range []string{
		"", aliceKey + "x", aliceKey[1:], "a.b.c", "..", "invalid token",
		hs(testSecret, map[string]any{"exp": testNow.Add(-time.Hour).Unix()}),
		hs(testSecret, map[string]any{"iss": "x"}),
		hs(testSecret, map[string]any{"sub": nil}),
		hs(testSecret, map[string]any{"groups": 1.5}),
		hs("another-secret-of-at-least-32-bytes!!", nil),
		tamper(f, hs(testSecret, nil), hs(testSecret, map[string]any{"sub": "root"})),
		unsigned(f, "", claims(nil)),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		if token == aliceKey {
			return
		}
		id, err := a.Authenticate(context.Background(), token)
		if err == nil {
			t.Fatalf("Authenticate(%q) accepted it as %q", token, id.Principal.Name())
		}
		if !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("Authenticate(%q): %v does not wrap ErrInvalidToken", token, err)
		}
		msg := err.Error()
		reason, ok := strings.CutPrefix(msg, ErrInvalidToken.Error()+": ")
		if !ok || !slices.Contains(fuzzMessages, reason) {
			t.Fatalf("Authenticate(%q): unexpected error %q", token, msg)
		}
		if len(token) >= 8 && strings.Contains(msg, token) && !strings.Contains(strings.Join(fuzzMessages, "|")+ErrInvalidToken.Error(), token) {
			t.Fatalf("Authenticate(%q): error %q holds the token", token, msg)
		}
	})
}
