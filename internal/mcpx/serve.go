package mcpx

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeHTTP serves h on ln until ctx is done, then shuts it down, giving
// requests in flight up to grace, and closes the sessions of s (streamable
// HTTP sessions outlive their requests, and SSE streams never end by
// themselves). It returns nil after a shutdown, or the error that stopped
// serving. For the small servers in this repository (demo, fixture); the
// gateway drains its own way (gateway.Serve).
// Request contexts end with ctx, which ends hanging SSE GETs; errors of the
// HTTP server go to errorLog.
func ServeHTTP(ctx context.Context, ln net.Listener, h http.Handler, s *mcp.Server, errorLog *log.Logger, grace time.Duration) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          errorLog,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served: // Serve never returns nil
		closeSessions(s)
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	shutdown := make(chan error, 1)
	go func() { shutdown <- srv.Shutdown(sctx) }()
	closeSessions(s)
	if err := <-shutdown; err != nil {
		srv.Close()
	}
	closeSessions(s) // sessions created by requests that raced with the shutdown
	<-served
	return nil
}

// closeSessions closes every session of s, waiting for in-flight requests.
// Errors are ignored: the session is gone either way.
func closeSessions(s *mcp.Server) {
	for ss := range s.Sessions() {
		_ = ss.Close()
	}
}
