package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeUpstream is an in-process demo server reached over in-memory
// transports; kill cuts its current connection, as a crash would.
type fakeUpstream struct {
	server *mcp.Server
	calls  atomic.Int64 // requests other than initialize, ping and lists
	mu     sync.Mutex
	cur    *mcp.ServerSession
	pipe   *testutil.Pipe
	dials  int
	down   bool
}

// newFakeUpstream wraps server, counting the requests that reach it.
func newFakeUpstream(server *mcp.Server) *fakeUpstream {
	f := &fakeUpstream{server: server}
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch {
			case method == "initialize", method == "ping", method == "server/discover", method == "subscriptions/listen",
				strings.HasPrefix(method, "notifications/"), strings.HasSuffix(method, "/list"):
			default:
				f.calls.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	return f
}

func (f *fakeUpstream) transport() (mcp.Transport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials++
	if f.down {
		return nil, errors.New("fake upstream is down")
	}
	p := testutil.NewPipe()
	ss, err := f.server.Connect(context.Background(), p.Server, nil)
	if err != nil {
		return nil, err
	}
	f.cur, f.pipe = ss, p
	return p.Client, nil
}

// kill cuts the live connection (closing the session alone would wait for
// the requests in flight); with stayDown, reconnects fail until revive.
func (f *fakeUpstream) kill(stayDown bool) {
	f.mu.Lock()
	f.down = stayDown
	ss, p := f.cur, f.pipe
	f.mu.Unlock()
	if ss != nil {
		p.Cut()
		ss.Close()
	}
}

func (f *fakeUpstream) revive() {
	f.mu.Lock()
	f.down = false
	f.mu.Unlock()
}

// harness is a started Gateway in front of fake upstreams, and a connected
// client session.
type harness struct {
	gw     *Gateway
	ups    map[string]*fakeUpstream
	client *mcp.ClientSession
	notes  chan string // notification methods the client received
}

// upstreamSpec names a fake upstream: the config name and the demo server's own name.
type upstreamSpec struct {
	name, demoName string
	prefix         *string
	opts           *demo.Options
	server         *mcp.Server // instead of a demo server
}

func newHarness(t *testing.T, specs ...upstreamSpec) *harness {
	t.Helper()
	return newHarnessWith(t, nil, specs...)
}

// newHarnessWith is newHarness with a config edit (auth, policy, limits)
// applied before the gateway is built.
func newHarnessWith(t *testing.T, edit func(*config.Config), specs ...upstreamSpec) *harness {
	t.Helper()
	return newHarnessOpts(t, nil, edit, specs...)
}

// newHarnessOpts is newHarnessWith with gateway options (audit, telemetry);
// their Transports are replaced.
func newHarnessOpts(t *testing.T, opts *Options, edit func(*config.Config), specs ...upstreamSpec) *harness {
	t.Helper()
	cfg := &config.Config{Servers: map[string]config.Server{}, Gateway: config.DefaultGateway(), Source: "test"}
	cfg.Gateway.Backoff.Initial = 10 * time.Millisecond
	cfg.Gateway.Backoff.Max = 50 * time.Millisecond
	cfg.Gateway.Timeouts.Call = 5 * time.Second
	h := &harness{ups: map[string]*fakeUpstream{}, notes: make(chan string, 1000)}
	transports := map[string]func() (mcp.Transport, error){}
	for _, s := range specs {
		cfg.Servers[s.name] = config.Server{Name: s.name, Type: "stdio", Command: "unused", Prefix: s.prefix}
		srv := s.server
		if srv == nil {
			srv = demo.NewServer(s.demoName, s.opts)
		}
		f := newFakeUpstream(srv)
		h.ups[s.name] = f
		transports[s.name] = f.transport
	}
	if edit != nil {
		edit(cfg)
	}
	cfg.Auth.Local.Name = cmp.Or(cfg.Auth.Local.Name, "local")
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Transports = transports
	gw, err := New(cfg, &o)
	if err != nil {
		t.Fatal(err)
	}
	gw.Start(context.Background())
	h.gw = gw
	t.Cleanup(func() {
		if h.client != nil {
			h.client.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := gw.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	h.client = h.connect(t)
	return h
}

// newAlphaGateway starts a gateway in front of one in-memory demo upstream
// named alpha, closed when the test ends. edit may change the config; opts
// may set a logger (its Transports are replaced).
func newAlphaGateway(t testing.TB, edit func(*config.Config), opts *Options) *Gateway {
	t.Helper()
	cfg := &config.Config{Servers: map[string]config.Server{
		"alpha": {Name: "alpha", Type: "stdio", Command: "unused"},
	}, Gateway: config.DefaultGateway()}
	if edit != nil {
		edit(cfg)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	f := newFakeUpstream(demo.NewServer("alpha", nil))
	o.Transports = map[string]func() (mcp.Transport, error){"alpha": f.transport}
	gw, err := New(cfg, &o)
	if err != nil {
		t.Fatal(err)
	}
	gw.Start(context.Background())
	t.Cleanup(func() { gw.Close(context.Background()) })
	return gw
}

func (h *harness) connect(t testing.TB) *mcp.ClientSession {
	t.Helper()
	return h.connectVersion(t, "")
}

// connectVersion connects a client offering protocol version v ("" = the
// SDK's latest); it is closed when the test ends.
func (h *harness) connectVersion(t testing.TB, v string) *mcp.ClientSession {
	t.Helper()
	note := func(method string) { h.notes <- method }
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client"}, &mcp.ClientOptions{
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { note("tools") },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { note("resources") },
	})
	ct, st := mcp.NewInMemoryTransports()
	if _, err := h.gw.Server().Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := c.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: v})
	if err != nil {
		t.Fatal(err)
	}
	if v != "" {
		t.Cleanup(func() { cs.Close() })
	}
	return cs
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

func textOf(t *testing.T, content []mcp.Content) string {
	t.Helper()
	var parts []string
	for _, c := range content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func rpcCode(err error) int64 {
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func ptr[T any](v T) *T { return &v }

func TestMergedListsAreNamespaced(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "alpha", demoName: "alpha"}, upstreamSpec{name: "beta", demoName: "beta"})
	names := toolNames(t, h.client)
	for _, want := range []string{"alpha__echo", "beta__echo", "alpha__add", "beta__image", "alpha__link"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %q; got %v", want, names)
		}
	}
	seen := map[string]int{}
	for _, n := range names {
		seen[n]++
		if seen[n] > 1 {
			t.Errorf("tool %q listed twice", n)
		}
	}
	res, err := h.client.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range res.Resources {
		uris = append(uris, r.URI)
	}
	if !slices.Contains(uris, "manifold://alpha/demo://alpha/readme") || !slices.Contains(uris, "manifold://beta/demo://beta/readme") {
		t.Errorf("resources/list = %v", uris)
	}
	tmpls, err := h.client.ListResourceTemplates(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tmpls.ResourceTemplates) != 2 {
		t.Errorf("templates = %d, want 2", len(tmpls.ResourceTemplates))
	}
	init := h.client.InitializeResult()
	if !strings.Contains(init.Instructions, "## alpha") || !strings.Contains(init.Instructions, "Demo server beta") {
		t.Errorf("instructions do not merge upstreams': %q", init.Instructions)
	}
	if init.ServerInfo.Name != "manifold" {
		t.Errorf("serverInfo.name = %q", init.ServerInfo.Name)
	}
}

func TestCallsReachTheOwningUpstream(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "alpha", demoName: "alpha"}, upstreamSpec{name: "beta", demoName: "beta"})
	ctx := context.Background()
	tests := []struct {
		name     string
		tool     string
		args     map[string]any
		wantText string
		check    func(t *testing.T, res *mcp.CallToolResult)
	}{
		{name: "text", tool: "alpha__echo", args: map[string]any{"message": "hi"}, wantText: "hi"},
		{name: "structured", tool: "beta__add", args: map[string]any{"a": 2, "b": 3}, check: func(t *testing.T, res *mcp.CallToolResult) {
			got, _ := json.Marshal(res.StructuredContent)
			if string(got) != `{"sum":5}` {
				t.Errorf("structuredContent = %s", got)
			}
		}},
		{name: "owner", tool: "beta__info", check: func(t *testing.T, res *mcp.CallToolResult) {
			got, _ := json.Marshal(res.StructuredContent)
			if !strings.Contains(string(got), `"server":"beta"`) {
				t.Errorf("beta__info answered by the wrong server: %s", got)
			}
		}},
		{name: "image", tool: "alpha__image", check: func(t *testing.T, res *mcp.CallToolResult) {
			img, ok := res.Content[0].(*mcp.ImageContent)
			if !ok || img.MIMEType != "image/png" || len(img.Data) == 0 {
				t.Errorf("content = %#v", res.Content[0])
			}
		}},
		{name: "error result", tool: "alpha__fail", wantText: "demo failure", check: func(t *testing.T, res *mcp.CallToolResult) {
			if !res.IsError {
				t.Error("isError = false")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := h.client.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantText != "" {
				if got := textOf(t, res.Content); got != tc.wantText {
					t.Errorf("text = %q, want %q", got, tc.wantText)
				}
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}

func TestResourcesPromptsCompletion(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "alpha", demoName: "alpha"}, upstreamSpec{name: "beta", demoName: "beta"})
	ctx := context.Background()

	// A resource_link handed out by a tool is readable through the gateway.
	res, err := h.client.CallTool(ctx, &mcp.CallToolParams{Name: "beta__link"})
	if err != nil {
		t.Fatal(err)
	}
	var linked, embedded string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.ResourceLink:
			linked = c.URI
		case *mcp.EmbeddedResource:
			embedded = c.Resource.URI
		}
	}
	if linked != "manifold://beta/demo://beta/readme" || embedded != "manifold://beta/demo://beta/items/7" {
		t.Fatalf("link = %q, embedded = %q", linked, embedded)
	}
	for _, tc := range []struct{ uri, want string }{
		{linked, "beta"},
		{"manifold://alpha/demo://alpha/items/42", "item 42 from alpha"},
	} {
		rr, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: tc.uri})
		if err != nil {
			t.Fatalf("read %s: %v", tc.uri, err)
		}
		if rr.Contents[0].URI != tc.uri || !strings.Contains(rr.Contents[0].Text, tc.want) {
			t.Errorf("read %s = %+v", tc.uri, rr.Contents[0])
		}
	}
	if _, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: "manifold://nope/x://y"}); rpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Errorf("unknown resource: err = %v, want code %d", err, jsonrpc.CodeInvalidParams)
	}

	pr, err := h.client.GetPrompt(ctx, &mcp.GetPromptParams{Name: "alpha__greet", Arguments: map[string]string{"person": "Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, []mcp.Content{pr.Messages[0].Content}); !strings.Contains(got, "Ada") || !strings.Contains(got, "alpha") {
		t.Errorf("prompt text = %q", got)
	}

	for _, tc := range []struct {
		name string
		ref  *mcp.CompleteReference
		arg  mcp.CompleteParamsArgument
		want []string
	}{
		{"prompt", &mcp.CompleteReference{Type: "ref/prompt", Name: "beta__greet"}, mcp.CompleteParamsArgument{Name: "person", Value: "a"}, []string{"alice"}},
		{"template", &mcp.CompleteReference{Type: "ref/resource", URI: "manifold://alpha/demo://alpha/items/{id}"}, mcp.CompleteParamsArgument{Name: "id", Value: "4"}, []string{"42"}},
	} {
		t.Run("complete "+tc.name, func(t *testing.T) {
			cr, err := h.client.Complete(ctx, &mcp.CompleteParams{Ref: tc.ref, Argument: tc.arg})
			if err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(tc.want, cr.Completion.Values); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnknownNamesAreClearErrors(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "alpha", demoName: "alpha"})
	ctx := context.Background()
	_, err := h.client.CallTool(ctx, &mcp.CallToolParams{Name: "nope__echo"})
	if rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "nope__echo") {
		t.Errorf("unknown tool: %v", err)
	}
	_, err = h.client.GetPrompt(ctx, &mcp.GetPromptParams{Name: "alpha__nope"})
	if err == nil {
		t.Error("unknown prompt: no error")
	}
}

func TestSameNamesAndURIsOnTwoUpstreams(t *testing.T) {
	// Both upstreams are demo servers named "same": identical tool names and
	// identical resource URIs.
	h := newHarness(t, upstreamSpec{name: "one", demoName: "same"}, upstreamSpec{name: "two", demoName: "same"})
	ctx := context.Background()
	for _, srv := range []string{"one", "two"} {
		res, err := h.client.CallTool(ctx, &mcp.CallToolParams{Name: srv + "__echo", Arguments: map[string]any{"message": srv}})
		if err != nil || textOf(t, res.Content) != srv {
			t.Errorf("%s__echo = %v, %v", srv, res, err)
		}
		uri := "manifold://" + srv + "/demo://same/readme"
		rr, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || rr.Contents[0].URI != uri {
			t.Errorf("read %s = %v, %v", uri, rr, err)
		}
	}
}

func TestLongNamesAreShortenedAndCallable(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "alpha", demoName: "alpha", opts: &demo.Options{LongNames: true}})
	var long string
	for _, n := range toolNames(t, h.client) {
		if len(n) > 64 {
			t.Errorf("tool name over 64 chars: %q", n)
		}
		if strings.HasPrefix(n, "alpha__") && len(n) == 64 {
			long = n
		}
	}
	if long == "" {
		t.Fatal("no shortened tool found")
	}
	if _, err := h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: long}); err != nil {
		t.Errorf("call %s: %v", long, err)
	}
}

