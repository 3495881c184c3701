//go:build linux

package rawio

import (
	"net"
	"os"
	"syscall"
	"unsafe"
)

// Conn is a network connection whose Read and Write are made with direct
// system calls (see the package doc); the rest (deadlines, Close,
// addresses) is the connection's own, and deadlines hold for Read and
// Write as for the connection's own. Errors are *net.OpError, as the net
// package's: a deadline's is a timeout, a closed connection's is
// net.ErrClosed, and the end of the input is io.EOF.
type Conn struct {
	net.Conn
	rc syscall.RawConn
}

// NewConn returns c with Read and Write made with direct system calls, or
// c itself when it is not a connection of the system (syscall.Conn) in the
// runtime's poller, as every *net.TCPConn and *net.UnixConn is.
func NewConn(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &Conn{Conn: c, rc: rc}
}

// Read reads up to len(p) bytes, waiting in the poller until some are
// there.
func (c *Conn) Read(p []byte) (int, error) { return read(c.rc, p, c.opError) }

// Write writes all of p, waiting in the poller while the connection's
// send buffer is full.
func (c *Conn) Write(p []byte) (int, error) { return write(c.rc, p, c.opError) }

// CloseWrite shuts down the writing side, when the connection has one
// (TCP and Unix connections do); net/http uses it.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *Conn) opError(op string, err error) error {
	if errno, ok := err.(syscall.Errno); ok {
		err = os.NewSyscallError(op, errno) // as the net package reports it
	}
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// Listener accepts connections as Conns (NewConn).
type Listener struct{ net.Listener }

// Accept waits for the next connection and returns it as a Conn.
func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return NewConn(c), nil
}

// Open reports whether c, a connection kept idle between requests, is
// still open with nothing to read: one peek at its descriptor, which never
// waits. A connection the peer closed (or reset), or one that holds bytes
// nobody asked for, is not. A connection that is not of the system is
// taken as open.
func Open(c net.Conn) bool {
	var rc syscall.RawConn
	switch c := c.(type) {
	case *Conn:
		rc = c.rc
	case syscall.Conn:
		var err error
		if rc, err = c.SyscallConn(); err != nil {
			return false
		}
	default:
		return true
	}
	var b [1]byte
	var errno syscall.Errno
	err := rc.Read(func(fd uintptr) bool {
		for {
			_, _, errno = syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
				syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
			if errno != syscall.EINTR {
				return true
			}
		}
	})
	return err == nil && errno == syscall.EAGAIN
}
