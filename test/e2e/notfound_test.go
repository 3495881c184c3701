package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	everythingURI = "manifold://everything/demo://resource/"
	blobTemplate  = everythingURI + "dynamic/blob/{resourceId}"
)

// notFoundConfig fronts server-everything and denies everyone one of each
// kind of name.
func notFoundConfig(t *testing.T) string {
	everything := filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	return writeConfig(t, fmt.Sprintf(`
mcpServers:
  everything:
    command: node
    args: [%q, stdio]
policy:
  default: allow
  rules:
    - deny:
        tools: [everything__echo]
        prompts: [everything__simple-prompt, everything__completable-prompt]
        resources: [%q, %q]
        templates: [%q]
`, everything, everythingURI+"static/document/architecture.md", everythingURI+"dynamic/blob/*", blobTemplate))
}

// nameProbe asks one method about a denied name and about names that do
// not exist: unrouted, or routed to server-everything, which answers in
// its own words (-32602 "MCP error -32602: Resource … not found", -32603
// "Unknown resource: …", its SDK's "Prompt … not found").
type nameProbe struct {
	method  string
	step    func(name string) nodeStep
	denied  string
	missing []string
}

var nameProbes = []nameProbe{
	{method: "tools/call", step: func(n string) nodeStep { return nodeStep{"op": "callTool", "name": n} },
		denied: "everything__echo", missing: []string{"everything__nope", "nobody__echo"}},
	{method: "prompts/get", step: func(n string) nodeStep { return nodeStep{"op": "getPrompt", "name": n} },
		denied: "everything__simple-prompt", missing: []string{"everything__nope"}},
	{method: "resources/read", step: func(n string) nodeStep { return nodeStep{"op": "readResource", "uri": n} },
		denied: everythingURI + "static/document/architecture.md", missing: []string{
			everythingURI + "static/document/nope.md", everythingURI + "dynamic/text/abc", everythingURI + "dynamic/text/0",
			everythingURI + "dynamic/blob/1", "manifold://nobody/x"}},
	{method: "resources/subscribe", step: func(n string) nodeStep { return nodeStep{"op": "subscribeResource", "uri": n} },
		denied: everythingURI + "static/document/architecture.md", missing: []string{
			everythingURI + "static/document/nope.md", everythingURI + "dynamic/text/abc", "manifold://nobody/x"}},
	{method: "completion/complete prompt", step: func(n string) nodeStep {
		return nodeStep{"op": "complete", "ref": map[string]any{"type": "ref/prompt", "name": n}, "argument": map[string]any{"name": "department", "value": ""}}
	}, denied: "everything__completable-prompt", missing: []string{"everything__nope"}},
	{method: "completion/complete template", step: func(n string) nodeStep {
		return nodeStep{"op": "complete", "ref": map[string]any{"type": "ref/resource", "uri": n}, "argument": map[string]any{"name": "resourceId", "value": "1"}}
	}, denied: blobTemplate, missing: []string{everythingURI + "dynamic/nope/{resourceId}", "manifold://everything/demo://nope/{x}"}},
}

// withoutName is the JSON of v with name replaced by NAME.
func withoutName(t *testing.T, v any, name string) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	quoted, _ := json.Marshal(name)
	return strings.ReplaceAll(string(b), string(quoted[1:len(quoted)-1]), "NAME")
}

// TestDeniedAndMissingNamesLookAlike: through the built gateway in front of
// server-everything, a denied name and names that do not exist get
// byte-identical answers (code, message and data, but for the name) for
// every method that takes a name, over the TypeScript SDK on 2024-11-05
// and 2025-11-25 and the go-sdk on 2026-07-28.
func TestDeniedAndMissingNamesLookAlike(t *testing.T) {
	requireNode(t)
	g := startGateway(t, "--config", notFoundConfig(t))
	waitForTool(t, g, "everything__get-env")

	for _, version := range []string{"2024-11-05", "2025-11-25"} {
		var steps []nodeStep
		for _, p := range nameProbes {
			for _, n := range append([]string{p.denied}, p.missing...) {
				steps = append(steps, p.step(n))
			}
		}
		out := runNodeClient(t, []string{"--transport", "http", "--url", g.url("/mcp"), "--protocol-version", version}, steps)
		i := 0
		for _, p := range nameProbes {
			answer := func(name string) string {
				s := out.Steps[i]
				i++
				if s.OK {
					return "result " + withoutName(t, s.Result, name)
				}
				return "error " + withoutName(t, s.Error, name)
			}
			want := answer(p.denied)
			if p.method != "resources/subscribe" && !strings.HasPrefix(want, "error ") {
				t.Errorf("%s %s: the denied %s was answered: %s", version, p.method, p.denied, want)
			}
			for _, n := range p.missing {
				if got := answer(n); got != want {
					t.Errorf("%s %s: %s answers\n  %s\nthe denied %s\n  %s", version, p.method, n, got, p.denied, want)
				}
			}
		}
	}

	// 2026-07-28 (no resources/subscribe: its clients use subscriptions/listen).
	ctx := ctxT(t, 60*time.Second)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-notfound"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: g.url("/mcp")}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ProtocolVersion; got != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", got)
	}
	for _, p := range nameProbes {
		if p.method == "resources/subscribe" {
			continue
		}
		answer := func(name string) string {
			err := askGo(ctx, cs, p.step(name))
			rpcErr, ok := mcpx.AsRPCError(err)
			if !ok {
				return fmt.Sprintf("not a JSON-RPC error: %v", err)
			}
			return withoutName(t, rpcErr, name)
		}
		want := answer(p.denied)
		for _, n := range p.missing {
			if got := answer(n); got != want {
				t.Errorf("2026-07-28 %s: %s answers\n  %s\nthe denied %s\n  %s", p.method, n, got, p.denied, want)
			}
		}
	}
}

// askGo sends the request of a client.mjs step with the go-sdk client.
func askGo(ctx context.Context, cs *mcp.ClientSession, s nodeStep) error {
	var err error
	switch s["op"] {
	case "callTool":
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: s["name"].(string)})
	case "getPrompt":
		_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: s["name"].(string)})
	case "readResource":
		_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: s["uri"].(string)})
	case "complete":
		ref, arg := s["ref"].(map[string]any), s["argument"].(map[string]any)
		r := &mcp.CompleteReference{Type: ref["type"].(string)}
		r.Name, _ = ref["name"].(string)
		r.URI, _ = ref["uri"].(string)
		_, err = cs.Complete(ctx, &mcp.CompleteParams{Ref: r, Argument: mcp.CompleteParamsArgument{Name: arg["name"].(string), Value: arg["value"].(string)}})
	default:
		return fmt.Errorf("askGo: op %v", s["op"])
	}
	return err
}
