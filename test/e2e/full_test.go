package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startFixtureHTTP runs the Go fixture (the demo server) over streamable
// HTTP and returns its base URL.
func startFixtureHTTP(t *testing.T, name string) string {
	t.Helper()
	cmd := exec.Command(binary, "demo-server", "--name", name, "--http", "127.0.0.1:0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if _, addr, ok := strings.Cut(sc.Text(), "listening on "); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return strings.TrimSpace(addr)
		}
	}
	t.Fatal("fixture did not report its address")
	return ""
}

// npmServers is the mcpServers section fronting server-everything and
// server-memory (stdio, npm), the latter storing into memoryFile.
func npmServers(memoryFile string) string {
	nm := filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol")
	return fmt.Sprintf(`
mcpServers:
  everything:
    command: node
    args: [%q, stdio]
  memory:
    command: node
    args: [%q]
    env: { MEMORY_FILE_PATH: %q }
    autoApprove: [read_graph]   # a host-only key: ignored
`, filepath.Join(nm, "server-everything", "dist", "index.js"), filepath.Join(nm, "server-memory", "dist", "index.js"), memoryFile)
}

// fullConfig fronts the npm servers and the Go fixture over streamable HTTP.
func fullConfig(t *testing.T, fixtureURL string) string {
	return writeConfig(t, npmServers(filepath.Join(t.TempDir(), "memory.jsonl"))+fmt.Sprintf(`
  fixture:
    type: http
    url: %s/mcp
gateway:
  timeouts: { call: 20s }
`, fixtureURL))
}

// inventory is what one upstream offers when asked directly: names, and
// the raw items by name for fidelity checks.
type inventory struct {
	tools, prompts, resources, templates []string
	raw                                  [4]map[string]map[string]any
}

// gatewayClientCapabilities are the client capabilities the gateway
// declares to its upstreams (gateway.upstreamCapabilities): a direct
// listing must declare the same, since servers such as server-everything
// offer some tools only to capable clients.
const gatewayClientCapabilities = `{"sampling":{"tools":{}},"elicitation":{"form":{},"url":{}},"roots":{}}`

func listDirect(t *testing.T, args []string) inventory {
	t.Helper()
	args = append([]string{"--capabilities", gatewayClientCapabilities}, args...)
	out := runNodeClient(t, args, []nodeStep{
		{"op": "waitNotification", "method": "notifications/tools/list_changed", "timeoutMs": 1500},
		{"op": "listTools"}, {"op": "listPrompts"}, {"op": "listResources"}, {"op": "listResourceTemplates"},
	})
	var inv inventory
	for i, dst := range []*[]string{&inv.tools, &inv.prompts, &inv.resources, &inv.templates} {
		r := out.Steps[i+1]
		if !r.OK {
			continue // e.g. server-memory has no prompts
		}
		key := []string{"name", "name", "uri", "uriTemplate"}[i]
		*dst = names(r.items(t), key)
		inv.raw[i] = map[string]map[string]any{}
		for _, it := range r.items(t) {
			inv.raw[i][fmt.Sprint(it[key])] = it
		}
	}
	return inv
}

