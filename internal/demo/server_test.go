package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(subprocessEnv) == "1" {
		// Act as `manifold demo-server` for TestMainSubprocess.
		if err := Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// protocolVersions are the protocol versions tests run under: the newest
// (which the SDK negotiates by default and which has per-request _meta and
// no real initialize state) and the newest handshake-era one.
var protocolVersions = []string{mcp.SupportedProtocolVersions()[0], "2025-11-25"}

// connect serves srv over in-memory transports and returns a connected client
// session using the SDK's default protocol version; both ends are closed when
// the test ends.
func connect(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	return connectVersion(t, srv, "")
}

// connectVersion is connect with an explicit protocol version ("" = default).
func connectVersion(t *testing.T, srv *mcp.Server, version string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	if version != "" {
		if got := cs.InitializeResult().ProtocolVersion; got != version {
			t.Fatalf("negotiated protocol version %q, want %q", got, version)
		}
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

func TestInitialize(t *testing.T) {
	cs := connect(t, NewServer("alpha", nil))
	res := cs.InitializeResult()
	if got, want := res.Instructions, "Demo server alpha: echo, add, image and more."; got != want {
		t.Errorf("instructions = %q, want %q", got, want)
	}
	if res.ServerInfo.Name != "alpha" || res.ServerInfo.Version != Version {
		t.Errorf("server info = %+v, want name alpha version %s", res.ServerInfo, Version)
	}
	caps := res.Capabilities
	if caps.Tools == nil || caps.Resources == nil || caps.Prompts == nil || caps.Completions == nil {
		t.Errorf("capabilities = %+v, want tools, resources, prompts and completions", caps)
	}
}

func TestListTools(t *testing.T) {
	tests := []struct {
		name      string
		opts      *Options
		wantNames []string
	}{
		{
			name:      "default",
			wantNames: []string{"add", "annotated", "echo", "fail", "image", "info", "link", "meta", "slow"},
		},
		{
			name:      "long names and extra tools",
			opts:      &Options{LongNames: true, ExtraTools: []string{"zeta", "", "echo"}},
			wantNames: []string{LongToolName, "add", "annotated", "echo", "fail", "image", "info", "link", "meta", "slow", "zeta"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := connect(t, NewServer("alpha", tt.opts))
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
				if tool.Title == "" || tool.Description == "" {
					t.Errorf("tool %q: title %q, description %q: want both set", tool.Name, tool.Title, tool.Description)
				}
				if tool.InputSchema == nil {
					t.Errorf("tool %q: no input schema", tool.Name)
				}
			}
			slices.Sort(names)
			if diff := cmp.Diff(tt.wantNames, names); diff != "" {
				t.Errorf("tool names (-want +got):\n%s", diff)
			}
		})
	}
	if n := len(LongToolName); n != 80 {
		t.Errorf("len(LongToolName) = %d, want 80", n)
	}
}

func TestToolMetadata(t *testing.T) {
	cs := connect(t, NewServer("alpha", nil))
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		tools[tool.Name] = tool
	}

	wantAddOutput := map[string]any{
		"type":                 "object",
		"required":             []any{"sum"},
		"additionalProperties": false,
		"properties":           map[string]any{"sum": map[string]any{"type": "number", "description": "a + b"}},
	}
	if diff := cmp.Diff(wantAddOutput, tools["add"].OutputSchema); diff != "" {
		t.Errorf("add output schema (-want +got):\n%s", diff)
	}
	if tools["info"].OutputSchema == nil {
		t.Error("info: no output schema")
	}

	a := tools["annotated"]
	wantAnn := &mcp.ToolAnnotations{Title: "Annotated (annotation title)", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)}
	if diff := cmp.Diff(wantAnn, a.Annotations); diff != "" {
		t.Errorf("annotated annotations (-want +got):\n%s", diff)
	}
	wantIcons := []mcp.Icon{{Source: pngDataURI(), MIMEType: "image/png", Sizes: []string{"1x1"}}}
	if diff := cmp.Diff(wantIcons, a.Icons); diff != "" {
		t.Errorf("annotated icons (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(mcp.Meta{MetaKey: "x"}, a.Meta); diff != "" {
		t.Errorf("annotated _meta (-want +got):\n%s", diff)
	}
}

func TestCallTool(t *testing.T) {
	t.Setenv("DEMO_VALUE", "from-env")
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	info := map[string]any{"server": "alpha", "pid": float64(os.Getpid()), "cwd": cwd, "env": "from-env"}

	tests := []struct {
		name           string
		tool           string
		args           any
		wantContent    []mcp.Content
		wantJSONText   any // if set, content is one text holding this as JSON
		wantStructured any
		wantIsError    bool
		wantMeta       mcp.Meta
	}{
		{
			name:        "echo",
			tool:        "echo",
			args:        map[string]any{"message": "hello"},
			wantContent: []mcp.Content{&mcp.TextContent{Text: "hello"}},
		},
		{
			name:           "add",
			tool:           "add",
			args:           map[string]any{"a": 1.5, "b": 2},
			wantContent:    []mcp.Content{&mcp.TextContent{Text: "3.5"}},
			wantStructured: map[string]any{"sum": 3.5},
		},
		{
			name:        "image",
			tool:        "image",
			wantContent: []mcp.Content{&mcp.ImageContent{Data: pngBytes(), MIMEType: "image/png"}},
		},
		{
			name:        "fail",
			tool:        "fail",
			wantContent: []mcp.Content{&mcp.TextContent{Text: "demo failure"}},
			wantIsError: true,
		},
		{
			name:        "slow",
			tool:        "slow",
			args:        map[string]any{"ms": 5},
			wantContent: []mcp.Content{&mcp.TextContent{Text: "done"}},
		},
		{
			name:           "info",
			tool:           "info",
			wantJSONText:   info,
			wantStructured: info,
		},
		{
			name: "link",
			tool: "link",
			wantContent: []mcp.Content{
				&mcp.ResourceLink{URI: "demo://alpha/readme", Name: "readme", Title: "Readme of alpha", MIMEType: "text/markdown"},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "demo://alpha/items/7", MIMEType: "text/plain", Text: "item 7 from alpha"}},
			},
		},
		{
			name:        "annotated",
			tool:        "annotated",
			wantContent: []mcp.Content{&mcp.TextContent{Text: "annotated result from alpha"}},
			wantMeta:    mcp.Meta{MetaKey: "x"},
		},
	}
	for _, version := range protocolVersions {
		cs := connectVersion(t, NewServer("alpha", nil), version)
		for _, tt := range tests {
			t.Run(version+"/"+tt.name, func(t *testing.T) {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
				if err != nil {
					t.Fatal(err)
				}
				if tt.wantJSONText != nil {
					checkJSONText(t, res.Content, tt.wantJSONText)
				} else if diff := cmp.Diff(tt.wantContent, res.Content); diff != "" {
					t.Errorf("content (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.wantStructured, res.StructuredContent); diff != "" {
					t.Errorf("structured content (-want +got):\n%s", diff)
				}
				if res.IsError != tt.wantIsError {
					t.Errorf("isError = %v, want %v", res.IsError, tt.wantIsError)
				}
				if diff := cmp.Diff(tt.wantMeta, ownMeta(res.Meta), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("_meta (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// ownMeta returns m without the io.modelcontextprotocol/* keys that the SDK
// adds to result _meta under the newest protocol.
func ownMeta(m mcp.Meta) mcp.Meta {
	own := mcp.Meta{}
	for k, v := range m {
		if !strings.HasPrefix(k, "io.modelcontextprotocol/") {
			own[k] = v
		}
	}
	return own
}

// checkJSONText checks that content is a single text holding want as JSON.
func checkJSONText(t *testing.T, content []mcp.Content, want any) {
	t.Helper()
	if len(content) != 1 {
		t.Fatalf("got %d content blocks, want 1", len(content))
	}
	tc, ok := content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want *mcp.TextContent", content[0])
	}
	var got any
	if err := json.Unmarshal([]byte(tc.Text), &got); err != nil {
		t.Fatalf("text %q is not JSON: %v", tc.Text, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON text (-want +got):\n%s", diff)
	}
}

func TestCallToolErrors(t *testing.T) {
	tests := []struct {
		name         string
		tool         string
		args         any
		wantToolErr  bool // result with isError
		wantProtoErr bool // JSON-RPC error
	}{
		{name: "echo without message", tool: "echo", args: map[string]any{}, wantToolErr: true},
		{name: "slow above maximum", tool: "slow", args: map[string]any{"ms": MaxSlowMillis + 1}, wantToolErr: true},
		{name: "slow negative", tool: "slow", args: map[string]any{"ms": -1}, wantToolErr: true},
		{name: "add with a string", tool: "add", args: map[string]any{"a": "1", "b": 2}, wantToolErr: true},
		{name: "unknown tool", tool: "nope", wantProtoErr: true},
	}
	cs := connect(t, NewServer("alpha", nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
			if tt.wantProtoErr {
				if err == nil {
					t.Fatalf("CallTool succeeded with %+v, want a protocol error", res)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != tt.wantToolErr {
				t.Errorf("isError = %v, want %v (content %v)", res.IsError, tt.wantToolErr, res.Content)
			}
		})
	}
}

func TestSlowCancellation(t *testing.T) {
	cs := connect(t, NewServer("alpha", nil))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": MaxSlowMillis}})
	if err == nil {
		t.Fatal("slow call succeeded, want cancellation error")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancelled slow call took %v", d)
	}
	// The server must still serve requests after the cancellation.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}}); err != nil {
		t.Errorf("echo after cancelled slow: %v", err)
	}
}

func TestExtraTools(t *testing.T) {
	cs := connect(t, NewServer("beta", &Options{LongNames: true, ExtraTools: []string{"zeta", "echo"}}))
	for _, name := range []string{"zeta", "echo", LongToolName} {
		t.Run(name, func(t *testing.T) {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]mcp.Content{&mcp.TextContent{Text: name}}, res.Content); diff != "" {
				t.Errorf("content (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecoverMiddleware(t *testing.T) {
	srv := NewServer("alpha", nil)
	srv.AddTool(&mcp.Tool{Name: "panic", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { panic("boom") })
	cs := connect(t, srv)

	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "panic"})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError {
		t.Fatalf("CallTool(panic) error = %v (%T), want a JSON-RPC internal error", err, err)
	}
	// The session survives the panic.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}}); err != nil {
		t.Errorf("echo after panic: %v", err)
	}
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		wantErr bool
	}{
		{name: "simple", input: "alpha"},
		{name: "punctuation", input: "a-b_c.D9"},
		{name: "empty", input: "", wantErr: true},
		{name: "space", input: "a b", wantErr: true},
		{name: "slash", input: "a/b", wantErr: true},
		{name: "non-ascii", input: "é", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := ValidateName(tt.input); (err != nil) != tt.wantErr {
				t.Errorf("ValidateName(%q) = %v, want error %v", tt.input, err, tt.wantErr)
			}
		})
	}
}

func TestPNGIsValid(t *testing.T) {
	img, err := png.Decode(bytes.NewReader(pngBytes()))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 1 || b.Dy() != 1 {
		t.Errorf("bounds = %v, want 1x1", b)
	}
}
