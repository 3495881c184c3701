package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// newHTTPGateway starts a gateway in front of one in-memory demo upstream
// and serves its Handler on 127.0.0.1.
func newHTTPGateway(t *testing.T, edit func(*config.Gateway)) (*Gateway, *httptest.Server) {
	t.Helper()
	gw := newAlphaGateway(t, func(c *config.Config) {
		if edit != nil {
			edit(&c.Gateway)
		}
	}, nil)
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(func() {
		for ss := range gw.Server().Sessions() {
			ss.Close()
		}
		srv.Close()
	})
	return gw, srv
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func post(t *testing.T, url, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	return send(t, http.MethodPost, url, body, header)
}

// send sends a request to the MCP endpoint url as a client would, with
// header overriding or adding headers, and returns the answer and its body.
func send(t *testing.T, method, url, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp, string(b)
}

func TestHTTPProtections(t *testing.T) {
	_, srv := newHTTPGateway(t, func(g *config.Gateway) {
		g.Limits.MaxMessageBytes = 1024
		g.AllowedHosts = []string{"mcp.internal"}
		g.AllowedOrigins = []string{"https://app.example"}
	})
	tests := []struct {
		name       string
		body       string
		header     map[string]string
		wantStatus int
		wantBody   string
	}{
		{name: "plain initialize", body: initBody, wantStatus: 200},
		{name: "oversized", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 2000) + `"}}`, wantStatus: 413, wantBody: "maxMessageBytes"},
		{name: "rebinding host", body: initBody, header: map[string]string{"Host": "evil.example:8080"}, wantStatus: 403, wantBody: "allowedHosts"},
		{name: "allowed host", body: initBody, header: map[string]string{"Host": "mcp.internal:8080"}, wantStatus: 200},
		{name: "cross-site origin", body: initBody, header: map[string]string{"Origin": "https://evil.example"}, wantStatus: 403, wantBody: "allowedOrigins"},
		{name: "allowed origin", body: initBody, header: map[string]string{"Origin": "https://app.example"}, wantStatus: 200},
		{name: "malformed JSON", body: `{"jsonrpc":`, wantStatus: 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, srv.URL+"/mcp", tc.body, tc.header)
			if resp.StatusCode != tc.wantStatus || !strings.Contains(body, tc.wantBody) {
				t.Errorf("status %d body %q; want %d containing %q", resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
		})
	}
}

func TestMaxSessions(t *testing.T) {
	_, srv := newHTTPGateway(t, func(g *config.Gateway) { g.Limits.MaxSessions = 1 })
	if resp, body := post(t, srv.URL+"/mcp", initBody, nil); resp.StatusCode != 200 {
		t.Fatalf("first session: %d %s", resp.StatusCode, body)
	}
	resp, body := post(t, srv.URL+"/mcp", initBody, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "maxSessions") {
		t.Errorf("second session: %d %q", resp.StatusCode, body)
	}
}

// TestBrokenAndSlowUpstreams: an upstream that cannot start and one that
// never answers initialize delay startup by at most the connect timeout and
// do not affect the healthy one.
func TestBrokenAndSlowUpstreams(t *testing.T) {
	cfg := &config.Config{Servers: map[string]config.Server{
		"good":   {Name: "good", Type: "stdio", Command: "unused"},
		"broken": {Name: "broken", Type: "stdio", Command: "unused"},
		"slow":   {Name: "slow", Type: "stdio", Command: "unused"},
	}, Gateway: config.DefaultGateway()}
	cfg.Gateway.Timeouts.Connect = 300 * time.Millisecond
	good := &fakeUpstream{server: demo.NewServer("good", nil)}
	broken := &fakeUpstream{server: demo.NewServer("broken", nil), down: true}
	silent := make(chan struct{})
	defer close(silent)
	gw, err := New(cfg, &Options{Transports: map[string]func() (mcp.Transport, error){
		"good":   good.transport,
		"broken": broken.transport,
		"slow": func() (mcp.Transport, error) {
			// A peer that accepts the connection, reads, and never answers
			// (as a hung process whose pipe buffer absorbs our writes).
			ct, st := mcp.NewInMemoryTransports()
			go func() {
				conn, err := st.Connect(context.Background())
				if err != nil {
					return
				}
				go func() {
					for {
						if _, err := conn.Read(context.Background()); err != nil {
							return
						}
					}
				}()
				<-silent
				conn.Close()
			}()
			return ct, nil
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	gw.Start(context.Background())
	defer gw.Close(context.Background())
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Start took %s with a 300ms connect timeout", took)
	}
	h := &harness{gw: gw, notes: make(chan string, 10)}
	cs := h.connect(t)
	defer cs.Close()
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "good__echo", Arguments: map[string]any{"message": "ok"}}); err != nil || textOf(t, res.Content) != "ok" {
		t.Fatalf("good upstream: %v %v", res, err)
	}
	states := map[string]string{}
	for _, s := range gw.Upstreams() {
		states[s.Name] = string(s.State) + " " + s.Error
	}
	if !strings.HasPrefix(states["good"], "ready") || strings.HasPrefix(states["broken"], "ready") || strings.HasPrefix(states["slow"], "ready") {
		t.Errorf("states = %v", states)
	}
	if !strings.Contains(states["slow"], "300ms") && !strings.HasPrefix(states["slow"], "connecting") {
		t.Errorf("slow upstream's error does not name the timeout: %q", states["slow"])
	}
}
