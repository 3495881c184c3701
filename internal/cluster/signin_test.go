package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func sampleSignIn() *SignIn {
	return &SignIn{Kind: KindSignInState, Owner: "10.1.2.3:8080", Boot: 42, Expires: time.Now().Add(10 * time.Minute).Truncate(time.Second),
		Principal: PrincipalOf("alice"), Server: "github", Local: "sdk-state-XYZ"}
}

// TestSignInTokens: a sign-in token opens under the current and the
// previous secrets into what was sealed; one of another cluster, altered,
// truncated, expired, or a session token does not open as a sign-in, nor
// a sign-in as a session.
func TestSignInTokens(t *testing.T) {
	old := mustKeys(t, secretB)
	k := mustKeys(t, secretA, secretB)
	want := sampleSignIn()
	for _, c := range []struct {
		name string
		keys *Keys
	}{{"current secret", k}, {"previous secret", old}} {
		t.Run(c.name, func(t *testing.T) {
			s, err := c.keys.SealSignIn(want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.OpenSignIn(s, time.Now())
			if err != nil || got != *want {
				t.Fatalf("opened %+v %v, want %+v", got, err, *want)
			}
		})
	}
	good, _ := k.SealSignIn(want)
	altered := []byte(good)
	altered[len(altered)/2] ^= 1
	expired := *want
	expired.Expires = time.Now().Add(-time.Second)
	exp, _ := k.SealSignIn(&expired)
	session, _ := k.Seal(sampleToken())
	other, _ := mustKeys(t, []byte("another-cluster-secret-0123456789abcdef")).SealSignIn(want)
	for _, c := range []struct {
		name, token string
		want        error
	}{
		{"altered", string(altered), nil},
		{"truncated", good[:len(good)-10], nil},
		{"expired", exp, ErrExpired},
		{"a session token", session, ErrForged},
		{"another cluster's", other, ErrForged},
		{"too long", strings.Repeat("A", 2000), ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := k.OpenSignIn(c.token, time.Now())
			if err == nil || c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("open: %v, want %v", err, c.want)
			}
		})
	}
	if _, err := k.Open(good, time.Now()); err == nil {
		t.Error("a sign-in token opens as a session token")
	}
	if _, err := k.SealSignIn(&SignIn{Kind: KindSession}); err == nil {
		t.Error("sealed a sign-in token of a session kind")
	}
	if _, err := k.SealSignIn(&SignIn{Kind: KindSignInStart, Server: strings.Repeat("s", 256)}); err == nil {
		t.Error("sealed a server name over 255 bytes")
	}
	if _, err := k.SealSignIn(&SignIn{Kind: KindSignInStart, Local: strings.Repeat("s", 1000)}); err == nil {
		t.Error("sealed a token over the size bound")
	}
}

func FuzzOpenSignIn(f *testing.F) {
	k := mustKeys(f, secretA)
	good, _ := k.SealSignIn(sampleSignIn())
	addTokenSeeds(f, good)
	f.Fuzz(func(t *testing.T, s string) {
		// Only tokens the key sealed open (the seed, sealed in each fuzzing
		// process): a fuzzer cannot forge one or alter its fields.
		si, err := k.OpenSignIn(s, time.Now())
		if err == nil && (si.Owner != "10.1.2.3:8080" || si.Server != "github" || si.Local != "sdk-state-XYZ" || si.Boot != 42) {
			t.Fatalf("opened %q: %+v", s, si)
		}
	})
}
