package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestUpstreamNotFound(t *testing.T) {
	rpc := func(code int64, msg string) error {
		return fmt.Errorf("upstream %q: %w", "u", &jsonrpc.Error{Code: code, Message: msg})
	}
	tests := []struct {
		name string
		err  error
		kind nameKind
		of   string
		want bool
	}{
		{name: "go-sdk unknown tool", err: rpc(-32602, `unknown tool "echo"`), kind: kindTool, of: "echo", want: true},
		{name: "go-sdk unknown prompt", err: rpc(-32602, `unknown prompt "greet"`), kind: kindPrompt, of: "greet", want: true},
		{name: "go-sdk resource not found", err: rpc(-32602, "Resource not found"), kind: kindResource, of: "test://a", want: true},
		{name: "legacy resource code", err: rpc(-32002, "whatever"), kind: kindResource, of: "test://a", want: true},
		{name: "TypeScript tool", err: rpc(-32602, "MCP error -32602: Tool echo not found"), kind: kindTool, of: "echo", want: true},
		{name: "TypeScript prompt", err: rpc(-32602, "MCP error -32602: Prompt simple-prompt not found"), kind: kindPrompt, of: "simple-prompt", want: true},
		{name: "TypeScript resource", err: rpc(-32602, "MCP error -32602: Resource demo://x/nope.md not found"), kind: kindResource, of: "demo://x/nope.md", want: true},
		{name: "TypeScript template", err: rpc(-32602, "MCP error -32602: Resource template demo://nope/{x} not found"), kind: kindTemplate, of: "demo://nope/{x}", want: true},
		{name: "server-everything template read", err: rpc(-32603, "Unknown resource: demo://resource/dynamic/text/abc"), kind: kindResource, of: "demo://resource/dynamic/text/abc", want: true},
		{name: "case of the words", err: rpc(-32000, "UNKNOWN TOOL 'echo'"), kind: kindTool, of: "echo", want: true},

		{name: "another tool is unknown", err: rpc(-32602, `unknown tool "echo2"`), kind: kindTool, of: "echo", want: false},
		{name: "another tool, bare", err: rpc(-32603, "unknown tool echo2"), kind: kindTool, of: "echo", want: false},
		{name: "a longer URI is unknown", err: rpc(-32603, "Unknown resource: demo://x/12"), kind: kindResource, of: "demo://x/1", want: false},
		{name: "invalid arguments", err: rpc(-32602, "Input validation error: Invalid arguments for tool echo: field x not found"), kind: kindTool, of: "echo", want: false},
		{name: "a failing handler", err: rpc(-32603, "database unavailable"), kind: kindResource, of: "test://a", want: false},
		{name: "resource code on a tool", err: rpc(-32002, "Resource not found"), kind: kindTool, of: "echo", want: false},
		{name: "invalid params on a prompt", err: rpc(-32602, `prompt "greet": missing required argument "person"`), kind: kindPrompt, of: "greet", want: false},
		{name: "not a JSON-RPC error", err: errors.New(`unknown tool "echo"`), kind: kindTool, of: "echo", want: false},
		{name: "nil", err: nil, kind: kindTool, of: "echo", want: false},
		{name: "go-sdk not found naming the URI", err: fmt.Errorf("w: %w", &jsonrpc.Error{Code: -32602, Message: "Resource not found", Data: json.RawMessage(`{"uri":"test://a"}`)}), kind: kindResource, of: "test://a", want: true},
		{name: "not found naming another URI", err: fmt.Errorf("w: %w", &jsonrpc.Error{Code: -32002, Message: "Resource not found", Data: json.RawMessage(`{"uri":"test://b"}`)}), kind: kindResource, of: "test://a", want: false},
		{name: "empty name", err: rpc(-32602, "unknown tool "), kind: kindTool, of: "", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := upstreamNotFound(tt.err, tt.kind, tt.of); got != tt.want {
				t.Errorf("upstreamNotFound(%v, %d, %q) = %v, want %v", tt.err, tt.kind, tt.of, got, tt.want)
			}
		})
	}
}

