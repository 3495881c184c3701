package gateway

import (
	"bufio"
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/rawio"
)

// byteUpstream is a stdio MCP server that speaks bytes only: it answers
// the SDK client's handshake and lists with canned lines, and every
// tools/call with one canned result under the call's id. It allocates
// nothing per call, so that a benchmark through it measures the gateway.
func byteUpstream(tb testing.TB) func() (io.ReadCloser, io.WriteCloser, error) {
	return func() (io.ReadCloser, io.WriteCloser, error) {
		// Pipes of the system, as a real upstream process's: the stdio
		// fast path writes to them without a goroutine (StartRaw).
		inR, inW, outR, outW, err := osPipes()
		if err != nil {
			return nil, nil, err
		}
		go serveBytes(inR, outW)
		return outR, inW, nil
	}
}

// Canned results of byteUpstream, by method.
var byteResults = map[string]string{
	"initialize": `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"bytes","version":"1"}}`,
	"tools/list": `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`,
	"ping":       `{}`,
	"tools/call": `{"content":[{"type":"text","text":"hello"}]}`,
}

func serveBytes(r io.ReadCloser, w io.WriteCloser) {
	defer r.Close()
	defer w.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	out := make([]byte, 0, 4096)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		env, err := envelope.Scan(line)
		if err != nil || !env.ID.Present() {
			continue // notifications
		}
		out = append(out[:0], `{"jsonrpc":"2.0","id":`...)
		out = append(out, env.ID.In(line)...)
		if res, ok := byteResults[string(envelope.Text(env.Method.In(line)))]; ok {
			out = append(out, `,"result":`...)
			out = append(out, res...)
		} else {
			out = append(out, `,"error":{"code":-32601,"message":"method not found"}`...)
		}
		out = append(out, "}\n"...)
		if _, err := w.Write(out); err != nil {
			return
		}
	}
}

// BenchmarkForward is one tools/call through the stdio front to a
// byte-level upstream: pre-encoded request bytes in, response bytes out,
// nothing decoded on either side but by the gateway. With the raw path it
// is the gateway's whole cost per call.
func BenchmarkForward(b *testing.B) {
	gw := newRawGatewayPipes(b, map[string]func() (io.ReadCloser, io.WriteCloser, error){"alpha": byteUpstream(b)})
	inR, inW := io.Pipe()
	// The answers go out on a real pipe, written as `serve --stdio` writes
	// its stdout when it is one (rawio), so that the fast path writes
	// them from the upstream's reading goroutine (writeLineNoWait).
	outR, outFile, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	var outW io.WriteCloser = outFile
	if f, err := rawio.New(outFile); err == nil {
		outW = f
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.ServeStdio(ctx, inR, outW); outW.Close() }()
	b.Cleanup(func() {
		inW.Close()
		cancel()
		<-done
		inR.Close()
		outR.Close()
	})
	br := bufio.NewReaderSize(outR, 64<<10)
	roundTrip := func(line []byte) {
		if _, err := inW.Write(line); err != nil {
			b.Fatal(err)
		}
		for {
			resp, err := br.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if env, err := envelope.Scan(resp); err == nil && env.ID.Present() {
				return
			}
		}
	}
	roundTrip([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}` + "\n"))
	inW.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
	call := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"message":"hello"}}}` + "\n")
	roundTrip(call) // the session is initialized once a call is answered
	before := gw.rawServed.Load()
	b.ReportAllocs()
	for b.Loop() {
		roundTrip(call)
	}
	b.StopTimer()
	if n := gw.rawServed.Load() - before; n != int64(b.N) {
		b.Fatalf("%d of %d calls took the raw path", n, b.N)
	}
}

// newRawGatewayPipes starts a gateway whose upstreams are pipes, closed
// when tb ends.
func newRawGatewayPipes(tb testing.TB, pipes map[string]func() (io.ReadCloser, io.WriteCloser, error)) *Gateway {
	tb.Helper()
	cfg := &config.Config{Servers: map[string]config.Server{}, Gateway: config.DefaultGateway(), Source: "bench"}
	for name := range pipes {
		cfg.Servers[name] = config.Server{Name: name, Type: "stdio", Command: "unused"}
	}
	cfg.Auth.Local.Name = "local"
	gw, err := New(cfg, &Options{Pipes: pipes})
	if err != nil {
		tb.Fatal(err)
	}
	gw.Start(context.Background())
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gw.Close(ctx)
	})
	return gw
}
