package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDefaultConfig is acceptance 2 of the core issue: `manifold serve`
// with no config fronts the two built-in demo servers; clients of the
// 2025-11-25 and 2026-07-28 protocols (and legacy SSE) list both servers'
// tools, namespaced, and call one of each.
func TestDefaultConfig(t *testing.T) {
	g := startGateway(t)
	tests := []struct {
		name        string
		transport   func() mcp.Transport
		version     string // requested; "" = the SDK's latest
		wantVersion string
	}{
		{name: "streamable 2025-11-25", transport: func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: g.url("/mcp")} }, version: "2025-11-25", wantVersion: "2025-11-25"},
		{name: "streamable 2026-07-28", transport: func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: g.url("/mcp")} }, wantVersion: "2026-07-28"},
		{name: "streamable 2025-03-26", transport: func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: g.url("/mcp")} }, version: "2025-03-26", wantVersion: "2025-03-26"},
		{name: "sse 2024-11-05", transport: func() mcp.Transport { return &mcp.SSEClientTransport{Endpoint: g.url("/sse")} }, version: "2024-11-05", wantVersion: "2024-11-05"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t, 30*time.Second)
			c := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil)
			cs, err := c.Connect(ctx, tc.transport(), &mcp.ClientSessionOptions{ProtocolVersion: tc.version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != tc.wantVersion {
				t.Errorf("negotiated %q, want %q", got, tc.wantVersion)
			}
			lt, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range lt.Tools {
				names = append(names, tool.Name)
			}
			for _, want := range []string{"alpha__echo", "beta__echo", "alpha__add", "beta__info"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list lacks %q: %v", want, names)
				}
			}
			for _, server := range []string{"alpha", "beta"} {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: server + "__echo", Arguments: map[string]any{"message": "hello " + server}})
				if err != nil {
					t.Fatalf("%s__echo: %v", server, err)
				}
				if got := res.Content[0].(*mcp.TextContent).Text; got != "hello "+server {
					t.Errorf("%s__echo = %q", server, got)
				}
			}
			if !strings.Contains(cs.InitializeResult().Instructions, "## beta") {
				t.Errorf("instructions = %q", cs.InitializeResult().Instructions)
			}
		})
	}
}
