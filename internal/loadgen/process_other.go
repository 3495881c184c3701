//go:build unix && !linux

package loadgen

import "syscall"

func setPdeathsig(*syscall.SysProcAttr) {}
