package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// The test binary doubles as the child processes of these tests:
//
//	<bin> upstream-guard -- CMD…        RunGuard, as `manifold upstream-guard`
//	UPSTREAM_TEST_CHILD=demo            the demo MCP server on stdio
//	UPSTREAM_TEST_CHILD=spawner         /bin/sh leaving a `sleep 300` grandchild, then exec demo
//	UPSTREAM_TEST_CHILD=parent          starts a guard (own group) and prints its pid, then blocks
const (
	childEnv      = "UPSTREAM_TEST_CHILD"
	childNameEnv  = "UPSTREAM_TEST_NAME"        // demo server name
	ignoreTermEnv = "UPSTREAM_TEST_IGNORE_TERM" // demo: ignore SIGTERM and stdin EOF
	pdeathsigEnv  = "UPSTREAM_TEST_PDEATHSIG"   // parent: "0" starts the guard without Pdeathsig
	floodEnv      = "UPSTREAM_TEST_FLOOD"       // demo: write this many bytes as one stderr line first
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "upstream-guard" {
		os.Exit(RunGuard(os.Args[2:], os.Stderr))
	}
	switch os.Getenv(childEnv) {
	case "":
		goleak.VerifyTestMain(m)
	case "demo":
		os.Exit(runDemoChild())
	case "spawner":
		os.Exit(runSpawnerChild())
	case "parent":
		os.Exit(runParentChild())
	case "mute":
		// A server that never reads its input nor answers.
		time.Sleep(time.Hour)
		os.Exit(0)
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", childEnv, os.Getenv(childEnv))
		os.Exit(2)
	}
}

func runDemoChild() int {
	name := os.Getenv(childNameEnv)
	if name == "" {
		name = "child"
	}
	stubborn := os.Getenv(ignoreTermEnv) == "1"
	if stubborn {
		signal.Ignore(syscall.SIGTERM)
	}
	fmt.Fprintln(os.Stderr, "demo child starting") // exercises the stderr logger
	if n, _ := strconv.Atoi(os.Getenv(floodEnv)); n > 0 {
		// One over-long line, then more than a pipe buffer of short ones: a
		// reader that gave up on the long line would block us here.
		os.Stderr.WriteString(strings.Repeat("x", n) + "\n")
		for range 4096 {
			os.Stderr.WriteString(strings.Repeat("y", 99) + "\n")
		}
		os.Stderr.WriteString("flood done\n")
	}
	err := demo.Main(context.Background(), []string{"--name", name}, os.Stdin, os.Stdout, os.Stderr)
	if stubborn {
		// A server that ignores both EOF on stdin and SIGTERM: only SIGKILL ends it.
		time.Sleep(time.Minute)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runSpawnerChild emulates npx: a shell that leaves a grandchild behind,
// holding the stdout and stderr pipes, and execs the real server. The pid
// (and so the process group leader) stays the same.
func runSpawnerChild() int {
	env := append(os.Environ(), childEnv+"=demo")
	err := syscall.Exec("/bin/sh", []string{"sh", "-c", `sleep 300 & exec "$0"`, testBinary()}, env)
	fmt.Fprintln(os.Stderr, "spawner: exec:", err)
	return 1
}

// runParentChild starts `<bin> upstream-guard -- /bin/sh -c 'sleep 300 &
// sleep 300'` as the gateway would (own group, Pdeathsig SIGTERM), prints the
// guard's pid and waits to be killed (at most a minute).
func runParentChild() int {
	cmd := exec.Command(testBinary(), "upstream-guard", "--", "/bin/sh", "-c", "sleep 300 & sleep 300")
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if os.Getenv(pdeathsigEnv) == "0" {
		cmd.SysProcAttr.Pdeathsig = 0 // the guard must notice the new parent pid by itself
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "parent:", err)
		return 1
	}
	fmt.Println(cmd.Process.Pid)
	time.Sleep(time.Minute)
	return 0
}

func testBinary() string {
	p, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return p
}

// childConfig is a stdio server config that runs this test binary as child
// mode mode ("demo" or "spawner").
func childConfig(name, mode string, env map[string]string) config.Server {
	e := map[string]string{
		childEnv:     mode,
		childNameEnv: name,
		"GORACE":     "atexit_sleep_ms=0",
	}
	for k, v := range env {
		e[k] = v
	}
	return config.Server{Name: name, Type: "stdio", Command: testBinary(), Env: e}
}

// checkLeaks fails t if goroutines started during the test are still
// running once its other cleanups (registered later, run earlier) are done.
func checkLeaks(t *testing.T) {
	t.Helper()
	current := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, current) })
}

