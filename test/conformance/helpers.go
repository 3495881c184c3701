package conformance

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Module is the import path of the repository's module.
const Module = "github.com/manifold-mcp/manifold"

// Build compiles the command package pkg of this module (for example
// "cmd/manifold-fixture") into a temporary directory that lives as long as
// t, and returns the binary's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), path.Base(pkg))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", bin, Module+"/"+pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// goTool returns the go command of the toolchain running the test: go test
// puts that toolchain's bin directory first in the test's PATH.
func goTool() string {
	return "go"
}

// StartHTTP starts bin with args (which must make it serve HTTP and print
// its endpoint URL as the first line of stdout, as manifold-fixture --http
// 127.0.0.1:0 does), waits for that line and returns the URL and the
// process id. See Start for the process's lifetime.
func StartHTTP(t testing.TB, bin string, args ...string) (url string, pid int) {
	t.Helper()
	lines := make(chan string, 1)
	pid = start(t, bin, args, lines)
	select {
	case url = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s printed no URL within 30s", bin)
	}
	if !strings.HasPrefix(url, "http://") {
		t.Fatalf("%s: first line %q is not a URL", bin, url)
	}
	return url, pid
}

// Start starts bin with args and returns its process id. The process runs
// in its own process group; when t ends it gets SIGTERM, then (after 5s,
// or at once for the rest of its group) SIGKILL. Its stdout is discarded;
// its stderr is logged when t has failed.
func Start(t testing.TB, bin string, args ...string) int {
	t.Helper()
	return start(t, bin, args, nil)
}

// StartGateway runs `manifold serve --config cfg` on a free loopback port
// until t ends and returns its streamable HTTP endpoint once it answers.
func StartGateway(t testing.TB, manifold, cfg string) string {
	t.Helper()
	addr := FreeAddr(t)
	Start(t, manifold, "serve", "--config", cfg, "--listen", addr)
	url := "http://" + addr + "/mcp"
	WaitHTTP(t, url, 30*time.Second)
	return url
}

// start starts bin; when firstLine is not nil, the first line of its
// stdout is sent there.
func start(t testing.TB, bin string, args []string, firstLine chan<- string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	ownGroup(cmd)
	// Let it stop gracefully first; killGroup follows.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	stderr := &lockedWriter{w: &strings.Builder{}}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", bin, err)
	}
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		r := bufio.NewReader(stdout)
		if firstLine != nil {
			line, _ := r.ReadString('\n')
			firstLine <- strings.TrimSpace(line)
		}
		_, _ = io.Copy(io.Discard, r)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		cancel()
		<-waited
		killGroup(cmd)
		if t.Failed() {
			t.Logf("%s %s stderr:\n%s", filepath.Base(bin), strings.Join(args, " "), stderr.String())
		}
	})
	return cmd.Process.Pid
}

// lockedWriter is a strings.Builder safe for the concurrent Write of the
// exec package and String of a cleanup.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// FreeAddr returns a loopback address with a port that was free a moment
// ago, for programs that cannot announce the port they bound.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// WaitHTTP polls url until it answers any HTTP status or timeout passes.
func WaitHTTP(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := pingClient.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not answering after %v: %v", url, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// GatewayConfig returns a manifold config (YAML) with one upstream, "conf",
// exposed without a prefix so names and URIs are what the suite calls: the
// fixture binary over stdio when upstream is a path, or the streamable HTTP
// server at upstream when it is an http:// URL.
func GatewayConfig(upstream string) string {
	if strings.HasPrefix(upstream, "http://") || strings.HasPrefix(upstream, "https://") {
		return fmt.Sprintf("mcpServers:\n  conf:\n    type: http\n    url: %q\n    prefix: \"\"\n", upstream)
	}
	return fmt.Sprintf("mcpServers:\n  conf:\n    command: %q\n    args: [\"--stdio\"]\n    prefix: \"\"\n", upstream)
}

// pingClient is the HTTP client of WaitHTTP: short timeouts, no keep-alive
// (nothing is left open after a test).
var pingClient = &http.Client{
	Timeout:   2 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true},
}
