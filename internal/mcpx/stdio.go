package mcpx

import (
	"context"
	"io"

	"github.com/manifold-mcp/manifold/internal/rawio"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CancelWhenDone returns middleware that cancels each request's context
// when done is done, so that shutdown does not wait for long-running
// handlers: the SDK detaches handler contexts from the connection's, and
// closing a session waits for the requests in flight.
func CancelWhenDone(done context.Context) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(done, cancel)()
			return next(ctx, method, req)
		}
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// ServeStdio serves s on stdin and stdout until stdin ends or ctx is done,
// which both return nil; stdout is never closed. For the small servers in
// this repository (demo, fixture).
// The process's own stdin is read through the runtime's poller whenever it
// can be (rawio.Standard, which says why): never with a read that blocks
// in the kernel.
func ServeStdio(ctx context.Context, s *mcp.Server, stdin io.Reader, stdout io.Writer) error {
	stdin, stdout, restore, _ := rawio.Standard(stdin, stdout)
	defer restore()
	rc, ok := stdin.(io.ReadCloser)
	if !ok {
		rc = io.NopCloser(stdin)
	}
	err := s.Run(ctx, &mcp.IOTransport{Reader: rc, Writer: nopWriteCloser{stdout}})
	if err == nil || ctx.Err() != nil {
		return nil // stdin closed, or asked to stop
	}
	return err
}
