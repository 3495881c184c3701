package testutil

import (
	"context"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ConnectStateless connects a 2026-07-28 client (sessionless: every request
// stands alone) with opts to the streamable HTTP endpoint, through hc (nil:
// the default client), and checks that it negotiated 2026-07-28: the
// go-sdk client falls back to an older version silently.
func ConnectStateless(ctx context.Context, endpoint string, hc *http.Client, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stateless-test"}, opts).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		return nil, err
	}
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		cs.Close()
		return nil, fmt.Errorf("negotiated %q, want 2026-07-28", v)
	}
	return cs, nil
}
