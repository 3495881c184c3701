package loadgen

import "syscall"

// setPdeathsig has the server killed if the load generator dies.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
