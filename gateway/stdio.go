package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// ServeStdio serves one client over r and w (the process's stdin and
// stdout) until the client disconnects or ctx is done. A message over
// gateway.limits.maxMessageBytes ends the session with a logged error.
func (g *Gateway) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	t := &mcp.IOTransport{
		Reader:        io.NopCloser(r),
		Writer:        nopWriteCloser{w},
		MaxLineLength: int(g.cfg.Gateway.Limits.MaxMessageBytes),
	}
	ss, err := g.server.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("stdio: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		ss.Close()
		err = <-done
	}
	if err != nil && !errors.Is(err, io.EOF) && ctx.Err() == nil {
		g.log.Error("stdio session ended", zap.Error(err), zap.Int64("max_message_bytes", g.cfg.Gateway.Limits.MaxMessageBytes))
		return fmt.Errorf("stdio session: %w", err)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
