package rawio

import (
	"io"
	"os"
)

// Standard returns stdin and stdout as a server on the process's standard
// descriptors reads and writes them, when they are os.Stdin and os.Stdout,
// and raw names those it reads or writes as Files ("" when none):
//
//   - "stdin and stdout": both are pipes or sockets, neither the same file
//     as stderr, and are read and written as Stdio's Files (one socket
//     may serve as both: then both Files share its non-blocking mode, and
//     the process's os.Stdin and os.Stdout must not be used meanwhile);
//   - "stdin": stdin is a pipe or a terminal that cannot be put in
//     non-blocking mode itself, because stdin or stdout shares its open
//     file with stderr (stderr's *os.File, which the logs write to, does
//     not expect that mode); stdin is read through an open file of its own
//     (Reopen) and stdout is left as it is;
//   - "": anything else (a socket shared with stderr, a regular file, a
//     reader that is not the process's stdin), returned as it is.
//
// restore closes the Files and puts the shared descriptors back in
// blocking mode.
//
// Why stdin above all: a server reads it while it serves what it read
// last, and a read that blocks in the kernel is unsafe there with Go 1.26.
// A goroutine that enters one just as another starts a garbage collection
// can hold the collection's stop-the-world, and with it the whole process,
// until the read returns: until the client sends its next message, while
// it waits for the answer to the last (docs/architecture.md, Direct system
// calls). Reads through the poller never block in the kernel.
func Standard(stdin io.Reader, stdout io.Writer) (in io.Reader, out io.Writer, restore func(), raw string) {
	nothing := func() {}
	if stdin != io.Reader(os.Stdin) || stdout != io.Writer(os.Stdout) {
		return stdin, stdout, nothing, ""
	}
	if distinctFiles(os.Stdin, os.Stderr) && distinctFiles(os.Stdout, os.Stderr) {
		if rin, err := Stdio(0, "stdin"); err == nil {
			if rout, err := Stdio(1, "stdout"); err == nil {
				return rin, rout, func() {
					rin.Close()
					rout.Close()
				}, "stdin and stdout"
			}
			rin.Close()
		}
	}
	if rin, err := Reopen(0, "stdin"); err == nil {
		return rin, stdout, func() { rin.Close() }, "stdin"
	}
	return stdin, stdout, nothing, ""
}

// distinctFiles reports whether no two of files are the same file.
func distinctFiles(files ...*os.File) bool {
	infos := make([]os.FileInfo, len(files))
	for i, f := range files {
		fi, err := f.Stat()
		if err != nil {
			return false
		}
		for _, seen := range infos[:i] {
			if os.SameFile(seen, fi) {
				return false
			}
		}
		infos[i] = fi
	}
	return true
}
