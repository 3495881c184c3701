package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/audit"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/internal/fixture"
	"github.com/manifold-mcp/manifold/internal/telemetry"
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkCallTool measures one tools/call end to end over in-memory
// transports: "direct" is a client calling the demo server itself (the
// floor), "gateway" the same call through the gateway (lookup, forward,
// result rewrite, both JSON-RPC hops). The difference is the gateway's cost.
//
// The "stdio" pair is the same over byte streams, as `serve --stdio` runs
// with a stdio upstream: "direct stdio" is the client on a pipe to the
// demo server, "gateway stdio" the client on a pipe to ServeStdio and the
// gateway on a pipe to the demo server, so that its calls take the raw
// path. The client and the server (the fixture's echo, which answers as
// the demo's does) speak 2025-11-25 in both: a 2026-07-28 client's
// per-request _meta takes the SDK path, and a 2026-07-28 server's
// validation of the _meta of each request would be counted against the
// gateway, whose upstream hop alone would pay it.
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
	b.Run("direct stdio", func(b *testing.B) {
		r, w, _ := pipeUpstream(b, legacyEcho())()
		cs := connectPipes(b, r, w)
		benchCalls(b, cs, "echo", args)
	})
	b.Run("gateway stdio", func(b *testing.B) {
		gw := newRawGatewayPipes(b, map[string]func() (io.ReadCloser, io.WriteCloser, error){
			"alpha": pipeUpstream(b, legacyEcho())})
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- gw.ServeStdio(ctx, inR, outW); outW.Close() }()
		b.Cleanup(func() {
			cancel()
			<-done
			inR.Close()
		})
		cs := connectPipes(b, outR, inW)
		before := gw.rawServed.Load()
		benchCalls(b, cs, "alpha__echo", args)
		if gw.rawServed.Load() == before {
			b.Fatal("no call took the raw path")
		}
	})
	// The operator console's cost on the call path, with the audit log on
	// (hashed arguments, to io.Discard): console=on adds the audit ring,
	// filled by the audit writer, and the console mounted on the handler.
	// Compare with benchstat -col /console.
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("audited/console=%s", map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
			opts := &audit.Options{Stdout: io.Discard, LookupEnv: func(string) (string, bool) { return "", false }}
			if on {
				opts.Ring = audit.NewRing(0)
			}
			al, err := audit.New(&config.Audit{Stdout: true, Arguments: config.ArgumentsHashed}, opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { al.Close(context.Background()) })
			h := &harness{gw: newAlphaGateway(b, nil, &Options{Audit: al}), notes: make(chan string, 100)}
			if on {
				h.gw.Handler()
			}
			h.client = h.connect(b)
			b.Cleanup(func() { h.client.Close() })
			// CPU time per call, beside wall time: on a shared machine it
			// varies far less with the load of other processes.
			cpu0 := processCPU()
			benchCalls(b, h.client, "alpha__echo", args)
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			if on && opts.Ring.Total() == 0 {
				b.Fatal("the ring kept no record")
			}
		})
	}
}

// processCPU is the CPU time (user and system) the process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// legacyEcho is an upstream with an echo tool that speaks 2025-11-25.
func legacyEcho() *mcp.Server {
	return fixture.NewServer(&fixture.Options{Name: "alpha", ProtocolVersions: []string{"2025-11-25"}})
}

