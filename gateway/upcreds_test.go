package gateway

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/testauth"
	"github.com/manifold-mcp/manifold/internal/upcred"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestUpstreamCredentials: a token-exchange server's upstream sees each
// principal's own exchanged token and a client_credentials server's the
// gateway's, on a 2025-11-25 streamable session, a sessionless 2026-07-28 client and a
// legacy SSE session; the client's JWT
// never reaches an upstream, and the exchanged tokens are kept in the
// encrypted token store.
// serveGateway starts gw and serves it over HTTP until the test ends, when
// its sessions, the server and gw are closed.
func serveGateway(t *testing.T, gw *Gateway) *httptest.Server {
	t.Helper()
	hs := httptest.NewUnstartedServer(nil)
	startServing(t, gw, hs)
	return hs
}

// startServing starts gw and hs (unstarted) serving it, until the test ends.
func startServing(t *testing.T, gw *Gateway, hs *httptest.Server) {
	t.Helper()
	gw.Start(context.Background())
	hs.Config.Handler = gw.Handler()
	hs.Start()
	t.Cleanup(func() {
		for ss := range gw.Server().Sessions() {
			ss.Close()
		}
		hs.Close()
		gw.Close(context.Background())
	})
}

// validGateway returns a gateway of cfg, after its defaults and validation.
func validGateway(t *testing.T, cfg *config.Config) *Gateway {
	t.Helper()
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

func TestUpstreamCredentials(t *testing.T) {
	const secret = "a-jwt-hmac-secret-of-at-least-32-bytes"
	mint := func(sub string) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"iss": "https://idp.example", "aud": "manifold", "sub": sub,
			"iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix(),
		}).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	as := &testauth.Server{Clients: map[string]testauth.Client{"gw": {Secret: "gw-secret"}}, Subject: testauth.HMACSubject([]byte(secret))}
	upURL, stop := testauth.Start(as, "https://up.test")
	t.Cleanup(stop)

	storePath := filepath.Join(t.TempDir(), "tokens")
	const storeSecret = "a-token-store-secret-of-32-bytes-or-more"
	client := config.UpstreamAuth{TokenURL: as.TokenURL, ClientID: "gw", ClientSecret: "gw-secret", Audience: "https://up.test"}
	exchange, machine := client, client
	exchange.Type, machine.Type = config.UpstreamAuthTokenExchange, config.UpstreamAuthClientCredentials
	cfg := &config.Config{Servers: map[string]config.Server{
		"user":    {Name: "user", Type: config.TypeHTTP, URL: upURL, Session: config.SessionPerClient, Auth: exchange},
		"machine": {Name: "machine", Type: config.TypeHTTP, URL: upURL, Auth: machine},
	}, Gateway: config.DefaultGateway()}
	cfg.Gateway.TokenStore = config.TokenStore{File: storePath, Secret: storeSecret}
	cfg.Auth.JWT = &config.JWT{Issuer: "https://idp.example", Audience: []string{"manifold"}, Secret: secret, PrincipalClaim: "sub", GroupsClaim: "groups"}
	hs := serveGateway(t, validGateway(t, cfg))

	whoami := func(cs *mcp.ClientSession, tool string) string {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if res.IsError || len(res.Content) == 0 {
			t.Fatalf("%s: error result %+v", tool, res.Content)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	jwts := map[string]string{"alice": mint("alice"), "bob": mint("bob")}
	for _, who := range []string{"alice", "bob"} {
		for _, version := range []string{"2025-11-25", "2026-07-28", "sse"} {
			var cs *mcp.ClientSession
			if version == "sse" {
				cs = connectSSE(t, hs.URL, jwts[who])
			} else {
				cs = connectAs(t, hs.URL, jwts[who], version)
			}
			if got := whoami(cs, "user__whoami"); got != who {
				t.Errorf("%s's call reached the upstream as %q", who, got)
			}
			if got := whoami(cs, "machine__whoami"); got != "client:gw" {
				t.Errorf("%s's call to the client_credentials server reached it as %q, want client:gw", who, got)
			}
			// A second call reuses the stored token.
			whoami(cs, "user__whoami")
		}
	}
	if n := as.CountGrants(testauth.GrantTokenExchange); n != 2 {
		t.Errorf("%d token exchanges for two principals, want 2", n)
	}
	for _, h := range as.Seen() {
		for who, tok := range jwts {
			if strings.Contains(h, tok) {
				t.Fatalf("the upstream saw %s's own JWT", who)
			}
		}
		if _, issued := as.Lookup(strings.TrimPrefix(h, "Bearer ")); !issued {
			t.Errorf("the upstream saw Authorization %q, not a token the authorization server issued", h)
		}
	}

	data, err := os.ReadFile(storePath)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("alice")) || bytes.Contains(data, []byte("at-")) {
		t.Error("the token store file holds plaintext")
	}
	store, _ := upcred.NewFileStore(storePath, []byte(storeSecret))
	list, err := store.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range list {
		got = append(got, e.Principal+"/"+e.Server)
	}
	if want := []string{"alice/user", "bob/user"}; !slices.Equal(got, want) {
		t.Errorf("stored tokens %v, want %v", got, want)
	}
}
