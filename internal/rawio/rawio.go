// Package rawio reads and writes the pipes of the stdio data path (the
// gateway's own stdin and stdout, and its stdio upstreams' pipes) with the
// read and write system calls made directly on non-blocking descriptors,
// waiting for readiness in the runtime's network poller when they would
// block.
//
// Why: an *os.File's Read and Write enter the runtime's system-call state
// for every call. That wakes the runtime's monitor thread (sysmon) whenever
// it sleeps, and a blocking read of stdin keeps a processor "in a system
// call" between messages, which keeps that thread polling every 20 µs and
// handing processors to other threads. On the stdio fast path, where a call
// is four system calls, those wake-ups cost more than the gateway's own
// work (docs/architecture.md, The stdio fast path). A read or write of a
// non-blocking pipe never waits in the kernel, so it needs none of that.
//
// On systems other than Linux, New and Stdio return ErrUnsupported and the
// callers keep their *os.File.
package rawio

import "errors"

// ErrUnsupported: the file is not a non-blocking pipe or socket in the
// runtime's poller, or the system is not Linux; use the *os.File itself.
var ErrUnsupported = errors.New("rawio: not a pollable pipe or socket")
