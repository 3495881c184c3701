package upstream

import (
	"context"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/internal/h1client"
	"github.com/manifold-mcp/manifold/internal/rawio"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// seenRequest is what headerRecorder keeps of one request.
type seenRequest struct {
	method, path  string
	authorization string
	team          string
}

// headerRecorder wraps an MCP HTTP handler and records each request's headers.
type headerRecorder struct {
	next http.Handler

	mu   sync.Mutex
	seen []seenRequest
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, seenRequest{
		method:        r.Method,
		path:          r.URL.Path,
		authorization: r.Header.Get("Authorization"),
		team:          r.Header.Get("X-Team"),
	})
	h.mu.Unlock()
	h.next.ServeHTTP(w, r)
}

func (h *headerRecorder) requests() []seenRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]seenRequest(nil), h.seen...)
}

// mcpHandler returns the streamable HTTP or SSE handler for a demo server.
func mcpHandler(kind, name string) http.Handler {
	s := demo.NewServer(name, nil)
	get := func(*http.Request) *mcp.Server { return s }
	if kind == "sse" {
		return mcp.NewSSEHandler(get, nil)
	}
	return mcp.NewStreamableHTTPHandler(get, nil)
}

// startHTTPServer serves h on 127.0.0.1 (TLS if tls) and closes it when the
// test ends, after the upstreams started later are closed.
func startHTTPServer(t *testing.T, h http.Handler, tls bool) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

func TestHTTPUpstream(t *testing.T) {
	tests := []struct {
		name string
		typ  string
		path string
	}{
		{name: "streamable", typ: "http", path: "/mcp"},
		{name: "sse", typ: "sse", path: "/sse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			rec := &headerRecorder{next: mcpHandler(tt.typ, "web")}
			srv := startHTTPServer(t, rec, false)
			before := goleak.IgnoreCurrent() // the server's own goroutines

			cfg := config.Server{
				Name:    "web",
				Type:    tt.typ,
				URL:     srv.URL + tt.path,
				Headers: map[string]string{"Authorization": "Bearer x", "X-Team": "a"},
			}
			u := New(cfg, fastOptions())
			u.Start(context.Background())
			st := waitReady(t, u, 5*time.Second)
			if st.PID != 0 || st.Transport != tt.typ {
				t.Errorf("status = %+v, want no pid and transport %q", st, tt.typ)
			}
			if n := len(u.Catalog().Tools); n == 0 {
				t.Error("catalog has no tools")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if got, err := echo(ctx, u, "over http"); err != nil || got != "over http" {
				t.Errorf("echo = %q, %v", got, err)
			}
			if err := u.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}

			reqs := rec.requests()
			if len(reqs) < 3 {
				t.Fatalf("server saw %d requests, want at least initialize, list and call: %+v", len(reqs), reqs)
			}
			for _, r := range reqs {
				if r.authorization != "Bearer x" || r.team != "a" {
					t.Errorf("%s %s: Authorization %q, X-Team %q; want the configured headers", r.method, r.path, r.authorization, r.team)
				}
			}
			// Closing the upstream leaves no connection (and no goroutine
			// serving one) behind, even while the server stays up.
			if err := goleak.Find(before); err != nil {
				t.Errorf("goroutines left after Close while the server is still up: %v", err)
			}
		})
	}
}

// writeCertPEM writes srv's certificate as a PEM file and returns its path.
func writeCertPEM(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHTTPCAFile(t *testing.T) {
	tests := []struct {
		name    string
		typ     string
		path    string
		caFile  bool
		wantErr string // "" = connects
	}{
		{name: "streamable with caFile", typ: "http", path: "/mcp", caFile: true},
		{name: "sse with caFile", typ: "sse", path: "/sse", caFile: true},
		{name: "streamable without caFile", typ: "http", path: "/mcp", wantErr: "certificate"},
		{name: "sse without caFile", typ: "sse", path: "/sse", wantErr: "certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			srv := startHTTPServer(t, mcpHandler(tt.typ, "secure"), true)
			cfg := config.Server{Name: "secure", Type: tt.typ, URL: srv.URL + tt.path}
			if tt.caFile {
				cfg.CAFile = writeCertPEM(t, srv)
			}
			u := startUpstream(t, cfg, fastOptions())
			if tt.wantErr == "" {
				waitReady(t, u, 5*time.Second)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if got, err := echo(ctx, u, "tls"); err != nil || got != "tls" {
					t.Errorf("echo = %q, %v", got, err)
				}
				return
			}
			var st Status
			waitFor(t, 5*time.Second, "a failed state", func() bool {
				st = u.Status()
				return st.State == StateFailed
			})
			if !strings.Contains(st.Error, tt.wantErr) {
				t.Errorf("status error = %q, want it to contain %q", st.Error, tt.wantErr)
			}
		})
	}
}

// fakeRoundTripper records the last request it was given.
type fakeRoundTripper struct{ last *http.Request }

func (f *fakeRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	f.last = r
	return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Request: r}, nil
}

