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

// cannedCalls answers every tools/call itself with a canned result (for
// the id of the request), as JSON or, with stream, as one event of an SSE
// stream as the SDK's server answers, and passes the rest to next, an SDK
// server: what a benchmark then measures is the client's side.
type cannedCalls struct {
	next   http.Handler
	stream bool
}

func (c cannedCalls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		if env, err := envelope.Scan(body); err == nil && string(envelope.Text(env.Method.In(body))) == "tools/call" {
			res := `{"jsonrpc":"2.0","id":` + string(env.ID.In(body)) + `,"result":{"content":[{"type":"text","text":"hello"}]}}`
			if c.stream {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write([]byte("event: message\ndata: " + res + "\n\n"))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(res))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	c.next.ServeHTTP(w, r)
}

// BenchmarkCallRawHTTP and BenchmarkCallToolHTTP: the same tools/call to
// the same streamable HTTP upstream, which answers it with canned JSON,
// raw and through the SDK's types. BenchmarkCallRawHTTPStream is the raw
// call answered on an SSE stream.
func BenchmarkCallRawHTTP(b *testing.B) { benchCallRawHTTP(b, false) }

func BenchmarkCallRawHTTPStream(b *testing.B) { benchCallRawHTTP(b, true) }

func benchCallRawHTTP(b *testing.B, stream bool) {
	u, _ := startRawHTTP(b, true, false, nil, func(h http.Handler) http.Handler { return cannedCalls{next: h, stream: stream} })
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
	u, _ := startRawHTTP(b, true, false, nil, func(h http.Handler) http.Handler { return cannedCalls{next: h} })
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := u.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
}
