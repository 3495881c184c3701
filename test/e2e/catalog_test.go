package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// everythingPath is server-everything's entry point.
func everythingPath() string {
	return filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
}

// overridesConfig is the overrides example in front of
// server-everything, under a policy that denies one tool.
func overridesConfig(t *testing.T, rule string) string {
	return writeConfig(t, fmt.Sprintf(`
mcpServers:
  everything:
    command: node
    args: [%q, stdio]
    tools:
      echo:    { rename: say, description: "Repeat a message back." }
      get-env: { hide: true }
      get-sum: { title: Sum, annotations: { readOnlyHint: true } }
policy:
  default: allow
  rules:
    - { name: no-images, deny: { tools: [%q] } }
`, everythingPath(), rule))
}

// tool finds a tool by name in a listTools step's items.
func tool(items []map[string]any, name string) map[string]any {
	for _, it := range items {
		if it["name"] == name {
			return it
		}
	}
	return nil
}

// TestOverridesAcceptance is acceptance 1 of issue 16: rename, description
// and hide on server-everything's tools are what a TS-SDK client sees, over
// HTTP and stdio, and calls route to the upstream's own names; policy
// explain and validate speak of the renamed names.
func TestOverridesAcceptance(t *testing.T) {
	requireNode(t)
	cfg := overridesConfig(t, "everything__get-tiny-image")
	g := startGateway(t, "--config", cfg)
	waitForTool(t, g, "everything__say")

	for _, ds := range []struct {
		name string
		args []string
	}{
		{"http", []string{"--transport", "http", "--url", g.url("/mcp")}},
		{"stdio", stdioArgs(binary, "serve", "--stdio", "--config", cfg)},
	} {
		t.Run(ds.name, func(t *testing.T) {
			out := runNodeClient(t, ds.args, []nodeStep{
				{"op": "until", "step": map[string]any{"op": "listTools"}, "contains": "everything__say", "timeoutMs": 20000},
				{"op": "listTools"},
				{"op": "callTool", "name": "everything__say", "arguments": map[string]any{"message": "hi"}},
				{"op": "callTool", "name": "everything__echo", "arguments": map[string]any{"message": "hi"}},
				{"op": "callTool", "name": "everything__get-env", "arguments": map[string]any{}},
				{"op": "callTool", "name": "everything__get-sum", "arguments": map[string]any{"a": 2, "b": 3}},
				{"op": "callTool", "name": "everything__get-tiny-image", "arguments": map[string]any{}},
			})
			items := out.Steps[1].items(t)
			say := tool(items, "everything__say")
			if say == nil || say["description"] != "Repeat a message back." {
				t.Errorf("everything__say = %v, want the renamed echo with the new description", say)
			}
			for _, gone := range []string{"everything__echo", "everything__get-env", "everything__get-tiny-image"} {
				if tool(items, gone) != nil {
					t.Errorf("%s is listed", gone)
				}
			}
			sum := tool(items, "everything__get-sum")
			ann, _ := sum["annotations"].(map[string]any)
			if sum == nil || sum["title"] != "Sum" || ann["readOnlyHint"] != true {
				t.Errorf("everything__get-sum = %v, want title Sum and readOnlyHint", sum)
			}
			mustContain(t, "everything__say", callText(t, out.Steps[2]), "hi")
			mustContain(t, "everything__get-sum", callText(t, out.Steps[5]), "5")
			for i, name := range map[int]string{3: "everything__echo", 4: "everything__get-env", 6: "everything__get-tiny-image"} {
				r := out.Steps[i]
				if r.OK || r.Error == nil || !strings.Contains(r.Error.Message, `unknown tool "`+name+`"`) {
					t.Errorf("%s: %s %+v, want unknown tool", name, r.Result, r.Error)
				}
			}
		})
	}

	// /status shows the overrides in force.
	resp, err := http.Get(g.url("/status"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Catalog struct {
			Overrides []struct{ Server, Kind, Upstream, Exposed string }
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || !slices.Contains(st.Catalog.Overrides, struct{ Server, Kind, Upstream, Exposed string }{"everything", "tool", "echo", "everything__say"}) {
		t.Errorf("status catalog = %+v (%v), want echo shown as everything__say", st.Catalog, err)
	}

	// policy explain decides on the names clients see.
	for _, tc := range []struct {
		tool     string
		code     int
		contains []string
	}{
		{"everything__say", 0, []string{"decision   allow", `upstream   tool "echo" of server everything, renamed (mcpServers.everything.tools.echo.rename)`}},
		{"everything__echo", 1, []string{"decision   deny", "renamed to everything__say; clients never see this name"}},
		{"everything__get-env", 1, []string{"decision   deny", "mcpServers.everything.tools.get-env.hide"}},
		{"everything__get-tiny-image", 1, []string{"decision   deny", "no-images"}},
	} {
		cmd := exec.Command(binary, "policy", "explain", "--config", cfg, "--principal", "local", "--tool", tc.tool)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != tc.code {
			t.Errorf("explain %s: exit %d, want %d\n%s", tc.tool, code, tc.code, out)
		}
		mustContain(t, "explain "+tc.tool, string(out), tc.contains...)
	}

	// A rule written for the old name would not apply: validate says so.
	escaped := overridesConfig(t, "everything__echo")
	cmd := exec.Command(binary, "validate", "--config", escaped)
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("validate of a rule the rename escapes: exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}
	mustContain(t, "validate", string(out), "policy.rules[0].deny.tools[0]", `before its rename`, `"everything__say"`)
}

// TestToolsetAcceptance is acceptance 4 of issue 16: a TS-SDK client on
// /mcp/dev lists exactly the toolset's tools minus what the policy denies,
// gets list_changed when an upstream in it changes, and calls outside it
// are unknown names; /mcp stays the whole catalog; SSE and stdio serve the
// same toolset.
func TestToolsetAcceptance(t *testing.T) {
	requireNode(t)
	up := startHTTPUpstream(t)
	cfg := writeConfig(t, fmt.Sprintf(`
mcpServers:
  everything:
    command: node
    args: [%q, stdio]
  grow:
    type: http
    url: %s/grow/mcp
  demo:
    command: %q
    args: [demo-server]
toolsets:
  dev:     { servers: [everything, grow], tools: ["!*__get-env", "!*__trigger-*"] }
  support: { tools: ["demo__echo"], prompts: [], resources: [] }
policy:
  default: allow
  rules:
    - { deny: { tools: ["everything__get-sum"] } }
`, everythingPath(), up.url, binary))
	g := startGateway(t, "--config", cfg)
	waitForTool(t, g, "everything__get-roots-list") // server-everything's tools for capable clients are in

	whole := runNodeClient(t, []string{"--transport", "http", "--url", g.url("/mcp")}, []nodeStep{{"op": "listTools"}})
	all := names(whole.Steps[0].items(t), "name")
	var want []string
	for _, n := range all {
		inServers := strings.HasPrefix(n, "everything__") || strings.HasPrefix(n, "grow__")
		if inServers && n != "everything__get-env" && !strings.HasPrefix(n, "everything__trigger-") {
			want = append(want, n)
		}
	}
	if !slices.Contains(all, "demo__echo") || !slices.Contains(all, "everything__trigger-sampling-request") || slices.Contains(all, "everything__get-sum") {
		t.Fatalf("the whole catalog on /mcp = %v", all)
	}

	out := runNodeClient(t, []string{"--transport", "http", "--url", g.url("/mcp/dev")}, []nodeStep{
		{"op": "listTools"}, // 0
		{"op": "callTool", "name": "grow__grow", "arguments": map[string]any{}},                                     // 1
		{"op": "waitNotification", "method": "notifications/tools/list_changed", "since": 1, "timeoutMs": 20000},    // 2
		{"op": "until", "step": map[string]any{"op": "listTools"}, "contains": "grow__grown-1", "timeoutMs": 20000}, // 3
		{"op": "callTool", "name": "demo__echo", "arguments": map[string]any{"message": "x"}},                       // 4
		{"op": "callTool", "name": "everything__get-env", "arguments": map[string]any{}},                            // 5
		{"op": "callTool", "name": "everything__get-sum", "arguments": map[string]any{"a": 1, "b": 2}},              // 6
		{"op": "callTool", "name": "everything__trigger-sampling-request", "arguments": map[string]any{}},           // 7
		{"op": "callTool", "name": "everything__echo", "arguments": map[string]any{"message": "in dev"}},            // 8
		{"op": "callTool", "name": "grow__grown-1", "arguments": map[string]any{}},                                  // 9
	})
	if got := names(out.Steps[0].items(t), "name"); !slices.Equal(got, want) {
		t.Errorf("tools on /mcp/dev:\n got %v\nwant %v", got, want)
	}
	if !out.Steps[2].OK {
		t.Errorf("no tools/list_changed on /mcp/dev after grow added a tool: %+v", out.Steps[2].Error)
	}
	for i, name := range map[int]string{4: "demo__echo", 5: "everything__get-env", 6: "everything__get-sum", 7: "everything__trigger-sampling-request"} {
		r := out.Steps[i]
		if r.OK || r.Error == nil || !strings.Contains(r.Error.Message, `unknown tool "`+name+`"`) {
			t.Errorf("%s on /mcp/dev: %s %+v, want unknown tool", name, r.Result, r.Error)
		}
	}
	mustContain(t, "everything__echo on /mcp/dev", callText(t, out.Steps[8]), "in dev")
	mustContain(t, "grow__grown-1 on /mcp/dev", callText(t, out.Steps[9]), "grown-1")

	// The same toolset over SSE and stdio; another toolset; an unknown one.
	want = append(want, "grow__grown-1")
	slices.Sort(want)
	for _, ds := range []struct {
		name, toolset string
		args          []string
		want          []string
	}{
		{"sse", "dev", []string{"--transport", "sse", "--url", g.url("/sse/dev")}, want},
		{"stdio", "dev", stdioArgs(binary, "serve", "--stdio", "--toolset", "dev", "--config", cfg), nil},
		{"http support", "support", []string{"--transport", "http", "--url", g.url("/mcp/support")}, []string{"demo__echo"}},
	} {
		out := runNodeClient(t, ds.args, []nodeStep{
			{"op": "until", "step": map[string]any{"op": "listTools"}, "contains": "__", "timeoutMs": 20000},
			{"op": "listTools"},
			{"op": "callTool", "name": "demo__echo", "arguments": map[string]any{"message": "x"}},
		})
		got := names(out.Steps[1].items(t), "name")
		if ds.want != nil && !slices.Equal(got, ds.want) {
			t.Errorf("%s: tools\n got %v\nwant %v", ds.name, got, ds.want)
		}
		if ds.want == nil && (slices.Contains(got, "demo__echo") || slices.Contains(got, "everything__get-env") || !slices.Contains(got, "everything__echo")) {
			t.Errorf("%s: tools = %v, want dev's", ds.name, got)
		}
		if inToolset := slices.Contains(ds.want, "demo__echo"); out.Steps[2].OK != inToolset {
			t.Errorf("%s: demo__echo ok=%v, want %v", ds.name, out.Steps[2].OK, inToolset)
		}
	}
	for _, path := range []string{"/mcp/nope", "/sse/nope"} {
		resp, err := http.Post(g.url(path), "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s = %d, want 404", path, resp.StatusCode)
		}
	}
	cmd := exec.Command(binary, "serve", "--stdio", "--toolset", "nope", "--config", cfg)
	if out, _ := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), `no such toolset (toolsets: dev, support)`) {
		t.Errorf("serve --stdio --toolset nope: exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}
}
