package upstream

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// guardGrace is how long the guard waits after SIGTERM before SIGKILL.
const guardGrace = 3 * time.Second

// RunGuard is the body of the hidden `manifold upstream-guard -- CMD ARGS…`
// command. The gateway starts each stdio upstream through it, as leader of a
// new process group, with SIGTERM as its parent-death signal. The guard runs
// CMD in that group and waits. When the gateway stops it (SIGTERM) or dies
// (parent-death signal, or its parent pid changes), the guard sends SIGTERM
// to the whole group, waits, then SIGKILLs it: launchers such as npx leave
// grandchildren that the parent-death signal alone would orphan. When CMD
// exits by itself the guard kills what is left of the group and exits.
// It returns the exit code to use.
func RunGuard(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "upstream-guard: missing command")
		return 2
	}
	parent := os.Getppid()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "upstream-guard: %v\n", err)
		return 127
	}
	exited := make(chan error, 1)
	go func() {
		awaitExit(cmd.Process.Pid) // exitwait.go
		exited <- cmd.Wait()
	}()

	group := syscall.Getpgrp()
	orphaned := time.NewTicker(250 * time.Millisecond)
	defer orphaned.Stop()
	for {
		select {
		case err := <-exited:
			code := cmd.ProcessState.ExitCode()
			if err != nil && code != 0 {
				fmt.Fprintf(stderr, "upstream-guard: %s exited: %v\n", args[0], err)
			}
			// Leftover grandchildren go with us (SIGKILL reaches the guard too).
			_ = syscall.Kill(-group, syscall.SIGKILL)
			return code
		case <-sigs:
			return terminateGroup(group, exited)
		case <-orphaned.C:
			if os.Getppid() != parent {
				return terminateGroup(group, exited)
			}
		}
	}
}

// terminateGroup sends SIGTERM to the group (the guard ignores it: its
// signals are being caught), waits for the command, then SIGKILLs the group.
func terminateGroup(group int, exited <-chan error) int {
	_ = syscall.Kill(-group, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(guardGrace):
	}
	_ = syscall.Kill(-group, syscall.SIGKILL)
	return 143
}
