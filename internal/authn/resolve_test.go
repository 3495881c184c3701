package authn

import (
	"context"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/manifold-mcp/manifold/config"
)

// TestResolve: an identity resolves under a later Authenticator to the
// current principal of its credential: an API key's current name and
// groups, a JWT's own principal while the JWT settings are the same; a
// removed key, changed JWT settings, or no auth at all resolve nothing.
func TestResolve(t *testing.T) {
	ctx := context.Background()
	keys := newAuth(t, apiKeysAuth(), nil)
	alice, err := keys.Authenticate(ctx, aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(alice.Source, keyIDPrefix) || strings.Contains(alice.Source, config.HashAPIKey(aliceKey)[len(config.KeyHashPrefix):][:8]) {
		t.Fatalf("key id %q: want %q and no part of the key's hash", alice.Source, keyIDPrefix)
	}
	secret := func(j *config.JWT) { j.Secret = testSecret }
	jwts := newAuth(t, jwtAuth(secret), nil)
	carol, err := jwts.Authenticate(ctx, sign(t, jwt.SigningMethodHS256, []byte(testSecret), "", claims(map[string]any{"sub": "carol"})))
	if err != nil {
		t.Fatal(err)
	}
	if carol.Source != testIssuer || carol.Method != MethodJWT {
		t.Fatalf("JWT identity names %q/%q, want the issuer", carol.Method, carol.Source)
	}

	moved := apiKeysAuth()
	moved.APIKeys[0].Groups = []string{"contractor"}
	removed := apiKeysAuth()
	removed.APIKeys = removed.APIKeys[1:]
	otherLeeway := jwtAuth(secret)
	otherLeeway.JWT.Leeway *= 2
	tests := []struct {
		name       string
		id         *Identity
		under      *Authenticator
		wantOK     bool
		wantName   string
		wantGroups []string
	}{
		{name: "key, same config", id: alice, under: keys, wantOK: true, wantName: "alice", wantGroups: []string{"dev", "ops"}},
		{name: "key, groups changed", id: alice, under: newAuth(t, moved, nil), wantOK: true, wantName: "alice", wantGroups: []string{"contractor"}},
		{name: "key removed", id: alice, under: newAuth(t, removed, nil)},
		{name: "key under JWT only", id: alice, under: jwts},
		{name: "JWT, same settings", id: carol, under: newAuth(t, jwtAuth(secret), nil), wantOK: true, wantName: "carol", wantGroups: []string{"dev", "ops"}},
		{name: "JWT, settings changed", id: carol, under: newAuth(t, otherLeeway, nil)},
		{name: "JWT under keys only", id: carol, under: keys},
		{name: "auth off", id: alice, under: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := tt.under.Resolve(tt.id)
			if ok != tt.wantOK {
				t.Fatalf("Resolve ok = %v, want %v", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			if p.Name() != tt.wantName {
				t.Errorf("name %q, want %q", p.Name(), tt.wantName)
			}
			if diff := cmp.Diff(tt.wantGroups, p.Groups()); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
		})
	}
}
