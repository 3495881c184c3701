package gateway

import (
	"context"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestSelectorLastMatchingPatternDecides(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		in, out  []string
	}{
		{name: "absent: everything", patterns: nil, in: []string{"a__x", "b__y"}},
		{name: "empty: nothing", patterns: []string{}, out: []string{"a__x"}},
		{name: "only exclusions start from everything", patterns: []string{"!*__delete_*"}, in: []string{"a__get", "b__list"}, out: []string{"a__delete_x"}},
		{name: "inclusions start from nothing", patterns: []string{"jira__*", "everything__echo"}, in: []string{"jira__get", "everything__echo"}, out: []string{"everything__add", "github__x"}},
		{name: "a later exclusion narrows", patterns: []string{"jira__*", "!jira__delete*"}, in: []string{"jira__get"}, out: []string{"jira__delete_issue"}},
		{name: "a later inclusion takes one back", patterns: []string{"!*__delete_*", "a__delete_me"}, in: []string{"a__delete_me", "b__get"}, out: []string{"a__delete_you"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSelector(tt.patterns)
			for _, n := range tt.in {
				if !s.has(n) {
					t.Errorf("%q not selected", n)
				}
			}
			for _, n := range tt.out {
				if s.has(n) {
					t.Errorf("%q selected", n)
				}
			}
		})
	}
}

// toolsetConfig gives c the toolsets dev (alpha's tools but fail) and
// support (beta's echo, no prompts, no resources), and a policy that
// denies alpha__add.
func toolsetConfig(c *config.Config) {
	c.Toolsets = map[string]config.Toolset{
		"dev":     {Name: "dev", Servers: []string{"alpha"}, Tools: []string{"!*__fail"}},
		"support": {Name: "support", Tools: []string{"beta__echo"}, Prompts: []string{}, Resources: []string{}},
	}
	c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
		{Name: "no-add", Effect: config.Deny, Match: config.Match{Tools: []string{"alpha__add"}}},
	}}
}

// connectIn connects an in-memory client to h's gateway in toolset name;
// its list_changed notifications go to notes.
func connectIn(t *testing.T, h *harness, name string, notes chan string) *mcp.ClientSession {
	t.Helper()
	return connectInVersion(t, h, name, notes, "")
}

// connectInVersion is connectIn offering protocol version v ("": the
// SDK's latest).
func connectInVersion(t *testing.T, h *harness, name string, notes chan string, v string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "toolset-client"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { notes <- "tools" },
	})
	ct, st := mcp.NewInMemoryTransports()
	if _, err := h.gw.Server().Connect(WithToolset(context.Background(), name), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := c.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: v})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// listed returns the keys of the items of a list iterator of the client.
func listed[T any](t *testing.T, items iter.Seq2[T, error], key func(T) string) []string {
	t.Helper()
	var keys []string
	for it, err := range items {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key(it))
	}
	return keys
}

func promptNames(t *testing.T, cs *mcp.ClientSession) []string {
	return listed(t, cs.Prompts(context.Background(), nil), func(p *mcp.Prompt) string { return p.Name })
}

func resourceURIs(t *testing.T, cs *mcp.ClientSession) []string {
	return listed(t, cs.Resources(context.Background(), nil), func(r *mcp.Resource) string { return r.URI })
}

// withPrefix returns the names of names starting with prefix, but skip.
func withPrefix(names []string, prefix string, skip ...string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && !slices.Contains(skip, n) {
			out = append(out, n)
		}
	}
	return out
}