func TestUnprefixedServerKeepsNamesAndURIs(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "alpha", demoName: "alpha", prefix: ptr("")})
	ctx := context.Background()
	if names := toolNames(t, h.client); !slices.Contains(names, "echo") {
		t.Fatalf("tools = %v", names)
	}
	rr, err := h.client.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://alpha/items/5"})
	if err != nil || !strings.Contains(rr.Contents[0].Text, "item 5") {
		t.Errorf("read = %v, %v", rr, err)
	}
}

func TestListChangedReachesClients(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "alpha", demoName: "alpha"})
	h.ups["alpha"].server.AddTool(&mcp.Tool{Name: "fresh", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "new"}}}, nil
		})
	waitNote(t, h.notes, "tools")
	if names := toolNames(t, h.client); !slices.Contains(names, "alpha__fresh") {
		t.Fatalf("after list_changed, tools = %v", names)
	}
	h.ups["alpha"].server.RemoveTools("fresh")
	waitNote(t, h.notes, "tools")
	if names := toolNames(t, h.client); slices.Contains(names, "alpha__fresh") {
		t.Fatalf("removed tool still listed: %v", names)
	}
}

func waitNote(t *testing.T, notes chan string, want string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case got := <-notes:
			if got == want {
				return
			}
		case <-timeout:
			t.Fatalf("no %s list_changed notification", want)
		}
	}
}

