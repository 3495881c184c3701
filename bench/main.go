//go:build linux

// Command bench measures what Manifold costs. It runs one workload (C
// sessions making N calls of the fixture's echo tool, measured by
// manifold-bench) against seven targets, in alternation over several rounds
// so that drift in the machine affects them alike:
//
//	fixture stdio          the fixture, one process per session (direct)
//	fixture http           the fixture over streamable HTTP (direct)
//	manifold http→stdio    the gateway over HTTP, the fixture as a stdio upstream
//	manifold http→http     the gateway over HTTP, the fixture as an HTTP upstream
//	reference tcp relay    a Go process copying bytes between client and fixture http
//	reference http relay   a Go process relaying HTTP/1.1 messages to fixture http
//	manifold stdio→stdio   the gateway over stdio (one per session), the fixture as its stdio upstream
//
// and prints, per session count, the median of each metric over the rounds
// and its ratio to the direct target of the same downstream transport
// (HTTP targets to fixture http, stdio ones to fixture stdio). Every
// server is started afresh for each measurement and stopped after it.
//
// With --memory it measures instead the gateway process's memory: the peak
// growth of its resident set while one large tools/call result and one large
// resources/read pass through it (HTTP→stdio, HTTP→HTTP, stdio→stdio), and
// its growth with many idle sessions, each holding its GET stream
// (memory.go).
//
// bench/run.sh builds the binaries and runs it; --short runs each target
// once with tiny counts (what CI checks).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/manifold-mcp/manifold/internal/fixture"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// config is the suite's configuration.
type config struct {
	// binDir holds the binaries.
	binDir string
	// rounds is how many times every (target, sessions) pair is measured.
	rounds int
	// sessions are the session counts to measure.
	sessions []int
	// calls is the number of calls per measurement.
	calls int
	// duration bounds one measurement's call phase.
	duration time.Duration
	// targets, if not empty, restricts the targets by name.
	targets []string
	// jsonOut, if set, is a file to write every report to.
	jsonOut string
	// memory selects the memory mode; payload is its message size and
	// idleSessions its number of idle sessions.
	memory       bool
	payload      int
	idleSessions int
	// gatewayEnv are KEY=VALUE settings added to the environment of the
	// gateway's processes and of the reference relays, which stand in for
	// it (not the fixture's, not the load tool's).
	gatewayEnv []string
}

// binaries are the programs the suite runs, built into --bin by
// bench/run.sh: the gateway, the fixture, the load tool, and the reference
// relay (bench/relay).
var binaries = []string{"manifold", "manifold-fixture", "manifold-bench", "manifold-relay"}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var (
		cfg      config
		short    bool
		sessions string
		targets  string
		genv     string
	)
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.binDir, "bin", "", "`dir` with the manifold, manifold-fixture, manifold-bench and manifold-relay binaries (required)")
	fs.IntVar(&cfg.rounds, "rounds", 5, "rounds: each target is measured once per round and session count")
	fs.StringVar(&sessions, "sessions", "1,16,64", "comma-separated session counts")
	fs.IntVar(&cfg.calls, "calls", 5000, "tools/call per measurement")
	fs.DurationVar(&cfg.duration, "duration", 2*time.Minute, "bound on one measurement's calls")
	fs.StringVar(&targets, "targets", "", "comma-separated target names to run (default all)")
	fs.StringVar(&cfg.jsonOut, "json", "", "also write every report and the medians to this `file`")
	fs.BoolVar(&short, "short", false, "smoke test: one round, sessions 1 and 4, 20 calls (with --memory: a 64 KiB payload, 20 idle sessions)")
	fs.BoolVar(&cfg.memory, "memory", false, "measure the gateway's memory (large payloads, idle sessions) instead of throughput")
	fs.IntVar(&cfg.payload, "payload", 4<<20, "with --memory: bytes of the tool result and of the resource read")
	fs.IntVar(&cfg.idleSessions, "idle-sessions", 1000, "with --memory: idle sessions to open")
	fs.StringVar(&genv, "gateway-env", "", "comma-separated `KEY=VALUE` settings for the gateway's processes (and the reference relays) only, such as GOMAXPROCS=1")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.binDir == "" {
		return cfg, errors.New("--bin is required (bench/run.sh builds the binaries)")
	}
	if short {
		cfg.rounds, sessions, cfg.calls, cfg.duration = 1, "1,4", 20, 30*time.Second
		cfg.payload, cfg.idleSessions = 64<<10, 20
	}
	if cfg.payload < 1<<10 || cfg.payload > fixture.MaxPayloadBytes/2 || cfg.idleSessions < 1 {
		return cfg, fmt.Errorf("--payload must be in [1024, %d] and --idle-sessions positive", fixture.MaxPayloadBytes/2)
	}
	for s := range strings.SplitSeq(sessions, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("--sessions: %q is not a positive number", s)
		}
		cfg.sessions = append(cfg.sessions, n)
	}
	for t := range strings.SplitSeq(targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			if findTarget(t) == nil {
				return cfg, fmt.Errorf("--targets: unknown target %q", t)
			}
			cfg.targets = append(cfg.targets, t)
		}
	}
	for kv := range strings.SplitSeq(genv, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" || strings.ContainsAny(k, " \t") {
			return cfg, fmt.Errorf("--gateway-env: %q is not KEY=VALUE", kv)
		}
		cfg.gatewayEnv = append(cfg.gatewayEnv, kv)
	}
	if cfg.rounds < 1 || cfg.calls < 1 || cfg.duration <= 0 {
		return cfg, errors.New("--rounds, --calls and --duration must be positive")
	}
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(cfg.binDir, b)); err != nil {
			return cfg, fmt.Errorf("--bin: %w", err)
		}
	}
	return cfg, nil
}