// connectPipes connects a 2025-11-25 client to the server reading w and
// writing r, closed when b ends.
func connectPipes(b *testing.B, r io.ReadCloser, w io.WriteCloser) *mcp.ClientSession {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(),
		&mcp.IOTransport{Reader: r, Writer: w}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// observedCase is one configuration of the audit log and telemetry for the
// observation benchmarks: all off, each on alone, and all on.
type observedCase struct {
	name  string
	audit *config.Audit
	tel   config.Telemetry
}

// observedCases returns the cases, exporting spans to a local receiver that
// discards them (closed when b ends).
func observedCases(b *testing.B) []observedCase {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(rcv.Close)
	traces := func(r float64) *config.Traces {
		return &config.Traces{Endpoint: rcv.URL, Protocol: config.ProtocolHTTP, SampleRatio: &r}
	}
	hashed := &config.Audit{Stdout: true, Arguments: config.ArgumentsHashed}
	return []observedCase{
		{name: "off"},
		{name: "audit hashed", audit: hashed},
		{name: "metrics", tel: config.Telemetry{Metrics: &config.Metrics{}}},
		{name: "tracing sampled off", tel: config.Telemetry{Traces: traces(0)}},
		{name: "tracing sampled on", tel: config.Telemetry{Traces: traces(1)}},
		{name: "all", audit: hashed, tel: config.Telemetry{Traces: traces(1), Metrics: &config.Metrics{}}},
	}
}

// start builds the case's audit log (writing to io.Discard) and telemetry,
// closed when b ends, after the cleanups registered later (the gateway's).
// When b ends it reports the records dropped per op.
func (c observedCase) start(b *testing.B) (*audit.Log, *telemetry.Telemetry) {
	al, err := audit.New(c.audit, &audit.Options{Stdout: io.Discard, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		b.Fatal(err)
	}
	tel, err := telemetry.New(context.Background(), &c.tel, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		al.Close(context.Background())
		tel.Shutdown(context.Background())
	})
	return al, tel
}

// BenchmarkCallToolObserved is BenchmarkCallTool/gateway with the audit
// log, metrics and tracing on, one at a time and all together: what each
// adds to a call.
func BenchmarkCallToolObserved(b *testing.B) {
	for _, c := range observedCases(b) {
		b.Run(c.name, func(b *testing.B) {
			al, tel := c.start(b)
			h := &harness{gw: newAlphaGateway(b, nil, &Options{Audit: al, Telemetry: tel}), notes: make(chan string, 100)}
			h.client = h.connect(b)
			b.Cleanup(func() { h.client.Close() })
			benchCalls(b, h.client, "alpha__echo", map[string]any{"message": "hello"})
			b.ReportMetric(float64(al.Dropped())/float64(b.N), "dropped/op")
		})
	}
}

// BenchmarkObserveRequest is the gateway's own observation work per
// tools/call, without the JSON-RPC hops: the observe middleware (span,
// metric, audit record), the policy decision noted in the exchange, and the
// client span, _meta injection and metrics around the upstream call, in the
// configurations of BenchmarkCallToolObserved.
func BenchmarkObserveRequest(b *testing.B) {
	cfg := &config.Config{Gateway: config.DefaultGateway()}
	rt := route{up: upstream.New(config.Server{Name: "alpha", Type: "stdio"}, nil), original: "echo"}
	result := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "alpha__echo", Arguments: []byte(`{"message":"hello"}`)}}
	for _, c := range observedCases(b) {
		b.Run(c.name, func(b *testing.B) {
			al, tel := c.start(b)
			g := &Gateway{obs: newRecorder(al, tel)}
			g.snap.Store(newSnapshot(cfg, nil))
			h := g.observe(func(ctx context.Context, _ string, req mcp.Request) (mcp.Result, error) {
				g.exchange(ctx).routed(rt)
				g.decide(ctx, g.current().access, nil, false, policy.Tool, "alpha__echo", "alpha")
				ctx, _, call := g.beginCall(ctx, "tools/call", rt, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}}, nil)
				g.endCall(ctx, &call, nil, false)
				return result, nil
			})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h(ctx, "tools/call", req); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(al.Dropped())/float64(b.N), "dropped/op")
		})
	}
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
		r, _ := buildRoutes(ups, nil, namespacing.Options{}, "", nil)
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

// BenchmarkListChange10k is the end-to-end time for a change in a
// 10,000-tool upstream to reach a client: the upstream adds a tool and
// sends list_changed; the gateway lists the upstream again (paginated),
// merges, registers the difference; the client gets list_changed and lists
// the 10,000-odd tools through the gateway, finding the new one. The
// debounces on the way (upstream refresh, merge 20ms, the SDK's 10ms) are
// part of what is measured.
func BenchmarkListChange10k(b *testing.B) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "big"}, nil)
	noop := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	schema := map[string]any{"type": "object"}
	for i := range 10000 {
		srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("tool_%05d", i), InputSchema: schema}, noop)
	}
	cfg := &config.Config{Servers: map[string]config.Server{"big": {Name: "big", Type: "stdio", Command: "unused"}}, Gateway: config.DefaultGateway()}
	f := newFakeUpstream(srv)
	gw, err := New(cfg, &Options{Transports: map[string]func() (mcp.Transport, error){"big": f.transport}})
	if err != nil {
		b.Fatal(err)
	}
	gw.Start(context.Background())
	b.Cleanup(func() { gw.Close(context.Background()) })
	changed := make(chan struct{}, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "bench"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	ct, st := mcp.NewInMemoryTransports()
	if _, err := gw.Server().Connect(context.Background(), st, nil); err != nil {
		b.Fatal(err)
	}
	cs, err := c.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	ctx := context.Background()
	n := 0
	b.ResetTimer()
	for b.Loop() {
		n++
		name := fmt.Sprintf("added_%d", n)
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: schema}, noop)
		want := "big__" + name
		for found := false; !found; {
			select {
			case <-changed:
			case <-time.After(30 * time.Second):
				b.Fatal("no list_changed within 30s")
			}
			for tool, err := range cs.Tools(ctx, nil) {
				if err != nil {
					b.Fatal(err)
				}
				if tool.Name == want {
					found = true
				}
			}
		}
	}
}
