package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkCallTool measures one tools/call end to end over in-memory
// transports: "direct" is a client calling the demo server itself (the
// floor), "gateway" the same call through the gateway (lookup, forward,
// result rewrite, both JSON-RPC hops). The difference is the gateway's cost.
func BenchmarkCallTool(b *testing.B) {
	args := map[string]any{"message": "hello"}
	b.Run("direct", func(b *testing.B) {
		srv := demo.NewServer("alpha", nil)
		ct, st := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(context.Background(), st, nil); err != nil {
			b.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		benchCalls(b, cs, "echo", args)
	})
	b.Run("gateway", func(b *testing.B) {
		h := newBenchHarness(b)
		benchCalls(b, h.client, "alpha__echo", args)
	})
}

func benchCalls(b *testing.B, cs *mcp.ClientSession, name string, args map[string]any) {
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := cs.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallToolParallel is BenchmarkCallTool/gateway from GOMAXPROCS
// goroutines on one session.
func BenchmarkCallToolParallel(b *testing.B) {
	h := newBenchHarness(b)
	params := &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "hello"}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := h.client.CallTool(context.Background(), params); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRouteLookup is the gateway's own work on the call path: one
// atomic load and a map lookup in a table of 10,000 tools.
func BenchmarkRouteLookup(b *testing.B) {
	r := &routes{tools: map[string]route{}}
	for i := range 10000 {
		r.tools[fmt.Sprintf("server%d__tool_%d", i%10, i)] = route{original: fmt.Sprint(i)}
	}
	var g Gateway
	g.routes.Store(r)
	name := "server7__tool_4567"
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := g.routes.Load().tools[name]; !ok {
			b.Fatal("missing")
		}
	}
}

// BenchmarkBuildRoutes merges 10 upstreams of 1,000 tools each into one
// routing generation (what runs after every upstream list change).
func BenchmarkBuildRoutes(b *testing.B) {
	var ups []*upstream.Upstream
	for s := range 10 {
		name := fmt.Sprintf("server%d", s)
		srv := mcp.NewServer(&mcp.Implementation{Name: name}, nil)
		for i := range 1000 {
			srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("tool_%d", i), InputSchema: map[string]any{"type": "object"}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{}, nil
				})
		}
		up := upstream.New(config.Server{Name: name, Type: "stdio"}, &upstream.Options{Transport: func() (mcp.Transport, error) {
			ct, st := mcp.NewInMemoryTransports()
			_, err := srv.Connect(context.Background(), st, nil)
			return ct, err
		}})
		ups = append(ups, up)
	}
	for _, up := range ups {
		up.Start(context.Background())
		defer up.Close(context.Background())
	}
	for _, up := range ups {
		for up.Catalog() == nil {
			time.Sleep(time.Millisecond)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, _ := buildRoutes(ups, namespacing.Options{}, "")
		if len(r.tools) != 10000 {
			b.Fatalf("tools = %d", len(r.tools))
		}
	}
}

func newBenchHarness(b *testing.B) *harness {
	h := &harness{gw: newAlphaGateway(b, nil, nil), notes: make(chan string, 100)}
	h.client = h.connect(b)
	b.Cleanup(func() { h.client.Close() })
	return h
}

// BenchmarkPolicyView measures what a policy adds to tools/list over
// 10,000 tools: filtering one principal's view (once per routes generation
// and principal) and the cached lookup every list request makes.
func BenchmarkPolicyView(b *testing.B) {
	r := &routes{tools: map[string]route{}, byName: map[string]*upstream.Upstream{}}
	for s := range 10 {
		name := fmt.Sprintf("server%d", s)
		r.byName[name] = upstream.New(config.Server{Name: name, Type: "stdio"}, nil)
	}
	for i := range 10000 {
		name := fmt.Sprintf("server%d__tool_%d", i%10, i)
		r.tools[name] = route{up: r.byName[fmt.Sprintf("server%d", i%10)]}
		r.toolDefs = append(r.toolDefs, &mcp.Tool{Name: name})
	}
	cfg := &config.Config{Policy: &config.Policy{Default: config.Deny, Rules: []config.Rule{
		{Effect: config.Allow, Match: config.Match{Tools: []string{"*"}}, Principals: []string{"group:dev"}},
		{Effect: config.Allow, Match: config.Match{Tools: []string{"server1__*", "server2__tool_2?"}}, Principals: []string{"group:contractor"}},
		{Effect: config.Deny, Match: config.Match{Tools: []string{"*__tool_9*"}}},
	}}}
	a := newAccess(cfg, nil)
	pr := policy.NewPrincipal("bob", []string{"contractor"})
	b.Run("filter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			filterView(r, a.policy, pr)
		}
	})
	b.Run("cached", func(b *testing.B) {
		g := &Gateway{}
		g.routes.Store(r)
		g.snap.Store(newSnapshot(cfg, nil))
		g.current().access.local = pr
		req := &mcp.ListToolsRequest{}
		ctx := context.Background()
		g.view(ctx, req)
		b.ReportAllocs()
		for b.Loop() {
			if len(g.view(ctx, req).tools) == 0 {
				b.Fatal("empty view")
			}
		}
	})
}
