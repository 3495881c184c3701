package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

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
	_, hs, _ := oauthGateway(t, "local") // principallists_test.go
	ctx := context.Background()
	connect := func(version string, url bool) *mcp.ClientSession {
		t.Helper()
		opts := &mcp.ClientOptions{}
		if url {
			opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "oauth-test"}, opts).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
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
			if got := listedTools(t, cs); got != "user__sign_in" {
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
			if !strings.Contains(text, hs.URL+"/oauth/start/") || !strings.Contains(text, "retry") {
				t.Fatalf("text %q names no start link or what to do", text)
			}
		})
	}
	if link == "" {
		t.FailNow()
	}
	if code := signInAs(t, link, "local"); code != http.StatusOK {
		t.Fatalf("sign-in: %d", code)
	}
	cs := connect("2025-06-18", false)
	if got := listedTools(t, cs); got != "user__whoami" {
		t.Fatalf("after the sign-in the tools are %q", got)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "user__whoami"})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "local" {
		t.Fatalf("whoami: %v %+v", err, res)
	}
}
