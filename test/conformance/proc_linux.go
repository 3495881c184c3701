package conformance

import "syscall"

// setPdeathsig has the child killed when the test process dies.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
