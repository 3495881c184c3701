package gateway

import (
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// pastDeadline is a read deadline that has already passed: a read with it
// fails at once, without waiting for the peer.
var pastDeadline = time.Unix(1, 0)

// bodyDeadline bounds what a client can hold with a request body it does
// not send:
//
//   - a body must arrive within gateway.timeouts.requestBody of the end of
//     the headers (which have their own timeout); after that, reads fail and
//     the connection is closed. Only the body is bounded: once it is read,
//     a response may stream for as long as it lasts (SSE, a long call);
//   - a request answered without reading its body (401, 403, 404, 405, 413,
//     503, …) is not drained: net/http would wait for the rest of the body,
//     up to 256 KiB, before answering and reusing the connection, so a
//     client that announces a body and never sends it would hold a
//     connection, and a file, until it gives up. Instead, the part that
//     has arrived is discarded, and if the rest has not, the answer goes
//     out with "Connection: close" and the connection is closed.
//
// It reads the timeout from the current snapshot, so a reload applies it to
// the next request.
func (g *Gateway) bodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(g.current().cfg.Gateway.Timeouts.RequestBody)); err != nil {
			next.ServeHTTP(w, r) // a writer without deadlines (tests): nothing to hold
			return
		}
		body := &watchedBody{ReadCloser: r.Body}
		r.Body = body
		next.ServeHTTP(w, r)
		switch {
		case !body.eof:
			// The server now discards the body before it answers (when the
			// answer is still buffered) or when it finishes: with the
			// deadline passed, that takes what has arrived and fails on
			// the rest, which makes the server close the connection.
			_ = rc.SetReadDeadline(pastDeadline)
		case r.ProtoMajor >= 2:
			// HTTP/1 clears the deadline itself at the end of the body,
			// before it watches the connection for the client going away;
			// HTTP/2 keeps a per-stream timer.
			_ = rc.SetReadDeadline(time.Time{})
		}
	})
}

// watchedBody notes whether its body was read to the end. Like any request
// body it is read by one goroutine at a time.
type watchedBody struct {
	io.ReadCloser
	eof bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	return n, err
}

// Protect wraps h, served on a listener of the gateway's process other than
// the main one (the metrics listener) at address listen, in the main
// listener's front-door checks: the Host check against DNS rebinding (when
// listen is a loopback address, Host must name loopback or one of
// gateway.allowedHosts), the Origin check (same host, or one of
// gateway.allowedOrigins), and the request body deadline. The lists and the
// deadline are read per request from the config serving now.
func (g *Gateway) Protect(listen string, h http.Handler) http.Handler {
	host, _, _ := net.SplitHostPort(listen)
	loopbackOnly := isLoopback(host)
	return g.bodyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.allowHostOrigin(w, r, loopbackOnly) {
			h.ServeHTTP(w, r)
		}
	}))
}
