//go:build !linux

package rawio

import (
	"net"
	"os"
)

// File is not available on this system: New, Stdio and Reopen always return
// ErrUnsupported.
type File struct{ *os.File }

// New returns ErrUnsupported on this system.
func New(*os.File) (*File, error) { return nil, ErrUnsupported }

// Stdio returns ErrUnsupported on this system.
func Stdio(int, string) (*File, error) { return nil, ErrUnsupported }

// Reopen returns ErrUnsupported on this system.
func Reopen(int, string) (*File, error) { return nil, ErrUnsupported }

// TryWrite is never called: no File exists on this system.
func (f *File) TryWrite([]byte) (int, error) { return 0, nil }

// NewConn returns c itself on this system.
func NewConn(c net.Conn) net.Conn { return c }

// Listener accepts connections as they are on this system.
type Listener struct{ net.Listener }

// Open takes every connection as open on this system.
func Open(net.Conn) bool { return true }
