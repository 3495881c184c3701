package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// callInfo calls the demo's info tool.
func callInfo(t *testing.T, u *Upstream) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "info"})
	if err != nil {
		t.Fatalf("info: %v", err)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("info structured content %s: %v", b, err)
	}
	return out
}

func TestStdioUpstream(t *testing.T) {
	tests := []struct {
		name  string
		guard bool
	}{
		{name: "direct", guard: false},
		{name: "guarded", guard: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			dir := t.TempDir()
			cfg := childConfig("alpha", "demo", map[string]string{"DEMO_VALUE": "hello from config"})
			cfg.Cwd = dir
			opts := fastOptions()
			if tt.guard {
				opts.GuardPath = testBinary()
			}
			var rec recorder
			opts.OnChange = rec.onChange
			u := startUpstream(t, cfg, opts)
			st := waitReady(t, u, 10*time.Second)
			killGroupOnCleanup(t, st.PID)

			if st.Name != "alpha" || st.Transport != "stdio" || st.PID <= 0 || st.Restarts != 0 || st.Error != "" {
				t.Errorf("status = %+v, want name alpha, transport stdio, a pid, no restarts, no error", st)
			}
			if rec.count() == 0 {
				t.Error("OnChange was not called on ready")
			}

			cat := u.Catalog()
			if cat == nil {
				t.Fatal("Catalog() = nil after ready")
			}
			var names []string
			for _, tool := range cat.Tools {
				names = append(names, tool.Name)
			}
			for _, want := range []string{"echo", "add", "image", "fail", "slow", "info", "link"} {
				if !slices.Contains(names, want) {
					t.Errorf("catalog tools %v lack %q", names, want)
				}
			}
			if cat.ServerInfo == nil || cat.ServerInfo.Name != "alpha" {
				t.Errorf("catalog server info = %+v, want name alpha", cat.ServerInfo)
			}
			if cat.ProtocolVersion == "" || !strings.Contains(cat.Instructions, "alpha") {
				t.Errorf("catalog protocol %q, instructions %q", cat.ProtocolVersion, cat.Instructions)
			}
			if len(cat.Prompts) == 0 || len(cat.Resources) == 0 || len(cat.Templates) == 0 {
				t.Errorf("catalog has %d prompts, %d resources, %d templates; want some of each",
					len(cat.Prompts), len(cat.Resources), len(cat.Templates))
			}

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi there"}})
			if err != nil {
				t.Fatalf("echo: %v", err)
			}
			if got := textOf(t, res); got != "hi there" {
				t.Errorf("echo = %q, want %q", got, "hi there")
			}

			info := callInfo(t, u)
			wantDir, _ := filepath.EvalSymlinks(dir)
			gotDir, _ := filepath.EvalSymlinks(info["cwd"].(string))
			if gotDir != wantDir {
				t.Errorf("child cwd = %q, want %q", info["cwd"], dir)
			}
			if info["env"] != "hello from config" {
				t.Errorf("child DEMO_VALUE = %q, want %q", info["env"], "hello from config")
			}
			childPID := int(info["pid"].(float64))
			if tt.guard {
				// Status reports the guard, the group leader; the server runs in its group.
				if childPID == st.PID {
					t.Errorf("server pid = status pid %d, want the guard's child", childPID)
				}
				if pgid, err := syscall.Getpgid(childPID); err != nil || pgid != st.PID {
					t.Errorf("server's process group = %d (%v), want %d", pgid, err, st.PID)
				}
			} else if childPID != st.PID {
				t.Errorf("Status().PID = %d, want the child's pid %d", st.PID, childPID)
			}
			if pgid, err := syscall.Getpgid(st.PID); err != nil || pgid != st.PID {
				t.Errorf("child's process group = %d (%v), want its own (%d)", pgid, err, st.PID)
			}

			// The other forwarded methods reach the server too.
			if _, err := u.GetPrompt(ctx, &mcp.GetPromptParams{Name: cat.Prompts[0].Name, Arguments: promptArgs(cat.Prompts[0])}); err != nil {
				t.Errorf("GetPrompt(%q): %v", cat.Prompts[0].Name, err)
			}
			if _, err := u.ReadResource(ctx, &mcp.ReadResourceParams{URI: cat.Resources[0].URI}); err != nil {
				t.Errorf("ReadResource(%q): %v", cat.Resources[0].URI, err)
			}
		})
	}
}

