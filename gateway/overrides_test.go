package gateway

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// alphaOverrides reshapes the demo server alpha's tools and prompts.
func alphaOverrides(c *config.Config) {
	s := c.Servers["alpha"]
	s.Tools = map[string]config.Override{
		"echo":  {Rename: ptr("say"), Description: ptr("Repeat a message back.")},
		"add":   {Title: ptr("Sum"), Annotations: &config.Annotations{ReadOnlyHint: ptr(true), OpenWorldHint: ptr(false)}},
		"image": {Hide: true},
		"fail":  {AppendDescription: ptr("Used by the team's tests.")},
		"nope":  {Title: ptr("Not served")},
	}
	s.Prompts = map[string]config.Override{"greet": {Rename: ptr("hello"), Title: ptr("Hello")}}
	c.Servers["alpha"] = s
}

func TestOverridesReshapeTheListsAndCallsRouteToTheUpstreamName(t *testing.T) {
	h := newHarnessWith(t, alphaOverrides, upstreamSpec{name: "alpha", demoName: "alpha"})
	ctx := context.Background()
	tools := map[string]*mcp.Tool{}
	for tool, err := range h.client.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools[tool.Name] = tool
	}
	for _, gone := range []string{"alpha__echo", "alpha__image"} {
		if _, ok := tools[gone]; ok {
			t.Errorf("%s is listed; renamed and hidden tools must not be", gone)
		}
	}
	if say := tools["alpha__say"]; say == nil || say.Description != "Repeat a message back." || say.Title != "Echo" {
		t.Errorf("alpha__say = %+v, want the echo tool with the new description", say)
	}
	if add := tools["alpha__add"]; add == nil || add.Title != "Sum" || add.Annotations == nil || !add.Annotations.ReadOnlyHint ||
		add.Annotations.OpenWorldHint == nil || *add.Annotations.OpenWorldHint {
		t.Errorf("alpha__add = %+v, want title Sum, readOnlyHint and openWorldHint false", add)
	}
	if fail := tools["alpha__fail"]; fail == nil || !strings.HasSuffix(fail.Description, "\n\nUsed by the team's tests.") ||
		!strings.HasPrefix(fail.Description, "Always fails") {
		t.Errorf("alpha__fail description = %q, want the upstream's with the text appended", fail.Description)
	}

	res, err := h.client.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__say", Arguments: map[string]any{"message": "hi"}})
	if err != nil || textOf(t, res.Content) != "hi" {
		t.Fatalf("alpha__say = %v, %v; want the upstream's echo", res, err)
	}
	for _, name := range []string{"alpha__echo", "alpha__image"} {
		_, err := h.client.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"message": "hi"}})
		if err == nil || !strings.Contains(err.Error(), "unknown tool") {
			t.Errorf("%s: err = %v, want unknown tool", name, err)
		}
	}
	p, err := h.client.GetPrompt(ctx, &mcp.GetPromptParams{Name: "alpha__hello", Arguments: map[string]string{"person": "Ada"}})
	if err != nil || len(p.Messages) == 0 {
		t.Fatalf("alpha__hello = %v, %v; want the upstream's greet", p, err)
	}
	if _, err := h.client.GetPrompt(ctx, &mcp.GetPromptParams{Name: "alpha__greet", Arguments: map[string]string{"person": "Ada"}}); err == nil {
		t.Error("alpha__greet answered; its rename must hide the old name")
	}

	st := h.gw.Status(nil).Catalog
	var say OverrideStatus
	for _, o := range st.Overrides {
		if o.Upstream == "echo" {
			say = o
		}
	}
	if want := (OverrideStatus{Server: "alpha", Kind: "tool", Upstream: "echo", Exposed: "alpha__say", Changes: []string{"rename", "description"}}); !cmp.Equal(say, want) {
		t.Errorf("status of echo's override = %+v, want %+v", say, want)
	}
	if !slices.ContainsFunc(st.Problems, func(p string) bool { return strings.Contains(p, `does not serve a tool "nope"`) }) {
		t.Errorf("status problems = %q, want the override of a tool alpha does not serve", st.Problems)
	}
}

func TestOverridesApplyOnTheRawPath(t *testing.T) {
	gw := newRawGateway(t, nil, alphaOverrides, rawSpec{name: "alpha", server: demo.NewServer("alpha", nil)})
	c := serveStdioLines(t, gw, "2025-06-18", `{}`)
	before := rawCount(gw)
	if got := firstText(t, c.call("1", callLine("1", "alpha__say", `{"message":"raw"}`))); got != "raw" {
		t.Errorf("alpha__say = %q, want the upstream's echo", got)
	}
	if rawCount(gw) != before+1 {
		t.Fatal("the call did not take the raw path")
	}
	m := c.call("2", callLine("2", "alpha__echo", `{"message":"raw"}`))
	if m.Error == nil || !strings.Contains(m.Error.Message, "unknown tool") {
		t.Errorf("alpha__echo = %s, want unknown tool", m.line)
	}
}

