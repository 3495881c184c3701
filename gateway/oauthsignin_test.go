package gateway

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/upcred"
)

// TestOneUserCannotEvictOthersOIDCSignIns: every GET of a start link begins a sign-in at the
// issuer, and the process keeps at most oidc.MaxPending (1000) of them. bob, holding one start
// link of his own, GETs it 1000 times: each replaces his previous sign-in for that link, so
// alice's sign-in in progress at the issuer is kept and her callback goes on.
func TestOneUserCannotEvictOthersOIDCSignIns(t *testing.T) {
	r := newIdentityRig(t)
	alices := newBrowser()
	callback := r.throughIssuer(t, alices, r.link(t, "alice", "user"), "alice")

	bobLink := r.link(t, "bob", "user")
	bobs := newBrowser()
	for i := 0; i < 1000; i++ {
		resp, err := bobs.Get(bobLink)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	code, loc, page := visit(t, alices, callback)
	if code != http.StatusFound || !strings.HasPrefix(loc, r.as.Issuer) {
		t.Errorf("alice's callback after bob reloaded his link 1000 times: %d to %q, want her redirect to the authorization server\n%s", code, loc, page)
	}
}

// TestOAuthFollowsTokenStoreReload: a reload that changes gateway.tokenStore reopens the
// store, and the server's OAuth client, whose url and auth are unchanged, is made again on
// it: tokens are read from (and sign-ins stored in) the store the config names now, the one
// `manifold auth list|revoke` sees.
func TestOAuthFollowsTokenStoreReload(t *testing.T) {
	dir := t.TempDir()
	const secret = "a-token-store-secret-of-32-bytes-or-more"
	mk := func(file string) *config.Config {
		cfg := &config.Config{Servers: map[string]config.Server{
			"user": {Name: "user", Type: config.TypeHTTP, URL: "http://127.0.0.1:1/mcp", Session: config.SessionPerClient,
				Auth: config.UpstreamAuth{Type: config.UpstreamAuthOAuth}},
		}, Gateway: config.DefaultGateway()}
		cfg.Gateway.TokenStore = config.TokenStore{File: file, Secret: secret}
		cfg.ApplyDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	fileA, fileB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	next := mk(fileA)
	gw, err := New(mk(fileA), &Options{LoadConfig: func() (*config.Config, error) { return next, nil }})
	if err != nil {
		t.Fatal(err)
	}
	gw.Start(context.Background())
	t.Cleanup(func() { gw.Close(context.Background()) })
	if _, err := gw.oauthOf(gw.current().cfg.Servers["user"]); err != nil {
		t.Fatal(err)
	}

	next = mk(fileB)
	if _, err := gw.Reload(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	if gw.current().cfg.Gateway.TokenStore.File != fileB {
		t.Fatal("reload did not apply")
	}
	storeB, err := upcred.NewFileStore(fileB, []byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	if err := storeB.Put(context.Background(), "alice", "user", &upcred.Token{AccessToken: "tok-in-b", Expiry: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	oa, err := gw.oauthOf(gw.current().cfg.Servers["user"])
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := oa.AccessToken(context.Background(), "alice"); tok != "tok-in-b" {
		t.Errorf("after the reload to token store %s, alice's token is %q, want the one stored there", fileB, tok)
	}
}

// TestEndedSessionsStopWaitingForSignIn: each session that lists the sign-in tool waits for
// the principal's sign-in (g.oauth.waiting) until the principal signs in or the session ends:
// sessions that list and close without a sign-in are not kept, so a client reconnecting in a
// loop does not grow the map.
func TestEndedSessionsStopWaitingForSignIn(t *testing.T) {
	_, hs, gw := oauthGateway(t, "local")
	const n = 20
	for i := 0; i < n; i++ {
		cs := connectAs(t, hs.URL, "", "2025-11-25")
		if got := listedTools(t, cs); got != "user__sign_in" {
			t.Fatalf("tools %q", got)
		}
		cs.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		gw.oauth.mu.Lock()
		left := 0
		for _, m := range gw.oauth.waiting {
			left += len(m)
		}
		gw.oauth.mu.Unlock()
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			if open := gw.sessionCount(); open != 0 {
				t.Fatalf("%d sessions still open", open)
			}
			t.Fatalf("%d closed sessions still held in g.oauth.waiting after %d sessions listed and closed", left, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
