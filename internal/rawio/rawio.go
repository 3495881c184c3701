// Package rawio reads and writes the descriptors of the data path (the
// stdio pipes: the gateway's own stdin and stdout, its stdio upstreams'
// pipes; and the HTTP front's connections) with the read and write system
// calls made directly on non-blocking descriptors, waiting for readiness
// in the runtime's network poller when they would block.
//
// Why: an *os.File's or a net.Conn's Read and Write enter the runtime's
// system-call state for every call. That wakes the runtime's monitor
// thread (sysmon) whenever it sleeps, which it does between the calls of
// a lightly loaded gateway; and a blocking read of stdin keeps a processor
// "in a system call" between messages, which keeps that thread polling
// every 20 µs and handing processors to other threads. At one session
// those wake-ups cost more than the gateway's own work on a call
// (docs/architecture.md, Direct system calls). A read or write of a
// non-blocking descriptor never waits in the kernel, so it needs none of
// that.
//
// On systems other than Linux, New and Stdio return ErrUnsupported and
// NewConn returns the connection as it is.
package rawio

import "errors"

// ErrUnsupported: the file is not a non-blocking pipe or socket in the
// runtime's poller, or the system is not Linux; use the *os.File itself.
var ErrUnsupported = errors.New("rawio: not a pollable pipe or socket")
