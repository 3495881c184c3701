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
	"time"

	"go.uber.org/zap"
)

// forwardKey carries a forward's target and failure answer through the
// proxy's hooks.
type forwardKey struct{}

type forwardTarget struct {
	owner string
	gone  func(http.ResponseWriter)
}

// Forward serves r by reverse-proxying it to the replica owner (host:port),
// with a hop header, streaming the response (SSE included, flushed as it
// comes). When owner cannot be reached, gone answers (a session whose
// owner is gone: 404). The caller has decided that owner is not this
// replica and that r was not forwarded already, and bounds r's body (a
// JSON-RPC message, at most the gateway's message size limit).
//
// A body of known length (what MCP clients send) is read whole before the
// owner is asked, and sent from memory: net/http's Transport may go on
// reading a request's body after RoundTrip has returned an error (a pooled
// connection to a replica that died), and a read of r's body that ends
// after this handler has returned races the server reading the
// connection's next request (net/http panics with "invalid concurrent
// Body.Read call" and drops the connection). A body without a length is
// streamed, in full duplex: the owner may start its answer (an SSE
// stream) before the proxy's transport has read that body to its end;
// without full duplex, net/http would consume the body itself when the
// answer starts, and the transport's failed read would cut the stream.
func (n *Node) Forward(w http.ResponseWriter, r *http.Request, owner string, gone func(http.ResponseWriter)) {
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
	default:
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	ctx := context.WithValue(r.Context(), forwardKey{}, &forwardTarget{owner: owner, gone: gone})
	n.proxy.ServeHTTP(w, r.WithContext(ctx))
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
			if r.Context().Err() != nil {
				return // the client went away
			}
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" || !n.reachable(r.Context(), t.owner) {
				// Refused, or a pooled connection broke and the owner no
				// longer accepts new ones: it is gone.
				n.markDown(t.owner)
				n.log.Info("forward: owner unreachable", zap.String("owner", t.owner), zap.Error(err))
				t.gone(w)
				return
			}
			n.log.Warn("forward failed", zap.String("owner", t.owner), zap.Error(err))
			http.Error(w, "replica forwarding failed", http.StatusBadGateway)
		},
	}
}

// reachable reports whether owner accepts a connection now; asked only
// when a forward failed after connecting (a pooled connection to a replica
// that died).
func (n *Node) reachable(ctx context.Context, owner string) bool {
	ctx, cancel := context.WithTimeout(ctx, defaultDial)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", owner)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
