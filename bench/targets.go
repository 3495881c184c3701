//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// target is one server setup to measure.
type target struct {
	name string
	// direct names the target this one is compared with; "" for a direct one.
	direct string
	// start starts the servers the target needs (none for stdio targets,
	// whose processes manifold-bench starts per session) and returns the
	// manifold-bench arguments that select it. stop is called after the
	// measurement, also when start fails half-way.
	start func(ctx context.Context, e *env) (args []string, err error)
}

var allTargets = []*target{
	{name: "fixture stdio", start: func(_ context.Context, e *env) ([]string, error) {
		return []string{"--", e.bin("manifold-fixture"), "--stdio"}, nil
	}},
	{name: "fixture http", start: func(ctx context.Context, e *env) ([]string, error) {
		url, pid, err := e.startFixtureHTTP(ctx)
		if err != nil {
			return nil, err
		}
		return []string{"--url", url, "--target-pid", strconv.Itoa(pid)}, nil
	}},
	{name: "manifold http→stdio", direct: "fixture http", start: func(ctx context.Context, e *env) ([]string, error) {
		cfg, err := e.config("stdio.yaml", stdioUpstream(e.bin("manifold-fixture")))
		if err != nil {
			return nil, err
		}
		url, pid, err := e.startGateway(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return []string{"--url", url, "--target-pid", strconv.Itoa(pid)}, nil
	}},
	{name: "manifold http→http", direct: "fixture http", start: func(ctx context.Context, e *env) ([]string, error) {
		furl, fpid, err := e.startFixtureHTTP(ctx)
		if err != nil {
			return nil, err
		}
		cfg, err := e.config("http.yaml", httpUpstream(furl))
		if err != nil {
			return nil, err
		}
		url, pid, err := e.startGateway(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return []string{"--url", url, "--target-pid", strconv.Itoa(pid) + "," + strconv.Itoa(fpid)}, nil
	}},
	// The reference relays stand where the gateway stands in front of the
	// same fixture, doing the least a Go proxy can (bench/relay): what the
	// machine charges any proxy for the traffic, below which no gateway's
	// CPU per call can go.
	{name: "reference tcp relay", direct: "fixture http", start: func(ctx context.Context, e *env) ([]string, error) {
		return e.startRelay(ctx, "tcp")
	}},
	{name: "reference http relay", direct: "fixture http", start: func(ctx context.Context, e *env) ([]string, error) {
		return e.startRelay(ctx, "http")
	}},
	{name: "manifold stdio→stdio", direct: "fixture stdio", start: func(_ context.Context, e *env) ([]string, error) {
		cfg, err := e.config("stdio.yaml", stdioUpstream(e.bin("manifold-fixture")))
		if err != nil {
			return nil, err
		}
		return append([]string{"--"}, e.gatewayCommand("serve", "--stdio", "--config", cfg)...), nil
	}},
}

func findTarget(name string) *target {
	for _, t := range allTargets {
		if t.name == name {
			return t
		}
	}
	return nil
}

// stdioUpstream and httpUpstream are gateway configs with the fixture as
// the one upstream, its names unprefixed.
func stdioUpstream(fixture string) string {
	return fmt.Sprintf("mcpServers:\n  conf:\n    command: %q\n    args: [\"--stdio\"]\n    prefix: \"\"\n", fixture)
}

func httpUpstream(url string) string {
	return fmt.Sprintf("mcpServers:\n  conf:\n    type: http\n    url: %q\n    prefix: \"\"\n", url)
}

// env is what one measurement runs in: the binaries, a scratch directory,
// and the server processes it started.
type env struct {
	binDir string
	dir    string
	procs  []*exec.Cmd
	waits  []chan struct{}
	// groups are process groups started by others (an MCP command
	// transport, which reaps its process), killed by stop.
	groups  []int
	logs    []string
	timeout time.Duration
	// gatewayEnv is added to the environment of the gateway's processes.
	gatewayEnv []string
}

// newEnv returns an env with a scratch directory; close stops its servers
// and removes the directory.
func newEnv(cfg config) (*env, error) {
	dir, err := os.MkdirTemp("", "manifold-bench-*")
	if err != nil {
		return nil, err
	}
	return &env{binDir: cfg.binDir, dir: dir, timeout: 30 * time.Second, gatewayEnv: cfg.gatewayEnv}, nil
}

// gatewayCommand is the command line that runs manifold with args and the
// gateway's environment settings: env(1) in front of it when there are
// some, for the load tool, which starts the stdio→stdio gateways itself.
func (e *env) gatewayCommand(args ...string) []string {
	cmd := append([]string{e.bin("manifold")}, args...)
	if len(e.gatewayEnv) == 0 {
		return cmd
	}
	return append(append([]string{"env"}, e.gatewayEnv...), cmd...)
}

func (e *env) close() {
	e.stop()
	os.RemoveAll(e.dir)
}

func (e *env) bin(name string) string { return filepath.Join(e.binDir, name) }

// config writes a gateway config file and returns its path.
func (e *env) config(name, body string) (string, error) {
	p := filepath.Join(e.dir, name)
	return p, os.WriteFile(p, []byte(body), 0o600)
}

// startProc starts a server in its own process group, with extra added to
// the environment and stderr to a log file, and returns it with its stdout.
func (e *env) startProc(name string, extra []string, args ...string) (*exec.Cmd, io.Reader, error) {
	logPath := filepath.Join(e.dir, fmt.Sprintf("%d-%s.log", len(e.procs), filepath.Base(name)))
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(name, args...)
	if len(extra) > 0 {
		cmd.Env = append(os.Environ(), extra...)
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, err
	}
	logf.Close() // the child has its own descriptor
	e.procs = append(e.procs, cmd)
	e.logs = append(e.logs, logPath)
	done := make(chan struct{})
	e.waits = append(e.waits, done)
	go func() {
		defer close(done)
		_ = cmd.Wait()
	}()
	return cmd, stdout, nil
}

// stop stops every server: SIGTERM to each process group, SIGKILL to
// those still there after 5 seconds, and SIGKILL to e.groups.
func (e *env) stop() {
	for _, c := range e.procs {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
	}
	deadline := time.After(5 * time.Second)
	for i, done := range e.waits {
		select {
		case <-done:
		case <-deadline:
		}
		_ = syscall.Kill(-e.procs[i].Process.Pid, syscall.SIGKILL)
		<-done
	}
	for _, pgid := range e.groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	e.procs, e.waits, e.groups = nil, nil, nil
}

// logTail returns the end of every server log, for error messages.
func (e *env) logTail() string {
	var b strings.Builder
	for _, p := range e.logs {
		data, _ := os.ReadFile(p)
		if len(data) > 2000 {
			data = data[len(data)-2000:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(p), data)
	}
	return b.String()
}

func (e *env) startFixtureHTTP(ctx context.Context) (string, int, error) {
	cmd, stdout, err := e.startProc(e.bin("manifold-fixture"), nil, "--http", "127.0.0.1:0")
	if err != nil {
		return "", 0, err
	}
	url, err := e.printedURL(ctx, "manifold-fixture", stdout)
	return url, cmd.Process.Pid, err
}

// startRelay starts a fixture over HTTP and a reference relay in front of
// it (bench/relay, in mode tcp or http), with the gateway's environment
// settings, and returns the manifold-bench arguments that select it.
func (e *env) startRelay(ctx context.Context, mode string) ([]string, error) {
	furl, fpid, err := e.startFixtureHTTP(ctx)
	if err != nil {
		return nil, err
	}
	u, err := neturl.Parse(furl)
	if err != nil {
		return nil, err
	}
	cmd, stdout, err := e.startProc(e.bin("manifold-relay"), e.gatewayEnv, "--mode", mode, "--upstream", u.Host)
	if err != nil {
		return nil, err
	}
	url, err := e.printedURL(ctx, "manifold-relay", stdout)
	if err != nil {
		return nil, err
	}
	return []string{"--url", url, "--target-pid", strconv.Itoa(cmd.Process.Pid) + "," + strconv.Itoa(fpid)}, nil
}

// printedURL returns the URL the server name prints as the first line of
// stdout, and discards the rest of its output.
func (e *env) printedURL(ctx context.Context, name string, stdout io.Reader) (string, error) {
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		lines <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case url := <-lines:
		if !strings.HasPrefix(url, "http://") {
			return "", fmt.Errorf("%s printed %q, not its URL", name, url)
		}
		return url, nil
	case <-time.After(e.timeout):
		return "", fmt.Errorf("%s printed no URL", name)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// startGateway starts `manifold serve` on a free port and waits until it
// lists the fixture's echo tool.
func (e *env) startGateway(ctx context.Context, cfg string) (string, int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", 0, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd, stdout, err := e.startProc(e.bin("manifold"), e.gatewayEnv, "serve", "--config", cfg, "--listen", addr)
	if err != nil {
		return "", 0, err
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	url := "http://" + addr + "/mcp"
	if err := waitForTool(ctx, url, "echo", e.timeout); err != nil {
		return "", 0, fmt.Errorf("manifold on %s: %w", addr, err)
	}
	return url, cmd.Process.Pid, nil
}

// waitForTool polls url until an MCP session there lists tool, or timeout.
func waitForTool(ctx context.Context, url, tool string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench-probe", Version: "v0"}, nil)
	var last error
	for ctx.Err() == nil {
		last = func() error {
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: tr}, DisableStandaloneSSE: true}, nil)
			if err != nil {
				return err
			}
			defer cs.Close()
			for t, err := range cs.Tools(ctx, nil) {
				if err != nil {
					return err
				}
				if t.Name == tool {
					return nil
				}
			}
			return fmt.Errorf("no tool %q yet", tool)
		}()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("not ready after %v: %w", timeout, last)
}
