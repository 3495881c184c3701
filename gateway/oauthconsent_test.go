package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/testauth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestOAuthConsentByClient: a principal without a token at an oauth server sees its
// sign-in tool, whose call answers by protocol version and client capability: -32042
// for a 2025-11-25 client with URL elicitation, else an isError result naming the
// gateway's start link and what to do. Opening the link signs in (the test
// authorization server answers at once), after which the same session lists the
// upstream's tools and its call succeeds as that principal.
func TestOAuthConsentByClient(t *testing.T) {
	as := &testauth.Server{}
	upURL, stop := testauth.StartAuthCode(as, "local")
	t.Cleanup(stop)
	cfg := &config.Config{Servers: map[string]config.Server{
		"user": {Name: "user", Type: config.TypeHTTP, URL: upURL, Session: config.SessionPerClient, Auth: config.UpstreamAuth{Type: config.UpstreamAuthOAuth}},
	}, Gateway: config.DefaultGateway()}
	base := servePublicGateway(t, cfg) // oauthidentity_test.go
	ctx := context.Background()
	connect := func(version string, url bool) *mcp.ClientSession {
		t.Helper()
		opts := &mcp.ClientOptions{}
		if url {
			opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "oauth-test"}, opts).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: base + "/mcp", DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	tools := func(cs *mcp.ClientSession) string {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		return strings.Join(names, ",")
	}
	var link string
	tests := []struct {
		name    string
		version string
		url     bool
	}{
		{"2025-11-25 without URL elicitation", "2025-11-25", false},
		{"2025-06-18", "2025-06-18", true},
		{"2025-11-25 with URL elicitation", "2025-11-25", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := connect(tt.version, tt.url)
			if got := tools(cs); got != "user__sign_in" {
				t.Fatalf("tools %q, want the sign-in tool alone", got)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "user__sign_in"})
			if tt.url && tt.version == "2025-11-25" {
				var rpcErr *jsonrpc.Error
				if !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeURLElicitationRequired {
					t.Fatalf("got %v %+v, want -32042", err, res)
				}
				var data struct{ Elicitations []mcp.ElicitParams }
				if err := json.Unmarshal(rpcErr.Data, &data); err != nil || len(data.Elicitations) != 1 {
					t.Fatalf("data %s", rpcErr.Data)
				}
				link = data.Elicitations[0].URL
				return
			}
			if err != nil || !res.IsError || len(res.Content) != 1 {
				t.Fatalf("got %v %+v, want an isError result", err, res)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if !strings.Contains(text, cfg.Gateway.PublicURL+"/oauth/start/") || !strings.Contains(text, "retry") {
				t.Fatalf("text %q names no start link or what to do", text)
			}
		})
	}
	if link == "" {
		t.FailNow()
	}
	browser := &http.Client{CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/authorize" { // the person signs in at the authorization server
			q := req.URL.Query()
			q.Set("user", "local")
			req.URL.RawQuery = q.Encode()
		}
		return nil
	}}
	resp, err := browser.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %s", resp.Status)
	}
	cs := connect("2025-06-18", false)
	if got := tools(cs); got != "user__whoami" {
		t.Fatalf("after the sign-in the tools are %q", got)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "user__whoami"})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "local" {
		t.Fatalf("whoami: %v %+v", err, res)
	}
}
