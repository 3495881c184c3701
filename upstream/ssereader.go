package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode"
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
	// lastID and retry are the stream's last event id and the reconnection
	// time it asked for (0: none), for resuming it (resumeStream).
	lastID string
	retry  time.Duration
	// max, when not 0, bounds an event's data and any one line: past it,
	// next returns ErrTooLarge without reading further.
	max int
}

// next returns the data of the next event, valid until the following call
// unless take is called. At the end of the stream it returns io.EOF (an
// event cut short by the end is still returned first).
func (r *sseReader) next() ([]byte, error) {
	r.data, r.has = r.data[:0], false
	for {
		line, err := r.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) && r.longData(line) {
			if err = r.gatherLong(); errors.Is(err, ErrTooLarge) {
				return nil, err
			}
			r.data = bytes.TrimRightFunc(r.data, unicode.IsSpace)
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			if err != nil {
				return r.data, nil // cut short by the end: returned first
			}
			continue
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it whole (the body bounds it).
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.br.ReadSlice('\n')
				long = append(long, line...)
				if r.over(len(long)) {
					return nil, ErrTooLarge
				}
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
		switch string(field) {
		case "data":
			if r.has {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, bytes.TrimSpace(value)...)
			r.has = true
			if r.over(len(r.data)) {
				return nil, ErrTooLarge
			}
		case "id":
			r.lastID = string(bytes.TrimSpace(value))
		case "retry":
			if ms, err := strconv.Atoi(string(bytes.TrimSpace(value))); err == nil && ms >= 0 {
				r.retry = time.Duration(ms) * time.Millisecond
			}
		}
		if eof {
			if r.has {
				return r.data, nil
			}
			return nil, io.EOF
		}
	}
}

// over reports whether n bytes are past the reader's bound.
func (r *sseReader) over(n int) bool { return r.max > 0 && n > r.max }

// longData starts a data line longer than the reader's buffer, whose
// first part is chunk: its value, trimmed of leading blanks, is appended
// to the event's data, for the rest to follow. It reports false, doing
// nothing, for another field, or when chunk holds no value yet to trim
// (the general path then reads the line).
func (r *sseReader) longData(chunk []byte) bool {
	value, ok := bytes.CutPrefix(chunk, []byte("data:"))
	if !ok {
		return false
	}
	value = bytes.TrimLeftFunc(value, unicode.IsSpace)
	if len(value) == 0 {
		return false
	}
	if r.has {
		r.data = append(r.data, '\n')
	}
	r.data = append(r.data, value...)
	r.has = true
	return true
}

// Gathering a long data line: in blocks of gatherMin bytes at first, as
// large as what the line holds so far after, up to gatherMax.
const (
	gatherMin = 4 << 10
	gatherMax = 256 << 10
)

// gatherLong reads the rest of a data line longer than the reader's
// buffer, whose start longData put in the event's data, and appends it to
// the data. It gathers the line in blocks and joins them once, into data
// of the event's size: growing the data by append would allocate and copy
// a large answer many times over (each step a quarter larger than the
// last), and keep its garbage until the next collection; this allocates it
// about twice. It returns ErrTooLarge past the reader's bound, else the
// error that ended the line (nil at its '\n').
func (r *sseReader) gatherLong() error {
	var (
		blocks [][]byte
		block  []byte
		total  = len(r.data)
		err    = bufio.ErrBufferFull
		line   []byte
	)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = r.br.ReadSlice('\n')
		total += len(line)
		if r.over(total) {
			return ErrTooLarge
		}
		for len(line) > 0 {
			if len(block) == cap(block) {
				if block != nil {
					blocks = append(blocks, block)
				}
				block = make([]byte, 0, min(max(total, gatherMin), gatherMax))
			}
			k := copy(block[len(block):cap(block)], line)
			block, line = block[:len(block)+k], line[k:]
		}
	}
	data := append(make([]byte, 0, total), r.data...)
	for _, b := range blocks {
		data = append(data, b...)
	}
	r.data = append(data, block...)
	return err
}

// streamBuffers are the read buffers of answer streams (newStreamReader),
// reused from call to call: a fresh one was a third of the bytes a raw
// call over HTTP allocated, and so of the collections it caused.
var streamBuffers = sync.Pool{New: func() any { return bufio.NewReader(nil) }}

// newStreamReader returns a buffered reader of body from streamBuffers.
// The data next returns is copied out of it (sseReader.data), so it goes
// back with releaseStreamReader as soon as the stream is read.
func newStreamReader(body io.Reader) *bufio.Reader {
	br := streamBuffers.Get().(*bufio.Reader)
	br.Reset(body)
	return br
}

// releaseStreamReader returns br to streamBuffers, holding nothing of the
// stream it read.
func releaseStreamReader(br *bufio.Reader) {
	br.Reset(nil)
	streamBuffers.Put(br)
}

// take hands the data last returned to the caller: the reader will not
// reuse it.
func (r *sseReader) take() { r.data = nil }
