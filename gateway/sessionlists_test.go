package gateway

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionServers is an upstream whose every connection gets a server of its
// own, so that what one session adds (a tool, a resource) exists in that
// session only, as with server-everything's session resources.
type sessionServers struct {
	mu    sync.Mutex
	pipes []*testutil.Pipe
}

func (s *sessionServers) transport() (mcp.Transport, error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "per"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{
		Tools: &mcp.ToolCapabilities{ListChanged: true}, Resources: &mcp.ResourceCapabilities{ListChanged: true},
	}})
	added := 0
	mcp.AddTool(srv, &mcp.Tool{Name: "add"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		added++
		srv.AddResource(&mcp.Resource{URI: "mem://mine", Name: "mine"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "mem://mine", Text: "only mine"}}}, nil
		})
		mcp.AddTool(srv, &mcp.Tool{Name: "mine"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "only mine"}}}, nil, nil
		})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added"}}}, nil, nil
	})
	p := testutil.NewPipe()
	if _, err := srv.Connect(context.Background(), p.Server, nil); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.pipes = append(s.pipes, p)
	s.mu.Unlock()
	return p.Client, nil
}

// TestPerClientLists: with lists: per-client, what a client's own upstream
// session adds appears in that client's lists, with list_changed, and in no
// other client's; the new names are callable and readable by that client
// only, over a streamable session (raw path) and a legacy SSE one (SDK
// path).
func TestPerClientLists(t *testing.T) {
	ups := &sessionServers{}
	cfg := &config.Config{Servers: map[string]config.Server{
		"per": {Name: "per", Type: config.TypeStdio, Command: "unused", Session: config.SessionPerClient, Lists: config.ListsPerClient},
	}, Gateway: config.DefaultGateway()}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := New(cfg, &Options{Transports: map[string]func() (mcp.Transport, error){"per": ups.transport}})
	if err != nil {
		t.Fatal(err)
	}
	hs := serveGateway(t, gw)

	type client struct {
		cs                    *mcp.ClientSession
		toolsChanged, resChgd atomic.Int32
		changed               chan struct{}
	}
	connect := func(sse bool) *client {
		c := &client{changed: make(chan struct{}, 16)}
		opts := &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				c.toolsChanged.Add(1)
				c.changed <- struct{}{}
			},
			ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
				c.resChgd.Add(1)
				c.changed <- struct{}{}
			},
		}
		var tr mcp.Transport = &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp"}
		if sse {
			tr = &mcp.SSEClientTransport{Endpoint: hs.URL + "/sse"}
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "lists"}, opts).Connect(context.Background(), tr,
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		c.cs = cs
		return c
	}
	names := func(c *client) (tools, resources []string) {
		t.Helper()
		ctx := context.Background()
		tl, err := c.cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tl.Tools {
			tools = append(tools, tool.Name)
		}
		rl, err := c.cs.ListResources(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rl.Resources {
			resources = append(resources, r.URI)
		}
		return tools, resources
	}
	for _, sse := range []bool{false, true} {
		name := "streamable"
		if sse {
			name = "sse"
		}
		t.Run(name, func(t *testing.T) {
			me, other := connect(sse), connect(sse)
			for _, c := range []*client{me, other} {
				if tools, res := names(c); !slices.Equal(tools, []string{"per__add"}) || len(res) != 0 {
					t.Fatalf("before: tools %v, resources %v", tools, res)
				}
			}
			res, err := me.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "per__add"})
			if err != nil || res.IsError {
				t.Fatalf("per__add: %v %+v", err, res)
			}
			// Each list_changed is followed by a look at the lists, until
			// both additions are in.
			var tools, resources []string
			for {
				select {
				case <-me.changed:
				case <-time.After(10 * time.Second):
					t.Fatalf("no list_changed with the additions reached the client whose session changed (tools %v, resources %v)", tools, resources)
				}
				tools, resources = names(me)
				if slices.Contains(tools, "per__mine") && slices.Contains(resources, "manifold://per/mem://mine") {
					break
				}
			}
			got, err := me.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "per__mine"})
			if err != nil || got.IsError || got.Content[0].(*mcp.TextContent).Text != "only mine" {
				t.Fatalf("calling the session's own tool: %v %+v", err, got)
			}
			rr, err := me.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "manifold://per/mem://mine"})
			if err != nil || rr.Contents[0].Text != "only mine" {
				t.Fatalf("reading the session's own resource: %v %+v", err, rr)
			}
			if tools, res := names(other); !slices.Equal(tools, []string{"per__add"}) || len(res) != 0 {
				t.Errorf("the other client sees tools %v, resources %v", tools, res)
			}
			if r, err := other.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "per__mine"}); err == nil && !r.IsError {
				t.Error("the other client could call a tool of another client's session")
			}
			if other.toolsChanged.Load()+other.resChgd.Load() != 0 {
				t.Error("the other client got a list_changed for another session's change")
			}
		})
	}
}
