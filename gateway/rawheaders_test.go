package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCallHeadersAsTheSDK: for each header or _meta fault of a 2026-07-28
// call, checkCallHeaders gives the answer the SDK's stateless handler
// gives (status 400, same code and message), and accepts what it accepts.
func TestCallHeadersAsTheSDK(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "ref"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "p"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	srv.AddResource(&mcp.Resource{URI: "test://r", Name: "r"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://r", Text: "x"}}}, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})

	const v = "2026-07-28"
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `","io.modelcontextprotocol/clientCapabilities":{}}`
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},` + meta + `}}`
	tests := []struct {
		name, body     string
		method, target string // Mcp-Method and Mcp-Name; "-" leaves one out
	}{
		{name: "valid", body: call, method: "tools/call", target: "echo"},
		{name: "valid prompt", body: `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p",` + meta + `}}`, method: "prompts/get", target: "p"},
		{name: "valid read", body: `{"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":"test://r",` + meta + `}}`, method: "resources/read", target: "test://r"},
		{name: "no Mcp-Method", body: call, method: "-", target: "echo"},
		{name: "another Mcp-Method", body: call, method: "prompts/get", target: "echo"},
		{name: "no Mcp-Name", body: call, method: "tools/call", target: "-"},
		{name: "another Mcp-Name", body: call, method: "tools/call", target: "Echo"},
		{name: "no _meta version", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, method: "tools/call", target: "echo"},
		{name: "another _meta version", body: strings.Replace(call, `"`+v+`"`, `"2025-11-25"`, 1), method: "tools/call", target: "echo"},
		{name: "an escaped Mcp-Name body", body: strings.Replace(call, `"echo"`, `"ech\u006f"`, 1), method: "tools/call", target: "echo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tt.body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			r.Header.Set(headerProtocolVersion, v)
			if tt.method != "-" {
				r.Header.Set(headerMethod, tt.method)
			}
			if tt.target != "-" {
				r.Header.Set(headerName, tt.target)
			}
			rec := httptest.NewRecorder()
			sdk.ServeHTTP(rec, r)

			msg := []byte(tt.body)
			e, err := envelope.Scan(msg)
			if err != nil {
				t.Fatal(err)
			}
			method := string(envelope.Text(e.Method.In(msg)))
			target := e.Name
			if !target.Present() {
				target = e.URI
			}
			got := checkCallHeaders(r.Header, msg, &e, v, method, string(envelope.Text(target.In(msg))))
			if rec.Code == http.StatusOK {
				if got != nil {
					t.Fatalf("the SDK accepts it; checkCallHeaders: %v", got)
				}
				return
			}
			var want struct {
				Error struct {
					Code    int64  `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if rec.Code != http.StatusBadRequest || json.Unmarshal(rec.Body.Bytes(), &want) != nil {
				t.Fatalf("the SDK answers %d %q", rec.Code, rec.Body)
			}
			if got == nil || got.Code != want.Error.Code || got.Message != want.Error.Message {
				t.Fatalf("checkCallHeaders = %v\nthe SDK: %d %q", got, want.Error.Code, want.Error.Message)
			}
		})
	}
}
