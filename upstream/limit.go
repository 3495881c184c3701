package upstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.uber.org/zap"
)

// sseFraming is what an SSE event may hold beside its message ("data: ",
// "event:" and "id:" lines, line ends) within the limit of one event.
const sseFraming = 16 << 10

// sseBufferDrop: an event buffer grown past this is dropped after use
// rather than kept for the life of the stream.
const sseBufferDrop = 64 << 10

// tooLargeMarker is the data of the error that replaces an oversized
// message; call turns such an error into ErrTooLarge.
var tooLargeMarker = json.RawMessage(`"manifold:maxMessageBytes"`)

// limitTransport bounds each message an http or sse upstream sends to max
// bytes, as the stdio transport bounds each line: a JSON body is read up to
// max+1 bytes, an SSE stream one event at a time (a stream carries many
// messages). An oversized message is not read further (on a stream that
// must go on, its remainder is skipped without being kept) and is replaced
// by a JSON-RPC error for the request it answers, which the SDK delivers
// to that call; the session stays up. Error bodies (non-2xx) are cut at
// max bytes. Memory is proportional to max, not to what the upstream sends.
type limitTransport struct {
	base    http.RoundTripper
	server  string
	max     int
	framing int // allowed beside the message in an SSE event: sseFraming
	log     *zap.Logger
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp, err
	}
	// The media type as the SDK reads it (its baseMediaType).
	mt, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		resp.Body = &cappedBody{rc: resp.Body, left: int64(t.max)}
	case mt == "application/json":
		resp.Body = &jsonBody{t: t, req: req, rc: resp.Body, length: resp.ContentLength}
		resp.ContentLength = -1
	case mt == "text/event-stream" && req.Context().Value(boundsItsEvents{}) != nil:
		// A raw call reads its answer stream with a reader that bounds
		// each event itself (sseReader.max): buffering every event here
		// first would copy a large answer once more.
	case mt == "text/event-stream":
		resp.Body = &sseBody{t: t, req: req, rc: resp.Body, br: bufio.NewReader(resp.Body), onCall: req.Method == http.MethodPost}
	default:
		resp.Body = &cappedBody{rc: resp.Body, left: int64(t.max)}
	}
	return resp, nil
}

// boundsItsEvents marks, in its context, a request whose answer stream is
// read by a reader that bounds its events itself (a raw call's).
type boundsItsEvents struct{}

