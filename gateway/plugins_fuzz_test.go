package gateway

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzPluginResult feeds the gateway what an untrusted plugin may return:
// arguments spliced into a raw request (setArguments) and results decoded
// on the SDK path (decodeResult). Neither may panic; spliced arguments are
// the request's arguments afterwards, its id and name unchanged.
func FuzzPluginResult(f *testing.F) {
	f.Add([]byte(`{"message":"x"}`), true)
	f.Add([]byte(`{}`), false)
	f.Add([]byte(`{"a":[1,{"b":"\u0000"}]}`), true)
	f.Add([]byte(`{"content":[{"type":"text","text":"hi"}],"isError":true}`), false)
	f.Add([]byte(`"}`), true)
	f.Add([]byte("{} "), true) // found by the fuzzer: trailing whitespace
	f.Add([]byte("\n{\"a\":1}\t"), false)
	f.Fuzz(func(t *testing.T, payload []byte, withArgs bool) {
		_, _ = decodeResult[*mcp.CallToolResult](payload)
		_, _ = decodeResult[*mcp.GetPromptResult](payload)
		_, _ = decodeResult[*mcp.ReadResourceResult](payload)
		if !json.Valid(payload) { // the chain refuses anything else
			return
		}
		msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"s__t"}}`)
		if withArgs {
			msg = []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"s__t","arguments":{"old":1}}}`)
		}
		env, err := envelope.Scan(msg)
		if err != nil {
			t.Fatal(err)
		}
		r := &rawRequest{msg: msg, env: env, m: &rawTool}
		if err := r.setArguments(payload); err != nil {
			return
		}
		want := bytes.Trim(payload, jsonSpace)
		if got := r.env.Arguments.In(r.msg); !bytes.Equal(got, want) {
			t.Fatalf("arguments after the splice = %q; want %q", got, want)
		}
		if string(r.env.ID.In(r.msg)) != "7" || string(r.env.Name.In(r.msg)) != `"s__t"` {
			t.Fatalf("id or name changed: %s", r.msg)
		}
	})
}
