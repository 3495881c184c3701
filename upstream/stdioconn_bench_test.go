package upstream

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchUpstream is an Upstream over a fake that answers every tools/call
// itself with a canned result, so that the client's side is measured.
func benchUpstream(b *testing.B) *Upstream {
	b.Helper()
	opts := fastOptions()
	opts.KeepAlive = -1
	opts.Pipe = func() (io.ReadCloser, io.WriteCloser, error) {
		_, pipe := newFakeStdio(b, echoServer(), func(f *fakeStdio) { f.answerCalls = true })
		return pipe()
	}
	u := New(config.Server{Name: "bench", Type: "stdio"}, opts)
	u.Start(context.Background())
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u.Close(ctx)
	})
	for u.Status().State != StateReady {
		time.Sleep(5 * time.Millisecond)
	}
	return u
}

// BenchmarkCallRaw and BenchmarkCallTypedTool: the same tools/call over the
// same fake, raw and through the SDK's types.
func BenchmarkCallRaw(b *testing.B) {
	u := benchUpstream(b)
	params := []byte(`{"name":"echo","arguments":{"message":"hello"}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := u.CallRaw(ctx, "tools/call", params); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCallTypedTool(b *testing.B) {
	u := benchUpstream(b)
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := u.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStdioConnLongLine reads one 4 MiB message (a large tool result),
// the case where the line is longer than the read buffer.
func BenchmarkStdioConnLongLine(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("x", 4<<20) + `"}}` + "\n")
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		c := newStdioConn(io.NopCloser(bytes.NewReader(line)), nopWriteCloser{io.Discard}, 8<<20)
		if _, err := c.readLine(c.max); err != nil {
			b.Fatal(err)
		}
	}
}
