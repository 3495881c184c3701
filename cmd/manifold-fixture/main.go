// Command manifold-fixture serves Manifold's conformance fixture, the MCP
// server that implements what the official conformance suite's server
// scenarios expect (see package internal/fixture), over stdio or streamable
// HTTP:
//
//	manifold-fixture [--stdio]
//	manifold-fixture --http 127.0.0.1:0     # prints http://127.0.0.1:PORT/mcp on stdout
//
// It is test and benchmark tooling, not part of the gateway.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/manifold-mcp/manifold/internal/fixture"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := fixture.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	default:
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
}