// oddServer is an upstream whose items answer "not found" in the words of
// the SDKs and servers in the field:
//
//	tools     secret (denied); gone: the TypeScript SDK's tool error result;
//	          vanished: the go-sdk's error; other: says another tool is unknown; fail
//	prompts   secret (denied); gone: the TypeScript SDK's error
//	resources test://secret (denied); test://items/{id}: id x answers as
//	          server-everything, ts as the TypeScript SDK, boom fails;
//	          test://denied/{id} (denied); test://old/{id}, whose completion
//	          says it does not exist; others: the go-sdk's not found
//	subscribe test://nope: not found
func oddServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "odd"}, &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			switch ref := req.Params.Ref; {
			case ref.Type == "ref/prompt" && ref.Name == "gone":
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "MCP error -32602: Prompt gone not found"}
			case ref.Type == "ref/resource" && ref.URI == "test://old/{id}":
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "MCP error -32602: Resource template test://old/{id} not found"}
			}
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
		},
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			if req.Params.URI == "test://nope" {
				return mcp.ResourceNotFoundError(req.Params.URI)
			}
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	schema := map[string]any{"type": "object"}
	tool := func(name string, h mcp.ToolHandler) { s.AddTool(&mcp.Tool{Name: name, InputSchema: schema}, h) }
	tool("secret", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return textResult("secret"), nil
	})
	tool("gone", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "MCP error -32602: Tool gone not found"}}}, nil
	})
	tool("vanished", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `unknown tool "vanished"`}
	})
	tool("other", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `unknown tool "gone2"`}
	})
	tool("fail", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "boom", Data: json.RawMessage(`{"why":"test"}`)}
	})
	prompt := func(name string, h mcp.PromptHandler) { s.AddPrompt(&mcp.Prompt{Name: name}, h) }
	prompt("secret", func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{}}, nil
	})
	prompt("gone", func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "MCP error -32602: Prompt gone not found"}
	})
	read := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		switch strings.TrimPrefix(uri, "test://items/") {
		case "x":
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Unknown resource: " + uri}
		case "ts":
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "MCP error -32602: Resource " + uri + " not found"}
		case "boom":
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "database unavailable"}
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "content of " + uri}}}, nil
	}
	s.AddResource(&mcp.Resource{URI: "test://secret", Name: "secret"}, read)
	for _, tmpl := range []string{"test://items/{id}", "test://denied/{id}", "test://old/{id}"} {
		s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: tmpl, Name: tmpl}, read)
	}
	return s
}

// deniedOdd denies the local principal odd's secret tool, prompt and
// resource, and its denied template.
func deniedOdd(c *config.Config) {
	c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{{Effect: config.Deny, Match: config.Match{
		Tools:     []string{"f__secret"},
		Prompts:   []string{"f__secret"},
		Resources: []string{"manifold://f/test://secret", "manifold://f/test://denied/*"},
		Templates: []string{"manifold://f/test://denied/{id}"},
	}}}}
}

// wireError is err as the client got it, in JSON, with name replaced by
// NAME: two answers about different names compare equal when only the name
// differs.
func wireError(t *testing.T, err error, name string) string {
	t.Helper()
	if err == nil {
		return "no error"
	}
	rpcErr, ok := mcpx.AsRPCError(err)
	if !ok {
		t.Fatalf("not a JSON-RPC error: %v", err)
	}
	b, merr := json.Marshal(rpcErr)
	if merr != nil {
		t.Fatal(merr)
	}
	quoted, _ := json.Marshal(name)
	return strings.ReplaceAll(string(b), string(quoted[1:len(quoted)-1]), "NAME")
}

