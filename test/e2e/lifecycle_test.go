package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/gateway"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// taggedProcesses returns the pids of processes whose environment holds
// MANIFOLD_E2E_TAG=tag: every upstream process of a test, grandchildren
// included, since they inherit the environment.
func taggedProcesses(tag string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	needle := []byte("MANIFOLD_E2E_TAG=" + tag + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if bytes.Contains(append(env, 0), needle) {
			if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(stat), ") Z ") {
				continue // a zombie is already dead
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitNoTagged(t *testing.T, tag string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		pids := taggedProcesses(tag)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var desc []string
			for _, pid := range pids {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				desc = append(desc, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
			}
			t.Fatalf("upstream processes left running %s after the gateway ended:\n%s", d, strings.Join(desc, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func newTag() string {
	b := make([]byte, 8)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// TestNoOrphans is acceptance 7: stopping the gateway (SIGTERM) and killing
// it (SIGKILL) leave no upstream process running, npx-launched ones (whose
// node process is a grandchild) included.
func TestNoOrphans(t *testing.T) {
	requireNode(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			tag := newTag()
			cfg := writeConfig(t, fmt.Sprintf(`
mcpServers:
  demo:
    command: %q
    args: [demo-server, --name, demo]
    env: { MANIFOLD_E2E_TAG: %q }
  everything:
    command: npx
    args: [--no-install, mcp-server-everything]
    cwd: %q
    env: { MANIFOLD_E2E_TAG: %q }
  spawner:   # leaves a grandchild that ignores stdin EOF, as launchers can
    command: sh
    args: [-c, "sleep 300 & exec %s demo-server --name spawner"]
    env: { MANIFOLD_E2E_TAG: %q }
`, binary, tag, nodeDir, tag, binary, tag))
			g := startGateway(t, "--config", cfg)
			waitForTool(t, g, "everything__echo")
			if n := len(taggedProcesses(tag)); n < 5 {
				t.Fatalf("expected at least 5 upstream processes (demo, npx and its node, spawner and its sleep), found %d", n)
			}
			if sig == syscall.SIGKILL {
				g.cmd.Process.Kill() // the gateway alone, not its group
			} else {
				g.cmd.Process.Signal(sig)
			}
			select {
			case <-g.done:
			case <-time.After(20 * time.Second):
				t.Fatal("gateway did not exit")
			}
			waitNoTagged(t, tag, 10*time.Second)
		})
	}
}

// TestUpstreamKilled is acceptance 5: killing an upstream process gives
// calls to it a clear error; the other upstream keeps working; the upstream
// is restarted with backoff and works again.
func TestUpstreamKilled(t *testing.T) {
	cfg := writeConfig(t, fmt.Sprintf(`
mcpServers:
  alpha: { command: %q, args: [demo-server, --name, alpha] }
  beta:  { command: %q, args: [demo-server, --name, beta] }
gateway:
  timeouts: { call: 5s }
  backoff: { initial: 1s, max: 4s }
`, binary, binary))
	g := startGateway(t, "--config", cfg)
	ctx := ctxT(t, 60*time.Second)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url("/mcp")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	pidOf := func() int {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__info"})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var info struct{ PID int }
		json.Unmarshal(b, &info)
		return info.PID
	}
	pid := pidOf()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	// Until the restart, alpha's calls fail fast with a clear error.
	var sawUnavailable bool
	for time.Since(killed) < 30*time.Second {
		start := time.Now()
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "x"}})
		if took := time.Since(start); took > 6*time.Second {
			t.Fatalf("a call to a dead upstream took %s (call timeout 5s)", took)
		}
		if err == nil {
			break // restarted
		}
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) || rpcErr.Code != gateway.CodeUpstreamUnavailable || !strings.Contains(rpcErr.Message, `"alpha"`) {
			t.Fatalf("call to killed upstream: %v; want code %d naming alpha", err, gateway.CodeUpstreamUnavailable)
		}
		if rpcErr.Code >= -32768 && rpcErr.Code <= -32000 {
			t.Fatalf("the gateway's unavailable code %d lies in the range JSON-RPC reserves", rpcErr.Code)
		}
		sawUnavailable = true
		// beta is unaffected.
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "beta__echo", Arguments: map[string]any{"message": "b"}})
		if err != nil || res.Content[0].(*mcp.TextContent).Text != "b" {
			t.Fatalf("beta while alpha is down: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !sawUnavailable {
		t.Error("never saw the unavailable error (restart faster than the first call?)")
	}
	if newPID := pidOf(); newPID == pid || newPID == 0 {
		t.Errorf("pid after restart = %d (was %d)", newPID, pid)
	}
	if !strings.Contains(g.logs.String(), `"msg":"upstream failed; retrying"`) {
		t.Error("no retry logged")
	}
}

// TestValidate is acceptance 6: three mistakes, three reports naming their
// keys, exit status not 0; a good file validates.
func TestValidate(t *testing.T) {
	bad := writeConfig(t, `
mcpServers:
  weather:
    type: http
    url: not-a-url
  local:
    comand: ./server
gateway:
  listen: 127.0.0.1:8080
  separatr: "."
`)
	out, err := exec.Command(binary, "validate", "--config", bad).CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() == 0 {
		t.Fatalf("validate of a bad file: err = %v, output:\n%s", err, out)
	}
	for _, key := range []string{"mcpServers.weather.url", "mcpServers.local.comand", "gateway.separatr"} {
		if !strings.Contains(string(out), key) {
			t.Errorf("output does not name %s:\n%s", key, out)
		}
	}
	if n := strings.Count(string(out), bad); n < 3 {
		t.Errorf("expected at least 3 problems naming the file, got %d:\n%s", n, out)
	}

	good := writeConfig(t, fmt.Sprintf("mcpServers:\n  a: { command: %q, args: [demo-server] }\n", binary))
	if out, err := exec.Command(binary, "validate", "--config", good).CombinedOutput(); err != nil {
		t.Errorf("validate of a good file: %v\n%s", err, out)
	}
}