func TestAToolsetListsItsItemsUnderThePolicyAndRefusesTheRest(t *testing.T) {
	h := newHarnessWith(t, toolsetConfig, upstreamSpec{name: "alpha", demoName: "alpha"}, upstreamSpec{name: "beta", demoName: "beta"})
	ctx := context.Background()
	all := toolNames(t, h.client)
	if !slices.Contains(all, "alpha__fail") || !slices.Contains(all, "beta__echo") {
		t.Fatalf("the whole catalog lost items: %v", all)
	}
	dev := connectIn(t, h, "dev", make(chan string, 10))
	if d := cmp.Diff(withPrefix(all, "alpha__", "alpha__fail"), toolNames(t, dev)); d != "" {
		t.Errorf("dev's tools (-want +got):\n%s", d)
	}
	if got := promptNames(t, dev); len(got) == 0 || len(withPrefix(got, "alpha__")) != len(got) {
		t.Errorf("dev's prompts = %v, want alpha's", got)
	}
	if got := resourceURIs(t, dev); len(got) == 0 || len(withPrefix(got, "manifold://alpha/")) != len(got) {
		t.Errorf("dev's resources = %v, want alpha's", got)
	}
	if res, err := dev.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "in"}}); err != nil || textOf(t, res.Content) != "in" {
		t.Errorf("alpha__echo in dev = %v, %v", res, err)
	}
	// Outside the toolset, or denied by the policy on top of it: the
	// answer of a name that does not exist.
	for _, name := range []string{"beta__echo", "alpha__fail", "alpha__add", "alpha__nonexistent"} {
		_, err := dev.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"message": "x"}})
		if err == nil || err.Error() != unknownTool(name).Error() && !strings.Contains(err.Error(), `unknown tool "`+name+`"`) {
			t.Errorf("%s in dev: err = %v, want unknown tool", name, err)
		}
	}
	if _, err := dev.GetPrompt(ctx, &mcp.GetPromptParams{Name: "beta__greet", Arguments: map[string]string{"person": "x"}}); err == nil {
		t.Error("beta__greet answered in dev")
	}
	if _, err := dev.ReadResource(ctx, &mcp.ReadResourceParams{URI: "manifold://beta/demo://beta/readme"}); err == nil {
		t.Error("a beta resource was read in dev")
	}

	support := connectIn(t, h, "support", make(chan string, 10))
	if d := cmp.Diff([]string{"beta__echo"}, toolNames(t, support)); d != "" {
		t.Errorf("support's tools (-want +got):\n%s", d)
	}
	if got := promptNames(t, support); len(got) != 0 {
		t.Errorf("support's prompts = %v, want none (prompts: [])", got)
	}
	if got := resourceURIs(t, support); len(got) != 0 {
		t.Errorf("support's resources = %v, want none", got)
	}
	if names := toolNames(t, h.client); !cmp.Equal(names, all) {
		t.Errorf("the whole catalog changed: %v", names)
	}
	st := h.gw.Status(nil).Catalog.Toolsets
	if len(st) != 2 || st[0].Name != "dev" || st[0].Tools != len(withPrefix(all, "alpha__")) || st[1].Tools != 1 {
		t.Errorf("toolsets in status = %+v", st)
	}
}

