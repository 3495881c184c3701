// Command manifold-bench is a load generator for MCP servers: it opens
// concurrent sessions to a target, makes a fixed number of tools/call
// across them and reports calls/s, call latency percentiles, errors,
// initialize and tools/list times and the resident memory of the target's
// process tree (see package internal/loadgen).
//
//	manifold-bench --url http://127.0.0.1:8080/mcp --target-pid 1234 --sessions 16 --calls 5000
//	manifold-bench --sessions 4 -- manifold-fixture --stdio
//	manifold-bench --cmd "manifold serve --stdio --config m.yaml" --json
//
// A stdio target is started once per session (a stdio server serves one
// client), so --sessions 16 over stdio runs 16 processes, each in its own
// process group, all killed at the end. --cmd is split on spaces; use the
// arguments after -- for anything that needs quoting.
//
// Exit status: 0 when every call succeeded, 1 when some failed or the run
// could not complete, 2 for bad usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/manifold-mcp/manifold/internal/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, asJSON, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "manifold-bench:", err)
		return 2
	}
	rep, err := loadgen.Run(ctx, cfg)
	if rep != nil {
		if asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if werr := enc.Encode(rep); werr != nil {
				fmt.Fprintln(stderr, "manifold-bench:", werr)
				return 1
			}
		} else if werr := rep.WriteTable(stdout); werr != nil {
			fmt.Fprintln(stderr, "manifold-bench:", werr)
			return 1
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "manifold-bench:", err)
		return 1
	}
	if rep.Errors > 0 || rep.TimedOut {
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (loadgen.Config, bool, error) {
	var (
		cfg     loadgen.Config
		command string
		toolArg string
		pids    string
		asJSON  bool
	)
	fs := flag.NewFlagSet("manifold-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Target.URL, "url", "", "streamable HTTP endpoint of the target")
	fs.StringVar(&command, "cmd", "", "stdio target `command` line, split on spaces (or give it after --)")
	fs.IntVar(&cfg.Sessions, "sessions", loadgen.DefaultSessions, "concurrent sessions (stdio: processes)")
	fs.IntVar(&cfg.Calls, "calls", loadgen.DefaultCalls, "total tools/call across all sessions")
	fs.StringVar(&cfg.Tool, "tool", loadgen.DefaultTool, "tool to call")
	fs.StringVar(&toolArg, "args", loadgen.DefaultArgs, "tool arguments, a JSON object")
	fs.DurationVar(&cfg.Duration, "duration", loadgen.DefaultDuration, "bound on the time spent calling")
	fs.DurationVar(&cfg.CallTimeout, "call-timeout", loadgen.DefaultCallTimeout, "timeout of each call and of each connect")
	fs.StringVar(&cfg.ProtocolVersion, "protocol-version", "", "protocol version to offer (default: the SDK's newest)")
	fs.StringVar(&pids, "target-pid", "", "comma-separated `pids` whose process trees count as the target's memory (URL targets)")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.Float64Var(&cfg.Rate, "rate", 0, "offer this many calls per second in all (default: as fast as answers come)")
	fs.StringVar(&cfg.Token, "token", "", "bearer `token` for every HTTP request (URL targets)")
	if err := fs.Parse(args); err != nil {
		return cfg, false, err
	}
	switch {
	case command != "" && fs.NArg() > 0:
		return cfg, false, errors.New("give the stdio command with --cmd or after --, not both")
	case command != "":
		cfg.Target.Command = strings.Fields(command)
	case fs.NArg() > 0:
		cfg.Target.Command = fs.Args()
	}
	if (cfg.Target.URL == "") == (len(cfg.Target.Command) == 0) {
		return cfg, false, errors.New("give exactly one target: --url, or a stdio command (--cmd or after --)")
	}
	if cfg.Sessions < 1 || cfg.Calls < 1 {
		return cfg, false, errors.New("--sessions and --calls must be at least 1")
	}
	if cfg.Duration <= 0 || cfg.CallTimeout <= 0 {
		return cfg, false, errors.New("--duration and --call-timeout must be positive")
	}
	cfg.Args = json.RawMessage(toolArg)
	for p := range strings.SplitSeq(pids, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		pid, err := strconv.Atoi(p)
		if err != nil || pid <= 0 {
			return cfg, false, fmt.Errorf("--target-pid: %q is not a process id", p)
		}
		cfg.TargetPIDs = append(cfg.TargetPIDs, pid)
	}
	return cfg, asJSON, nil
}
