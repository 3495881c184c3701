package main

import (
	"io"
	"os"

	"github.com/manifold-mcp/manifold/internal/rawio"
	"go.uber.org/zap"
)

// rawStdio returns the process's stdin and stdout as `serve --stdio` reads
// and writes them: with direct system calls on non-blocking descriptors
// (internal/rawio, which says why) when both are pipes or sockets, each a
// file of its own. A descriptor shared with another standard one (a
// socket serving as both stdin and stdout, or stderr joined to stdout)
// stays as it is: its non-blocking mode would hold for the other too, whose
// *os.File does not expect it. Anything else (a terminal, a file, a reader
// that is not the process's stdin) is returned as it is. closeStdio puts
// the descriptors back in blocking mode.
func rawStdio(stdin io.Reader, stdout io.Writer, log *zap.Logger) (io.Reader, io.Writer, func()) {
	nothing := func() {}
	if stdin != io.Reader(os.Stdin) || stdout != io.Writer(os.Stdout) || !distinctFiles(os.Stdin, os.Stdout, os.Stderr) {
		return stdin, stdout, nothing
	}
	in, err := rawio.Stdio(0, "stdin")
	if err != nil {
		return stdin, stdout, nothing
	}
	out, err := rawio.Stdio(1, "stdout")
	if err != nil {
		in.Close()
		return stdin, stdout, nothing
	}
	log.Debug("stdio: direct system calls on stdin and stdout")
	return in, out, func() {
		in.Close()
		out.Close()
	}
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
