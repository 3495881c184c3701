package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestProgressiveDiscoveryNode: the real binary fronting server-everything
// with progressive discovery, driven by a host-like TypeScript SDK client
// (client.mjs's discover op: the SDK's listTools and callTool). The client
// lists the meta-tools (and the always tool), searches in plain words,
// describes the first hit and calls it through the call meta-tool; the
// call reaches server-everything and the audit log records it under the
// tool's real name.
func TestProgressiveDiscoveryNode(t *testing.T) {
	requireNode(t)
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := writeConfig(t, everythingServer()+fmt.Sprintf(`
gateway:
  timeouts: { call: 30s }
  discovery:
    mode: progressive
    always: ["everything__get-sum"]
audit: { file: %q }
`, auditFile))
	g := startGateway(t, "--config", cfg)
	waitForTool(t, g, "everything__get-sum") // listed (always): server-everything's catalog is merged

	out := runNodeClient(t, []string{"--transport", "http", "--url", g.url("/mcp")}, []nodeStep{{
		"op": "discover", "search": "manifold_search_tools", "describe": "manifold_describe_tool", "call": "manifold_call_tool",
		"query": "repeat my text back to me", "arguments": map[string]any{"message": "hello through discovery"},
	}})
	step := out.Steps[0]
	if !step.OK {
		t.Fatalf("discover: %+v", step.Error)
	}
	var got struct {
		Listed   []string `json:"listed"`
		Hits     []string `json:"hits"`
		Picked   string   `json:"picked"`
		Describe struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"describe"`
		Call struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"call"`
	}
	if err := json.Unmarshal(step.Result, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"everything__get-sum", "manifold_call_tool", "manifold_describe_tool", "manifold_search_tools"}
	if !slices.Equal(got.Listed, want) {
		t.Errorf("listed %v, want %v", got.Listed, want)
	}
	if got.Picked != "everything__echo" {
		t.Fatalf("search for %q: hits %v, want everything__echo first", "repeat my text back to me", got.Hits)
	}
	if got.Describe.StructuredContent["inputSchema"] == nil {
		t.Errorf("describe: %v, want the input schema", got.Describe.StructuredContent)
	}
	if got.Call.IsError || len(got.Call.Content) == 0 || !strings.Contains(got.Call.Content[0].Text, "hello through discovery") {
		t.Errorf("call: %+v, want the echo", got.Call)
	}

	g.stop(t)
	b, err := os.ReadFile(auditFile)
	if err != nil {
		t.Fatal(err)
	}
	var echoed bool
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if rec["name"] == "manifold_call_tool" {
			t.Errorf("audit record under the meta-tool's name: %s", line)
		}
		if rec["name"] == "everything__echo" && rec["server"] == "everything" && rec["upstream_name"] == "echo" && rec["outcome"] == "ok" {
			echoed = true
		}
	}
	if !echoed {
		t.Errorf("no audit record of everything__echo; audit:\n%s", b)
	}
}

// everythingServer is the mcpServers section fronting server-everything
// (stdio, npm) as "everything".
func everythingServer() string {
	return fmt.Sprintf("mcpServers:\n  everything:\n    command: node\n    args: [%q, stdio]\n",
		filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
}