// startUpstream builds and starts an Upstream and closes it when the test
// ends (failing the test if Close takes more than 10s).
func startUpstream(t *testing.T, cfg config.Server, opts *Options) *Upstream {
	t.Helper()
	u := New(cfg, opts)
	u.Start(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := u.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return u
}

// fastOptions are Options that keep tests quick.
func fastOptions() *Options {
	return &Options{
		ConnectTimeout: 10 * time.Second,
		CallTimeout:    10 * time.Second,
		BackoffInitial: 10 * time.Millisecond,
		BackoffMax:     40 * time.Millisecond,
		StopGrace:      time.Second,
	}
}

// waitFor polls cond every 5ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitReady waits until u is ready and returns its status.
func waitReady(t *testing.T, u *Upstream, timeout time.Duration) Status {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := u.Status()
		if st.State == StateReady {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream %q not ready after %s: %+v", u.Name(), timeout, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recorder collects the statuses seen by OnChange.
type recorder struct {
	mu    sync.Mutex
	seen  []Status
	calls int
}

func (r *recorder) onChange(u *Upstream) {
	st := u.Status()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, st)
	r.calls++
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func (r *recorder) states() []Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Status(nil), r.seen...)
}

// groupGone reports whether no live process is left in process group pgid.
// Orphans are reaped by pid 1, which in some containers takes a second or
// two; a group whose members are all zombies is gone for our purposes.
func groupGone(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true
	}
	return len(liveGroupMembers(pgid)) == 0
}

// liveGroupMembers lists the pids of non-zombie processes in group pgid.
func liveGroupMembers(pgid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may contain spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 3 || fields[0] == "Z" || fields[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(fields[2]); g == pgid {
			pid, _ := strconv.Atoi(strings.Fields(s)[0])
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitGroupGone fails t unless group pgid is gone within timeout.
func waitGroupGone(t *testing.T, pgid int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !groupGone(pgid) {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has live members after %s: %v", pgid, timeout, liveGroupMembers(pgid))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killGroupOnCleanup makes sure a test that fails midway leaves no processes.
func killGroupOnCleanup(t *testing.T, pgid int) {
	t.Cleanup(func() {
		if pgid > 1 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	})
}

// memServer serves an in-process mcp.Server to an Upstream through
// Options.Transport: each connection attempt gets a fresh pipe.
type memServer struct {
	srv *mcp.Server

	mu    sync.Mutex
	conns []memConn
	dials int
}

// memConn is one connection of a memServer.
type memConn struct {
	pipe *testutil.Pipe
	ss   *mcp.ServerSession
}

func newMemServer(t *testing.T, srv *mcp.Server) *memServer {
	m := &memServer{srv: srv}
	t.Cleanup(m.close)
	return m
}

func (m *memServer) transport() (mcp.Transport, error) {
	p := testutil.NewPipe()
	ss, err := m.srv.Connect(context.Background(), p.Server, nil)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.conns = append(m.conns, memConn{pipe: p, ss: ss})
	m.dials++
	m.mu.Unlock()
	return p.Client, nil
}

func (m *memServer) dialCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dials
}

// dropAll cuts every connection, as a crashing server would: the client's
// calls in flight fail at once with a connection error (ServerSession.Close
// would not do: it waits for the handlers in flight). It returns once the
// server's handlers, cancelled by the cut, have ended.
func (m *memServer) dropAll() {
	m.mu.Lock()
	conns := m.conns
	m.conns = nil
	m.mu.Unlock()
	for _, c := range conns {
		c.pipe.Cut()
		_ = c.ss.Close()
		_ = c.ss.Wait()
	}
}

func (m *memServer) close() { m.dropAll() }

// options returns fastOptions using this server as transport.
func (m *memServer) options() *Options {
	o := fastOptions()
	o.Transport = m.transport
	return o
}

// textOf returns the text of the first content of a tool result.
func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res == nil || len(res.Content) == 0 {
		t.Fatalf("result has no content: %+v", res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content[0] is %T, want *mcp.TextContent", res.Content[0])
	}
	return tc.Text
}

// readLine reads one line from r within timeout.
func readLine(t *testing.T, r io.Reader, timeout time.Duration) string {
	t.Helper()
	type result struct {
		s   string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var b []byte
		one := make([]byte, 1)
		for {
			n, err := r.Read(one)
			if n == 1 {
				if one[0] == '\n' {
					ch <- result{s: string(b)}
					return
				}
				b = append(b, one[0])
			}
			if err != nil {
				ch <- result{s: string(b), err: err}
				return
			}
		}
	}()
	select {
	case res := <-ch:
		if res.err != nil {
			t.Fatalf("reading line: %v (got %q)", res.err, res.s)
		}
		return res.s
	case <-time.After(timeout):
		t.Fatalf("no line within %s", timeout)
		return ""
	}
}
