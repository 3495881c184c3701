package upstream

import (
	"os"
	"syscall"
	"unsafe"
)

// awaitExit returns once pid, a child process not yet waited for, has
// exited, without reaping it: exec.Cmd.Wait then reaps it at once. It
// waits in the runtime's poller, on a pidfd, where Wait alone would block
// in waitid(2) for the child's whole life, and a goroutine that enters a
// blocking system call just as a garbage collection starts can hold the
// collection's stop-the-world, and with it the whole gateway, until the
// call returns (Go 1.26; docs/architecture.md, Direct system calls). On a
// kernel without pidfds (before 5.3) it returns at once, and Wait blocks
// as before.
func awaitExit(pid int) {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), syscall.O_NONBLOCK, 0) // PIDFD_NONBLOCK
	if errno != 0 {
		return
	}
	f := os.NewFile(fd, "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// Readable once the process has exited; the check does not block.
	_ = rc.Read(func(fd uintptr) bool { return exited(fd) })
}

// sysPidfdOpen is pidfd_open(2)'s number, the same on every Linux
// architecture.
const sysPidfdOpen = 434

// exited reports whether the process of pidfd has exited (or cannot be
// waited for), leaving it to be reaped: waitid(P_PIDFD, WEXITED | WNOHANG
// | WNOWAIT), made directly since it never blocks.
func exited(pidfd uintptr) bool {
	const (
		pPidfd  = 3
		wNowait = 0x1000000
	)
	var info [128]byte // siginfo_t
	_, _, errno := syscall.RawSyscall6(syscall.SYS_WAITID, pPidfd, pidfd, uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOHANG|wNowait, 0, 0)
	if errno != 0 {
		return true // nothing to wait for here: Wait will say why
	}
	return *(*int32)(unsafe.Pointer(&info[16])) != 0 // si_pid: 0 while it runs
}
