package upstream

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/manifold-mcp/manifold/internal/rawio"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connection is one transport to the upstream plus what must be stopped
// with it (the stdio process, the HTTP client's idle connections).
type connection struct {
	transport mcp.Transport
	raw       *stdioConn   // the transport, when it takes raw calls (stdio)
	proc      *process     // nil for http and sse
	http      *http.Client // nil for stdio
	// rawHTTP is the client of raw calls to a streamable HTTP upstream
	// (newRawHTTPClient); nil for other transports.
	rawHTTP *http.Client
}

func (c *connection) pid() int {
	if c.proc == nil {
		return 0
	}
	return c.proc.pid()
}

// exited is closed when the stdio process has exited; nil (never ready) for
// other transports. A grandchild may hold the stdout pipe open after the
// server died, so the session alone would not notice.
func (c *connection) exited() <-chan struct{} {
	if c.proc == nil {
		return nil
	}
	return c.proc.exited
}

func (c *connection) stop(grace time.Duration) {
	if c.proc != nil {
		c.proc.stop(grace)
	}
}

// release closes the HTTP client's idle connections; call it after the
// session is closed (its DELETE leaves one behind). Each connection has its
// own client, whose keep-alive connections (and their goroutines) would
// otherwise outlive it by 90s.
func (c *connection) release() {
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
	if c.rawHTTP != nil && c.rawHTTP != c.http {
		c.rawHTTP.CloseIdleConnections()
	}
}

// sseEventLimit is the SDK's own cap on an SSE event, a backstop above
// limitTransport's (which passes on no event over max+sseFraming bytes and
// answers the call instead): the SDK's breaks the whole connection.
func sseEventLimit(max int) int { return max + sseFraming + 1 }

// dial prepares a transport for the configured server type. For stdio it
// starts the process.
func (u *Upstream) dial() (*connection, error) {
	if u.opts.Transport != nil {
		t, err := u.opts.Transport()
		if err != nil {
			return nil, err
		}
		return &connection{transport: t}, nil
	}
	if u.opts.Pipe != nil {
		r, w, err := u.opts.Pipe()
		if err != nil {
			return nil, err
		}
		if f, ok := r.(*os.File); ok {
			r = rawPipe(f)
		}
		if f, ok := w.(*os.File); ok {
			w = rawPipe(f)
		}
		c := newStdioConn(r, w, u.opts.MaxMessageBytes)
		return &connection{transport: c, raw: c}, nil
	}
	switch u.cfg.Type {
	case "stdio", "":
		p, err := startProcess(u.cfg, u.opts.GuardPath, u.log)
		if err != nil {
			return nil, err
		}
		c := newStdioConn(rawPipe(p.stdout), rawPipe(p.stdin), u.opts.MaxMessageBytes)
		return &connection{transport: c, raw: c, proc: p}, nil
	case "http":
		base, err := newHTTPTransport(u.cfg)
		if err != nil {
			return nil, err
		}
		hc := layered(base, u.cfg, u.opts.MaxMessageBytes, u.opts.Credential, u.log)
		raw := newRawHTTPClient(base, hc, u.cfg, u.opts.MaxMessageBytes, u.opts.Credential, u.log)
		return &connection{transport: &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, HTTPClient: hc, MaxRetries: 2,
			MaxEventSize: sseEventLimit(u.opts.MaxMessageBytes)}, http: hc, rawHTTP: raw}, nil
	case "sse":
		hc, err := newHTTPClient(u.cfg, u.opts.MaxMessageBytes, u.opts.Credential, u.log)
		if err != nil {
			return nil, err
		}
		return &connection{transport: &mcp.SSEClientTransport{Endpoint: u.cfg.URL, HTTPClient: hc,
			MaxEventSize: sseEventLimit(u.opts.MaxMessageBytes)}, http: hc}, nil
	}
	return nil, fmt.Errorf("unknown transport type %q", u.cfg.Type)
}

// rawPipe is one of our ends of a stdio upstream's pipes as the data path
// reads and writes it: with direct system calls where the system has them
// (internal/rawio), else the file itself.
func rawPipe(f *os.File) io.ReadWriteCloser {
	if rf, err := rawio.New(f); err == nil {
		return rf
	}
	return f
}
