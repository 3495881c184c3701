// Package e2e runs the real manifold binary with real upstream processes
// (the built-in demo server, and the npm servers pinned in test/node) and
// drives it with real clients: the go-sdk and the TypeScript SDK
// (test/node/client.mjs), over stdio, streamable HTTP and SSE.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	binary  string // the manifold binary under test
	repo    string // repository root
	nodeDir string // test/node, with node_modules
)

func TestMain(m *testing.M) {
	_, file, _, _ := runtime.Caller(0)
	repo = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	nodeDir = filepath.Join(repo, "test", "node")
	dir, err := os.MkdirTemp("", "manifold-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "manifold")
	build := exec.Command("go", "build", "-o", binary, "./cmd/manifold")
	build.Dir = repo
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building manifold:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireNode skips when the pinned npm packages are not installed, except
// in CI, where .ci/run installs them and a skip would hide a failure.
func requireNode(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("test/node/node_modules missing in CI (run: npm ci --prefix test/node): %v", err)
		}
		t.Skip("test/node/node_modules not installed; run: npm ci --prefix test/node")
	}
}

// gatewayProc is a running `manifold serve`.
type gatewayProc struct {
	cmd  *exec.Cmd
	addr string // host:port, for HTTP mode
	logs *logBuffer
	done chan struct{}
}

// logBuffer collects the gateway's stderr lines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
	added chan struct{}
}

func (b *logBuffer) add(line string) {
	b.mu.Lock()
	b.lines = append(b.lines, line)
	b.mu.Unlock()
	select {
	case b.added <- struct{}{}:
	default:
	}
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// waitFor returns the first log line containing s, waiting up to d.
func (b *logBuffer) waitFor(t *testing.T, s string, d time.Duration) string {
	t.Helper()
	deadline := time.After(d)
	for {
		b.mu.Lock()
		for _, l := range b.lines {
			if strings.Contains(l, s) {
				b.mu.Unlock()
				return l
			}
		}
		b.mu.Unlock()
		select {
		case <-b.added:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("gateway log has no %q after %s; log:\n%s", s, d, b.String())
		}
	}
}

// startGateway runs `manifold serve --listen 127.0.0.1:0 args…` and waits
// until it serves. It is stopped (SIGTERM) when the test ends.
func startGateway(t *testing.T, args ...string) *gatewayProc {
	t.Helper()
	return serving(t, launch(t, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), nil))
}

// serving waits until g serves HTTP, and notes its address.
func serving(t *testing.T, g *gatewayProc) *gatewayProc {
	t.Helper()
	line := g.logs.waitFor(t, `"msg":"serving"`, 90*time.Second)
	var rec struct{ Addr string }
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Addr == "" {
		t.Fatalf("cannot read address from %q: %v", line, err)
	}
	g.addr = rec.Addr
	return g
}

// stdioPipes returns two pipes for a gateway's stdin (inR, which the
// gateway reads, and inW) and stdout (outR, outW, which it writes).
func stdioPipes(t *testing.T) (inR, inW, outR, outW *os.File) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err = os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	return inR, inW, outR, outW
}

// launch starts the binary with args; stdin, when non-nil, is its stdin.
// Each setup function may adjust the command first (its stdout, say).
func launch(t *testing.T, args []string, stdin io.Reader, setup ...func(*exec.Cmd)) *gatewayProc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = repo
	cmd.Stdin = stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for _, f := range setup {
		f(cmd)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gatewayProc{cmd: cmd, logs: &logBuffer{added: make(chan struct{}, 1)}, done: make(chan struct{})}
	scanDone := make(chan struct{})
	go func() {
		defer close(scanDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			g.logs.add(sc.Text())
		}
	}()
	go func() {
		<-scanDone
		cmd.Wait()
		close(g.done)
	}()
	t.Cleanup(func() {
		g.stop(t)
		if t.Failed() {
			t.Logf("gateway log:\n%s", g.logs.String())
		}
	})
	return g
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 15s).
func (g *gatewayProc) stop(t *testing.T) {
	select {
	case <-g.done:
		return
	default:
	}
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(15 * time.Second):
		t.Errorf("gateway did not exit within 15s of SIGTERM")
		g.cmd.Process.Kill()
		<-g.done
	}
}

func (g *gatewayProc) url(path string) string { return "http://" + g.addr + path }

// writeConfig writes a YAML config into a temp dir and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifold.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// helpers are the test programs built beside the manifold binary, by name.
var helpers struct {
	mu    sync.Mutex
	built map[string]error
}

// helperBinary builds the Go package pkg once per test run, as name beside
// the manifold binary (TestMain removes that directory), and returns its
// path.
func helperBinary(t *testing.T, name, pkg string) string {
	t.Helper()
	path := filepath.Join(filepath.Dir(binary), name)
	helpers.mu.Lock()
	defer helpers.mu.Unlock()
	err, done := helpers.built[name]
	if !done {
		build := exec.Command("go", "build", "-o", path, pkg)
		build.Dir = repo
		if out, berr := build.CombinedOutput(); berr != nil {
			err = fmt.Errorf("building %s: %v\n%s", pkg, berr, out)
		}
		if helpers.built == nil {
			helpers.built = map[string]error{}
		}
		helpers.built[name] = err
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// serverProc is a helper server process (a fixture or test upstream) that
// announces its address as its first line on stdout.
type serverProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
}

// startServerProc starts cmd in its own process group and returns it with
// the first line it prints (its address), within 30 s. It is stopped when
// the test ends.
func startServerProc(t *testing.T, name string, cmd *exec.Cmd) (*serverProc, string) {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProc{name: name, cmd: cmd, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })
	select {
	case line := <-lines:
		return p, line
	case <-p.done:
		t.Fatalf("%s exited before announcing its address", name)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not announce its address within 30s", name)
	}
	return nil, ""
}

// stop ends the process (SIGTERM, then SIGKILL after 10 s); stopping it
// again does nothing.
func (p *serverProc) stop(t *testing.T) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Errorf("%s did not exit within 10s of SIGTERM", p.name)
		p.cmd.Process.Kill()
		<-p.done
	}
}
