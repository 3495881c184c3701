package gateway

import (
	"context"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/internal/testutil"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressiveTeam is teamPolicy with progressive discovery for everyone
// but the dev group, alpha__link and alpha__add kept listed.
func progressiveTeam(c *config.Config) {
	c.Gateway.Discovery = config.Discovery{
		Mode:   config.DiscoveryProgressive,
		Groups: map[string]string{"dev": config.DiscoveryFull},
		Always: []string{"alpha__link", "alpha__add"},
	}
}

var metaNames = []string{metaCall, metaDescribe, metaSearch}

func TestProgressiveDiscoveryLists(t *testing.T) {
	_, srv, _ := teamGateway(t, progressiveTeam)
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			tests := []struct {
				name, key string
				want      []string
			}{
				// bob may use alpha__echo and alpha__link: link is always
				// listed, add is always listed but denied to him.
				{name: "progressive principal lists the meta-tools and its always tools", key: bobKey,
					want: []string{"alpha__link", metaCall, metaDescribe, metaSearch}},
				{name: "a principal with no rule lists the meta-tools only", key: eveKey, want: metaNames},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					cs := connectAs(t, srv.URL, tt.key, version)
					if diff := gocmp.Diff(tt.want, toolNames(t, cs)); diff != "" {
						t.Errorf("tools (-want +got):\n%s", diff)
					}
				})
			}
			t.Run("a group set to full lists the catalog", func(t *testing.T) {
				names := toolNames(t, connectAs(t, srv.URL, aliceKey, version))
				if !slices.Contains(names, "alpha__echo") || slices.Contains(names, metaSearch) {
					t.Errorf("alice lists %v, want the catalog without meta-tools", names)
				}
			})
		})
	}
}

// callJSON calls tool with args and returns its result, failing on a
// protocol error.
func callJSON(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func TestProgressiveSearchFollowsPolicy(t *testing.T) {
	_, srv, _ := teamGateway(t, progressiveTeam)
	cs := connectAs(t, srv.URL, bobKey, "2025-11-25")
	allowed := map[string]bool{"alpha__echo": true, "alpha__link": true} // bob's, by teamPolicy
	tests := []struct {
		query string
		first string // the best hit; "" for none
	}{
		{query: "return the message unchanged", first: "alpha__echo"},
		{query: "resource link to the readme", first: "alpha__link"},
		// alpha__add and alpha__image match best, but bob may not use them.
		{query: "adds two numbers", first: ""},
		{query: "tiny png image", first: ""},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			res := callJSON(t, cs, metaSearch, map[string]any{"query": tt.query})
			if res.IsError {
				t.Fatalf("search: %s", textOf(t, res.Content))
			}
			var got []string
			for _, h := range res.StructuredContent.(map[string]any)["tools"].([]any) {
				got = append(got, h.(map[string]any)["name"].(string))
			}
			for _, name := range got {
				if !allowed[name] {
					t.Errorf("search returned %s, which bob may not use", name)
				}
			}
			if first := append(got, "")[0]; first != tt.first {
				t.Errorf("first hit %q of %v, want %q", first, got, tt.first)
			}
		})
	}
}

func TestProgressiveDescribe(t *testing.T) {
	_, srv, _ := teamGateway(t, progressiveTeam)
	cs := connectAs(t, srv.URL, bobKey, "2025-11-25")
	res := callJSON(t, cs, metaDescribe, map[string]any{"name": "alpha__echo"})
	def, _ := res.StructuredContent.(map[string]any)
	if res.IsError || def["name"] != "alpha__echo" || def["inputSchema"] == nil {
		t.Fatalf("describe alpha__echo = %v %s, want its definition with its input schema", res.StructuredContent, textOf(t, res.Content))
	}
	// A denied name and an absent one get the same answer.
	denied := callJSON(t, cs, metaDescribe, map[string]any{"name": "alpha__add"})
	absent := callJSON(t, cs, metaDescribe, map[string]any{"name": "alpha__nope"})
	if !denied.IsError || !absent.IsError {
		t.Fatalf("describe of denied/absent: isError %v/%v, want true", denied.IsError, absent.IsError)
	}
	if d, a := strings.ReplaceAll(textOf(t, denied.Content), "alpha__add", "X"), strings.ReplaceAll(textOf(t, absent.Content), "alpha__nope", "X"); d != a {
		t.Errorf("denied answers %q, absent %q: want the same", d, a)
	}
}

