package upcred

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/testauth"
	"golang.org/x/oauth2"
)

// newSignInRig starts a test authorization server and MCP upstream for alice, stopped when t
// ends, and returns an OAuth client of it living for ctx, with a store of its own.
func newSignInRig(t *testing.T, ctx context.Context) (o *OAuth, mcpURL string) {
	t.Helper()
	mcpURL, stop := testauth.StartAuthCode(&testauth.Server{}, "alice")
	t.Cleanup(stop)
	o, err := NewOAuth(ctx, "up", config.UpstreamAuth{Type: config.UpstreamAuthOAuth}, &MemoryStore{}, testLinks{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return o, mcpURL
}

// askSignIn makes o meet the upstream at mcpURL's 401 for principal, as a call does, and
// returns the sign-in it asks for.
func askSignIn(t *testing.T, o *OAuth, mcpURL, principal string) *ConsentRequiredError {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, mcpURL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var ce *ConsentRequiredError
	if err := o.Authorize(context.Background(), principal, req, resp); !errors.As(err, &ce) || ce.Principal != principal {
		t.Fatalf("Authorize: %v, want a sign-in for %s", err, principal)
	}
	return ce
}

type testLinks struct{}

func (testLinks) StartURL(id string) string { return "http://127.0.0.1:1/oauth/start/" + id }
func (testLinks) RedirectURL() string       { return "http://127.0.0.1:1/oauth/callback" }

// TestOAuthSignInAndRefreshAfterRestart: the upstream's 401 starts a sign-in whose link is
// single use; the callback's code is exchanged and the token stored for the principal; a
// second OAuth on the same store (a restart) refreshes the expired token with the stored
// refresh token and client, without a new sign-in.
func TestOAuthSignInAndRefreshAfterRestart(t *testing.T) {
	ctx := context.Background()
	as := &testauth.Server{}
	mcpURL, stop := testauth.StartAuthCode(as, "alice")
	t.Cleanup(stop)
	store := &MemoryStore{}
	newOAuth := func() *OAuth {
		o, err := NewOAuth(ctx, "up", config.UpstreamAuth{Type: config.UpstreamAuthOAuth}, store, testLinks{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := newOAuth()
	if tok, err := o.AccessToken(ctx, "alice"); tok != "" || err != nil {
		t.Fatalf("before a sign-in: %q %v", tok, err)
	}
	ce := askSignIn(t, o, mcpURL, "alice")
	if p, ok := o.Pending(ce.ID); !ok || p != "alice" {
		t.Fatalf("Pending: %q %v", p, ok)
	}
	authURL, err := o.Start(ce.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Start(ce.ID); !errors.Is(err, ErrConsentUnknown) {
		t.Fatalf("a second start: %v, want ErrConsentUnknown", err)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(authURL + "&user=alice")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("authorize answered %s %q", resp.Status, resp.Header.Get("Location"))
	}
	p, ok, err := o.Callback(ctx, loc.Query().Get("state"), loc.Query().Get("code"), "")
	if !ok || err != nil || p != "alice" {
		t.Fatalf("Callback: %q %v %v", p, ok, err)
	}
	tok, err := o.AccessToken(ctx, "alice")
	if i, known := as.Lookup(tok); err != nil || !known || i.Principal != "alice" {
		t.Fatalf("alice's token %v: known %v as %q", err, known, i.Principal)
	}

	stored, err := store.Get(ctx, "alice", "up")
	if err != nil {
		t.Fatal(err)
	}
	stored.Expiry = time.Now().Add(-time.Minute)
	if err := store.Put(ctx, "alice", "up", stored); err != nil {
		t.Fatal(err)
	}
	tok2, err := newOAuth().AccessToken(ctx, "alice")
	if i, known := as.Lookup(tok2); err != nil || !known || i.Principal != "alice" || tok2 == tok {
		t.Fatalf("after a restart: %v, known %v as %q", err, known, i.Principal)
	}
	if n := as.CountGrants(testauth.GrantRefreshToken); n != 1 {
		t.Fatalf("%d refreshes, want 1", n)
	}
}

// TestOAuthCallbackErrorWithoutTheTokenEndpointsBody: a code the token endpoint refuses
// fails the callback with ErrTokenEndpoint, its status and OAuth error code, and nothing of
// the endpoint's answer beyond them (which might echo a secret).
func TestOAuthCallbackErrorWithoutTheTokenEndpointsBody(t *testing.T) {
	ctx := context.Background()
	o, mcpURL := newSignInRig(t, ctx)
	ce := askSignIn(t, o, mcpURL, "alice")
	authURL, err := o.Start(ce.ID)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(authURL)
	_, ok, err := o.Callback(ctx, u.Query().Get("state"), "not-a-code-the-server-issued", "")
	if !ok || !errors.Is(err, ErrTokenEndpoint) || strings.Contains(err.Error(), "Response:") || strings.Contains(err.Error(), "{") {
		t.Fatalf("Callback with a refused code: ok %v, %v; want ErrTokenEndpoint without the answer's body", ok, err)
	}
	// What the endpoint answered beyond its status and code is left out.
	secret := &oauth2.RetrieveError{Response: &http.Response{StatusCode: 500}, Body: []byte("secret-in-the-body")}
	if err := refusal(fmt.Errorf("wrapped: %w", secret)); err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "HTTP 500") {
		t.Errorf("refusal: %v", err)
	}
}
