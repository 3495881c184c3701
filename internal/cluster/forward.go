package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"

	"go.uber.org/zap"
)

// forwardKey carries a forward's target and failure answer through the
// proxy's hooks.
type forwardKey struct{}

type forwardTarget struct {
	owner string
	gone  func(http.ResponseWriter)
	body  *clientBody // a streamed body; nil when sent from memory
}

// clientBody is a request body streamed to the owner that keeps its read
// error: a forward that failed reading it failed for the client, not for
// the owner. The proxy's transport reads it on its own goroutine.
type clientBody struct {
	io.ReadCloser
	mu  sync.Mutex
	err error
}

// Read reads the client's body and keeps an error other than io.EOF.
func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.mu.Lock()
		b.err = err
		b.mu.Unlock()
	}
	return n, err
}

// failed is the error reading the client's body, nil if none.
func (b *clientBody) failed() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Forward serves r by reverse-proxying it to the replica owner (host:port),
// with a hop header, streaming the response (SSE included, flushed as it
// comes). When owner refuses the connection, gone answers (a session whose
// owner is gone: 404): the request never left this replica. A forward
// that fails once the request was sent (the owner may have received it
// and acted on it) gets 502 and is not served again here; a body that runs
// over the caller's limit gets 413, one the client failed to send 400. The
// caller has decided that owner is not this replica and that r was not
// forwarded already, and bounds r's body (a JSON-RPC message, at most the
// gateway's message size limit).
//
// A body of known length (what MCP clients send) is read whole before the
// owner is asked, and sent from memory: net/http's Transport may go on
// reading a request's body after RoundTrip has returned an error (a pooled
// connection to a replica that died), and a read of r's body that ends
// after this handler has returned races the server reading the
// connection's next request (net/http panics with "invalid concurrent
// Body.Read call" and drops the connection). From memory, the body can be
// sent again (GetBody): the Transport then retries a request that it
// wrote nothing of on a pooled connection the owner had closed, on a new
// connection. A body without a length is streamed, in full duplex: the
// owner may start its answer (an SSE stream) before the proxy's transport
// has read that body to its end; without full duplex, net/http would
// consume the body itself when the answer starts, and the transport's
// failed read would cut the stream.
//
// After Close, forwards in flight end and new ones fail (503).
func (n *Node) Forward(w http.ResponseWriter, r *http.Request, owner string, gone func(http.ResponseWriter)) {
	t := &forwardTarget{owner: owner, gone: gone}
	switch {
	case r.Body == nil || r.Body == http.NoBody:
	case r.ContentLength >= 0:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &tooLarge):
				http.Error(w, fmt.Sprintf("message exceeds the gateway's limit of %d bytes (gateway.limits.maxMessageBytes)", tooLarge.Limit), http.StatusRequestEntityTooLarge)
			case r.Context().Err() == nil:
				http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	default:
		_ = http.NewResponseController(w).EnableFullDuplex()
		t.body = &clientBody{ReadCloser: r.Body}
		r.Body = t.body
	}
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), forwardKey{}, t))
	defer cancel()
	defer context.AfterFunc(n.closed, cancel)()
	n.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// Close ends the forwards in flight and closes the idle connections to the
// peers; a forward after Close fails (503). Run ends with its context.
func (n *Node) Close() {
	n.cancel()
	if c, ok := n.proxy.Transport.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (n *Node) newProxy() *httputil.ReverseProxy {
	scheme := "http"
	if n.opts.TLS {
		scheme = "https"
	}
	rt := n.opts.Transport
	if rt == nil {
		rt = &http.Transport{
			Proxy:               nil, // replicas talk directly
			DialContext:         (&net.Dialer{Timeout: defaultDial, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true, // pass bytes through as they are
			ForceAttemptHTTP2:   false,
		}
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(forwardKey{}).(*forwardTarget)
			pr.Out.URL.Scheme = scheme
			pr.Out.URL.Host = t.owner
			pr.Out.Host = pr.In.Host // the owner checks Host as the entry replica did
			pr.SetXForwarded()
			pr.Out.Header.Set(HopHeader, n.Keys().hopValue(pr.Out, time.Now()))
		},
		Transport:     rt,
		FlushInterval: -1, // SSE: every write at once
		ErrorLog:      zap.NewStdLog(n.log.Named("forward")),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			t := r.Context().Value(forwardKey{}).(*forwardTarget)
			if n.closed.Err() != nil {
				http.Error(w, "replica forwarding stopped: the gateway is shutting down", http.StatusServiceUnavailable)
				return
			}
			if r.Context().Err() != nil {
				return // the client went away
			}
			var tooLarge *http.MaxBytesError
			var op *net.OpError
			bodyErr := t.body.failed()
			switch {
			case errors.As(err, &tooLarge) || errors.As(bodyErr, &tooLarge):
				// As the owner answers a body that runs over the limit.
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", tooLarge.Limit), http.StatusRequestEntityTooLarge)
			case bodyErr != nil:
				http.Error(w, "reading the request body: "+bodyErr.Error(), http.StatusBadRequest)
			case errors.As(err, &op) && op.Op == "dial":
				// No connection (refused or timed out; a request on a
				// pooled connection the owner had closed is retried on a
				// new one): the request never left this replica, and the
				// owner is gone.
				n.markDown(t.owner)
				n.log.Info("forward: owner unreachable", zap.String("owner", t.owner), zap.Error(err))
				t.gone(w)
			default:
				// The request left: the owner may have acted on it, so it
				// is not served again here.
				n.log.Warn("forward failed", zap.String("owner", t.owner), zap.Error(err))
				http.Error(w, "replica forwarding failed", http.StatusBadGateway)
			}
		},
	}
}
