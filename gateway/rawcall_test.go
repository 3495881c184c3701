package gateway

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/internal/fixture"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recordingServer is an upstream whose tools a and b answer with their
// own name, and that records each tool name a tools/call reached it with.
type recordingServer struct {
	*mcp.Server
	mu    sync.Mutex
	names []string
}

func newRecordingServer() *recordingServer {
	r := &recordingServer{Server: mcp.NewServer(&mcp.Implementation{Name: "rec", Version: "v1"}, nil)}
	for _, name := range []string{"a", "b"} {
		r.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil
			})
	}
	r.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if ct, ok := req.(*mcp.CallToolRequest); ok {
				r.mu.Lock()
				r.names = append(r.names, ct.Params.Name)
				r.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	return r
}

func (r *recordingServer) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.names)
}

const legacyVersion = "2025-11-25"

func TestRawPathTakesSimpleCallsAndLeavesTheRestToTheSDK(t *testing.T) {
	older := fixture.NewServer(&fixture.Options{Name: "older", ProtocolVersions: []string{legacyVersion}})
	gw := newRawGateway(t, nil, nil,
		rawSpec{name: "rec", server: newRecordingServer().Server},
		rawSpec{name: "mem", server: demo.NewServer("mem", nil), inMemory: true},
		rawSpec{name: "pc", server: newRecordingServer().Server, session: config.SessionPerClient},
		rawSpec{name: "older", server: older},
	)
	c := serveStdioLines(t, gw, legacyVersion, `{}`)
	tests := []struct {
		name string
		line string
		raw  bool
		want string // the answer's text; "" for an error
	}{
		{name: "simple call", line: callLine("1", "rec__a", `{}`), raw: true, want: "a"},
		{name: "simple call without arguments", line: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__b"}}`, raw: true, want: "b"},
		{name: "progress token", line: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__a","_meta":{"progressToken":7}}}`, raw: true, want: "a"},
		{name: "unknown name", line: callLine("1", "rec__zz", `{}`), raw: true},
		{name: "duplicate key", line: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__b","name":"rec__a"}}`, want: "a"},
		{name: "escaped key", line: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"rec__a"}}`, want: "a"},
		{name: "other _meta key", line: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__a","_meta":{"traceparent":"x"}}}`, want: "a"},
		{name: "other params key", line: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__a","requestState":"s"}}`, want: "a"},
		{name: "other top-level key", line: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__a"},"x":1}`, want: "a"},
		{name: "upstream without raw calls (HTTP today)", line: callLine("1", "mem__echo", `{"message":"m"}`), want: "m"},
		{name: "per-client upstream session", line: callLine("1", "pc__b", `{}`), raw: true, want: "b"},
		{name: "upstream before 2026-07-28", line: callLine("1", "older__echo", `{"message":"o"}`), raw: true, want: "o"},
		{name: "2026-07-28 request (bridged)", line: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"older__echo","arguments":{"message":"n"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, want: "n"},
		{name: "another method", line: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := rawCount(gw)
			m := c.call("1", tt.line)
			if got := rawCount(gw) - before; got != map[bool]int64{false: 0, true: 1}[tt.raw] {
				t.Errorf("raw calls = %d, want raw %v", got, tt.raw)
			}
			switch {
			case tt.want != "":
				if got := firstText(t, m); !strings.HasPrefix(got, tt.want) && !strings.Contains(got, tt.want) {
					t.Errorf("answer %q, want %q", got, tt.want)
				}
			case strings.Contains(tt.name, "unknown"):
				if m.Error == nil || m.Error.Message != `unknown tool "rec__zz"` || m.Error.Code != -32602 {
					t.Errorf("answer %s, want unknown tool", m.line)
				}
			}
		})
	}
}

// TestRawPathNeverLetsTheUpstreamSeeAnotherNameThanPolicy: a duplicate or
// escaped name key, which decoders read differently, cannot reach the
// upstream with a name the policy did not decide on.
func TestRawPathNeverLetsTheUpstreamSeeAnotherNameThanPolicy(t *testing.T) {
	rec := newRecordingServer()
	gw := newRawGateway(t, nil, func(c *config.Config) {
		c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
			{Effect: config.Deny, Match: config.Match{Tools: []string{"rec__b"}}},
		}}
	}, rawSpec{name: "rec", server: rec.Server})
	c := serveStdioLines(t, gw, legacyVersion, `{}`)
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__a","name":"rec__b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__b","name":"rec__a"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__a","n\u0061me":"rec__b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"rec__b","name":"rec__a"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__\u0062"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"NAME":"rec__b","name":"rec__a"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__a"},"params":{"name":"rec__b"}}`,
	}
	for _, l := range lines {
		m := c.call("1", l)
		if m.Error == nil && firstText(t, m) != "a" {
			t.Errorf("%s: answered %s", l, m.line)
		}
	}
	for _, name := range rec.seen() {
		if name != "a" {
			t.Errorf("the upstream saw %q, which the policy denies; seen %q", name, rec.seen())
		}
	}
}

// TestRawPathKeepsTheErrorsOfMalformedLines: a hot method's line that is
// malformed or truncated gets the parse error it got before the raw path,
// and the session goes on; a valid line the tokenizer finds too deep goes
// to the SDK.
func TestRawPathKeepsTheErrorsOfMalformedLines(t *testing.T) {
	gw := newRawGateway(t, nil, nil, rawSpec{name: "rec", server: newRecordingServer().Server})
	c := serveStdioLines(t, gw, legacyVersion, `{}`)
	deep := strings.Repeat("[", 600) + strings.Repeat("]", 600)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__a"`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__a"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__a",}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rec__a","arguments":{"x":` + deep + `}`,
	} {
		before := rawCount(gw)
		c.send(line)
		if m := c.next(); m.Error == nil || m.Error.Code != -32700 || string(m.ID) != "null" {
			t.Errorf("%.80s: answered %s, want the parse error", line, m.line)
		}
		if rawCount(gw) != before {
			t.Errorf("%.80s: the raw path took it", line)
		}
	}
	before := rawCount(gw)
	m := c.call("2", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"rec__a","arguments":{"x":`+deep+`}}}`)
	if got := firstText(t, m); got != "a" {
		t.Errorf("a deep but valid call answered %q", got)
	}
	if rawCount(gw) != before {
		t.Error("the raw path took a call nested deeper than the tokenizer reads")
	}
}
