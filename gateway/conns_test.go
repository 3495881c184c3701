package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawPost opens a connection to addr and sends the headers of a POST to
// path announcing a body of length bytes, then only sent (a prefix of it).
// Header "Host" replaces the Host line.
func rawPost(t *testing.T, addr, path string, header map[string]string, length int, sent string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	host := addr
	var b strings.Builder
	for k, v := range header {
		if k == "Host" {
			host = v
			continue
		}
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%sContent-Length: %d\r\n\r\n%s",
		path, host, b.String(), length, sent)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedAfter reads what is left on c and reports whether the peer closed
// the connection (rather than the read deadline passing).
func closedAfter(r io.Reader) (bool, error) {
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, err
	}
	return true, nil
}

// TestEarlyRefusalsDoNotWaitForTheBody: a request refused before its body
// is read, whose announced body never comes, is answered at once with
// "Connection: close", and the gateway closes the connection instead of
// waiting for the body (net/http would drain it first, holding the
// connection and a file for as long as the client wants).
func TestEarlyRefusalsDoNotWaitForTheBody(t *testing.T) {
	_, hs, _ := teamGateway(t, nil)
	addr := strings.TrimPrefix(hs.URL, "http://")
	alice := "Bearer " + aliceKey
	tests := []struct {
		name   string
		path   string
		header map[string]string
		length int // announced body; default 1000
		want   int
	}{
		{name: "no token", path: "/mcp", want: http.StatusUnauthorized},
		{name: "wrong key", path: "/mcp", header: map[string]string{"Authorization": "Bearer wrong-key-0123456789"}, want: http.StatusUnauthorized},
		{name: "rebinding host", path: "/mcp", header: map[string]string{"Host": "evil.example", "Authorization": alice}, want: http.StatusForbidden},
		{name: "foreign origin", path: "/mcp", header: map[string]string{"Origin": "https://evil.example", "Authorization": alice}, want: http.StatusForbidden},
		{name: "over the size limit", path: "/mcp", header: map[string]string{"Authorization": alice}, length: 5 << 20, want: http.StatusRequestEntityTooLarge},
		{name: "unknown session", path: "/mcp", header: map[string]string{"Authorization": alice, "Mcp-Session-Id": "no-such-session"}, want: http.StatusNotFound},
		{name: "unknown SSE session", path: "/sse?sessionid=no-such-session", header: map[string]string{"Authorization": alice}, want: http.StatusNotFound},
		{name: "wrong method on a probe", path: "/healthz", want: http.StatusMethodNotAllowed},
		{name: "admin endpoint without token", path: "/status", want: http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.length == 0 {
				tc.length = 1000
			}
			c := rawPost(t, addr, tc.path, tc.header, tc.length, "")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer without the body: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want || !resp.Close {
				t.Errorf("status %d, Connection %q; want %d and close", resp.StatusCode, resp.Header.Get("Connection"), tc.want)
			}
			if closed, err := closedAfter(br); !closed {
				t.Errorf("the gateway keeps the connection open, waiting for the body: %v", err)
			}
		})
	}
}

// TestRefusalWithItsBodyKeepsTheConnection: a refused request whose body
// has arrived in full leaves its connection usable for the next request.
func TestRefusalWithItsBodyKeepsTheConnection(t *testing.T) {
	_, hs, _ := teamGateway(t, nil)
	addr := strings.TrimPrefix(hs.URL, "http://")
	c := rawPost(t, addr, "/mcp", map[string]string{"Authorization": "Bearer wrong-key-0123456789"}, len(initBody), initBody)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Close {
		t.Fatalf("status %d, Connection %q; want 401, kept alive", resp.StatusCode, resp.Header.Get("Connection"))
	}
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	if resp, err = http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("next request on the connection: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestSlowBodyIsCut: a body that does not arrive within
// gateway.timeouts.requestBody ends its request, and the connection, while
// a response that streams for longer than that is not cut.
func TestSlowBodyIsCut(t *testing.T) {
	_, hs, _ := teamGateway(t, func(c *config.Config) { c.Gateway.Timeouts.RequestBody = 300 * time.Millisecond })
	addr := strings.TrimPrefix(hs.URL, "http://")

	c := rawPost(t, addr, "/mcp", map[string]string{"Authorization": "Bearer " + aliceKey}, 1000, `{"jsonrpc":"2.0",`)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if closed, err := closedAfter(c); !closed {
		t.Errorf("a body stalled for 10 s still holds its connection: %v", err)
	}

	cs := connectAs(t, hs.URL, aliceKey, "2025-11-25")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{"ms": 1000}})
	if err != nil || res.IsError {
		t.Errorf("a call answered after 1 s, body deadline 300 ms: %v %v", res, err)
	}
}