func TestHeaderTransport(t *testing.T) {
	base := &fakeRoundTripper{}
	rt := &headerTransport{base: base, headers: map[string]string{"Authorization": "Bearer x", "X-Team": "a"}}
	req := httptest.NewRequest(http.MethodPost, "http://example.test/mcp", nil)
	req.Header.Set("Authorization", "Bearer client")
	req.Header.Set("Mcp-Session-Id", "s1")
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	got := base.last.Header
	if got.Get("Authorization") != "Bearer x" || got.Get("X-Team") != "a" || got.Get("Mcp-Session-Id") != "s1" {
		t.Errorf("sent headers = %v, want configured ones set and others kept", got)
	}
	if req.Header.Get("Authorization") != "Bearer client" || req.Header.Get("X-Team") != "" {
		t.Errorf("caller's request was modified: %v", req.Header)
	}
}

func TestHeaderTransportNothingToAdd(t *testing.T) {
	base := &fakeRoundTripper{}
	rt := &headerTransport{base: base}
	req := httptest.NewRequest(http.MethodPost, "http://example.test/mcp", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if base.last != req {
		t.Error("a request with no headers to add was copied")
	}
}

// TestTraceContextReachesHTTPUpstream: the span context of a call survives
// detach (nothing else of the caller's context does) and is sent as W3C
// headers, before the configured headers.
func TestTraceContextReachesHTTPUpstream(t *testing.T) {
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled, Remote: true,
	})
	parent := trace.ContextWithSpanContext(context.WithValue(context.Background(), ctxKey{}, "downstream"), sc)
	d, stop := detach(parent)
	defer stop()
	if d.Value(ctxKey{}) != nil {
		t.Error("detach kept a downstream value")
	}
	base := &fakeRoundTripper{}
	rt := &headerTransport{base: base, headers: map[string]string{"Authorization": "Bearer x"}}
	req := httptest.NewRequestWithContext(d, http.MethodPost, "http://example.test/mcp", nil)
	if _, err := rt.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if got := base.last.Header.Get("traceparent"); got != traceparent {
		t.Errorf("traceparent = %q, want %q", got, traceparent)
	}
	if base.last.Header.Get("Authorization") != "Bearer x" || req.Header.Get("traceparent") != "" {
		t.Errorf("headers sent %v, caller's %v", base.last.Header, req.Header)
	}
}

// TestHTTPClientKeepsConnectionsForConcurrentCalls: concurrent requests to
// an upstream reuse their connections, rather than opening one per request
// beyond net/http's default of two idle connections per host.
func TestHTTPClientKeepsConnectionsForConcurrentCalls(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		time.Sleep(2 * time.Millisecond) // the callers' requests overlap
		w.Write([]byte("{}"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	client, err := newHTTPClient(config.Server{Name: "h"}, 1<<20, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	// Rounds of 8 requests at once: each round's connections all come
	// back idle together, and the next round reuses them if they were kept.
	const workers, rounds = 8, 20
	for range rounds {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				resp, err := client.Post(srv.URL, "application/json", strings.NewReader("{}"))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
	}
	// A dial racing a connection coming back idle may add one per caller;
	// without reuse, each round past the second would open connections.
	if n := opened.Load(); n > 2*workers {
		t.Errorf("%d connections opened for %d concurrent callers over %d rounds", n, workers, rounds)
	}
}

// TestHTTPClientConnsUseRawIO: on Linux the client's connections read and
// write with direct system calls (internal/rawio), as the gateway's own
// listener does; requests over them work as over any connection.
func TestHTTPClientConnsUseRawIO(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("direct system calls are Linux only")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	client, err := newHTTPClient(config.Server{Name: "h"}, 1<<20, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	base := client.Transport.(*limitTransport).base.(*headerTransport).base.(*http.Transport)
	c, err := base.DialContext(context.Background(), "tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, ok := c.(*rawio.Conn); !ok {
		t.Errorf("the client dials %T, want *rawio.Conn", c)
	}
	resp, err := client.Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != `{"ok":true}` {
		t.Errorf("answer %q", body)
	}
}

// TestRawHTTPClient: raw calls to a plain-http upstream go through
// h1client under the same layers as the session's client; an https
// upstream keeps the session's client (net/http) for them.
func TestRawHTTPClient(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("h1client serves raw calls on Linux only")
	}
	for _, tt := range []struct {
		name, url string
		direct    bool
	}{
		{name: "plain http", url: "http://127.0.0.1:9/mcp", direct: true},
		{name: "https", url: "https://127.0.0.1:9/mcp"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Server{Name: "h", URL: tt.url, Headers: map[string]string{"X-Team": "a"}}
			base, err := newHTTPTransport(cfg)
			if err != nil {
				t.Fatal(err)
			}
			hc := layered(base, cfg, 1<<20, nil, zap.NewNop())
			raw := newRawHTTPClient(base, hc, cfg, 1<<20, nil, zap.NewNop())
			if !tt.direct {
				if raw != hc {
					t.Error("the raw client is not the session's")
				}
				return
			}
			lt, ok := raw.Transport.(*limitTransport)
			if !ok || lt.max != 1<<20 {
				t.Fatalf("the raw client's transport is %T, want the message bound", raw.Transport)
			}
			ht, ok := lt.base.(*headerTransport)
			if !ok || ht.headers["X-Team"] != "a" {
				t.Fatalf("below the bound: %T, want the configured headers", lt.base)
			}
			if h1, ok := ht.base.(*h1client.Transport); !ok || h1.Fallback != base {
				t.Errorf("at the bottom: %T, want *h1client.Transport falling back to the session's", ht.base)
			}
		})
	}
}