// TestProgressiveCallIsTheRealCall calls through the call meta-tool on both
// paths (a session: the raw path takes simple calls; 2026-07-28: the
// stateless front) and checks that it is the call it names: answered by
// the upstream, audited under the real name; and that a denied name gets
// exactly the answer of an absent one, without reaching the upstream.
func TestProgressiveCallIsTheRealCall(t *testing.T) {
	sink := newAuditSink(t, "full")
	_, srv, up := teamGatewayOpts(t, demo.NewServer("alpha", nil), progressiveTeam, &Options{Audit: sink.log})
	ctx := context.Background()
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		cs := connectAs(t, srv.URL, bobKey, version)
		res := callJSON(t, cs, metaCall, map[string]any{"name": "alpha__echo", "arguments": map[string]any{"message": "hi " + version}})
		if got := textOf(t, res.Content); res.IsError || got != "hi "+version {
			t.Fatalf("%s: call alpha__echo = %q (isError %v), want %q", version, got, res.IsError, "hi "+version)
		}
		before := up.calls.Load()
		_, deniedErr := cs.CallTool(ctx, &mcp.CallToolParams{Name: metaCall, Arguments: map[string]any{"name": "alpha__add", "arguments": map[string]any{"a": 1, "b": 2}}})
		_, absentErr := cs.CallTool(ctx, &mcp.CallToolParams{Name: metaCall, Arguments: map[string]any{"name": "alpha__nope"}})
		_, directErr := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__add", Arguments: map[string]any{"a": 1, "b": 2}})
		if deniedErr == nil || absentErr == nil || directErr == nil {
			t.Fatalf("%s: denied, absent, direct errors = %v, %v, %v; want three errors", version, deniedErr, absentErr, directErr)
		}
		if d, a := strings.ReplaceAll(deniedErr.Error(), "alpha__add", "X"), strings.ReplaceAll(absentErr.Error(), "alpha__nope", "X"); d != a {
			t.Errorf("%s: denied answers %q, absent %q: want the same", version, d, a)
		}
		if deniedErr.Error() != directErr.Error() {
			t.Errorf("%s: through the meta-tool %q, direct %q: want the same", version, deniedErr, directErr)
		}
		if n := up.calls.Load() - before; n != 0 {
			t.Errorf("%s: %d requests reached the upstream for denied and absent names", version, n)
		}
	}
	var echo, add int
	for _, rec := range sink.records(t) {
		switch rec["name"] {
		case "alpha__echo":
			echo++
			if rec["server"] != "alpha" || rec["decision"] != "allow" || rec["principal"] != "bob" {
				t.Errorf("echo record %v, want server alpha, allowed, principal bob", rec)
			}
		case "alpha__add":
			add++
			if rec["decision"] != "deny" {
				t.Errorf("add record %v, want a denial", rec)
			}
		case metaCall:
			t.Errorf("a record names the meta-tool: %v", rec)
		}
	}
	if echo != 2 || add != 4 {
		t.Errorf("records: %d of alpha__echo, %d of alpha__add; want 2 and 4 (two paths, and for add one through the meta-tool and one direct each)", echo, add)
	}
}

func TestFullPrincipalHasNoMetaTools(t *testing.T) {
	_, srv, _ := teamGateway(t, progressiveTeam)
	cs := connectAs(t, srv.URL, aliceKey, "2025-11-25")
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: metaSearch, Arguments: map[string]any{"query": "echo"}})
	if err == nil || !strings.Contains(err.Error(), `unknown tool "`+metaSearch+`"`) {
		t.Errorf("alice calling %s: %v, want unknown tool", metaSearch, err)
	}
}

func TestDiscoveryModeFor(t *testing.T) {
	tests := []struct {
		name   string
		d      config.Discovery
		groups []string
		want   bool
	}{
		{name: "not configured", d: config.Discovery{}, want: false},
		{name: "default progressive", d: config.Discovery{Mode: "progressive"}, groups: []string{"x"}, want: true},
		{name: "group overrides the default", d: config.Discovery{Mode: "progressive", Groups: map[string]string{"dev": "full"}}, groups: []string{"dev"}, want: false},
		{name: "group turns it on", d: config.Discovery{Groups: map[string]string{"bots": "progressive"}}, groups: []string{"bots"}, want: true},
		{name: "others keep the default", d: config.Discovery{Groups: map[string]string{"bots": "progressive"}}, groups: []string{"dev"}, want: false},
		{name: "disagreeing groups give full", d: config.Discovery{Groups: map[string]string{"bots": "progressive", "dev": "full"}}, groups: []string{"bots", "dev"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newDiscoveryMode(&tt.d)
			if got := m.progressiveFor(policy.NewPrincipal("p", tt.groups)); got != tt.want {
				t.Errorf("progressiveFor(%v) = %v, want %v", tt.groups, got, tt.want)
			}
		})
	}
}

