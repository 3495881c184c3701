package upstream

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"go.uber.org/zap"
)

// maxStderrLine bounds one logged line of an upstream's stderr; longer lines
// are split.
const maxStderrLine = 64 << 10

// process is one running stdio upstream: the command (or the guard wrapping
// it), leader of its own process group so that the whole tree can be
// signalled, with pipes we own (not exec's, so Wait never races our reads).
type process struct {
	cmd    *exec.Cmd
	pgid   int
	stdin  *os.File // our write end of the child's stdin
	stdout *os.File // our read end of the child's stdout
	exited chan struct{}
	err    error // set before exited is closed
}

// startProcess spawns cfg's command. With guard set, the command runs under
// `guard upstream-guard -- command args…`, which kills the whole group if the
// gateway dies, even by SIGKILL (see RunGuard). stderr is logged line by line.
func startProcess(cfg config.Server, guard string, logger *zap.Logger) (*process, error) {
	command := cfg.Command
	if cfg.Cwd != "" && !filepath.IsAbs(command) && strings.ContainsRune(command, filepath.Separator) {
		// "./server" means the server's cwd, as it would for a shell there.
		command = filepath.Join(cfg.Cwd, command)
	}
	path, err := exec.LookPath(command)
	if err != nil {
		return nil, fmt.Errorf("command %q: %w", cfg.Command, err)
	}
	var cmd *exec.Cmd
	if guard != "" {
		cmd = exec.Command(guard, append([]string{"upstream-guard", "--", path}, cfg.Args...)...)
	} else {
		cmd = exec.Command(path, cfg.Args...)
	}
	cmd.Env = os.Environ()
	for k, v := range cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Dir = cfg.Cwd
	// Own process group: stop signals reach npx's grandchildren too. Pdeathsig
	// ends the direct child if we die; the guard (when used) forwards that
	// to the group.
	deathSig := syscall.SIGKILL
	if guard != "" {
		deathSig = syscall.SIGTERM
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSig}

	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, fmt.Errorf("start %q: %w", cfg.Command, err)
	}
	// The child holds its own copies now.
	closeAll(inR, outW, errW)

	p := &process{cmd: cmd, pgid: cmd.Process.Pid, stdin: inW, stdout: outR, exited: make(chan struct{})}
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		logStderr(errR, logger)
	}()
	go func() {
		awaitExit(cmd.Process.Pid) // not a waitid that blocks (exitwait.go)
		p.err = cmd.Wait()
		// stderr ends when every holder of its write end has exited; a
		// grandchild may keep it open, so do not wait for it forever.
		select {
		case <-stderrDone:
		case <-time.After(time.Second):
		}
		errR.Close()
		close(p.exited)
	}()
	return p, nil
}

func logStderr(r io.Reader, logger *zap.Logger) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxStderrLine)
	// Split over-long lines: bufio.ErrTooLong would end the loop, leaving
	// the pipe unread and the server blocked on its next write to stderr.
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		advance, token, err := bufio.ScanLines(data, atEOF)
		if advance == 0 && token == nil && err == nil && len(data) >= maxStderrLine {
			return maxStderrLine, data[:maxStderrLine], nil
		}
		return advance, token, err
	})
	for sc.Scan() {
		// A copy: sc.Bytes() is reused by the next Scan, and a core may keep
		// the field (observer, async cores).
		logger.Info("upstream stderr", zap.String(keyLine, sc.Text()))
	}
	if err := sc.Err(); err != nil && !errors.Is(err, os.ErrClosed) {
		logger.Debug("upstream stderr ended", zap.Error(err))
	}
}

// pid returns the process id of the direct child.
func (p *process) pid() int { return p.pgid }

// stop ends the process tree: close stdin and wait, then SIGTERM the group
// and wait, then SIGKILL the group. It returns when the child has exited or
// after the last grace period.
func (p *process) stop(grace time.Duration) {
	// stdout stays open until the end: closing it first would kill a child
	// that is still writing with SIGPIPE.
	defer p.stdout.Close()
	p.stdin.Close()
	if p.waitExit(grace) {
		p.killGroup(syscall.SIGKILL) // grandchildren that ignored the EOF
		return
	}
	p.killGroup(syscall.SIGTERM)
	if p.waitExit(grace) {
		p.killGroup(syscall.SIGKILL)
		return
	}
	p.killGroup(syscall.SIGKILL)
	p.waitExit(grace)
}

func (p *process) killGroup(sig syscall.Signal) {
	// ESRCH (the group is gone) is the expected outcome, not an error.
	_ = syscall.Kill(-p.pgid, sig)
}

func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		f.Close()
	}
}
