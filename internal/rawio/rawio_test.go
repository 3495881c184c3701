//go:build linux

package rawio

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// pipe returns the two ends of an os.Pipe as Files.
func pipe(t *testing.T) (r, w *File) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if r, err = New(pr); err != nil {
		t.Fatalf("New(read end) = %v", err)
	}
	if w, err = New(pw); err != nil {
		t.Fatalf("New(write end) = %v", err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// TestReadWrite: what Write writes, Read reads, in the order written,
// even past what the pipe holds at once; after the writer closes, EOF.
func TestReadWrite(t *testing.T) {
	r, w := pipe(t)
	want := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: many pipefuls
	wrote := make(chan error, 1)
	go func() {
		_, err := w.Write(want)
		w.Close()
		wrote <- err
	}()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("ReadAll = %v", err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("Write = %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(want))
	}
}

// TestTryWrite: TryWrite never waits: on a full pipe it reports 0 bytes
// taken, and once the reader drains the pipe it takes more.
func TestTryWrite(t *testing.T) {
	r, w := pipe(t)
	chunk := make([]byte, 4096)
	total := 0
	for range 10_000 { // a pipe holds at most 1 MiB unless raised
		n, err := w.TryWrite(chunk)
		if err != nil {
			t.Fatalf("TryWrite = %v", err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if n, err := w.TryWrite(chunk); n != 0 || err != nil {
		t.Fatalf("TryWrite on a full pipe = %d, %v; want 0, nil", n, err)
	}
	if _, err := io.ReadFull(r, make([]byte, total)); err != nil {
		t.Fatalf("reading what was written: %v", err)
	}
	if n, err := w.TryWrite(chunk); n == 0 || err != nil {
		t.Fatalf("TryWrite on a drained pipe = %d, %v; want some bytes", n, err)
	}
}

// TestCloseEndsRead: Close ends a Read that waits for input.
func TestCloseEndsRead(t *testing.T) {
	r, _ := pipe(t)
	read := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		read <- err
	}()
	time.Sleep(20 * time.Millisecond) // let it wait (not needed for the outcome)
	r.Close()
	select {
	case err := <-read:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("Read after Close = %v, want os.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the Read")
	}
}

// TestWriteBrokenPipe: a write to a pipe nobody reads is an error
// (EPIPE), not a signal that ends the process.
func TestWriteBrokenPipe(t *testing.T) {
	r, w := pipe(t)
	r.Close()
	if _, err := w.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("Write to a closed pipe = %v, want EPIPE", err)
	}
}

// TestNewRefusesBlocking: a file in blocking mode is not taken (its reads
// would wait in the kernel, holding a thread the runtime does not know
// of).
func TestNewRefusesBlocking(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	f0, f1 := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	defer f0.Close()
	defer f1.Close()
	if _, err := New(f0); !errors.Is(err, ErrUnsupported) {
		t.Errorf("New(blocking pipe) = %v, want ErrUnsupported", err)
	}
}

// TestStdio: Stdio takes a blocking pipe descriptor (as a process's stdin
// is) and puts it in non-blocking mode while its File is open; Close puts
// blocking mode back. A regular file is not taken.
func TestStdio(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	in, err := Stdio(fds[0], "stdin")
	if err != nil {
		t.Fatalf("Stdio(pipe) = %v", err)
	}
	if !nonblocking(t, fds[0]) {
		t.Error("the descriptor is blocking while Stdio's File is open")
	}
	if _, err := syscall.Write(fds[1], []byte("line\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := in.Read(buf); err != nil || string(buf[:n]) != "line\n" {
		t.Errorf("Read = %q, %v", buf[:n], err)
	}
	if err := in.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if nonblocking(t, fds[0]) {
		t.Error("Close left the descriptor non-blocking")
	}

	file, err := os.Create(filepath.Join(t.TempDir(), "input"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := Stdio(int(file.Fd()), "file"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Stdio(regular file) = %v, want ErrUnsupported", err)
	}
}

// TestReopen: Reopen reads a blocking pipe (a stdin shared with stderr,
// say) through an open file of its own, non-blocking, and leaves the
// pipe's own open file blocking: the data arrives, then the end. A regular
// file and a socket are not taken.
func TestReopen(t *testing.T) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	in, err := Reopen(fds[0], "stdin")
	if err != nil {
		t.Fatalf("Reopen(pipe) = %v", err)
	}
	defer in.Close()
	if nonblocking(t, fds[0]) {
		t.Error("Reopen put the shared descriptor in non-blocking mode")
	}
	if _, err := syscall.Write(fds[1], []byte("line\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := in.Read(buf); err != nil || string(buf[:n]) != "line\n" {
		t.Errorf("Read = %q, %v", buf[:n], err)
	}
	syscall.Close(fds[1])
	if n, err := in.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("Read after the writer closed = %d, %v; want io.EOF", n, err)
	}

	file, err := os.Create(filepath.Join(t.TempDir(), "input"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := Reopen(int(file.Fd()), "file"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Reopen(regular file) = %v, want ErrUnsupported", err)
	}
	sp, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(sp[0])
	defer syscall.Close(sp[1])
	if _, err := Reopen(sp[0], "socket"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Reopen(socket) = %v, want ErrUnsupported", err)
	}
}

func nonblocking(t *testing.T, fd int) bool {
	t.Helper()
	flags, err := fcntl(uintptr(fd), syscall.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	return flags&syscall.O_NONBLOCK != 0
}
