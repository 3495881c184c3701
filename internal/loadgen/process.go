package loadgen

import (
	"os/exec"
	"sync"
)

// process is a stdio server process started by one session, in its own
// process group so that kill also reaches the servers it starts (a gateway
// in stdio mode starts its upstreams).
type process struct {
	cmd      *exec.Cmd
	killOnce sync.Once
}

func newProcess(argv []string, env []string) *process {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	setProcessGroup(cmd)
	return &process{cmd: cmd}
}

// pid returns the process id, or 0 before the process started.
func (p *process) pid() int {
	if p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill kills the process group. The session's transport reaps the process
// itself when the session closes.
func (p *process) kill() {
	p.killOnce.Do(func() {
		if pid := p.pid(); pid > 0 {
			killProcessGroup(pid)
		}
	})
}
