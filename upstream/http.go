package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"

	"github.com/manifold-mcp/manifold/config"
)

// newHTTPClient returns the client for an http or sse upstream: proxy
// settings from the environment (HTTP_PROXY, HTTPS_PROXY, NO_PROXY), the
// server's extra CA bundle, and its configured headers on every request
// (the SDK's transports have no header option).
func newHTTPClient(cfg config.Server) (*http.Client, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = http.ProxyFromEnvironment
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
	var rt http.RoundTripper = base
	if len(cfg.Headers) > 0 {
		rt = &headerTransport{base: base, headers: cfg.Headers}
	}
	return &http.Client{Transport: rt}, nil
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
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
