package upstream

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// guardCommand returns `<test binary> upstream-guard args…`, leader of its
// own process group.
func guardCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(testBinary(), append([]string{"upstream-guard"}, args...)...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// waitExit waits for cmd to exit within timeout.
func waitExit(t *testing.T, cmd *exec.Cmd, timeout time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("%v did not exit within %s", cmd.Args, timeout)
		return nil
	}
}

// TestGuardParentKilled proves that a SIGKILLed gateway leaves no orphans:
// the guard notices its parent died (parent-death signal, or failing that
// its parent pid changing) and takes its whole group down.
func TestGuardParentKilled(t *testing.T) {
	tests := []struct {
		name      string
		pdeathsig bool
	}{
		{name: "parent-death signal", pdeathsig: true},
		{name: "parent pid poll", pdeathsig: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			parent := exec.Command(testBinary())
			parent.Env = append(os.Environ(), childEnv+"=parent", "GORACE=atexit_sleep_ms=0")
			if !tt.pdeathsig {
				parent.Env = append(parent.Env, pdeathsigEnv+"=0")
			}
			parent.Stderr = os.Stderr
			out, err := parent.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := parent.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = parent.Process.Kill()
				_ = parent.Wait()
			})
			line := readLine(t, out, 10*time.Second)
			guard, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil || guard <= 1 {
				t.Fatalf("parent printed %q, want the guard's pid", line)
			}
			killGroupOnCleanup(t, guard)
			// guard, sh, and two sleeps.
			waitFor(t, 10*time.Second, "the guarded tree to start", func() bool {
				return len(liveGroupMembers(guard)) >= 3
			})

			if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			waitGroupGone(t, guard, 5*time.Second)
			t.Logf("group gone %s after the parent was killed", time.Since(start))
		})
	}
}

func TestGuardCommandExits(t *testing.T) {
	checkLeaks(t)
	// The command exits by itself; what it left in the group goes with the guard.
	cmd := guardCommand("--", "/bin/sh", "-c", "sleep 300 & sleep 0.2; exit 3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	killGroupOnCleanup(t, pgid)
	err := waitExit(t, cmd, 5*time.Second)
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("guard exit = %v, want it to have ended by its own group kill", err)
	}
	waitGroupGone(t, pgid, 5*time.Second)
}

func TestGuardTerminated(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		minTime time.Duration // how long the guard must wait before SIGKILL
	}{
		{name: "command obeys SIGTERM", script: "sleep 300 & sleep 300", minTime: 0},
		{name: "command ignores SIGTERM", script: `trap "" TERM; sleep 300 & sleep 300`, minTime: guardGrace - 100*time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			cmd := guardCommand("--", "/bin/sh", "-c", tt.script)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pgid := cmd.Process.Pid
			killGroupOnCleanup(t, pgid)
			waitFor(t, 10*time.Second, "the guarded tree to start", func() bool {
				return len(liveGroupMembers(pgid)) >= 3
			})
			start := time.Now()
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil { // the guard alone
				t.Fatal(err)
			}
			_ = waitExit(t, cmd, guardGrace+5*time.Second)
			waitGroupGone(t, pgid, 5*time.Second)
			if took := time.Since(start); took < tt.minTime {
				t.Errorf("group gone after %s, want the guard to wait %s for the command", took, tt.minTime)
			}
		})
	}
}

func TestRunGuardUsage(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{name: "no command", args: nil, wantCode: 2, wantStderr: "missing command"},
		{name: "only separator", args: []string{"--"}, wantCode: 2, wantStderr: "missing command"},
		{name: "command not found", args: []string{"--", "/nonexistent/manifold-test"}, wantCode: 127, wantStderr: "/nonexistent/manifold-test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// In a subprocess: RunGuard installs signal handlers for the process.
			cmd := guardCommand(tt.args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			err := waitExit(t, cmd, 10*time.Second)
			code := 0
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				code = exitErr.ExitCode()
			}
			if code != tt.wantCode || !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("exit code %d, stderr %q; want %d and %q", code, stderr.String(), tt.wantCode, tt.wantStderr)
			}
		})
	}
}