func TestFailingUpstreamIsIsolatedAndRestarted(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "alpha", demoName: "alpha"}, upstreamSpec{name: "beta", demoName: "beta"})
	ctx := context.Background()
	h.ups["alpha"].kill(true)
	// Calls to alpha fail clearly (after the gateway noticed); beta works.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := h.client.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "x"}})
		if rpcCode(err) == CodeUpstreamUnavailable {
			if !strings.Contains(err.Error(), `"alpha"`) {
				t.Errorf("error does not name the server: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("call to killed upstream: err = %v, want code %d", err, CodeUpstreamUnavailable)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if res, err := h.client.CallTool(ctx, &mcp.CallToolParams{Name: "beta__echo", Arguments: map[string]any{"message": "ok"}}); err != nil || textOf(t, res.Content) != "ok" {
		t.Errorf("beta while alpha is down: %v, %v", res, err)
	}
	// The tools of a restarting upstream stay listed.
	if names := toolNames(t, h.client); !slices.Contains(names, "alpha__echo") {
		t.Errorf("alpha's tools vanished while it restarts: %v", names)
	}
	h.ups["alpha"].revive()
	deadline = time.Now().Add(5 * time.Second)
	for {
		res, err := h.client.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "back"}})
		if err == nil && textOf(t, res.Content) == "back" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alpha did not come back: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := h.gw.Upstreams()[0]; st.Restarts == 0 {
		t.Errorf("restarts = 0 after a kill: %+v", st)
	}
}