// promptArgs fills every argument of p with "x".
func promptArgs(p *mcp.Prompt) map[string]string {
	args := map[string]string{}
	for _, a := range p.Arguments {
		args[a.Name] = "x"
	}
	return args
}

func TestGracefulStop(t *testing.T) {
	tests := []struct {
		name     string
		mode     string // child mode
		stubborn bool   // ignores stdin EOF and SIGTERM
		guard    bool
		maxStop  time.Duration
	}{
		{name: "direct", mode: "demo", maxStop: 3 * time.Second},
		{name: "guarded", mode: "demo", guard: true, maxStop: 3 * time.Second},
		{name: "grandchild direct", mode: "spawner", maxStop: 4 * time.Second},
		{name: "grandchild guarded", mode: "spawner", guard: true, maxStop: 4 * time.Second},
		{name: "stubborn direct", mode: "demo", stubborn: true, maxStop: 3 * time.Second},
		{name: "stubborn guarded", mode: "demo", stubborn: true, guard: true, maxStop: 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			env := map[string]string{}
			if tt.stubborn {
				env[ignoreTermEnv] = "1"
			}
			opts := fastOptions()
			opts.StopGrace = 300 * time.Millisecond
			if tt.guard {
				opts.GuardPath = testBinary()
			}
			u := New(childConfig("stopper", tt.mode, env), opts)
			u.Start(context.Background())
			st := waitReady(t, u, 10*time.Second)
			pgid := st.PID
			killGroupOnCleanup(t, pgid)

			if tt.mode == "spawner" {
				// The shell's `sleep 300` is in the group beside the server.
				waitFor(t, 5*time.Second, "the grandchild to appear", func() bool {
					return len(liveGroupMembers(pgid)) >= 2
				})
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			if err := u.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			took := time.Since(start)
			if took > tt.maxStop {
				t.Errorf("Close took %s, want at most %s", took, tt.maxStop)
			}
			t.Logf("Close took %s", took)
			waitGroupGone(t, pgid, 5*time.Second)

			if got := u.Status(); got.State != StateStopped || got.PID != 0 {
				t.Errorf("status after Close = %+v, want stopped without pid", got)
			}
			select {
			case <-u.Done():
			default:
				t.Error("Done() not closed after Close")
			}
			_, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "x"}})
			if !errors.Is(err, ErrClosed) {
				t.Errorf("CallTool after Close: err = %v, want ErrClosed", err)
			}
			if err := u.Close(ctx); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

func TestCloseBeforeStart(t *testing.T) {
	u := New(childConfig("never", "demo", nil), nil)
	if err := u.Close(context.Background()); err != nil {
		t.Errorf("Close before Start = %v, want nil", err)
	}
}

func TestCloseTimeout(t *testing.T) {
	checkLeaks(t)
	// A stubborn server and long grace periods: Close gives up when its ctx ends.
	opts := fastOptions()
	opts.StopGrace = 500 * time.Millisecond
	u := New(childConfig("slowstop", "demo", map[string]string{ignoreTermEnv: "1"}), opts)
	u.Start(context.Background())
	st := waitReady(t, u, 10*time.Second)
	killGroupOnCleanup(t, st.PID)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := u.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `"slowstop"`) {
		t.Errorf("Close with a short deadline = %v, want DeadlineExceeded naming the server", err)
	}
	select {
	case <-u.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("supervisor did not finish stopping")
	}
	waitGroupGone(t, st.PID, 5*time.Second)
}

