package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPerClientListsEverything is acceptance 3 of the per-user issue: with
// lists: per-client, a resource that server-everything's
// gzip-file-as-resource adds in one client's own session appears in that
// client's list, announced by list_changed, is readable by it, and is in
// no other client's list.
func TestPerClientListsEverything(t *testing.T) {
	requireNode(t)
	everything := filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	cfg := writeConfig(t, fmt.Sprintf(`
mcpServers:
  everything:
    command: node
    args: [%q, stdio]
    session: per-client
    lists: per-client
gateway:
  timeouts: { call: 20s }
`, everything))
	g := startGateway(t, "--config", cfg)
	ctx := ctxT(t, 90*time.Second)

	type client struct {
		cs      *mcp.ClientSession
		changes atomic.Int32
		changed chan struct{}
	}
	connect := func() *client {
		c := &client{changed: make(chan struct{}, 64)}
		opts := &mcp.ClientOptions{ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			c.changes.Add(1)
			c.changed <- struct{}{}
		}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-lists"}, opts).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: g.url("/mcp")}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		c.cs = cs
		return c
	}
	resources := func(c *client) []string {
		t.Helper()
		var out []string
		for r, err := range c.cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r.URI)
		}
		return out
	}
	find := func(uris []string) string {
		for _, u := range uris {
			if strings.Contains(u, "alice.txt.gz") {
				return u
			}
		}
		return ""
	}
	alice, bob := connect(), connect()
	if u := find(resources(alice)); u != "" {
		t.Fatalf("listed before it was added: %s", u)
	}
	resources(bob)
	data := "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("only alice ", 100)))
	res, err := alice.cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__gzip-file-as-resource",
		Arguments: map[string]any{"name": "alice.txt.gz", "data": data, "outputType": "resourceLink"}})
	if err != nil || res.IsError {
		t.Fatalf("gzip-file-as-resource: %v %+v", err, res)
	}
	var uri string
	for uri == "" {
		select {
		case <-alice.changed:
		case <-ctx.Done():
			t.Fatalf("alice got no resources/list_changed with her resource (%d list_changed)", alice.changes.Load())
		}
		uri = find(resources(alice))
	}
	rr, err := alice.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(rr.Contents) == 0 {
		t.Fatalf("alice cannot read %s: %v", uri, err)
	}
	if u := find(resources(bob)); u != "" {
		t.Errorf("bob's list holds alice's resource %s", u)
	}
	if n := bob.changes.Load(); n != 0 {
		t.Errorf("bob got %d resources/list_changed for alice's session", n)
	}
}
