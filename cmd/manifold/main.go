// Command manifold is the Manifold MCP gateway: one MCP endpoint in front of
// many MCP servers. See README.md for usage.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/plugins/builtin"
	"github.com/manifold-mcp/manifold/upstream"
)

const usage = `manifold — one MCP endpoint in front of many MCP servers

Usage:
  manifold serve [--config FILE] [--listen ADDR] [--stdio [--toolset NAME]] [--log-file FILE]
  manifold validate --config FILE
  manifold policy explain --config FILE --principal NAME (--tool NAME | …)
  manifold auth (list | revoke) --config FILE [--principal NAME] [--server NAME]
  manifold pins list|diff|approve --config FILE [--server S] [--tool T]
  manifold demo-server [--name NAME] [--http ADDR]
  manifold plugin NAME          (a builtin plugin, started by the gateway)
  manifold version

Without --config, serve uses an embedded default that fronts two built-in
demo servers. See README.md and config/REFERENCE.md.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches a subcommand and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// A second signal after the first one kills at once.
		<-ctx.Done()
		stop()
	}()
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdin, stdout, stderr)
	case "validate":
		return validate(args[1:], stdout, stderr)
	case "policy":
		return policyCmd(args[1:], stdout, stderr)
	case "auth":
		return authCmd(ctx, args[1:], stdout, stderr)
	case "pins":
		return pinsCmd(ctx, args[1:], stdout, stderr)
	case "demo-server":
		if err := demo.Main(ctx, args[1:], stdin, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "demo-server: %v\n", err)
			return 1
		}
		return 0
	case "version", "--version", "-v":
		printVersion(stdout)
		return 0
	case "plugin": // started by the gateway for `builtin: NAME` plugins
		return builtin.Main(args[1:], func(s string) { fmt.Fprintln(stderr, s) })
	case "upstream-guard": // internal: see upstream.RunGuard
		return upstream.RunGuard(args[1:], stderr)
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "manifold: unknown command %q\n\n%s", args[0], usage)
	return 2
}