func TestCrashRestart(t *testing.T) {
	tests := []struct {
		name  string
		guard bool
	}{
		{name: "direct"},
		{name: "guarded", guard: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			opts := fastOptions()
			if tt.guard {
				opts.GuardPath = testBinary()
			}
			// While the upstream is failed, calls must fail fast and clearly.
			// OnChange runs on the supervisor right after the state changed,
			// so a call from it sees exactly that state.
			type failure struct {
				status Status
				err    error
			}
			failures := make(chan failure, 10)
			opts.OnChange = func(up *Upstream) {
				if st := up.Status(); st.State == StateFailed {
					_, err := up.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo"})
					select {
					case failures <- failure{status: st, err: err}:
					default:
					}
				}
			}
			u := startUpstream(t, childConfig("crashy", "demo", nil), opts)
			first := waitReady(t, u, 10*time.Second)
			killGroupOnCleanup(t, first.PID)

			if err := syscall.Kill(-first.PID, syscall.SIGKILL); err != nil {
				t.Fatalf("kill: %v", err)
			}
			var f failure
			select {
			case f = <-failures:
			case <-time.After(5 * time.Second):
				t.Fatalf("state never went failed; status %+v", u.Status())
			}
			if f.status.Error == "" {
				t.Errorf("failed status has no error: %+v", f.status)
			}
			if !errors.Is(f.err, ErrUnavailable) || !strings.Contains(f.err.Error(), `"crashy"`) {
				t.Errorf("call while failed: err = %v, want ErrUnavailable naming the server", f.err)
			}
			if u.Catalog() == nil {
				t.Error("catalog dropped while restarting; want the last one kept")
			}

			waitFor(t, 10*time.Second, "ready again after the crash", func() bool {
				st := u.Status()
				return st.State == StateReady && st.PID != first.PID
			})
			second := u.Status()
			killGroupOnCleanup(t, second.PID)
			if second.Restarts < 1 {
				t.Errorf("restarts = %d, want >= 1", second.Restarts)
			}
			waitGroupGone(t, first.PID, 5*time.Second)

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "back"}})
			if err != nil {
				t.Fatalf("echo after restart: %v", err)
			}
			if got := textOf(t, res); got != "back" {
				t.Errorf("echo after restart = %q", got)
			}
		})
	}
}

// TestChildExitWithGrandchild kills only the direct child while a grandchild
// keeps the stdout pipe open (npx and its node process): the upstream must
// still notice and restart, and the grandchild must not survive.
func TestChildExitWithGrandchild(t *testing.T) {
	checkLeaks(t)
	opts := fastOptions()
	opts.KeepAlive = -1 // the process exit alone must be enough
	u := startUpstream(t, childConfig("npxlike", "spawner", nil), opts)
	first := waitReady(t, u, 10*time.Second)
	killGroupOnCleanup(t, first.PID)
	waitFor(t, 5*time.Second, "the grandchild to appear", func() bool {
		return len(liveGroupMembers(first.PID)) >= 2
	})

	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil { // the child only
		t.Fatalf("kill: %v", err)
	}
	waitFor(t, 5*time.Second, "a restart", func() bool {
		st := u.Status()
		return st.State == StateReady && st.PID != first.PID
	})
	killGroupOnCleanup(t, u.Status().PID)
	waitGroupGone(t, first.PID, 5*time.Second)
}

func TestDialFailures(t *testing.T) {
	noPEM := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(noPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cfg     config.Server
		wantErr string
	}{
		{
			name:    "missing command",
			cfg:     config.Server{Name: "ghost", Type: "stdio", Command: "/nonexistent/manifold-test-command"},
			wantErr: `command "/nonexistent/manifold-test-command"`,
		},
		{
			name:    "command not on PATH",
			cfg:     config.Server{Name: "ghost", Command: "manifold-test-no-such-command-xyz"},
			wantErr: "executable file not found",
		},
		{
			name:    "unknown transport",
			cfg:     config.Server{Name: "ghost", Type: "pigeon"},
			wantErr: `unknown transport type "pigeon"`,
		},
		{
			name:    "caFile without PEM",
			cfg:     config.Server{Name: "ghost", Type: "http", URL: "https://127.0.0.1:1/mcp", CAFile: noPEM},
			wantErr: "no PEM certificates found",
		},
		{
			name:    "caFile missing",
			cfg:     config.Server{Name: "ghost", Type: "sse", URL: "https://127.0.0.1:1/sse", CAFile: noPEM + ".missing"},
			wantErr: "caFile: open",
		},
		{
			name:    "server exits at once",
			cfg:     config.Server{Name: "ghost", Type: "stdio", Command: "/bin/sh", Args: []string{"-c", "exit 3"}},
			wantErr: "connect:",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			opts := fastOptions()
			opts.BackoffMax = 20 * time.Millisecond
			u := startUpstream(t, tt.cfg, opts)
			waitFor(t, 5*time.Second, "two retries", func() bool { return u.Status().Restarts >= 2 })
			// The error is recorded while failed and cleared while connecting; wait for it.
			var st Status
			waitFor(t, 5*time.Second, "a failed state", func() bool {
				st = u.Status()
				return st.State == StateFailed
			})
			if !strings.Contains(st.Error, tt.wantErr) {
				t.Errorf("status error = %q, want it to contain %q", st.Error, tt.wantErr)
			}
			if u.Catalog() != nil {
				t.Errorf("catalog = %+v, want nil before any connection", u.Catalog())
			}
			_, err := u.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo"})
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), `"ghost"`) {
				t.Errorf("CallTool = %v, want ErrUnavailable naming the server", err)
			}
		})
	}
}