// TestProtect is finding 9 of the security issue: a handler served on
// another listener (the metrics listener) gets the main listener's Host
// and Origin checks, judged by that listener's own address.
func TestProtect(t *testing.T) {
	gw := newAlphaGateway(t, func(c *config.Config) {
		c.Gateway.AllowedHosts = []string{"metrics.internal"}
		c.Gateway.AllowedOrigins = []string{"https://grafana.example"}
	}, nil)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics") })
	tests := []struct {
		name   string
		listen string
		host   string
		origin string
		want   int
	}{
		{name: "loopback IP", listen: "127.0.0.1:9464", host: "127.0.0.1:9464", want: http.StatusOK},
		{name: "localhost", listen: "127.0.0.1:9464", host: "localhost:9464", want: http.StatusOK},
		{name: "IPv6 loopback", listen: "[::1]:9464", host: "[::1]:9464", want: http.StatusOK},
		{name: "allowed host", listen: "127.0.0.1:9464", host: "metrics.internal:9464", want: http.StatusOK},
		{name: "rebinding host", listen: "127.0.0.1:9464", host: "evil.example:9464", want: http.StatusForbidden},
		{name: "same origin", listen: "127.0.0.1:9464", host: "127.0.0.1:9464", origin: "http://127.0.0.1:9464", want: http.StatusOK},
		{name: "allowed origin", listen: "127.0.0.1:9464", host: "127.0.0.1:9464", origin: "https://grafana.example", want: http.StatusOK},
		{name: "foreign origin", listen: "127.0.0.1:9464", host: "127.0.0.1:9464", origin: "https://evil.example", want: http.StatusForbidden},
		{name: "any host on a non-loopback listener", listen: "0.0.0.0:9464", host: "10.0.0.5:9464", want: http.StatusOK},
		{name: "foreign origin on a non-loopback listener", listen: "0.0.0.0:9464", host: "10.0.0.5:9464", origin: "https://evil.example", want: http.StatusForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			r.Host = tc.host
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			w := httptest.NewRecorder()
			gw.Protect(tc.listen, ok).ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("status %d %q, want %d", w.Code, w.Body.String(), tc.want)
			}
			if tc.want != http.StatusOK && strings.Contains(w.Body.String(), "metrics") {
				t.Errorf("refused, but served: %q", w.Body.String())
			}
		})
	}
}

// TestBodyDeadlineOverHTTP2: over HTTP/2 (TLS), where the deadline is per
// stream, requests with bodies are served and a response that streams for
// longer than gateway.timeouts.requestBody is not cut.
func TestBodyDeadlineOverHTTP2(t *testing.T) {
	certFile, keyFile, pool := testutil.SelfSigned(t, t.TempDir())
	gw := newAlphaGateway(t, func(c *config.Config) {
		c.Gateway.TLS = config.TLS{CertFile: certFile, KeyFile: keyFile}
		c.Gateway.Timeouts.RequestBody = 300 * time.Millisecond
	}, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx, ln) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	protos := &protoRecorder{base: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: "https://" + ln.Addr().String() + "/mcp", HTTPClient: &http.Client{Transport: protos}, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	callCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{"ms": 1000}})
	if err != nil || res.IsError {
		t.Fatalf("a call answered after 1 s, body deadline 300 ms: %v %v", res, err)
	}
	if got := protos.major.Load(); got != 2 {
		t.Errorf("served over HTTP/%d, want HTTP/2", got)
	}
}

// protoRecorder notes the HTTP major version of the last response.
type protoRecorder struct {
	base  http.RoundTripper
	major atomic.Int32
}

func (p *protoRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := p.base.RoundTrip(r)
	if err == nil {
		p.major.Store(int32(resp.ProtoMajor))
	}
	return resp, err
}