// TestFullConfig is acceptance 3 of the core issue.
func TestFullConfig(t *testing.T) {
	requireNode(t)
	fixtureURL := startFixtureHTTP(t, "fixture")
	cfgPath := fullConfig(t, fixtureURL)
	nm := filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol")

	// What each upstream offers directly; the gateway must show all of it,
	// once, under its namespace.
	want := map[string]inventory{
		"everything": listDirect(t, stdioArgs("node", filepath.Join(nm, "server-everything", "dist", "index.js"), "stdio")),
		"memory":     listDirect(t, stdioArgs("node", filepath.Join(nm, "server-memory", "dist", "index.js"))),
		"fixture":    listDirect(t, []string{"--transport", "http", "--url", fixtureURL + "/mcp"}),
	}
	if len(want["everything"].tools) < 10 || len(want["memory"].tools) < 5 || len(want["fixture"].tools) < 5 {
		t.Fatalf("direct inventories look wrong: %+v", want)
	}

	g := startGateway(t, "--config", cfgPath)
	waitForTool(t, g, "everything__echo")

	downstreams := []struct {
		name string
		args []string
	}{
		{"http", []string{"--transport", "http", "--url", g.url("/mcp")}},
		{"sse", []string{"--transport", "sse", "--url", g.url("/sse")}},
		{"stdio", stdioArgs(binary, "serve", "--stdio", "--config", cfgPath)},
	}
	for _, ds := range downstreams {
		t.Run(ds.name, func(t *testing.T) {
			steps := []nodeStep{
				{"op": "waitNotification", "method": "notifications/tools/list_changed", "timeoutMs": 3000},
				{"op": "listTools"}, {"op": "listPrompts"}, {"op": "listResources"}, {"op": "listResourceTemplates"},
				{"op": "callTool", "name": "everything__echo", "arguments": map[string]any{"message": "hi"}},                                                                              // 5
				{"op": "callTool", "name": "everything__get-tiny-image", "arguments": map[string]any{}},                                                                                   // 6
				{"op": "callTool", "name": "fixture__add", "arguments": map[string]any{"a": 1, "b": 2}},                                                                                   // 7
				{"op": "callTool", "name": "fixture__fail", "arguments": map[string]any{}},                                                                                                // 8
				{"op": "callTool", "name": "memory__read_graph", "arguments": map[string]any{}},                                                                                           // 9
				{"op": "getPrompt", "name": "everything__simple-prompt", "arguments": map[string]any{}},                                                                                   // 10
				{"op": "getPrompt", "name": "fixture__greet", "arguments": map[string]any{"person": "Ada"}},                                                                               // 11
				{"op": "readResource", "uri": "manifold://fixture/demo://fixture/readme"},                                                                                                 // 12
				{"op": "readResource", "uri": "manifold://fixture/demo://fixture/items/42"},                                                                                               // 13
				{"op": "callTool", "name": "fixture__link", "arguments": map[string]any{}},                                                                                                // 14
				{"op": "readResource", "uri": "manifold://fixture/demo://fixture/readme"},                                                                                                 // 15 (the link's URI, checked below)
				{"op": "callTool", "name": "everything__get-resource-links", "arguments": map[string]any{"count": 2}},                                                                     // 16
				{"op": "readResource", "uri": "manifold://everything/demo://resource/dynamic/text/2"},                                                                                     // 17
				{"op": "complete", "ref": map[string]any{"type": "ref/prompt", "name": "fixture__greet"}, "argument": map[string]any{"name": "person", "value": "ca"}},                    // 18
				{"op": "complete", "ref": map[string]any{"type": "ref/prompt", "name": "everything__completable-prompt"}, "argument": map[string]any{"name": "department", "value": "E"}}, // 19
				{"op": "callTool", "name": "nope__echo", "arguments": map[string]any{}},                                                                                                   // 20
			}
			if ds.name == "stdio" {
				steps[0]["timeoutMs"] = 8000 // the gateway starts its own upstreams
			}
			out := runNodeClient(t, ds.args, steps)
			for i, s := range out.Steps[1:20] {
				if !s.OK {
					t.Errorf("step %d (%s) failed: %+v", i+1, s.Op, s.Error)
				}
			}
			if t.Failed() {
				t.FailNow()
			}
			// Merged lists: every upstream item exactly once, namespaced.
			lists := []struct {
				kind string
				key  string
				got  []string
				want func(inventory) []string
				wrap func(server, name string) string
			}{
				{"tools", "name", names(out.Steps[1].items(t), "name"), func(i inventory) []string { return i.tools }, func(s, n string) string { return s + "__" + n }},
				{"prompts", "name", names(out.Steps[2].items(t), "name"), func(i inventory) []string { return i.prompts }, func(s, n string) string { return s + "__" + n }},
				{"resources", "uri", names(out.Steps[3].items(t), "uri"), func(i inventory) []string { return i.resources }, func(s, n string) string { return "manifold://" + s + "/" + n }},
				{"templates", "uriTemplate", names(out.Steps[4].items(t), "uriTemplate"), func(i inventory) []string { return i.templates }, func(s, n string) string { return "manifold://" + s + "/" + n }},
			}
			for _, l := range lists {
				var expected []string
				for server, inv := range want {
					for _, n := range l.want(inv) {
						expected = append(expected, l.wrap(server, n))
					}
				}
				slices.Sort(expected)
				got := slices.Clone(l.got)
				slices.Sort(got)
				if !slices.Equal(got, expected) {
					t.Errorf("%s: got %d, want %d\n got: %v\nwant: %v", l.kind, len(got), len(expected), got, expected)
				}
				if l.kind == "tools" {
					for _, n := range got {
						if !toolNameRE.MatchString(n) {
							t.Errorf("tool name %q does not match %s", n, toolNameRE)
						}
					}
				}
			}
			checkFidelity(t, want, out)
			expectJSON(t, out.Steps[5], `"text":"Echo: hi"`)
			expectJSON(t, out.Steps[6], `"type":"image"`, `"mimeType":"image/png"`)
			expectJSON(t, out.Steps[7], `"structuredContent":{"sum":3}`)
			expectJSON(t, out.Steps[8], `"isError":true`, `demo failure`)
			expectJSON(t, out.Steps[9], `"entities"`)
			expectJSON(t, out.Steps[10], `"messages"`)
			expectJSON(t, out.Steps[11], `Say hello to Ada from fixture`)
			expectJSON(t, out.Steps[12], `"uri":"manifold://fixture/demo://fixture/readme"`, `fixture`)
			expectJSON(t, out.Steps[13], `item 42 from fixture`)
			expectJSON(t, out.Steps[14], `"type":"resource_link"`, `"uri":"manifold://fixture/demo://fixture/readme"`, `"uri":"manifold://fixture/demo://fixture/items/7"`)
			expectJSON(t, out.Steps[15], `"uri":"manifold://fixture/demo://fixture/readme"`)
			expectJSON(t, out.Steps[16], `"uri":"manifold://everything/demo://resource/dynamic/text/2"`)
			expectJSON(t, out.Steps[17], `"uri":"manifold://everything/demo://resource/dynamic/text/2"`)
			expectJSON(t, out.Steps[18], `"carol"`)
			expectJSON(t, out.Steps[19], `"Engineering"`)
			if s := out.Steps[20]; s.OK || s.Error == nil || s.Error.Code != -32602 || !strings.Contains(s.Error.Message, "nope__echo") {
				t.Errorf("unknown tool: %+v", s)
			}
			if out.ServerInfo["name"] != "manifold" {
				t.Errorf("serverInfo = %v", out.ServerInfo)
			}
		})
	}

	// The go-sdk client over HTTP too, at the newest protocol.
	t.Run("go-sdk 2026-07-28", func(t *testing.T) {
		ctx := ctxT(t, 30*time.Second)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url("/mcp")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
			t.Errorf("negotiated %s", v)
		}
		for _, name := range []string{"everything__get-sum", "fixture__add"} {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"a": 2, "b": 5}})
			if err != nil || res.IsError {
				t.Fatalf("%s: %v %+v", name, err, res)
			}
			b, _ := json.Marshal(res)
			if !strings.Contains(string(b), "7") {
				t.Errorf("%s = %s", name, b)
			}
		}
	})
}

