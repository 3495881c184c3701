package demo

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// shutdownTimeout bounds how long Main waits for HTTP handlers to finish after
// its context is done, before closing connections forcibly.
const shutdownTimeout = 5 * time.Second

// Main runs `manifold demo-server [flags]`:
//
//	--name NAME         server name (default "demo")
//	--http ADDR         serve streamable HTTP at /mcp and legacy SSE at /sse on
//	                    ADDR instead of stdio; ADDR may use port 0
//	--long-names        also register the tool LongToolName
//	--extra-tools a,b,c register extra tools that return their own name
//
// In stdio mode Main speaks the protocol on stdin/stdout and returns nil once
// stdin reaches EOF or ctx is done; if stdin is an io.Closer, Main closes it
// before returning (which unblocks a pending read). stdout is never closed.
//
// In HTTP mode Main writes "listening on http://HOST:PORT" (with the real port)
// to stderr once the listener is open, and returns nil after ctx is done and
// the server has shut down: request contexts are cancelled, sessions are
// closed and handlers get up to 5s to return.
//
// In both modes, handlers still running when ctx is done (such as the slow
// tool) see their context cancelled. Flag errors are reported on stderr and
// returned; -h returns [flag.ErrHelp].
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	s := NewServer(cfg.name, &cfg.opts)
	s.AddReceivingMiddleware(mcpx.CancelWhenDone(ctx))
	if cfg.httpAddr != "" {
		return serveHTTP(ctx, s, cfg.httpAddr, stderr)
	}
	if err := mcpx.ServeStdio(ctx, s, stdin, stdout); err != nil {
		return fmt.Errorf("demo-server: stdio: %w", err)
	}
	return nil
}

type config struct {
	name     string
	httpAddr string
	opts     Options
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	var extra string
	fs := flag.NewFlagSet("demo-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.name, "name", "demo", "server `name`, also used in demo://<name>/... URIs")
	fs.StringVar(&cfg.httpAddr, "http", "", "serve streamable HTTP (/mcp) and legacy SSE (/sse) on `addr` instead of stdio")
	fs.BoolVar(&cfg.opts.LongNames, "long-names", false, "also register a tool with an 80-character name")
	fs.StringVar(&extra, "extra-tools", "", "comma-separated `names` of extra tools that return their own name")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("demo-server: unexpected arguments: %q", fs.Args())
	}
	if err := ValidateName(cfg.name); err != nil {
		return config{}, fmt.Errorf("demo-server: --name: %w", err)
	}
	for n := range strings.SplitSeq(extra, ",") {
		if n = strings.TrimSpace(n); n != "" {
			cfg.opts.ExtraTools = append(cfg.opts.ExtraTools, n)
		}
	}
	return cfg, nil
}

func serveHTTP(ctx context.Context, s *mcp.Server, addr string, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("demo-server: %w", err)
	}
	getServer := func(*http.Request) *mcp.Server { return s }
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(getServer, nil))
	mux.Handle("/sse", mcp.NewSSEHandler(getServer, nil))
	fmt.Fprintf(stderr, "listening on http://%s\n", ln.Addr())

	if err := mcpx.ServeHTTP(ctx, ln, mux, s, log.New(stderr, "demo-server: http: ", 0), shutdownTimeout); err != nil {
		return fmt.Errorf("demo-server: %w", err)
	}
	return nil
}
