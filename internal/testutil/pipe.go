package testutil

import (
	"net"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Pipe is a pair of connected in-memory MCP transports whose connection a
// test can cut, as a crashing server or a dropped network would.
//
// Closing an mcp.ServerSession is not a crash: in go-sdk v1.8.0 it is a
// graceful close that waits for the requests in flight to finish, so a
// client's pending calls end only if something else cancels them. Cut closes
// the server's end of the pipe instead: both sides' reads fail at once, the
// client's calls in flight end with a connection error, and the server's
// handlers in flight are cancelled.
type Pipe struct {
	// Server is the transport to connect the mcp.Server with, first.
	Server mcp.Transport
	// Client is the transport to hand to the client.
	Client mcp.Transport

	server net.Conn
}

// NewPipe returns a connected Pipe.
func NewPipe() *Pipe {
	s, c := net.Pipe()
	return &Pipe{
		Server: &mcp.IOTransport{Reader: s, Writer: s},
		Client: &mcp.IOTransport{Reader: c, Writer: c},
		server: s,
	}
}

// Cut closes the server's end of the connection. It is safe to call more
// than once and from any goroutine.
func (p *Pipe) Cut() { _ = p.server.Close() }
