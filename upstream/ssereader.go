package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// errMalformedEvent: a line of an SSE stream without a ':'.
var errMalformedEvent = errors.New("malformed line in SSE stream")

// sseReader returns the data of each event of a text/event-stream, read
// the way the SDK reads its streams (so that the raw path and the SDK see
// the same messages): lines end at '\n' (trailing '\r's trimmed), a blank
// line ends the event, a line is "field:value", the values of an event's
// data lines are trimmed of blanks and joined by '\n', other fields and
// ":" comments are ignored, and events without data are skipped.
//
// It keeps no more than one event's data. The body it reads is bounded per
// event by limitTransport (sseBody), so that is at most max+sseFraming
// bytes.
type sseReader struct {
	br   *bufio.Reader
	data []byte // the event being read; reused unless taken
	has  bool   // data holds at least one data line
}

// next returns the data of the next event, valid until the following call
// unless take is called. At the end of the stream it returns io.EOF (an
// event cut short by the end is still returned first).
func (r *sseReader) next() ([]byte, error) {
	r.data, r.has = r.data[:0], false
	for {
		line, err := r.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it whole (the body bounds it).
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		eof := err != nil
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if r.has {
				return r.data, nil
			}
			if eof {
				return nil, io.EOF
			}
			continue
		}
		field, value, found := bytes.Cut(line, []byte{':'})
		if !found {
			return nil, fmt.Errorf("%w: %d bytes", errMalformedEvent, len(line))
		}
		if string(field) == "data" {
			if r.has {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, bytes.TrimSpace(value)...)
			r.has = true
		}
		if eof {
			if r.has {
				return r.data, nil
			}
			return nil, io.EOF
		}
	}
}

// take hands the data last returned to the caller: the reader will not
// reuse it.
func (r *sseReader) take() { r.data = nil }
