package upstream

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cannedCalls answers every tools/call itself with a canned JSON result
// (for the id of the request) and passes the rest to next, an SDK server:
// what a benchmark then measures is the client's side.
type cannedCalls struct{ next http.Handler }

func (c cannedCalls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		if env, err := envelope.Scan(body); err == nil && string(envelope.Text(env.Method.In(body))) == "tools/call" {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(env.ID.In(body)) + `,"result":{"content":[{"type":"text","text":"hello"}]}}`))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	c.next.ServeHTTP(w, r)
}

// BenchmarkCallRawHTTP and BenchmarkCallToolHTTP: the same tools/call to
// the same streamable HTTP upstream, which answers it with canned JSON,
// raw and through the SDK's types.
func BenchmarkCallRawHTTP(b *testing.B) {
	u, _ := startRawHTTP(b, true, false, nil, func(h http.Handler) http.Handler { return cannedCalls{h} })
	params := []byte(`{"name":"echo","arguments":{"message":"hello"}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := u.CallRaw(ctx, "tools/call", params); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCallToolHTTP(b *testing.B) {
	u, _ := startRawHTTP(b, true, false, nil, func(h http.Handler) http.Handler { return cannedCalls{h} })
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := u.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
}
