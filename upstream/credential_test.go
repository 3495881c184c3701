package upstream

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/testauth"
	"github.com/manifold-mcp/manifold/internal/upcred"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCredentialReachesHTTPUpstream: an upstream with a credential connects to a server that
// requires a bearer token, on every request (initialize, list, call), with the credential's
// token in place of a static Authorization header, and a 401 makes it ask for a new token.
func TestCredentialReachesHTTPUpstream(t *testing.T) {
	as := &testauth.Server{Clients: map[string]testauth.Client{"gw": {Secret: "gw-secret"}}}
	upURL, stop := testauth.Start(as, "https://up.test")
	t.Cleanup(stop) // after the upstream closes (cleanups run last first)

	cred, err := upcred.NewClientCredentials("web", config.UpstreamAuth{ClientID: "gw", ClientSecret: "gw-secret",
		TokenURL: as.TokenURL, Audience: "https://up.test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := fastOptions()
	opts.Credential = cred
	u := startUpstream(t, config.Server{Name: "web", Type: "http", URL: upURL,
		Headers: map[string]string{"Authorization": "Bearer static"}}, opts)
	waitReady(t, u, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "client:gw" {
		t.Errorf("the upstream saw principal %q, want client:gw", got)
	}
	seen := as.Seen()
	if len(seen) < 3 {
		t.Fatalf("upstream saw %d requests", len(seen))
	}
	for _, h := range seen {
		if tok, ok := strings.CutPrefix(h, "Bearer "); !ok || tok == "static" {
			t.Errorf("upstream saw Authorization %q, want the credential's token", h)
		} else if _, issued := as.Lookup(tok); !issued {
			t.Errorf("upstream saw a token the authorization server never issued")
		}
	}
	if n := as.CountGrants(testauth.GrantClientCredentials); n != 1 {
		t.Errorf("%d token requests for one connection, want 1 (cached)", n)
	}
}
