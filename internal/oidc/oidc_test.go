package oidc

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/oidc/oidctest"
)

// TestPendingIsBoundedAndSingleUse: at MaxPending sign-ins the one expiring first makes
// room, an expired state is refused, and a state is taken once.
func TestPendingIsBoundedAndSingleUse(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f := NewFlow(nil, func() time.Time { return now })
	f.add("first", &Pending{Expires: now.Add(time.Minute)})
	for i := range MaxPending - 1 {
		f.add(RandomID(), &Pending{Expires: now.Add(time.Hour + time.Duration(i))})
	}
	f.add("last", &Pending{Expires: now.Add(2 * time.Hour)})
	if n := f.Len(); n != MaxPending {
		t.Fatalf("%d pending, want %d", n, MaxPending)
	}
	if _, ok := f.Take("first"); ok {
		t.Error("the sign-in expiring first was kept beyond the bound")
	}
	if _, ok := f.Take("last"); !ok {
		t.Error("the newest sign-in was dropped")
	}
	if _, ok := f.Take("last"); ok {
		t.Error("a state was taken twice")
	}
	f.add("old", &Pending{Expires: now.Add(time.Minute)})
	now = now.Add(time.Minute)
	if _, ok := f.Take("old"); ok {
		t.Error("an expired state was accepted")
	}
}

// TestSignInReplacesTheOneOfItsData: a sign-in kept with the Data of one in progress
// replaces it, however often, so it never makes room by evicting others' sign-ins; sign-ins
// without Data (the console's) are each kept, and a taken one's Data may begin again.
func TestSignInReplacesTheOneOfItsData(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f := NewFlow(nil, func() time.Time { return now })
	f.add("alice", &Pending{Data: "alice's link", Expires: now.Add(time.Minute)})
	f.add("console", &Pending{Expires: now.Add(time.Minute)})
	f.add("console 2", &Pending{Expires: now.Add(time.Minute)})
	for range MaxPending {
		f.add(RandomID(), &Pending{Data: "bob's link", Expires: now.Add(time.Hour)})
	}
	f.add("bob", &Pending{Data: "bob's link", Expires: now.Add(time.Hour)})
	if n := f.Len(); n != 4 {
		t.Errorf("%d pending, want alice's, bob's last and the two without data", n)
	}
	for _, s := range []string{"alice", "console", "console 2", "bob"} {
		if _, ok := f.Take(s); !ok {
			t.Errorf("sign-in %q dropped", s)
		}
	}
	f.add("bob again", &Pending{Data: "bob's link", Expires: now.Add(time.Hour)})
	if _, ok := f.Take("bob again"); !ok {
		t.Error("a sign-in begun again after its Data's was taken is missing")
	}
	if n := f.Len(); n != 0 {
		t.Errorf("%d pending after every sign-in was taken", n)
	}
}

// TestBeginAndExchange: Begin sends the issuer a PKCE S256 challenge and a state it keeps;
// the code it returns is exchanged with the matching verifier.
func TestBeginAndExchange(t *testing.T) {
	idp := oidctest.New(t, "c", "s", "the-token")
	f := NewFlow(nil, nil)
	s := Settings{Issuer: idp.URL, ClientID: "c", ClientSecret: "s"}
	to, state, err := f.Begin(context.Background(), s, "http://127.0.0.1/cb", "data")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(to)
	if q := u.Query(); q.Get("state") != state || q.Get("code_challenge_method") != "S256" || q.Get("redirect_uri") != "http://127.0.0.1/cb" {
		t.Fatalf("authorization URL %s", to)
	}
	resp, err := (noRedirect()).Get(to)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, _ := url.Parse(resp.Header.Get("Location"))
	p, ok := f.Take(back.Query().Get("state"))
	if !ok || p.Data != "data" {
		t.Fatalf("pending %+v %v", p, ok)
	}
	tok, err := f.Exchange(context.Background(), s, p, back.Query().Get("code"))
	if err != nil || tok.AccessToken != "the-token" {
		t.Fatalf("exchange: %+v %v", tok, err)
	}
	if _, err := f.Exchange(context.Background(), s, &Pending{Verifier: "wrong", Redirect: p.Redirect}, back.Query().Get("code")); err == nil {
		t.Error("a used code was exchanged again")
	}
}

// TestBeginNamed: the state sent to the issuer is the name of the pending sign-in's key,
// which Take wants back (the name itself takes nothing); a name that fails or is empty
// fails Begin and keeps nothing.
func TestBeginNamed(t *testing.T) {
	idp := oidctest.New(t, "c", "s", "the-token")
	s := Settings{Issuer: idp.URL, ClientID: "c", ClientSecret: "s"}
	f := NewFlow(nil, nil)
	var key string
	to, state, err := f.BeginNamed(context.Background(), s, "http://127.0.0.1/cb", "data", func(k string) (string, error) {
		key = k
		return "named." + k, nil
	})
	if err != nil || key == "" || state != "named."+key {
		t.Fatalf("state %q of key %q: %v", state, key, err)
	}
	if u, _ := url.Parse(to); u.Query().Get("state") != state {
		t.Fatalf("authorization URL %s, want state %q", to, state)
	}
	if _, ok := f.Take(state); ok {
		t.Error("the name was taken as the key")
	}
	if p, ok := f.Take(key); !ok || p.Data != "data" {
		t.Errorf("the key: %+v %v", p, ok)
	}
	for _, tc := range []struct {
		name string
		fn   func(string) (string, error)
	}{
		{"failing", func(string) (string, error) { return "", errors.New("no") }},
		{"empty", func(string) (string, error) { return "", nil }},
	} {
		if _, _, err := f.BeginNamed(context.Background(), s, "http://127.0.0.1/cb", "data", tc.fn); err == nil || f.Len() != 0 {
			t.Errorf("a %s name: %v, %d pending", tc.name, err, f.Len())
		}
	}
}

func TestSameState(t *testing.T) {
	for _, tc := range []struct {
		callback, bound string
		want            bool
	}{{"a", "a", true}, {"a", "b", false}, {"", "", false}, {"a", "", false}} {
		if got := SameState(tc.callback, tc.bound); got != tc.want {
			t.Errorf("SameState(%q, %q) = %v", tc.callback, tc.bound, got)
		}
	}
}

func noRedirect() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func FuzzIDTokenNonce(f *testing.F) {
	f.Add("h.eyJub25jZSI6Im4ifQ.s")
	f.Add("a.b")
	f.Fuzz(func(t *testing.T, jwt string) {
		_ = IDTokenNonce(jwt) // never panics
	})
}
