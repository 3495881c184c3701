//go:build unix && !linux

package conformance

import "syscall"

func setPdeathsig(*syscall.SysProcAttr) {}
