package plugins

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin/runner"
)

// ErrChecksum is the error of a plugin whose file does not have the
// configured sha256.
var ErrChecksum = errors.New("plugin file does not match its sha256")

// execFD is the descriptor the plugin's own file has in the process that
// executes it (ExtraFiles[0]).
const execFD = 3

// spec is how one plugin process is started: the file, its arguments and
// environment. want is the file's expected SHA-256 (hex); empty for the
// manifold binary itself (builtins).
type spec struct {
	path string
	args []string
	env  []string
	want string
	// guard is the manifold binary run as `upstream-guard` around the
	// plugin; empty: none (tests).
	guard string
}

// openChecked opens the plugin's file and checks its SHA-256 on that open
// file, which is then the one executed (through /proc/self/fd): the file
// cannot be swapped between the check and the exec.
func openChecked(path, want string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if want == "" {
		return f, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		f.Close()
		return nil, fmt.Errorf("hashing %s: %w", path, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		f.Close()
		return nil, fmt.Errorf("%w: %s has sha256 %s", ErrChecksum, path, got)
	}
	return f, nil
}

// procRunner is the go-plugin Runner of one plugin process: our own exec,
// with no stdin (go-plugin would give it ours, which under serve --stdio is
// the MCP client's stream), only the environment go-plugin sets plus the
// plugin's `env`, in a process group of its own under the upstream guard,
// which kills the group when the gateway dies, even by SIGKILL.
type procRunner struct {
	cmd    *exec.Cmd
	file   *os.File
	name   string
	stdout io.ReadCloser
	stderr io.ReadCloser
	exited chan struct{}
	err    error
}

var _ runner.Runner = (*procRunner)(nil)

// newRunner builds the runner of s from base, go-plugin's command (whose
// environment carries the handshake).
func newRunner(s *spec, base *exec.Cmd) (*procRunner, error) {
	f, err := openChecked(s.path, s.want)
	if err != nil {
		return nil, err
	}
	self := "/proc/self/fd/" + strconv.Itoa(execFD)
	var cmd *exec.Cmd
	if s.guard != "" {
		cmd = exec.Command(s.guard, append([]string{"upstream-guard", "--", self}, s.args...)...)
	} else {
		cmd = &exec.Cmd{Path: self, Args: append([]string{s.path}, s.args...)}
	}
	cmd.Env = append(append([]string(nil), base.Env...), s.env...)
	cmd.ExtraFiles = []*os.File{f}
	deathSig := syscall.SIGKILL
	if s.guard != "" {
		deathSig = syscall.SIGTERM // the guard forwards it to the group
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSig}
	r := &procRunner{cmd: cmd, file: f, name: s.path, exited: make(chan struct{})}
	return r, nil
}

// Start starts the process, with pipes of our own for stdout and stderr
// (exec's would be closed by Wait while go-plugin still reads them).
func (r *procRunner) Start(context.Context) error {
	defer r.file.Close() // the child has its copy
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	r.cmd.Stdout, r.cmd.Stderr = outW, errW
	err = r.cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return fmt.Errorf("start %s: %w", r.name, err)
	}
	r.stdout, r.stderr = outR, errR
	go func() {
		r.err = r.cmd.Wait()
		close(r.exited)
	}()
	return nil
}

// Wait waits for the process to exit.
func (r *procRunner) Wait(ctx context.Context) error {
	select {
	case <-r.exited:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Kill ends the process group: SIGTERM (the guard then ends the plugin),
// then SIGKILL after a grace period.
func (r *procRunner) Kill(context.Context) error {
	if r.cmd.Process == nil {
		return nil
	}
	select {
	case <-r.exited:
		return nil // its pid may be another's by now
	default:
	}
	pgid := r.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(2 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-r.exited
	}
	return nil
}

// Exited is closed when the process has exited.
func (r *procRunner) Exited() <-chan struct{} { return r.exited }

func (r *procRunner) Stdout() io.ReadCloser           { return r.stdout }
func (r *procRunner) Stderr() io.ReadCloser           { return r.stderr }
func (r *procRunner) Name() string                    { return r.name }
func (r *procRunner) Diagnose(context.Context) string { return "" }
func (r *procRunner) ID() string {
	if r.cmd.Process == nil {
		return ""
	}
	return strconv.Itoa(r.cmd.Process.Pid)
}
func (r *procRunner) PluginToHost(n, a string) (string, string, error) { return n, a, nil }
func (r *procRunner) HostToPlugin(n, a string) (string, string, error) { return n, a, nil }