func TestAToolsetSessionOnTheRawPath(t *testing.T) {
	gw := newRawGateway(t, nil, toolsetConfig, rawSpec{name: "alpha", server: demo.NewServer("alpha", nil)}, rawSpec{name: "beta", server: demo.NewServer("beta", nil)})
	c := serveStdioIn(t, WithToolset(context.Background(), "dev"), gw)
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"lines","version":"1"}}}`)
	c.await(`"init"`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	before := rawCount(gw)
	if got := firstText(t, c.call("1", callLine("1", "alpha__echo", `{"message":"raw"}`))); got != "raw" {
		t.Errorf("alpha__echo = %q", got)
	}
	m := c.call("2", callLine("2", "beta__echo", `{"message":"raw"}`))
	if m.Error == nil || m.Error.Message != unknownTool("beta__echo").Error() && !strings.Contains(m.Error.Message, `unknown tool "beta__echo"`) {
		t.Errorf("beta__echo in dev = %s, want unknown tool", m.line)
	}
	if rawCount(gw) != before+2 {
		t.Errorf("raw calls = %d, want both on the raw path", rawCount(gw)-before)
	}
}

func TestToolsetEndpoints(t *testing.T) {
	h := newHarnessWith(t, toolsetConfig, upstreamSpec{name: "alpha", demoName: "alpha"}, upstreamSpec{name: "beta", demoName: "beta"})
	srv := httptest.NewServer(h.gw.Handler())
	t.Cleanup(srv.Close)
	ctx := context.Background()
	connect := func(tr mcp.Transport, version string) (*mcp.ClientSession, error) {
		return mcp.NewClient(&mcp.Implementation{Name: "http"}, nil).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	}
	for _, c := range []struct {
		tr      mcp.Transport
		version string
	}{
		{&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/support", DisableStandaloneSSE: true}, "2025-11-25"},
		{&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/support", DisableStandaloneSSE: true}, ""}, // 2026-07-28: stateless
		{&mcp.SSEClientTransport{Endpoint: srv.URL + "/sse/support"}, ""},
	} {
		cs, err := connect(c.tr, c.version)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"beta__echo"}, toolNames(t, cs)); d != "" {
			t.Errorf("%T %s: support's tools (-want +got):\n%s", c.tr, cs.InitializeResult().ProtocolVersion, d)
		}
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "x"}})
		if err == nil || !strings.Contains(err.Error(), "unknown tool") {
			t.Errorf("%T %s: alpha__echo in support: err = %v, want unknown tool", c.tr, cs.InitializeResult().ProtocolVersion, err)
		}
		cs.Close()
	}
	for _, path := range []string{"/mcp/nope", "/sse/nope", "/mcp/", "/mcp/dev/x"} {
		res, err := http.Post(srv.URL+path, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s = %d, want 404", path, res.StatusCode)
		}
	}

	// A session of a toolset is not reachable on another endpoint.
	cs, err := connect(&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/support", DisableStandaloneSSE: true}, "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, path := range []string{"/mcp", "/mcp/dev"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(callLine("1", "alpha__echo", `{"message":"x"}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(sessionIDHeader, cs.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("support's session on %s = %d %s, want 404", path, res.StatusCode, body)
		}
	}
}

