package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cimdURL is the Client ID Metadata Document URL the suite's CIMD scenario expects as the
// client_id.
const cimdURL = "https://conformance-test.local/client-metadata.json"

// runAuth plays an auth/* scenario through `via serve --stdio`: the scenario server is an
// upstream with `auth.type: oauth`. The session lists, finds the server's sign-in tool,
// calls it and gets the URL elicitation (-32042), opens its link the way a browser would
// (following redirects: the gateway's start page, the suite's /authorize, which answers
// with the code at once, the gateway's loopback callback), then lists again and calls
// the scenario's tool. A step-up (403 insufficient_scope) on the call asks again, once.
func runAuth(ctx context.Context, url, via string) error {
	dir, err := os.MkdirTemp("", "conformance-auth-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	auth := map[string]any{"type": "oauth", "clientMetadataURL": cimdURL}
	var sc struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if c := os.Getenv("MCP_CONFORMANCE_CONTEXT"); c != "" {
		_ = json.Unmarshal([]byte(c), &sc)
	}
	if sc.ClientID != "" {
		auth["clientID"] = sc.ClientID
		if sc.ClientSecret != "" {
			auth["clientSecret"] = sc.ClientSecret
		}
	}
	cfg := map[string]any{"mcpServers": map[string]any{"scenario": map[string]any{
		"type": "http", "url": url, "prefix": "", "session": "per-client", "auth": auth}}}
	body, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "manifold.json")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		return err
	}
	cmd := exec.Command(via, "serve", "--stdio", "--config", path)
	cmd.Stderr = os.Stderr
	changed := make(chan struct{}, 8)
	client := mcp.NewClient(&mcp.Implementation{Name: "manifold-conformance-client", Version: "v0.1.0"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	const tool = "test-tool"
	for round := 0; round < 3; round++ {
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		name := tool
		if !hasTool(tools, tool) {
			if !hasTool(tools, "sign_in") {
				return fmt.Errorf("neither %s nor sign_in among %d tools", tool, len(tools.Tools))
			}
			name = "sign_in"
		}
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		var rpcErr *jsonrpc.Error
		switch {
		case err == nil && name == tool:
			return nil
		case err == nil:
			continue // signed in meanwhile
		case errors.As(err, &rpcErr) && rpcErr.Code == mcp.CodeURLElicitationRequired:
			if err := openLinks(ctx, rpcErr); err != nil {
				return err
			}
			if name == "sign_in" {
				select {
				case <-changed:
				case <-ctx.Done():
					return errors.New("no tools/list_changed after the sign-in")
				}
			}
		default:
			return fmt.Errorf("tools/call %s: %w", name, err)
		}
	}
	return errors.New("the scenario's tool did not succeed after three sign-ins")
}

func hasTool(res *mcp.ListToolsResult, name string) bool {
	for _, t := range res.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// openLinks opens each URL of a -32042 error like a browser: GET, following redirects.
func openLinks(ctx context.Context, e *jsonrpc.Error) error {
	var data struct {
		Elicitations []mcp.ElicitParams `json:"elicitations"`
	}
	if err := json.Unmarshal(e.Data, &data); err != nil || len(data.Elicitations) == 0 {
		return fmt.Errorf("-32042 without elicitations: %s", e.Data)
	}
	for _, el := range data.Elicitations {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, el.URL, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("opening the sign-in link: %w", err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("sign-in link: %s: %s", resp.Status, b)
		}
	}
	return nil
}
