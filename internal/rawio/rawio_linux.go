//go:build linux

package rawio

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// File is a non-blocking pipe or socket read and written with direct
// system calls. Read and Write may be called concurrently with each other,
// not each with itself (as for an *os.File, whose locks they take).
type File struct {
	f  *os.File
	rc syscall.RawConn
	// restore: Close puts the open file back in blocking mode (Stdio),
	// through orig, the descriptor f duplicates.
	restore bool
	orig    int
	closed  atomic.Bool
}

// New returns f as a File. f must be in the runtime's poller: a file of
// os.Pipe, or one os.NewFile made from a non-blocking descriptor; any other
// is ErrUnsupported. The File takes f over: Close closes it.
func New(f *os.File) (*File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, ErrUnsupported
	}
	nonblocking := false
	if err := rc.Control(func(fd uintptr) {
		flags, err := fcntl(fd, syscall.F_GETFL, 0)
		nonblocking = err == nil && flags&syscall.O_NONBLOCK != 0
	}); err != nil || !nonblocking {
		return nil, ErrUnsupported
	}
	return &File{f: f, rc: rc}, nil
}

// Stdio returns a File for the standard descriptor fd (0 or 1) when it is
// a pipe or a socket; a terminal or a regular file is ErrUnsupported. The
// File reads or writes a duplicate of fd put in non-blocking mode, which
// holds for fd too (the mode belongs to the open file both share): the
// caller must not use fd otherwise while the File is open. Close closes
// the duplicate and puts the mode back.
func Stdio(fd int, name string) (*File, error) {
	if err := kindIs(fd, name, syscall.S_IFIFO, syscall.S_IFSOCK); err != nil {
		return nil, err
	}
	dup, err := fcntl(uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("rawio: %s: %w", name, err)
	}
	if err := syscall.SetNonblock(dup, true); err != nil {
		syscall.Close(dup)
		return nil, fmt.Errorf("rawio: %s: %w", name, err)
	}
	rf, err := New(os.NewFile(uintptr(dup), name))
	if err != nil {
		_ = syscall.SetNonblock(dup, false)
		syscall.Close(dup)
		return nil, err
	}
	rf.restore, rf.orig = true, fd
	return rf, nil
}

// Reopen returns a File that reads fd, a pipe or a terminal, through an
// open file of its own: fd's entry in /proc/self/fd opened anew, in
// non-blocking mode, so that fd's own open file, and whoever shares it (a
// stderr joined to it), stays in blocking mode. A socket, a regular file
// (whose reads never wait), or a system without /proc is ErrUnsupported.
func Reopen(fd int, name string) (*File, error) {
	if err := kindIs(fd, name, syscall.S_IFIFO, syscall.S_IFCHR); err != nil {
		return nil, err
	}
	own, err := syscall.Open(fmt.Sprintf("/proc/self/fd/%d", fd), syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, ErrUnsupported
	}
	f := os.NewFile(uintptr(own), name)
	rf, err := New(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return rf, nil
}

// kindIs checks that fd is a file of one of the two kinds (S_IFIFO,
// S_IFSOCK, S_IFCHR): ErrUnsupported if not.
func kindIs(fd int, name string, a, b uint32) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fmt.Errorf("rawio: %s: %w", name, err)
	}
	if kind := st.Mode & syscall.S_IFMT; kind != a && kind != b {
		return ErrUnsupported
	}
	return nil
}

// Read reads up to len(p) bytes, waiting in the poller until some are
// there; at the end of the input it returns io.EOF.
func (f *File) Read(p []byte) (int, error) { return read(f.rc, p, f.failed) }

// Write writes all of p, waiting in the poller while the pipe is full.
func (f *File) Write(p []byte) (int, error) { return write(f.rc, p, f.failed) }

// TryWrite makes one attempt to write p and returns how much the pipe
// took: 0 and no error when it is full. It never waits.
func (f *File) TryWrite(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := f.rc.Write(func(fd uintptr) bool {
		n, errno = sysRW(syscall.SYS_WRITE, fd, p)
		return true
	})
	switch {
	case err != nil:
		return 0, f.failed("write", err)
	case errno == syscall.EAGAIN:
		return 0, nil
	case errno != 0:
		return 0, f.failed("write", errno)
	}
	return n, nil
}

// failed is the error of op: os.ErrClosed once Close has been called, as
// an *os.File reports it, else err; both as an *os.PathError.
func (f *File) failed(op string, err error) error {
	if f.closed.Load() {
		err = os.ErrClosed
	}
	return &os.PathError{Op: op, Path: f.f.Name(), Err: err}
}

// Close closes the file; a Read or Write waiting in the poller returns
// os.ErrClosed. A File of Stdio is closed before its open file goes back
// to blocking mode: closing waits for a Read or Write in progress, and
// none starts after, so no read or write is ever made on a blocking
// descriptor with a direct system call, which would hold its thread (and
// a collection's stop-the-world with it) until the other side acted.
func (f *File) Close() error {
	f.closed.Store(true)
	err := f.f.Close()
	if f.restore {
		_ = syscall.SetNonblock(f.orig, false)
	}
	return err
}

// read reads into p from rc's descriptor once some bytes are there,
// waiting in the poller meanwhile (and honouring rc's deadlines, which end
// the wait); at the end of the input it returns io.EOF. fail makes the
// error of a failed read.
func read(rc syscall.RawConn, p []byte, fail func(op string, err error) error) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := rc.Read(func(fd uintptr) bool {
		n, errno = sysRW(syscall.SYS_READ, fd, p)
		return errno != syscall.EAGAIN
	})
	switch {
	case err != nil:
		return 0, fail("read", err)
	case errno != 0:
		return 0, fail("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// write writes all of p to rc's descriptor, waiting in the poller while
// it would block; it returns how much it wrote. fail makes the error of a
// failed write.
func write(rc syscall.RawConn, p []byte, fail func(op string, err error) error) (int, error) {
	done := 0
	var errno syscall.Errno
	err := rc.Write(func(fd uintptr) bool {
		for done < len(p) {
			n, e := sysRW(syscall.SYS_WRITE, fd, p[done:])
			switch e {
			case 0:
				done += n
			case syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return done, fail("write", err)
	case errno != 0:
		return done, fail("write", errno)
	}
	return done, nil
}

// sysRW is one read or write system call on fd, made without entering the
// runtime's system-call state: fd is non-blocking, so the call never waits
// in the kernel. An interrupted call is made again.
func sysRW(trap, fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		n, _, errno := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if errno != syscall.EINTR {
			return int(n), errno
		}
	}
}

// fcntl is fcntl(2), also made directly: it never waits.
func fcntl(fd uintptr, cmd, arg int) (int, error) {
	r, _, errno := syscall.RawSyscall(syscall.SYS_FCNTL, fd, uintptr(cmd), uintptr(arg))
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