func TestARenameOntoANameTheServerServesIsRefused(t *testing.T) {
	h := newHarnessWith(t, func(c *config.Config) {
		s := c.Servers["alpha"]
		s.Tools = map[string]config.Override{"echo": {Rename: ptr("add")}}
		c.Servers["alpha"] = s
	}, upstreamSpec{name: "alpha", demoName: "alpha"})
	res, err := h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__add", Arguments: map[string]any{"a": 1, "b": 2}})
	if err != nil || textOf(t, res.Content) != "3" {
		t.Fatalf("alpha__add = %v, %v; want the upstream's own add", res, err)
	}
	if names := toolNames(t, h.client); slices.Contains(names, "alpha__echo") {
		t.Errorf("tools = %v: the renamed echo must not come back under its old name", names)
	}
	if p := h.gw.Status(nil).Catalog.Problems; !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, `renamed to "add", which the server also serves`) }) {
		t.Errorf("problems = %q, want the refused rename", p)
	}
}

func TestCheckCatalogReportsPatternsARenameEscapes(t *testing.T) {
	base := func(rules ...config.Rule) *config.Config {
		return &config.Config{
			Source:  "c.yaml",
			Gateway: config.DefaultGateway(),
			Servers: map[string]config.Server{"everything": {Command: "x", Tools: map[string]config.Override{
				"echo":    {Rename: ptr("say")},
				"get-env": {Hide: true},
			}, Prompts: map[string]config.Override{"simple": {Rename: ptr("plain")}}}},
			Policy: &config.Policy{Default: config.Allow, Rules: rules},
		}
	}
	deny := func(m config.Match) config.Rule { return config.Rule{Effect: config.Deny, Match: m} }
	tests := []struct {
		name string
		cfg  *config.Config
		keys []string
	}{
		{name: "the old name exactly", cfg: base(deny(config.Match{Tools: []string{"everything__echo"}})), keys: []string{"policy.rules[0].deny.tools[0]"}},
		{name: "a glob of the old name only", cfg: base(deny(config.Match{Tools: []string{"everything__e*"}})), keys: []string{"policy.rules[0].deny.tools[0]"}},
		{name: "a prompt's old name", cfg: base(deny(config.Match{Prompts: []string{"*simple"}})), keys: []string{"policy.rules[0].deny.prompts[0]"}},
		{name: "a pattern matching both names", cfg: base(deny(config.Match{Tools: []string{"everything__*"}}))},
		{name: "the new name", cfg: base(deny(config.Match{Tools: []string{"everything__say"}}))},
		{name: "a hidden tool's name", cfg: base(deny(config.Match{Tools: []string{"everything__get-env"}}))},
		{name: "no policy", cfg: func() *config.Config { c := base(); c.Policy = nil; return c }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var keys []string
			for _, fe := range config.FieldErrors(CheckCatalog(tt.cfg)) {
				keys = append(keys, fe.Key)
				if !strings.Contains(fe.Msg, "before its rename") || fe.Source != "c.yaml" {
					t.Errorf("problem %v", fe)
				}
			}
			if d := cmp.Diff(tt.keys, keys); d != "" {
				t.Errorf("keys (-want +got):\n%s", d)
			}
		})
	}
}

func TestAnOverrideChangedByReloadAppliesWithoutRestartingTheServer(t *testing.T) {
	h := newReloadHarness(t, false)
	h.drainNotes()
	res := h.reload(t, h.reloadConfig(false, func(c *config.Config) {
		s := c.Servers["alpha"]
		s.Tools = map[string]config.Override{"echo": {Rename: ptr("say"), Description: ptr("Said.")}}
		c.Servers["alpha"] = s
	}), nil)
	if len(res.Restarted)+len(res.Added)+len(res.Removed) != 0 {
		t.Errorf("reload changed the pool: %+v; an override must not restart the server", res.poolChanges)
	}
	waitNote(t, h.notes, "tools")
	var say *mcp.Tool
	for tool, err := range h.client.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name == "alpha__say" {
			say = tool
		}
	}
	if say == nil || say.Description != "Said." {
		t.Fatalf("after the reload alpha__say = %+v", say)
	}
	if err := h.call(context.Background(), "alpha__say"); err != nil {
		t.Errorf("alpha__say: %v", err)
	}
}
