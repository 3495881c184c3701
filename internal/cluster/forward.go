package cluster

import (
	"context"
	"errors"
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
// with a hop header, streaming the request body and the response (SSE
// included, flushed as it comes). When owner cannot be reached, gone
// answers (a session whose owner is gone: 404). The caller has decided
// that owner is not this replica and that r was not forwarded already.
func (n *Node) Forward(w http.ResponseWriter, r *http.Request, owner string, gone func(http.ResponseWriter)) {
	// Full duplex: the owner may start its answer (an SSE stream) before
	// the proxy's transport has read r's body to its end; without it,
	// net/http would consume that body itself when the answer starts, and
	// the transport's failed read would cut the stream.
	_ = http.NewResponseController(w).EnableFullDuplex()
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
