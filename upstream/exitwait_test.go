package upstream

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAwaitExit: awaitExit returns once the child has exited, and leaves
// it to Wait, which then reaps it with its exit status.
func TestAwaitExit(t *testing.T) {
	cmd := exec.Command("sh", "-c", "read line; exit 3")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	returned := make(chan struct{})
	go func() {
		awaitExit(cmd.Process.Pid)
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatal("awaitExit returned while the child runs")
	case <-time.After(100 * time.Millisecond):
	}
	in.Close() // the child's read ends, and it exits
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("awaitExit did not return after the child exited")
	}
	if state := procState(t, cmd.Process.Pid); state != "Z" {
		t.Errorf("child state %q after awaitExit, want Z (exited, not reaped)", state)
	}
	err = cmd.Wait()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("Wait = %v, state %v; want exit status 3", err, cmd.ProcessState)
	}
}

// procState returns the state letter of process pid (/proc/pid/stat).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}
