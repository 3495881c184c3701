package plugins

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"go.uber.org/zap/zaptest"
)

// upPID returns the pid (= process group) of h's one plugin's guard.
func upPID(t *testing.T, h *Host) int {
	t.Helper()
	st := h.Status()
	if len(st) != 1 || !st[0].Up {
		t.Fatalf("status = %+v; want the plugin up", st)
	}
	pid, _ := strconv.Atoi(st[0].PID)
	if pid == 0 {
		t.Fatal("no pid")
	}
	return pid
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// stopHost kills the process group pid (SIGKILL ends it even when
// stopped) and closes h, with the test.
func stopHost(t *testing.T, h *Host, pid int) {
	t.Cleanup(func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Close(ctx)
	})
}

// A hung plugin (here SIGSTOPped: it holds its connection and answers
// nothing) is killed once its hook calls time out hungAfter times in a
// row, and restarted.
func TestHungPluginIsRestarted(t *testing.T) {
	h := New(&Options{Logger: zaptest.NewLogger(t), GuardPath: os.Args[0], Executable: os.Args[0]})
	p := testPluginConfig(t, "p", "")
	p.Timeout = 200 * time.Millisecond
	h.Apply(context.Background(), []config.Plugin{p}, 1<<20)
	pid := upPID(t, h)
	stopHost(t, h, pid)
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(12 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if _, err = h.Chain().Pre(context.Background(), toolTarget, []byte(`{}`)); err == nil {
			st := h.Status()[0]
			if st.PID == strconv.Itoa(pid) || st.Restarts != 1 {
				t.Errorf("status = %+v; want a new process, one restart", st)
			}
			if alive(pid) {
				t.Errorf("the hung process group %d is still alive", pid)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("a hung plugin was not restarted within 12 s: status %+v, calls still fail: %v", h.Status(), err)
}

// Close kills a plugin that does not answer go-plugin's Shutdown (which
// has no deadline) rather than waiting for it for good.
func TestCloseKillsAHungPlugin(t *testing.T) {
	h := New(&Options{Logger: zaptest.NewLogger(t), GuardPath: os.Args[0], Executable: os.Args[0]})
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", "")}, 1<<20)
	pid := upPID(t, h)
	stopHost(t, h, pid)
	if err := syscall.Kill(-pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	err := h.Close(ctx)
	if err != nil || alive(pid) {
		t.Fatalf("Close = %v; plugin process group %d alive: %v; want it killed", err, pid, alive(pid))
	}
}

// Apply after Close (a reload racing the gateway's shutdown) starts
// nothing: nothing would stop it.
func TestApplyAfterCloseStartsNothing(t *testing.T) {
	h := New(&Options{Logger: zaptest.NewLogger(t), GuardPath: os.Args[0], Executable: os.Args[0]})
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", "")}, 1<<20)
	st := h.Status()
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	if len(st) > 0 {
		pid, _ := strconv.Atoi(st[0].PID)
		t.Fatalf("Apply after Close started plugin %+v (alive: %v); want nothing started", st[0], alive(pid))
	}
	if h.Chain() != nil {
		t.Error("Apply after Close set a chain")
	}
}

// A failed replacement keeps the running process and the config it was
// sent: a later reload back to the running binary with the new config
// sends that config.
func TestFailedReplacementKeepsTheSentConfig(t *testing.T) {
	h := testHost(t, nil)
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", `{"block":"x"}`)}, 1<<20)
	// New binary (a wrong checksum here) and new config in one reload.
	bad := testPluginConfig(t, "p", `{"block":"y"}`)
	bad.SHA256 = strings.Repeat("1", 64)
	h.Apply(context.Background(), []config.Plugin{bad}, 1<<20)
	if _, err := h.Chain().Pre(context.Background(), toolTarget, []byte(`"x"`)); !errors.Is(err, ErrBlocked) {
		t.Fatalf("after the failed replacement the old process should block \"x\" still: %v", err)
	}
	// The operator reverts the binary, keeping the new config.
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", `{"block":"y"}`)}, 1<<20)
	if _, err := h.Chain().Pre(context.Background(), toolTarget, []byte(`"y"`)); !errors.Is(err, ErrBlocked) {
		t.Fatalf("config {\"block\":\"y\"} is in force per the host, but the plugin did not block \"y\": %v", err)
	}
}
