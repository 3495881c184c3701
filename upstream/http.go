package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/h1client"
	"github.com/manifold-mcp/manifold/internal/rawio"
	"go.uber.org/zap"
)

// newHTTPClient returns the client for an http or sse upstream: proxy
// settings from the environment (HTTP_PROXY, HTTPS_PROXY, NO_PROXY), the
// server's extra CA bundle, its configured headers on every request (the
// SDK's transports have no header option), the W3C trace context of the
// call a request belongs to, and each message the upstream sends bounded to
// maxMessageBytes (see limitTransport); with cred, the bearer token of the
// server's auth (credentialTransport).
func newHTTPClient(cfg config.Server, maxMessageBytes int, cred Credential, log *zap.Logger) (*http.Client, error) {
	base, err := newHTTPTransport(cfg)
	if err != nil {
		return nil, err
	}
	return layered(base, cfg, maxMessageBytes, cred, log), nil
}

// newRawHTTPClient returns the client of a streamable HTTP upstream's raw
// calls (httpraw.go) beside hc, the SDK session's client over base
// (newHTTPClient): the same layers over an h1client.Transport, which makes
// each exchange on the calling goroutine, when the upstream is plain http
// reached without a proxy on Linux (where h1client can check a kept
// connection before reusing it); else hc itself. Requests h1client does
// not make (a redirect to https, a proxied host) go to base. Raw calls are
// the hot path: net/http's Transport wakes three or four goroutines for
// each (docs/architecture.md, Direct system calls).
func newRawHTTPClient(base *http.Transport, hc *http.Client, cfg config.Server, maxMessageBytes int, cred Credential, log *zap.Logger) *http.Client {
	if runtime.GOOS != "linux" {
		return hc
	}
	req, err := http.NewRequest(http.MethodPost, cfg.URL, nil)
	if err != nil || req.URL.Scheme != "http" {
		return hc
	}
	if proxy, err := base.Proxy(req); err != nil || proxy != nil {
		return hc
	}
	return layered(&h1client.Transport{Fallback: base, Proxy: base.Proxy}, cfg, maxMessageBytes, cred, log)
}

// newHTTPTransport returns net/http's transport as an upstream's client
// uses it (newHTTPClient).
func newHTTPTransport(cfg config.Server) (*http.Transport, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = http.ProxyFromEnvironment
	// Keep a connection per call in flight: with net/http's default of 2
	// idle connections per host, concurrent calls beyond two would open
	// and close a connection each (thousands in TIME-WAIT under load).
	base.MaxIdleConnsPerHost = base.MaxIdleConns
	// Reads and writes of the connections with direct system calls, as on
	// the gateway's own listener (internal/rawio): through the net
	// package, each enters the runtime's syscall state, which keeps sysmon
	// polling every few microseconds while calls flow.
	dial := base.DialContext
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return rawio.NewConn(c), nil
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("caFile: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caFile %q: no PEM certificates found", cfg.CAFile)
		}
		base.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return base, nil
}

// layered is the client of an upstream over base: its credential, its
// configured headers and trace context, and its message bound.
func layered(base http.RoundTripper, cfg config.Server, maxMessageBytes int, cred Credential, log *zap.Logger) *http.Client {
	rt := base
	if cred != nil {
		rt = &credentialTransport{base: base, cred: cred}
	}
	return &http.Client{Transport: &limitTransport{
		base:    &headerTransport{base: rt, headers: cfg.Headers},
		server:  cfg.Name,
		max:     maxMessageBytes,
		framing: sseFraming,
		log:     log,
	}}
}

// headerTransport adds the trace context of the request's context
// (traceparent, tracestate, baggage; see detach) and then the configured
// headers to every request. A request with neither to add is passed on as
// it is.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	traced := hasTraceContext(req.Context())
	if !traced && len(t.headers) == 0 {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	if traced {
		injectTraceHeaders(req.Context(), req.Header)
	}
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections closes the base transport's idle connections
// (http.Client.CloseIdleConnections reaches them only through this).
func (t *headerTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