// CloseIdleConnections closes the base transport's idle connections.
func (t *limitTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// tooLarge logs an oversized message and returns the JSON-RPC error
// response for id that replaces it.
func (t *limitTransport) tooLarge(req *http.Request, id json.RawMessage, what string) []byte {
	t.log.Warn("upstream message over gateway.limits.maxMessageBytes: "+what,
		zap.Int(keyLimit, t.max), zap.String(keyHTTPMethod, req.Method))
	msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s,"data":%s}}`,
		id, jsonrpc.CodeInternalError, strconv.Quote(ErrTooLarge.Error()), tooLargeMarker)
	return []byte(msg)
}

// requestID returns the id of the JSON-RPC request req carries, or nil.
// The SDK's requests have GetBody (their bodies are in memory).
func requestID(req *http.Request) json.RawMessage {
	if req.GetBody == nil {
		return nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer body.Close()
	var s idScanner
	if _, err := io.Copy(writerFunc(func(p []byte) (int, error) { s.write(p); return len(p), nil }), body); err != nil {
		return nil
	}
	return s.requestID()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// isTooLarge reports whether err is the error limitTransport put in place
// of an oversized message.
func isTooLarge(err error) bool {
	var rpcErr *jsonrpc.Error
	return errors.As(err, &rpcErr) && bytes.Equal(rpcErr.Data, tooLargeMarker)
}

// cappedBody ends (io.EOF) after left bytes and closes the body then.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.rc.Close()
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// jsonBody is an application/json answer to a request: one message. It is
// read whole (up to max+1 bytes) at the first Read and then served, or
// replaced by the error for the request when over max.
type jsonBody struct {
	t      *limitTransport
	req    *http.Request
	rc     io.ReadCloser
	length int64     // Content-Length, or -1
	r      io.Reader // nil until the first Read
}

func (b *jsonBody) Read(p []byte) (int, error) {
	if b.r == nil {
		b.r = b.open()
	}
	return b.r.Read(p)
}

func (b *jsonBody) open() io.Reader {
	max := int64(b.t.max)
	switch {
	case b.length >= 0 && b.length <= max:
		return b.rc // net/http stops at Content-Length
	case b.length < 0:
		data, err := io.ReadAll(io.LimitReader(b.rc, max+1))
		if err != nil {
			return io.MultiReader(bytes.NewReader(data), errReader{err})
		}
		if int64(len(data)) <= max {
			return bytes.NewReader(data)
		}
	}
	b.rc.Close()
	id := requestID(b.req)
	if id == nil {
		return errReader{fmt.Errorf("upstream %q: %w (%d bytes)", b.t.server, ErrTooLarge, b.t.max)}
	}
	return bytes.NewReader(b.t.tooLarge(b.req, id, "the answer was replaced by an error"))
}

func (b *jsonBody) Close() error { return b.rc.Close() }

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// sseBody is a text/event-stream answer, passed on one whole event at a
// time so that an event over the limit can be held back. On the stream
// that answers a POST (one call), an oversized event ends the stream with
// the error for that call. On a GET stream (the standalone stream; the
// legacy SSE transport's only stream, which carries every answer), the
// oversized event is skipped to its end without being kept, and replaced
// by the error for the id it answers, if it is an answer.
type sseBody struct {
	t      *limitTransport
	req    *http.Request
	rc     io.ReadCloser
	br     *bufio.Reader
	onCall bool

	out []byte // the event being passed on, from off
	off int
	buf []byte // reused for out
	err error  // returned once out is drained
}

func (b *sseBody) Read(p []byte) (int, error) {
	for b.off == len(b.out) {
		if b.err != nil {
			return 0, b.err
		}
		b.next()
	}
	n := copy(p, b.out[b.off:])
	b.off += n
	return n, nil
}

func (b *sseBody) Close() error { return b.rc.Close() }

// next reads the next event (its lines up to and including the blank line
// ending it) into out, or what replaces it; on a read error, what was read
// and then the error.
func (b *sseBody) next() {
	if cap(b.buf) > sseBufferDrop {
		b.buf = nil
	}
	b.out, b.off = b.buf[:0], 0
	budget := b.t.max + b.t.framing
	for {
		frag, err := b.br.ReadSlice('\n')
		if len(b.out)+len(frag) > budget {
			b.overflow(frag, err)
			return
		}
		b.out = append(b.out, frag...)
		b.buf = b.out
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil:
			b.err = err
			return
		case len(bytes.TrimRight(frag, "\r\n")) == 0 && (len(b.out) == len(frag) || b.out[len(b.out)-len(frag)-1] == '\n'):
			return // a blank line: the event is complete
		}
	}
}

// overflow handles an event over the limit, of which out holds the start
// and frag (read with err) the next piece.
func (b *sseBody) overflow(frag []byte, err error) {
	if b.onCall {
		b.rc.Close()
		b.err = io.EOF
		if id := requestID(b.req); id != nil {
			b.out, b.off = b.event(b.t.tooLarge(b.req, id, "the call's stream was ended with an error")), 0
		} else {
			b.out, b.off = nil, 0
			b.err = fmt.Errorf("upstream %q: %w (%d bytes)", b.t.server, ErrTooLarge, b.t.max)
		}
		return
	}
	// Skip the rest of the event, finding the id it answers.
	var s idScanner
	d := dataLines{s: &s, lineStart: true}
	d.write(b.out)
	d.write(frag)
	for !d.ended && (err == nil || errors.Is(err, bufio.ErrBufferFull)) {
		frag, err = b.br.ReadSlice('\n')
		d.write(frag)
	}
	b.out, b.off = nil, 0
	if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
		b.err = err
	}
	if id := s.response(); id != nil {
		b.out = b.event(b.t.tooLarge(b.req, id, "the answer was replaced by an error"))
	} else {
		b.t.log.Warn("upstream message over gateway.limits.maxMessageBytes dropped: it answers no call",
			zap.Int(keyLimit, b.t.max), zap.String(keyHTTPMethod, b.req.Method))
	}
}

// dataLines feeds the values of an SSE event's data lines, given in
// pieces, to an idScanner (joined by newlines, as the SDK joins them), and
// notes the blank line that ends the event. It splits lines as the SDK
// does: at '\n', a line of nothing but '\r' being blank, the field name
// being what precedes the first ':'.
type dataLines struct {
	s         *idScanner
	lineStart bool
	onlyCR    bool    // the line so far is nothing but '\r'
	name      [5]byte // the field name so far, until ':'
	nameLen   int     // -1: longer than "data"
	inValue   bool    // past the ':' of a data line
	ended     bool
}

func (d *dataLines) write(p []byte) {
	for _, c := range p {
		if d.ended {
			return
		}
		if d.lineStart {
			d.lineStart, d.onlyCR, d.nameLen, d.inValue = false, true, 0, false
		}
		if c == '\n' {
			if d.onlyCR {
				d.ended = true
				return
			}
			if d.inValue {
				d.s.byte('\n')
			}
			d.lineStart = true
			continue
		}
		if c != '\r' {
			d.onlyCR = false
		}
		switch {
		case d.inValue:
			d.s.byte(c)
		case d.nameLen < 0:
		case c == ':':
			d.inValue = string(d.name[:d.nameLen]) == "data"
			d.nameLen = -1
		case d.nameLen < len(d.name):
			d.name[d.nameLen] = c
			d.nameLen++
		default:
			d.nameLen = -1
		}
	}
}

// event returns msg as an SSE message event.
func (b *sseBody) event(msg []byte) []byte {
	out := make([]byte, 0, len(msg)+len("event: message\ndata: \n\n"))
	out = append(out, "event: message\ndata: "...)
	out = append(out, msg...)
	return append(out, "\n\n"...)
}
