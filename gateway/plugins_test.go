package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// buildTestPlugin builds the test hook plugin (plugins/internal/testplugin)
// and returns its plugins entry with cfg as its config.
func buildTestPlugin(t *testing.T, cfg string) config.Plugin {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testplugin")
	build := exec.Command("go", "build", "-o", bin, "github.com/manifold-mcp/manifold/plugins/internal/testplugin/cmd/testplugin")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test plugin: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return config.Plugin{Name: "tp", Command: []string{bin}, SHA256: hex.EncodeToString(sum[:]), Config: json.RawMessage(cfg),
		Mode: config.PluginEnforce, OnError: config.PluginFailClosed, Timeout: 5 * time.Second}
}

func TestPluginHooksOnBothPaths(t *testing.T) {
	p := buildTestPlugin(t, `{"block":"etc/passwd","replace":"secret","rename":{"alpha__echo":"say"}}`)
	withPlugin := func(c *config.Config) { c.Plugins = []config.Plugin{p} }

	t.Run("raw path", func(t *testing.T) {
		gw := newRawGateway(t, nil, withPlugin, rawSpec{name: "alpha", server: demo.NewServer("alpha", nil)})
		c := serveStdioLines(t, gw, "2025-11-25", `{}`)
		before := rawCount(gw)
		if got := firstText(t, c.call("1", callLine("1", "alpha__echo", `{"message":"my secret"}`))); got != "my [gone]" {
			t.Errorf("echo through the post hook = %q; want the secret replaced", got)
		}
		m := c.call("2", callLine("2", "alpha__echo", `{"message":"../../etc/passwd"}`))
		if m.Error == nil || !strings.Contains(m.Error.Message, "no etc/passwd for local") {
			t.Errorf("blocked call = %s; want the plugin's reason", m.line)
		}
		if n := rawCount(gw) - before; n != 2 {
			t.Errorf("raw path served %d calls; want 2", n)
		}
		// An alias takes the slow path, and works there.
		if got := firstText(t, c.call("3", callLine("3", "say", `{"message":"hi"}`))); got != "hi" {
			t.Errorf("call by the alias = %q", got)
		}
	})

	t.Run("SDK path", func(t *testing.T) {
		h := newHarnessWith(t, withPlugin, upstreamSpec{name: "alpha", demoName: "alpha"})
		names := toolNames(t, h.client)
		if !slices.Contains(names, "say") || slices.Contains(names, "alpha__echo") {
			t.Errorf("tools = %v; want alpha__echo listed as say", names)
		}
		res, err := h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: "say", Arguments: map[string]any{"message": "a secret"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != "a [gone]" {
			t.Errorf("call by alias through the post hook = %q", got)
		}
		_, err = h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "/etc/passwd"}})
		if err == nil || !strings.Contains(err.Error(), "no etc/passwd for local") {
			t.Errorf("blocked call: %v", err)
		}
		if st := h.gw.Status(nil).Plugins; len(st) != 1 || !st[0].Up {
			t.Errorf("status plugins = %+v", st)
		}
	})

	t.Run("decisions in the audit record", func(t *testing.T) {
		sink := newAuditSink(t, config.ArgumentsNone)
		gw := newRawGateway(t, &Options{Audit: sink.log}, withPlugin, rawSpec{name: "alpha", server: demo.NewServer("alpha", nil)})
		c := serveStdioLines(t, gw, "2025-11-25", `{}`)
		c.call("1", callLine("1", "alpha__echo", `{"message":"a secret"}`))
		c.call("2", callLine("2", "alpha__echo", `{"message":"/etc/passwd"}`))
		recs := sink.records(t)
		if len(recs) != 2 {
			t.Fatalf("records = %v", recs)
		}
		got := fmt.Sprint(recs[0]["plugins"], " ", recs[1]["plugins"])
		for _, want := range []string{"action:modify", "counts:map[word:1]", "hook:tool_post_call", "action:block", "rule:test", "hook:tool_pre_call", "plugin:tp"} {
			if !strings.Contains(got, want) {
				t.Errorf("plugins in the records = %s; want %s", got, want)
			}
		}
	})

	t.Run("uncovered calls are untouched", func(t *testing.T) {
		q := p
		q.Match.Servers = []string{"other"}
		gw := newRawGateway(t, nil, func(c *config.Config) { c.Plugins = []config.Plugin{q} }, rawSpec{name: "alpha", server: demo.NewServer("alpha", nil)})
		c := serveStdioLines(t, gw, "2025-11-25", `{}`)
		if got := firstText(t, c.call("1", callLine("1", "alpha__echo", `{"message":"my secret"}`))); got != "my secret" {
			t.Errorf("uncovered call = %q; want it unchanged", got)
		}
	})
}

// TestPluginCallsAuditAlikeOnBothPaths: a call a pre-hook rewrote is audited with the
// arguments the client sent, and a call a pre-hook answered with a tool error has the outcome
// tool_error, on the raw path as on the SDK path. Before, the raw path recorded the plugin's
// arguments and "ok".
func TestPluginCallsAuditAlikeOnBothPaths(t *testing.T) {
	p := buildTestPlugin(t, `{"rewrite":"rewrite-me","answer":"answer-me"}`)
	withPlugin := func(c *config.Config) { c.Plugins = []config.Plugin{p} }
	records := map[string][]map[string]any{}

	sink := newAuditSink(t, config.ArgumentsFull)
	gw := newRawGateway(t, &Options{Audit: sink.log}, withPlugin, rawSpec{name: "alpha", server: demo.NewServer("alpha", nil)})
	c := serveStdioLines(t, gw, "2025-11-25", `{}`)
	before := rawCount(gw)
	if got := firstText(t, c.call("1", callLine("1", "alpha__echo", `{"message":"rewrite-me"}`))); got != "rewritten" {
		t.Errorf("raw path: the rewritten call echoed %q", got)
	}
	c.call("2", callLine("2", "alpha__echo", `{"message":"answer-me"}`))
	if n := rawCount(gw) - before; n != 2 {
		t.Fatalf("the raw path served %d calls, want 2", n)
	}
	records["raw"] = sink.records(t)

	sink = newAuditSink(t, config.ArgumentsFull)
	h := newHarnessOpts(t, &Options{Audit: sink.log}, withPlugin, upstreamSpec{name: "alpha", demoName: "alpha"})
	for _, msg := range []string{"rewrite-me", "answer-me"} {
		if _, err := h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": msg}}); err != nil {
			t.Fatal(err)
		}
	}
	settled(t, h.gw)
	records["sdk"] = sink.records(t)

	for path, recs := range records {
		if len(recs) != 2 {
			t.Fatalf("%s: %d records, want 2: %v", path, len(recs), recs)
		}
		if args := fmt.Sprint(recs[0]["arguments"]); !strings.Contains(args, "rewrite-me") {
			t.Errorf("%s: the rewritten call is audited with arguments %s, want the client's", path, args)
		}
		if out := recs[1]["outcome"]; out != "tool_error" {
			t.Errorf("%s: the call the plugin answered with a tool error has outcome %v, want tool_error", path, out)
		}
	}
}