// expectJSON checks that a step succeeded and its raw result contains each
// fragment.
func expectJSON(t *testing.T, r nodeResult, fragments ...string) {
	t.Helper()
	if !r.OK {
		t.Errorf("%s failed: %+v", r.Op, r.Error)
		return
	}
	s := string(r.Result)
	for _, f := range fragments {
		if !strings.Contains(s, f) {
			t.Errorf("%s result lacks %s:\n%s", r.Op, f, s)
		}
	}
}

// waitForTool polls tools/list through the gateway until name appears
// (upstreams such as server-everything register tools after initialize).
func waitForTool(t *testing.T, g *gatewayProc, name string) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-wait"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url("/mcp")}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for {
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range lt.Tools {
			if tool.Name == name {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("tool %s never appeared", name)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sdkLosses are fields that go-sdk v1.8.0's typed structs drop, so the
// gateway cannot pass them on: Tool has no "execution" (task support).
// If the SDK starts keeping one, checkFidelity fails: remove it here.
var sdkLosses = map[string][]string{"tool": {"execution"}}

// omitFalseRequired drops "required": false from prompt arguments: the SDK
// omits it, which means the same (false is the default).
func omitFalseRequired(args any) any {
	list, ok := args.([]any)
	if !ok {
		return args
	}
	out := make([]any, len(list))
	for i, a := range list {
		m, ok := a.(map[string]any)
		if !ok || m["required"] != false {
			out[i] = a
			continue
		}
		c := map[string]any{}
		for k, v := range m {
			if k != "required" {
				c[k] = v
			}
		}
		out[i] = c
	}
	return out
}

// checkFidelity compares every item the gateway lists with the upstream's
// own, apart from the name (or URI) the gateway rewrites and sdkLosses.
func checkFidelity(t *testing.T, want map[string]inventory, out nodeOutput) {
	t.Helper()
	kinds := []struct{ kind, key string }{{"tool", "name"}, {"prompt", "name"}, {"resource", "uri"}, {"template", "uriTemplate"}}
	for i, k := range kinds {
		for _, it := range out.Steps[i+1].items(t) {
			exposed := fmt.Sprint(it[k.key])
			var server, original string
			if k.key == "name" {
				server, original, _ = strings.Cut(exposed, "__")
			} else {
				rest, _ := strings.CutPrefix(exposed, "manifold://")
				server, original, _ = strings.Cut(rest, "/")
			}
			direct, ok := want[server].raw[i][original]
			if !ok {
				continue // reported by the list comparison
			}
			got := map[string]any{}
			for key, v := range it {
				got[key] = v
			}
			got[k.key] = original
			expected := map[string]any{}
			for key, v := range direct {
				expected[key] = v
			}
			for _, lost := range sdkLosses[k.kind] {
				delete(expected, lost)
			}
			if args, ok := expected["arguments"]; ok && k.kind == "prompt" {
				expected["arguments"] = omitFalseRequired(args)
			}
			g, _ := json.Marshal(got)
			d, _ := json.Marshal(expected)
			if string(g) != string(d) {
				t.Errorf("%s %s differs from the upstream's own:\n gateway: %s\n  direct: %s", k.kind, exposed, g, d)
			}
		}
	}
}