func TestAToolsetGetsListChangedWhenAnUpstreamInItChanges(t *testing.T) {
	h := newHarnessWith(t, toolsetConfig, upstreamSpec{name: "alpha", demoName: "alpha"}, upstreamSpec{name: "beta", demoName: "beta"})
	notes := make(chan string, 10)
	dev := connectIn(t, h, "dev", notes)
	toolNames(t, dev)
	h.ups["alpha"].server.AddTool(&mcp.Tool{Name: "fresh", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	waitNote(t, notes, "tools")
	if names := toolNames(t, dev); !slices.Contains(names, "alpha__fresh") {
		t.Errorf("after list_changed, dev's tools = %v", names)
	}
}

func TestReloadAddsAndRemovesToolsets(t *testing.T) {
	h := newReloadHarness(t, true)
	srv := httptest.NewServer(h.gw.Handler())
	t.Cleanup(srv.Close)
	post := func(path string) int {
		res, err := http.Post(srv.URL+path, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := post("/mcp/dev"); code != http.StatusNotFound {
		t.Fatalf("/mcp/dev before any toolset = %d", code)
	}
	h.reload(t, h.reloadConfig(true, toolsetConfig), nil)
	if code := post("/mcp/dev"); code == http.StatusNotFound {
		t.Fatal("/mcp/dev is 404 after a reload added it")
	}
	notes := make(chan string, 10)
	dev := connectIn(t, h.harness, "dev", notes)
	if len(toolNames(t, dev)) == 0 {
		t.Fatal("dev lists nothing")
	}
	// Narrowed by a reload: its sessions are told, and see the new set.
	h.reload(t, h.reloadConfig(true, func(c *config.Config) {
		toolsetConfig(c)
		c.Toolsets["dev"] = config.Toolset{Name: "dev", Tools: []string{"alpha__echo"}}
	}), nil)
	waitNote(t, notes, "tools")
	if d := cmp.Diff([]string{"alpha__echo"}, toolNames(t, dev)); d != "" {
		t.Errorf("dev after the reload (-want +got):\n%s", d)
	}
	// Removed: its path is gone, and its sessions see and reach nothing.
	h.reload(t, h.reloadConfig(true, nil), nil)
	if code := post("/mcp/dev"); code != http.StatusNotFound {
		t.Errorf("/mcp/dev after its removal = %d, want 404", code)
	}
	if names := toolNames(t, dev); len(names) != 0 {
		t.Errorf("a removed toolset's session lists %v", names)
	}
	if _, err := dev.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "x"}}); err == nil {
		t.Error("a removed toolset's session could call alpha__echo")
	}
	if names := toolNames(t, h.client); !slices.Contains(names, "beta__echo") {
		t.Errorf("the whole catalog = %v", names)
	}
}

func TestToolsetAllowsByServerAndKind(t *testing.T) {
	ts := compileToolsets(&config.Config{Toolsets: map[string]config.Toolset{
		"x": {Servers: []string{"a"}, Resources: []string{"manifold://a/keep*"}},
	}})["x"]
	tests := []struct {
		kind         policy.Kind
		name, server string
		want         bool
	}{
		{policy.Tool, "a__t", "a", true},
		{policy.Tool, "b__t", "b", false},
		{policy.Prompt, "a__p", "a", true},
		{policy.Resource, "manifold://a/keep/1", "a", true},
		{policy.Template, "manifold://a/keep/{id}", "a", true},
		{policy.Resource, "manifold://a/other", "a", false},
	}
	for _, tt := range tests {
		if got := ts.allows(tt.kind, tt.name, tt.server); got != tt.want {
			t.Errorf("allows(%v, %q, %q) = %v, want %v", tt.kind, tt.name, tt.server, got, tt.want)
		}
	}
}

func TestAToolsetHearsOfItsOwnChangesOnly(t *testing.T) {
	h := newHarnessWith(t, toolsetConfig, upstreamSpec{name: "alpha", demoName: "alpha"}, upstreamSpec{name: "beta", demoName: "beta"})
	devNotes, supportNotes := make(chan string, 10), make(chan string, 10)
	dev := connectIn(t, h, "dev", devNotes)
	connectIn(t, h, "support", supportNotes)
	add := func(server, tool string) {
		h.ups[server].server.AddTool(&mcp.Tool{Name: tool, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	// beta is outside dev: the whole catalog hears of it, dev does not.
	add("beta", "outside")
	waitNote(t, h.notes, "tools")
	// alpha is in dev: dev hears of it (and of nothing before it).
	add("alpha", "inside")
	waitNote(t, devNotes, "tools")
	if names := toolNames(t, dev); !slices.Contains(names, "alpha__inside") || slices.Contains(names, "beta__outside") {
		t.Errorf("dev's tools = %v", names)
	}
	select {
	case n := <-devNotes:
		t.Errorf("dev got a second %s list_changed: one was for beta", n)
	default:
	}
	// support holds beta__echo only: neither change was its own.
	select {
	case n := <-supportNotes:
		t.Errorf("support got a %s list_changed for tools it does not hold", n)
	default:
	}
}

func TestAToolsetSessionSubscribesOnlyToItsResources(t *testing.T) {
	h := newHarnessWith(t, toolsetConfig, upstreamSpec{name: "alpha", demoName: "alpha"}, upstreamSpec{name: "beta", demoName: "beta"})
	dev := connectInVersion(t, h, "dev", make(chan string, 10), "2025-11-25")
	ctx := context.Background()
	if err := dev.Subscribe(ctx, &mcp.SubscribeParams{URI: "manifold://beta/demo://beta/readme"}); err != nil {
		t.Fatalf("subscribe outside the toolset: %v (want the silent acknowledgement of an unknown URI)", err)
	}
	if n := h.gw.Status(nil).Subscriptions; n != 0 {
		t.Fatalf("a subscription outside the toolset reached the upstream (%d held)", n)
	}
	if err := dev.Subscribe(ctx, &mcp.SubscribeParams{URI: "manifold://alpha/demo://alpha/readme"}); err != nil {
		t.Fatal(err)
	}
	if n := h.gw.Status(nil).Subscriptions; n != 1 {
		t.Errorf("subscriptions held = %d, want alpha's readme", n)
	}
}