func TestBackoffGrows(t *testing.T) {
	checkLeaks(t)
	// With a 20ms initial delay doubling to 160ms, five attempts need at
	// least 10+20+40+80 = 150ms (each wait is at least half the delay).
	opts := fastOptions()
	opts.BackoffInitial = 20 * time.Millisecond
	opts.BackoffMax = 160 * time.Millisecond
	start := time.Now()
	u := startUpstream(t, config.Server{Name: "ghost", Command: "/nonexistent/x"}, opts)
	waitFor(t, 5*time.Second, "four restarts", func() bool { return u.Status().Restarts >= 4 })
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("four restarts took %s, want at least 150ms of backoff", took)
	}
	// And it is capped: 6 more attempts at most 160ms apart.
	waitFor(t, 3*time.Second, "ten restarts", func() bool { return u.Status().Restarts >= 10 })
}

// TestStderrLogged: the server's stderr reaches the log line by line; an
// over-long line is split rather than ending the logging (which would leave
// the pipe unread and block the server on its next write).
func TestStderrLogged(t *testing.T) {
	checkLeaks(t)
	core, logs := observer.New(zap.InfoLevel)
	opts := fastOptions()
	opts.Logger = zap.New(core)
	opts.ConnectTimeout = 5 * time.Second
	const long = 100 << 10
	u := startUpstream(t, childConfig("noisy", "demo", map[string]string{floodEnv: strconv.Itoa(long)}), opts)
	st := waitReady(t, u, 10*time.Second)
	killGroupOnCleanup(t, st.PID)

	waitFor(t, 5*time.Second, "the stderr lines in the log", func() bool {
		return logs.FilterMessage("upstream stderr").FilterField(zap.String(keyLine, "flood done")).Len() == 1
	})
	var starting, xs int
	for _, e := range logs.FilterMessage("upstream stderr").All() {
		line := e.ContextMap()[keyLine]
		switch s, _ := line.(string); {
		case s == "demo child starting":
			starting++
		case strings.HasPrefix(s, "x"):
			if len(s) > maxStderrLine {
				t.Errorf("logged a stderr line of %d bytes, want at most %d", len(s), maxStderrLine)
			}
			xs += len(s)
		}
	}
	if starting != 1 || xs != long {
		t.Errorf("logged %d start lines and %d bytes of the long line; want 1 and %d", starting, xs, long)
	}
}

// TestMaxMessageBytes: a message over the limit from a stdio server fails the
// call and the connection (the SDK cannot resynchronise), not the gateway.
func TestMaxMessageBytes(t *testing.T) {
	checkLeaks(t)
	opts := fastOptions()
	opts.MaxMessageBytes = 64 << 10
	u := startUpstream(t, childConfig("big", "demo", nil), opts)
	first := waitReady(t, u, 10*time.Second)
	killGroupOnCleanup(t, first.PID)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if got, err := echo(ctx, u, strings.Repeat("s", 1000)); err != nil || len(got) != 1000 {
		t.Fatalf("small echo = %d bytes, %v", len(got), err)
	}
	_, err := echo(ctx, u, strings.Repeat("b", 100<<10))
	if err == nil || !strings.Contains(err.Error(), `"big"`) {
		t.Fatalf("echo of 100KiB with a 64KiB limit: err = %v, want an error naming the server", err)
	}
	t.Logf("oversized answer: %v", err)
	waitFor(t, 10*time.Second, "a restart", func() bool {
		st := u.Status()
		return st.State == StateReady && st.Restarts >= 1
	})
	killGroupOnCleanup(t, u.Status().PID)
	if got, err := echo(ctx, u, "again"); err != nil || got != "again" {
		t.Errorf("echo after restart = %q, %v", got, err)
	}
}

// TestRelativeCommandUsesCwd: a command such as "./server" is found in the
// server's cwd, not the gateway's.
func TestRelativeCommandUsesCwd(t *testing.T) {
	checkLeaks(t)
	dir := t.TempDir()
	if err := os.Symlink(testBinary(), filepath.Join(dir, "server")); err != nil {
		t.Fatal(err)
	}
	cfg := childConfig("rel", "demo", nil)
	cfg.Command, cfg.Cwd = "./server", dir
	u := startUpstream(t, cfg, fastOptions())
	st := waitReady(t, u, 10*time.Second)
	killGroupOnCleanup(t, st.PID)
	if info := callInfo(t, u); info["server"] != "rel" {
		t.Errorf("info = %v", info)
	}
}
