package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/manifold-mcp/manifold/config"
)

// TestLoopbackTrustNeedsALoopbackHost: with auth off on a listener opened with
// gateway.insecure on every interface, /status, /reload and the console trust a loopback
// peer. A page of another site that the operator's browser resolves to 127.0.0.1 (DNS
// rebinding) is such a peer, its requests same-origin under its own Host: they are refused.
// The same requests under a loopback Host, or one of gateway.allowedHosts, are served.
// Before the check the rebound page read /status and the console's API, and could reload.
func TestLoopbackTrustNeedsALoopbackHost(t *testing.T) {
	gw := newAlphaGateway(t, func(c *config.Config) {
		c.Gateway.Listen = "0.0.0.0:8080"
		c.Gateway.Insecure = true
		c.Gateway.AllowedHosts = []string{"gateway.internal"}
	}, nil)
	h := gw.Handler()
	for _, host := range []string{"rebind.evil.example:8080", "localhost:8080", "127.0.0.1:8080", "gateway.internal:8080"} {
		for _, tc := range []struct{ method, path string }{
			{http.MethodGet, "/status"},
			{http.MethodGet, "/ui/api/overview"},
			{http.MethodGet, "/ui/api/catalog"},
			{http.MethodPost, "/reload"},
		} {
			r := httptest.NewRequest(tc.method, tc.path, nil)
			r.Host, r.RemoteAddr = host, "127.0.0.1:5000"
			if tc.method == http.MethodPost {
				r.Header.Set("Origin", "http://"+host) // a same-origin fetch
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			refused := w.Code == http.StatusForbidden
			if want := host == "rebind.evil.example:8080"; refused != want {
				t.Errorf("%s %s from loopback under Host %s: %d, want refused %v", tc.method, tc.path, host, w.Code, want)
			}
		}
	}
}
