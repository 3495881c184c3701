package gateway

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"time"
)

// An open GET stream of a streamable session is served apart from the
// request that opened it (docs/architecture.md, Sessions): over HTTP/1
// the gateway takes the connection from net/http (Hijack) and lets the
// request end, which frees what net/http holds for a connection serving
// a request (its read and write buffers, the response's, the goroutine
// and its stack, grown by the requests the connection served before);
// a goroutine of the gateway's then parks the stream in a shallow frame,
// its transport writing to the connection directly, and a small one
// reads the connection to learn the client has gone. The response ends
// with the connection (Connection: close), as the stream does. Over
// HTTP/2, or where the connection cannot be taken, the stream is served
// as any response.

// detachStream serves r, the GET stream of cl, from a goroutine of the
// gateway's on r's connection, taken from net/http, and reports true;
// the stream's end is counted (cl.end) when it ends. It reports false,
// doing nothing, when the connection cannot be taken.
func (g *Gateway) detachStream(w http.ResponseWriter, r *http.Request, cl *client) bool {
	if r.ProtoMajor != 1 {
		return false
	}
	// The buffers that come with the connection are left to the
	// collector: a client sends nothing more on it before the answer.
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	_ = conn.SetDeadline(time.Time{})
	// Its values, not its cancellation: the request ends now.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	r = r.WithContext(ctx)
	if !g.life.Go(func(life context.Context) {
		defer cl.end(streamUnit)
		defer cancel()
		stop := context.AfterFunc(life, cancel)
		defer stop()
		serveDetached(conn, r, cancel, cl.transport)
	}) {
		cancel()
		conn.Close()
		cl.end(streamUnit)
	}
	return true
}

// serveDetached serves r on conn with serve, until it returns; cancel
// cancels r's context, which ends it, when the client closes conn.
func serveDetached(conn net.Conn, r *http.Request, cancel context.CancelFunc, serve http.Handler) {
	defer conn.Close()
	gone := make(chan struct{})
	go watchConn(conn, cancel, gone)
	serve.ServeHTTP(&streamWriter{conn: conn, h: http.Header{}, proto: r.ProtoMinor}, r)
	conn.Close() // ends watchConn
	<-gone
}

// watchConn reads conn until it fails (the client closed it, or the
// stream ended and closed it), then calls cancel and closes gone.
func watchConn(conn net.Conn, cancel context.CancelFunc, gone chan<- struct{}) {
	defer close(gone)
	defer cancel()
	var b [1]byte
	for {
		if _, err := conn.Read(b[:]); err != nil {
			return
		}
	}
}

// streamWriter is the http.ResponseWriter of a stream on a taken
// connection: the status line and headers go out at the first write, the
// body as written, unbuffered, until the connection closes.
type streamWriter struct {
	conn  net.Conn
	h     http.Header
	proto int // the request's HTTP/1 minor version
	wrote bool
	err   error
}

func (s *streamWriter) Header() http.Header { return s.h }

// WriteHeader writes the status line and the headers; the body that
// follows lasts until the connection closes.
func (s *streamWriter) WriteHeader(code int) {
	if s.wrote {
		return
	}
	s.wrote = true
	var b bytes.Buffer
	b.WriteString("HTTP/1.")
	b.WriteString(strconv.Itoa(s.proto))
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(code))
	b.WriteByte(' ')
	b.WriteString(http.StatusText(code))
	b.WriteString("\r\n")
	s.h.Del("Content-Length")
	s.h.Del("Transfer-Encoding")
	s.h.Set("Connection", "close")
	if _, ok := s.h["Date"]; !ok {
		s.h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	_ = s.h.Write(&b)
	b.WriteString("\r\n")
	_, s.err = s.conn.Write(b.Bytes())
}

func (s *streamWriter) Write(p []byte) (int, error) {
	if !s.wrote {
		s.WriteHeader(http.StatusOK)
	}
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.conn.Write(p)
	s.err = err
	return n, err
}

// Flush does nothing: every write goes out at once.
func (s *streamWriter) Flush() {}