func TestCallTimeout(t *testing.T) {
	gw := newAlphaGateway(t, func(c *config.Config) {
		alpha := c.Servers["alpha"]
		alpha.Timeout = 200 * time.Millisecond
		c.Servers["alpha"] = alpha
	}, nil)
	h := &harness{gw: gw, notes: make(chan string, 10)}
	cs := h.connect(t)
	defer cs.Close()
	start := time.Now()
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{"ms": 5000}})
	if rpcCode(err) != CodeUpstreamTimeout || !strings.Contains(err.Error(), "200ms") {
		t.Fatalf("err = %v, want code %d naming the timeout", err, CodeUpstreamTimeout)
	}
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("timeout took %s", elapsed)
	}
	// The upstream still serves after a timed-out call.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "x"}}); err != nil {
		t.Errorf("after timeout: %v", err)
	}
}

// TestCollisionsAreReported: two upstream names that map to the same
// exposed name keep the first server's and report the other, never a
// silent overwrite.
func TestCollisionsAreReported(t *testing.T) {
	h := newHarness(t,
		upstreamSpec{name: "first", demoName: "first", prefix: ptr("x"), opts: &demo.Options{ExtraTools: []string{"y__echo"}}},
		upstreamSpec{name: "second", demoName: "second", prefix: ptr("x__y")},
	)
	n := 0
	for _, name := range toolNames(t, h.client) {
		if name == "x__y__echo" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("x__y__echo listed %d times", n)
	}
	res, err := h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: "x__y__echo"})
	if err != nil || textOf(t, res.Content) != "y__echo" {
		t.Errorf("x__y__echo did not reach the kept tool (first's y__echo): %v %v", res, err)
	}
	h.gw.syncMu.Lock()
	defer h.gw.syncMu.Unlock()
	var reported bool
	for msg := range h.gw.problems {
		if strings.Contains(msg, "collides") && strings.Contains(msg, `"second"`) {
			reported = true
		}
	}
	if !reported {
		t.Errorf("collision not reported; problems: %v", h.gw.problems)
	}
}
