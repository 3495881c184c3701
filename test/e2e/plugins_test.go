package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/loadgen"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fileSum returns the hex SHA-256 of the file at path.
func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// pluginStatus is one entry of /status's plugins.
type pluginStatus struct {
	Name     string
	Up       bool
	PID      string
	Restarts int
	Error    string
}

func pluginStatuses(t *testing.T, g *gatewayProc) map[string]pluginStatus {
	t.Helper()
	resp, err := http.Get(g.url("/status"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct{ Plugins []pluginStatus }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	out := map[string]pluginStatus{}
	for _, p := range st.Plugins {
		out[p.Name] = p
	}
	return out
}

// textOf returns the text of a tool result's contents.
func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	if res == nil {
		return ""
	}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestPluginsNode: server-everything behind the real binary with the
// builtin redact and guard plugins, the example rename plugin built as a
// separate binary, and a plugin whose sha256 is wrong; over streamable
// HTTP and over stdio.
func TestPluginsNode(t *testing.T) {
	requireNode(t)
	rename := helperBinary(t, "rename-plugin", "./plugins/examples/rename")
	everything := filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	cfg := writeConfig(t, fmt.Sprintf(`
mcpServers:
  everything:
    command: node
    args: [%q, stdio]
plugins:
  - name: guard
    builtin: guard
    match: { tools: ["everything__echo"] }
    config:
      rules:
        - name: traversal
          tools: ["everything__echo"]
          pathTraversal: true
          message: "path traversal is not allowed here"
  - name: redact
    builtin: redact
    priority: 10
    config: { detectors: [secrets, pii] }
  - name: rename
    command: [%q]
    sha256: %q
    config: { renames: { everything__get-sum: add } }
  - name: broken
    command: [%q]
    sha256: "%s"
    match: { servers: [nothing] }
`, everything, rename, fileSum(t, rename), rename, strings.Repeat("0", 64)))

	check := func(t *testing.T, cs *mcp.ClientSession) {
		ctx := ctxT(t, 60*time.Second)
		msg := "key AKIAIOSFODNN7EXAMPLE mail jane.doe@example.com"
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": msg}})
		if err != nil {
			t.Fatal(err)
		}
		text := textOf(res)
		if strings.Contains(text, "AKIAIOSFODNN7EXAMPLE") || strings.Contains(text, "jane.doe@example.com") ||
			!strings.Contains(text, "[REDACTED:aws_access_key]") || !strings.Contains(text, "[REDACTED:email]") {
			t.Errorf("echo through redact = %q; want the key and the email redacted", text)
		}
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__echo", Arguments: map[string]any{"message": "../../etc/passwd"}})
		if err == nil || !strings.Contains(err.Error(), "path traversal is not allowed here") {
			t.Errorf("traversal through guard: %v; want the rule's message", err)
		}
		var names []string
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, tool.Name)
		}
		if !contains(names, "add") || contains(names, "everything__get-sum") {
			t.Errorf("tools %v; want everything__get-sum listed as add", names)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}})
		if err != nil || res.IsError || !strings.Contains(textOf(res), "5") {
			t.Errorf("add (renamed by the example plugin) = %q, %v", textOf(res), err)
		}
	}

	t.Run("http", func(t *testing.T) {
		g := startGateway(t, "--config", cfg)
		waitForTool(t, g, "everything__echo")
		st := pluginStatuses(t, g)
		if b := st["broken"]; b.Up || !strings.Contains(b.Error, "does not match its sha256") {
			t.Errorf("broken plugin status = %+v; want refused for its checksum", b)
		}
		for _, name := range []string{"guard", "redact", "rename"} {
			if !st[name].Up {
				t.Errorf("plugin %s not up: %+v", name, st[name])
			}
		}
		g.logs.waitFor(t, "does not match its sha256", 5*time.Second)
		check(t, connectHTTP(t, g, nil))
	})
	t.Run("stdio", func(t *testing.T) {
		_, c := startStdioClient(t, cfg)
		waitForToolOn(t, c.cs, "everything__echo")
		check(t, c.cs)
	})
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// waitForToolOn waits until cs lists name.
func waitForToolOn(t *testing.T, cs *mcp.ClientSession, name string) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	for {
		for tool, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			if tool.Name == name {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never listed", name)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// loadConfig is the demo server behind the gateway with the test plugin
// covering demo__echo only; onError as given, and extra plugins entries.
func loadConfig(t *testing.T, plugin, onError, config, extra string) string {
	return fmt.Sprintf(`
mcpServers:
  demo:
    command: %q
    args: [demo-server]
plugins:
  - name: tp
    command: [%q]
    sha256: %q
    onError: %s
    timeout: 2s
    match: { tools: [demo__echo] }
    config: %s
%s`, binary, plugin, fileSum(t, plugin), onError, config, extra)
}

// runLoad drives g's tool with the load tool's engine (internal/loadgen,
// as manifold-bench runs it): 8 sessions sharing calls calls. The report
// arrives on the channel when they are done.
func runLoad(t *testing.T, g *gatewayProc, tool string, calls int) <-chan *loadgen.Report {
	t.Helper()
	done := make(chan *loadgen.Report, 1)
	go func() {
		rep, err := loadgen.Run(context.Background(), loadgen.Config{
			Target: loadgen.Target{URL: g.url("/mcp")}, Sessions: 8, Calls: calls, Tool: tool,
			Duration: 2 * time.Minute, CallTimeout: 10 * time.Second, ProtocolVersion: "2025-11-25",
		})
		if err != nil {
			t.Errorf("load: %v", err)
		}
		done <- rep
	}()
	return done
}

// pluginChild returns the pid of the plugin process under the guard gpid
// (a child of any of its threads).
func pluginChild(t *testing.T, gpid string) int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/" + gpid + "/task/*/children")
	if err != nil {
		t.Fatal(err)
	}
	var f []string
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		f = append(f, strings.Fields(string(b))...)
	}
	if len(f) != 1 {
		t.Fatalf("guard %s has children %q; want the plugin", gpid, f)
	}
	pid, _ := strconv.Atoi(f[0])
	return pid
}

// waitPluginBack waits until plugin tp is up with a pid other than old and
// returns how long that took from since.
func waitPluginBack(t *testing.T, g *gatewayProc, old string, since time.Time) time.Duration {
	t.Helper()
	for {
		if st := pluginStatuses(t, g)["tp"]; st.Up && st.PID != old {
			return time.Since(since)
		}
		if time.Since(since) > 30*time.Second {
			t.Fatal("plugin not back after 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPluginKilledUnderLoad: 8 sessions call the covered tool while the
// plugin is killed with SIGKILL: fail-closed calls get a clear error while
// it is down, fail-open calls all pass; it is back within 2 s; SIGKILL of
// the gateway leaves no plugin process.
func TestPluginKilledUnderLoad(t *testing.T) {
	plugin := helperBinary(t, "testplugin", "./plugins/internal/testplugin/cmd/testplugin")
	for _, onError := range []string{"fail-closed", "fail-open"} {
		t.Run(onError, func(t *testing.T) {
			g := startGateway(t, "--config", writeConfig(t, loadConfig(t, plugin, onError, `{block: never}`, "")))
			waitForTool(t, g, "demo__echo")
			st := pluginStatuses(t, g)["tp"]
			child := pluginChild(t, st.PID)
			load := runLoad(t, g, "demo__echo", 4000)
			time.Sleep(time.Second) // sessions connected, calls in flight
			killed := time.Now()
			if err := syscall.Kill(child, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			back := waitPluginBack(t, g, st.PID, killed)
			rep := <-load
			if rep == nil {
				t.FailNow()
			}
			t.Logf("%s: plugin back after %s; %d calls, %d failed %q; p50 %s", onError, back, rep.Calls, rep.Errors, rep.ErrorSamples, rep.Latency.P50)
			if back > 2*time.Second {
				t.Errorf("plugin back after %s; want within 2 s", back)
			}
			switch onError {
			case "fail-open":
				if rep.Errors != 0 {
					t.Errorf("%d of %d fail-open calls failed: %q", rep.Errors, rep.Calls, rep.ErrorSamples)
				}
			case "fail-closed":
				for _, msg := range rep.ErrorSamples {
					if !strings.Contains(msg, `plugin "tp" is unavailable (fail-closed)`) {
						t.Errorf("fail-closed error %q; want it to name the plugin", msg)
					}
				}
			}
			// The gateway serves on; then SIGKILL it: no plugin left.
			cur := pluginStatuses(t, g)["tp"]
			pid := pluginChild(t, cur.PID)
			g.cmd.Process.Signal(syscall.SIGKILL)
			<-g.done
			gpid, _ := strconv.Atoi(cur.PID)
			for _, p := range []int{gpid, pid} {
				deadline := time.Now().Add(10 * time.Second)
				for syscall.Kill(p, 0) == nil {
					if time.Now().After(deadline) {
						t.Fatalf("process %d still running 10 s after the gateway was killed", p)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
}

// TestPluginHotReloadUnderLoad: while 8 sessions call a tool no plugin
// covers (other__echo), the plugin's config changes (applied without a
// restart), a plugin is added and removed: zero failed calls.
func TestPluginHotReloadUnderLoad(t *testing.T) {
	plugin := helperBinary(t, "testplugin", "./plugins/internal/testplugin/cmd/testplugin")
	other := fmt.Sprintf("  other:\n    command: %q\n    args: [demo-server, --name, other]\n", binary)
	write := func(config, extra string) string {
		c := loadConfig(t, plugin, "fail-closed", config, extra)
		return strings.Replace(c, "mcpServers:\n", "mcpServers:\n"+other, 1)
	}
	path := writeConfig(t, write(`{block: never}`, ""))
	g := startGateway(t, "--config", path)
	waitForTool(t, g, "demo__echo")
	waitForTool(t, g, "other__echo")
	pid := pluginStatuses(t, g)["tp"].PID
	load := runLoad(t, g, "other__echo", 10000)
	probe := connectHTTP(t, g, nil)
	blocked := func(word string) bool {
		_, err := probe.CallTool(ctxT(t, 10*time.Second), &mcp.CallToolParams{Name: "demo__echo", Arguments: map[string]any{"message": word}})
		return err != nil && strings.Contains(err.Error(), "no "+word)
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 30 s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	reload := func(doc string) {
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	reload(write(`{block: zzz}`, ""))
	until("the new config blocks zzz", func() bool { return blocked("zzz") })
	if got := pluginStatuses(t, g)["tp"].PID; got != pid {
		t.Errorf("config-only reload restarted the plugin: pid %s → %s", pid, got)
	}
	add := fmt.Sprintf("  - name: tp2\n    command: [%q]\n    sha256: %q\n    match: { tools: [demo__echo] }\n    config: {block: yyy}\n", plugin, fileSum(t, plugin))
	reload(write(`{block: zzz}`, add))
	until("the added plugin blocks yyy", func() bool { return blocked("yyy") })
	reload(write(`{block: zzz}`, ""))
	until("the removed plugin no longer blocks", func() bool { return !blocked("yyy") })
	select {
	case <-load:
		t.Fatal("the load ended before the reloads did: raise its calls")
	default:
	}
	rep := <-load
	if rep == nil {
		t.FailNow()
	}
	t.Logf("%d calls to the uncovered tool across the reloads, %d failed; p50 %s", rep.Calls, rep.Errors, rep.Latency.P50)
	if rep.Errors != 0 || rep.Completed == 0 {
		t.Errorf("%d of %d calls to the uncovered tool failed: %q", rep.Errors, rep.Calls, rep.ErrorSamples)
	}
}