// TestProgressiveCallIsTracedUnderTheRealName: a call through the call
// meta-tool gets the server span of the tool it names, continuing the
// client's trace context, and its upstream call the client span.
func TestProgressiveCallIsTracedUnderTheRealName(t *testing.T) {
	rcv, tel := newTracing(t)
	progressive := func(c *config.Config) { c.Gateway.Discovery.Mode = config.DiscoveryProgressive }
	h := newHarnessOpts(t, &Options{Telemetry: tel}, progressive, upstreamSpec{name: "alpha", demoName: "alpha"})
	cs := h.connectVersion(t, "2025-11-25")
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: metaCall,
		Arguments: map[string]any{"name": "alpha__meta"}, Meta: mcp.Meta{"traceparent": clientTP}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans, _, _ := rcv.Received()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
		if s.Name == "tools/call alpha__meta" {
			if got := testutil.AttrMap(s.Attributes)["gen_ai.tool.name"]; got != "alpha__meta" {
				t.Errorf("server span's tool name %q, want alpha__meta", got)
			}
			if hex.EncodeToString(s.TraceId) != clientTrace {
				t.Errorf("server span in trace %x, want the client's %s", s.TraceId, clientTrace)
			}
		}
	}
	slices.Sort(names)
	if want := []string{"tools/call alpha__meta", "tools/call meta"}; !slices.Equal(names, want) {
		t.Errorf("spans %v, want %v", names, want)
	}
}

// TestReloadIntoProgressiveDiscovery: a reload that turns progressive
// discovery on sends tools list_changed (the tools registered with the SDK
// did not change), after which the client lists the meta-tools, and can
// search at once (the index is built for the new config).
func TestReloadIntoProgressiveDiscovery(t *testing.T) {
	h := newReloadHarness(t, false)
	h.drainNotes()
	if names := toolNames(t, h.client); slices.Contains(names, metaSearch) {
		t.Fatalf("before: tools %v", names)
	}
	h.reload(t, h.reloadConfig(false, func(c *config.Config) { c.Gateway.Discovery.Mode = config.DiscoveryProgressive }), nil)
	waitNote(t, h.notes, "tools")
	if diff := gocmp.Diff(metaNames, toolNames(t, h.client)); diff != "" {
		t.Errorf("after: tools (-want +got):\n%s", diff)
	}
	res := callJSON(t, h.client, metaSearch, map[string]any{"query": "return the message unchanged"})
	if hits := res.StructuredContent.(map[string]any)["tools"].([]any); len(hits) == 0 || hits[0].(map[string]any)["name"] != "alpha__echo" {
		t.Errorf("search after the reload: %v", hits)
	}
}

// BenchmarkDiscoveryOff measures what progressive discovery adds to a
// tools/call when nobody is configured for it: unwrapCall and discovered
// (a string compare, a type assertion, a snapshot load and a nil check).
func BenchmarkDiscoveryOff(b *testing.B) {
	gw := newAlphaGateway(b, nil, nil)
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "alpha__echo"}}
	next := func(context.Context, string, mcp.Request) (mcp.Result, error) { return nil, nil }
	h := gw.unwrapCall(next)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h(ctx, "tools/call", req)
		gw.discovered(ctx, "tools/call", req)
	}
}

// BenchmarkProgressiveSearch measures a search through the gateway (the
// index lookup, the policy filter and the answer) over the demo catalog.
func BenchmarkProgressiveSearch(b *testing.B) {
	gw := newAlphaGateway(b, func(c *config.Config) {
		c.Gateway.Discovery.Mode = config.DiscoveryProgressive
		teamPolicy(c)
	}, nil)
	snap := gw.current()
	pr := policy.NewPrincipal("bob", []string{"contractor"})
	args := []byte(`{"query":"return the message unchanged"}`)
	b.ReportAllocs()
	for b.Loop() {
		gw.searchTools(snap, pr, args)
	}
}

func TestProgressiveMetaToolArguments(t *testing.T) {
	_, srv, _ := teamGateway(t, progressiveTeam)
	cs := connectAs(t, srv.URL, bobKey, "2025-11-25")
	tests := []struct {
		name, tool string
		args       map[string]any
		wantError  string // "" for a result without isError
		wantText   string // a part of the text
	}{
		{name: "call without a name", tool: metaCall, args: map[string]any{}, wantError: `arguments must be {"name"`},
		{name: "call with arguments that are not an object", tool: metaCall, args: map[string]any{"name": "alpha__echo", "arguments": []any{1}}, wantError: "arguments must be an object"},
		{name: "call with null arguments is a call without", tool: metaCall, args: map[string]any{"name": "alpha__link", "arguments": nil}},
		{name: "describe without a name", tool: metaDescribe, args: map[string]any{}, wantError: `arguments must be {"name"`},
		{name: "search with a limit that is not a number", tool: metaSearch, args: map[string]any{"query": "echo", "limit": "3"}, wantError: "arguments must be"},
		{name: "search matching nothing says so", tool: metaSearch, args: map[string]any{"query": "zzzz qqqq"}, wantText: "No tool matches"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := callJSON(t, cs, tt.tool, tt.args)
			text := textOf(t, res.Content)
			if res.IsError != (tt.wantError != "") || !strings.Contains(text, tt.wantError+tt.wantText) {
				t.Errorf("%s: isError %v, %q; want error %q, text %q", tt.tool, res.IsError, text, tt.wantError, tt.wantText)
			}
		})
	}
}
