package gateway

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pipeUpstream returns a Pipes entry that serves srv as a stdio upstream
// over in-process pipes: the gateway's raw calls reach it as bytes.
func pipeUpstream(t testing.TB, srv *mcp.Server) func() (io.ReadCloser, io.WriteCloser, error) {
	return func() (io.ReadCloser, io.WriteCloser, error) {
		inR, inW := io.Pipe()   // gateway → server
		outR, outW := io.Pipe() // server → gateway
		ss, err := srv.Connect(context.Background(), &mcp.IOTransport{Reader: inR, Writer: outW}, nil)
		if err != nil {
			return nil, nil, err
		}
		t.Cleanup(func() { ss.Close() })
		return outR, inW, nil
	}
}

// rawSpec is one upstream of a raw-path test gateway: over a pipe (raw
// calls) or, with inMemory, over the SDK's in-memory transport (no raw
// calls, as an HTTP upstream today).
type rawSpec struct {
	name     string
	server   *mcp.Server
	inMemory bool
	prefix   *string
	session  string
}

// newRawGateway starts a gateway in front of specs, closed when t ends.
func newRawGateway(t testing.TB, opts *Options, edit func(*config.Config), specs ...rawSpec) *Gateway {
	t.Helper()
	cfg := &config.Config{Servers: map[string]config.Server{}, Gateway: config.DefaultGateway(), Source: "test"}
	cfg.Gateway.Timeouts.Call = 10 * time.Second
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Pipes = map[string]func() (io.ReadCloser, io.WriteCloser, error){}
	o.Transports = map[string]func() (mcp.Transport, error){}
	for _, s := range specs {
		cfg.Servers[s.name] = config.Server{Name: s.name, Type: "stdio", Command: "unused", Prefix: s.prefix, Session: s.session}
		if s.inMemory {
			o.Transports[s.name] = newFakeUpstream(s.server).transport
		} else {
			o.Pipes[s.name] = pipeUpstream(t, s.server)
		}
	}
	if edit != nil {
		edit(cfg)
	}
	cfg.Auth.Local.Name = cmp.Or(cfg.Auth.Local.Name, "local")
	gw, err := New(cfg, &o)
	if err != nil {
		t.Fatal(err)
	}
	gw.Start(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		gw.Close(ctx)
	})
	return gw
}

// lineClient is a client of ServeStdio that speaks JSON lines itself, so
// that tests choose the exact bytes of each request.
type lineClient struct {
	t     testing.TB
	in    *io.PipeWriter
	lines chan string
	done  chan error
}

// serveStdioLines starts a stdio session of gw and initializes it with
// protocol version v and capabilities caps (a JSON object); it ends when
// t does.
func serveStdioLines(t testing.TB, gw *Gateway, v, caps string) *lineClient {
	t.Helper()
	c := serveStdioRaw(t, gw)
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":` + caps + `,"clientInfo":{"name":"lines","version":"1"}}}`)
	c.await(`"init"`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// serveStdioRaw starts a stdio session of gw without initializing it, as a
// 2026-07-28 client does (each request carries its version); it ends when
// t does.
func serveStdioRaw(t testing.TB, gw *Gateway) *lineClient {
	t.Helper()
	return serveStdioIn(t, context.Background(), gw)
}

// serveStdioIn is serveStdioRaw with the session's context (a toolset).
func serveStdioIn(t testing.TB, ctx context.Context, gw *Gateway) *lineClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &lineClient{t: t, in: inW, lines: make(chan string, 1000), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(ctx)
	go func() { c.done <- gw.ServeStdio(ctx, inR, outW); outW.Close() }()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		<-c.done
		inR.Close()
		for range c.lines {
		}
	})
	return c
}

func (c *lineClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// message is one line the gateway wrote, decoded.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	line string
}

// next returns the next line the gateway writes.
func (c *lineClient) next() message {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatal("the gateway's output ended")
		}
		var m message
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			c.t.Fatalf("line %q: %v", l, err)
		}
		m.line = l
		return m
	case <-time.After(10 * time.Second):
		c.t.Fatal("no line from the gateway in 10s")
		return message{}
	}
}

// await returns the response with id (raw JSON), skipping other lines.
func (c *lineClient) await(id string) message {
	c.t.Helper()
	for {
		if m := c.next(); m.Method == "" && string(m.ID) == id {
			return m
		}
	}
}

// call sends a request line and returns its response (id: raw JSON).
func (c *lineClient) call(id, line string) message {
	c.t.Helper()
	c.send(line)
	return c.await(id)
}

// callLine is a tools/call line with id n, name and arguments args (JSON).
func callLine(id, name, args string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}`
}

// rawCount is how many calls gw's raw path has served.
func rawCount(gw *Gateway) int64 { return gw.rawServed.Load() }

// firstText returns the text of a tools/call result's first content.
func firstText(t testing.TB, m message) string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("error %d %s", m.Error.Code, m.Error.Message)
	}
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s: %v", m.Result, err)
	}
	return strings.TrimSpace(r.Content[0].Text)
}