// TestDeniedAndMissingNamesAnswerAlike: for every method that takes a
// name, a denied name, one that routes nowhere and one the upstream says
// it does not have (in the words of the go-sdk, the TypeScript SDK or
// server-everything) get the same error object, but for the name; on every
// protocol version. Genuine upstream errors pass through.
func TestDeniedAndMissingNamesAnswerAlike(t *testing.T) {
	h := newHarnessWith(t, deniedOdd, upstreamSpec{name: "f", server: oddServer()})
	ctx := context.Background()
	type ask func(cs *mcp.ClientSession, name string) error
	callTool := func(cs *mcp.ClientSession, name string) error {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name})
		return err
	}
	getPrompt := func(cs *mcp.ClientSession, name string) error {
		_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name})
		return err
	}
	read := func(cs *mcp.ClientSession, uri string) error {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		return err
	}
	subscribe := func(cs *mcp.ClientSession, uri string) error {
		return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	}
	completePrompt := func(cs *mcp.ClientSession, name string) error {
		_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: name}, Argument: mcp.CompleteParamsArgument{Name: "a", Value: "x"}})
		return err
	}
	completeTemplate := func(cs *mcp.ClientSession, uri string) error {
		_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: uri}, Argument: mcp.CompleteParamsArgument{Name: "id", Value: "1"}})
		return err
	}
	tests := []struct {
		method   string
		ask      ask
		versions []string // "" = every version
		denied   string
		missing  []string
	}{
		{method: "tools/call", ask: callTool, denied: "f__secret", missing: []string{"f__nope", "nobody__x", "f__gone", "f__vanished"}},
		{method: "prompts/get", ask: getPrompt, denied: "f__secret", missing: []string{"f__nope", "f__gone"}},
		{method: "resources/read", ask: read, denied: "manifold://f/test://secret", missing: []string{
			"manifold://f/test://denied/1", "manifold://f/test://nope", "manifold://f/test://items/x", "manifold://f/test://items/ts", "manifold://nobody/x"}},
		{method: "resources/subscribe", ask: subscribe, versions: []string{"2024-11-05", "2025-11-25"}, denied: "manifold://f/test://secret",
			missing: []string{"manifold://f/test://nope", "manifold://nobody/x"}},
		{method: "completion/complete prompt", ask: completePrompt, denied: "f__secret", missing: []string{"f__nope", "f__gone"}},
		{method: "completion/complete template", ask: completeTemplate, denied: "manifold://f/test://denied/{id}", missing: []string{
			"manifold://f/test://nope/{id}", "manifold://f/test://old/{id}", "manifold://nobody/{id}"}},
	}
	for _, version := range []string{"2024-11-05", "2025-11-25", mcpx.StatelessVersion} {
		cs := h.connectVersion(t, version)
		for _, tt := range tests {
			if tt.versions != nil && !strings.Contains(strings.Join(tt.versions, " "), version) {
				continue
			}
			t.Run(version+" "+tt.method, func(t *testing.T) {
				want := wireError(t, tt.ask(cs, tt.denied), tt.denied)
				if tt.method != "resources/subscribe" && want == "no error" {
					t.Fatalf("%s was answered", tt.denied)
				}
				for _, name := range tt.missing {
					if got := wireError(t, tt.ask(cs, name), name); got != want {
						t.Errorf("%s answers\n  %s\nthe denied %s\n  %s", name, got, tt.denied, want)
					}
				}
			})
		}
		t.Run(version+" genuine errors pass", func(t *testing.T) {
			for _, c := range []struct {
				ask  ask
				name string
				want *jsonrpc.Error
			}{
				{callTool, "f__fail", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "boom", Data: json.RawMessage(`{"why":"test"}`)}},
				{callTool, "f__other", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: `unknown tool "gone2"`}},
				{read, "manifold://f/test://items/boom", &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "database unavailable"}},
			} {
				got, _ := mcpx.AsRPCError(c.ask(cs, c.name))
				if diff := gocmp.Diff(c.want, got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", c.name, diff)
				}
			}
		})
	}
}

// FuzzUpstreamNotFound: any message an upstream sends is matched without
// panicking, and a tool or prompt is only ever found missing by a message
// that names it.
func FuzzUpstreamNotFound(f *testing.F) {
	f.Add(int64(-32602), `unknown tool "echo"`, "echo")
	f.Add(int64(-32603), "Unknown resource: demo://x/1", "demo://x/1")
	f.Add(int64(-32602), "MCP error -32602: Resource template demo://a/{x} not found", "demo://a/{x}")
	f.Add(int64(-32603), "unknown tool echo2", "echo")
	f.Fuzz(func(t *testing.T, code int64, msg, name string) {
		err := &jsonrpc.Error{Code: code, Message: msg}
		for _, kind := range []nameKind{kindTool, kindPrompt, kindResource, kindTemplate} {
			found := upstreamNotFound(err, kind, name)
			if found && (kind == kindTool || kind == kindPrompt) && (name == "" || !strings.Contains(strings.ToLower(msg), strings.ToLower(name))) {
				t.Fatalf("kind %d: %q found %q missing without naming it", kind, msg, name)
			}
		}
		toolResultNotFound(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, name)
	})
}
