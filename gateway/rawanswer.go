package gateway

import (
	"bytes"
	"io"
	"sync"
)

// rawAnswer is the response of a raw call in pieces, written one after
// the other: the envelope around the result, and the result itself as
// slices of the upstream's bytes, so that a large result is never copied
// into the response (a 4 MiB tool result costs the gateway its one read
// buffer, not three).
type rawAnswer struct {
	parts [12][]byte
	n     int
	// failed: the answer is a JSON-RPC error (one piece).
	failed bool
}

// add appends a piece; an empty one is skipped.
func (a *rawAnswer) add(p []byte) {
	if len(p) > 0 {
		a.parts[a.n] = p
		a.n++
	}
}

// pieces returns the pieces in order.
func (a *rawAnswer) pieces() [][]byte { return a.parts[:a.n] }

// len is the length of the whole response.
func (a *rawAnswer) len() int {
	n := 0
	for _, p := range a.pieces() {
		n += len(p)
	}
	return n
}

// bytes returns the response as one slice (a copy, unless it is one
// piece).
func (a *rawAnswer) bytes() []byte {
	if a.n == 1 {
		return a.parts[0]
	}
	out := make([]byte, 0, a.len()+1) // +1: a front's newline
	for _, p := range a.pieces() {
		out = append(out, p...)
	}
	return out
}

// writeLine writes the response as one line to w, which the caller
// serializes: a line break inside it (an HTTP upstream's pretty-printed
// JSON, where it can only be whitespace between tokens) becomes a space,
// so that the line framing of stdio holds.
func (a *rawAnswer) writeLine(w io.Writer) error {
	if n := a.len(); n <= joinedLineMax {
		// One write (one system call on an unbuffered stdout).
		bp := lineBuffers.Get().(*[]byte)
		defer lineBuffers.Put(bp)
		_, err := w.Write(a.joinLine(bp))
		return err
	}
	if err := writeBroken(w, a.pieces(), " "); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// joinLine returns the response as one line, its line breaks made spaces,
// in *bp (from lineBuffers), which keeps the grown buffer.
func (a *rawAnswer) joinLine(bp *[]byte) []byte {
	line := (*bp)[:0]
	for _, p := range a.pieces() {
		line = append(line, p...)
	}
	for i, c := range line {
		if c == '\r' || c == '\n' {
			line[i] = ' '
		}
	}
	line = append(line, '\n')
	*bp = line
	return line
}

// writeBroken writes parts to w one after the other, each line break in
// them ('\r' or '\n') written as sep instead.
func writeBroken(w io.Writer, parts [][]byte, sep string) error {
	for _, p := range parts {
		for len(p) > 0 {
			i := bytes.IndexAny(p, "\r\n")
			if i < 0 {
				if _, err := w.Write(p); err != nil {
					return err
				}
				break
			}
			if _, err := w.Write(p[:i]); err != nil {
				return err
			}
			if _, err := io.WriteString(w, sep); err != nil {
				return err
			}
			p = p[i+1:]
		}
	}
	return nil
}

var (
	// lineBuffers join answers of up to joinedLineMax bytes.
	lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
)

const joinedLineMax = 64 << 10
