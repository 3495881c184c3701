package gateway

import (
	"bufio"
	"context"
	"maps"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// sendHTTP sends method to /mcp with token and, unless empty, session id
// sid at protocol version 2025-11-25; header overrides or adds headers.
func sendHTTP(t *testing.T, url, method, token, sid, body string, header map[string]string) (int, string) {
	t.Helper()
	all := map[string]string{}
	if token != "" {
		all["Authorization"] = "Bearer " + token
	}
	if sid != "" {
		all["Mcp-Session-Id"], all["Mcp-Protocol-Version"] = sid, "2025-11-25"
	}
	maps.Copy(all, header)
	resp, b := send(t, method, url+"/mcp", body, all)
	return resp.StatusCode, b
}

// openStream opens the GET stream of session sid with token; the returned
// channel is closed when the gateway ends it. The stream is closed when the
// test ends.
func openStream(t *testing.T, url, token, sid string) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		resp.Body.Close()
		t.Fatalf("GET stream: %s", resp.Status)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		for {
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return done
}

// sessionDone returns a channel closed when the gateway's session sid
// ends.
func sessionDone(t *testing.T, gw *Gateway, sid string) <-chan struct{} {
	t.Helper()
	v, ok := gw.clients.byID.Load(sid)
	if !ok {
		t.Fatalf("session %s is not in the table", sid)
	}
	ss := v.(*client).ss.Load()
	done := make(chan struct{})
	go func() { ss.Wait(); close(done) }()
	return done
}

// within reports whether done is closed within d.
func within(done <-chan struct{}, d time.Duration) bool {
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// TestSessionRequests: every request of a streamable session is checked by
// the gateway as the SDK's handler would, and a request without a session
// must be an initialize.
func TestSessionRequests(t *testing.T) {
	h := newPrincipalsHarness(t, nil)
	alice, status, body := openRaw(t, h.srv.URL, aliceKey)
	if status != http.StatusOK {
		t.Fatalf("initialize: %d %s", status, body)
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	tests := []struct {
		name       string
		method     string
		token, sid string
		body       string
		header     map[string]string
		wantStatus int
		wantBody   string
	}{
		{name: "ping", method: http.MethodPost, token: aliceKey, sid: alice, body: ping, wantStatus: 200, wantBody: `"result":{}`},
		{name: "POST to an unknown session", method: http.MethodPost, token: aliceKey, sid: "nope", body: ping, wantStatus: 404, wantBody: "session not found"},
		{name: "GET of an unknown session", method: http.MethodGet, token: aliceKey, sid: "nope", wantStatus: 404, wantBody: "session not found"},
		{name: "DELETE of an unknown session", method: http.MethodDelete, token: aliceKey, sid: "nope", wantStatus: 404, wantBody: "session not found"},
		{name: "ping without a session", method: http.MethodPost, token: aliceKey, body: ping, wantStatus: 400, wantBody: "must be a single initialize request"},
		{name: "initialize in a batch", method: http.MethodPost, token: aliceKey, body: "[" + initBody + "]", wantStatus: 400, wantBody: "must be a single initialize request"},
		{name: "malformed initialize", method: http.MethodPost, token: aliceKey, body: `{"jsonrpc":`, wantStatus: 400, wantBody: "malformed payload"},
		{name: "POST of another principal", method: http.MethodPost, token: bobKey, sid: alice, body: ping, wantStatus: 403, wantBody: "session user mismatch"},
		{name: "GET of another principal", method: http.MethodGet, token: bobKey, sid: alice, wantStatus: 403, wantBody: "session user mismatch"},
		{name: "DELETE of another principal", method: http.MethodDelete, token: bobKey, sid: alice, wantStatus: 403, wantBody: "session user mismatch"},
		{name: "GET without a session", method: http.MethodGet, token: aliceKey, wantStatus: 400, wantBody: "GET requires an Mcp-Session-Id header"},
		{name: "DELETE without a session", method: http.MethodDelete, token: aliceKey, wantStatus: 400, wantBody: "DELETE requires an Mcp-Session-Id header"},
		{name: "GET not accepting a stream", method: http.MethodGet, token: aliceKey, sid: alice, header: map[string]string{"Accept": "application/json"}, wantStatus: 400, wantBody: "text/event-stream"},
		{name: "POST of another content type", method: http.MethodPost, token: aliceKey, sid: alice, body: ping, header: map[string]string{"Content-Type": "text/plain"}, wantStatus: 415, wantBody: "application/json"},
		{name: "POST not accepting a stream", method: http.MethodPost, token: aliceKey, sid: alice, body: ping, header: map[string]string{"Accept": "application/json"}, wantStatus: 400, wantBody: "Accept must contain both"},
		{name: "unsupported protocol version", method: http.MethodPost, token: aliceKey, sid: alice, body: ping, header: map[string]string{"Mcp-Protocol-Version": "2020-01-01"}, wantStatus: 400, wantBody: "Unsupported protocol version"},
		{name: "batch in 2025-11-25", method: http.MethodPost, token: aliceKey, sid: alice, body: " \n[" + ping + "]", wantStatus: 400, wantBody: "batching is not supported"},
		{name: "batch in 2025-03-26", method: http.MethodPost, token: aliceKey, sid: alice, body: "[" + ping + "]", header: map[string]string{"Mcp-Protocol-Version": "2025-03-26"}, wantStatus: 200, wantBody: `"result":{}`},
		{name: "PUT", method: http.MethodPut, token: aliceKey, sid: alice, wantStatus: 405, wantBody: "Method Not Allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := sendHTTP(t, h.srv.URL, tc.method, tc.token, tc.sid, tc.body, tc.header)
			if status != tc.wantStatus || !strings.Contains(body, tc.wantBody) {
				t.Errorf("%d %q; want %d containing %q", status, body, tc.wantStatus, tc.wantBody)
			}
		})
	}
	if n, _ := h.gw.clients.count(""); n != 1 {
		t.Errorf("%d sessions registered, want alice's 1: a refused request opened one", n)
	}

	t.Run("DELETE", func(t *testing.T) {
		done := sessionDone(t, h.gw, alice)
		if status, body := sendHTTP(t, h.srv.URL, http.MethodDelete, aliceKey, alice, "", nil); status != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", status, body)
		}
		if !within(done, 10*time.Second) {
			t.Fatal("the deleted session goes on")
		}
		if got := pingRaw(t, h.srv.URL, aliceKey, alice); got != http.StatusNotFound {
			t.Errorf("ping after DELETE: %d, want 404", got)
		}
		if n, _ := h.gw.clients.count(""); n != 0 {
			t.Errorf("%d sessions registered after DELETE, want 0", n)
		}
	})
}

// TestIdleSessionsEnd: the gateway ends a session without requests for
// gateway.limits.sessionIdleTimeout, and not one with a call in flight or
// its GET stream open, though their last requests began before.
func TestIdleSessionsEnd(t *testing.T) {
	h := newPrincipalsHarness(t, func(c *config.Config) { c.Gateway.Limits.SessionIdleTimeout = 2 * time.Second })
	open := func() string {
		sid, status, body := openRaw(t, h.srv.URL, aliceKey)
		if status != http.StatusOK {
			t.Fatalf("initialize: %d %s", status, body)
		}
		return sid
	}
	listening := open()
	stream := openStream(t, h.srv.URL, aliceKey, listening)
	calling := open()
	callDone := make(chan struct{})
	go func() {
		defer close(callDone)
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"alpha__slow","arguments":{"ms":20000}}}`))
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Authorization": "Bearer " + aliceKey, "Mcp-Session-Id": calling, "Mcp-Protocol-Version": "2025-11-25"} {
			req.Header.Set(k, v)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, "the slow call in flight", func() bool { return countFlights(h.gw) == 1 })
	idle := open()
	if !within(sessionDone(t, h.gw, idle), 10*time.Second) {
		t.Fatal("the idle session was not ended")
	}
	if got := pingRaw(t, h.srv.URL, aliceKey, idle); got != http.StatusNotFound {
		t.Errorf("the idle session's next request: %d, want 404", got)
	}
	for name, sid := range map[string]string{"with its GET stream open": listening, "with a call in flight": calling} {
		if _, ok := h.gw.clients.byID.Load(sid); !ok {
			t.Errorf("the session %s was ended", name)
		}
	}
	select {
	case <-stream:
		t.Error("the GET stream of the listening session ended")
	default:
	}
	// Once its call ends, the calling session is idle too.
	if status, body := sendHTTP(t, h.srv.URL, http.MethodDelete, aliceKey, calling, "", nil); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	<-callDone
}

// TestReloadShortensTheIdleTimeout: a reload that lowers
// gateway.limits.sessionIdleTimeout ends the sessions idle for the new
// timeout, without waiting for the old one.
func TestReloadShortensTheIdleTimeout(t *testing.T) {
	h := newPrincipalsHarness(t, func(c *config.Config) { c.Gateway.Limits.SessionIdleTimeout = time.Hour })
	sid, status, body := openRaw(t, h.srv.URL, aliceKey)
	if status != http.StatusOK {
		t.Fatalf("initialize: %d %s", status, body)
	}
	done := sessionDone(t, h.gw, sid)
	h.reload(t, func(c *config.Config) { c.Gateway.Limits.SessionIdleTimeout = 100 * time.Millisecond })
	if !within(done, 10*time.Second) {
		t.Fatal("the session idle for longer than the new timeout was not ended")
	}
	if got := pingRaw(t, h.srv.URL, aliceKey, sid); got != http.StatusNotFound {
		t.Errorf("its next request: %d, want 404", got)
	}
}

// TestShutdownEndsEverySession: when Serve's context ends, every
// streamable session ends (a GET stream open, a call in flight, an idle
// one), the table is empty, and after Close nothing of the gateway runs.
func TestShutdownEndsEverySession(t *testing.T) {
	before := goleak.IgnoreCurrent()
	gw := newAlphaGateway(t, func(c *config.Config) { c.Gateway.Timeouts.Drain = 200 * time.Millisecond }, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx, ln) }()
	hc := &http.Client{Transport: &http.Transport{}}
	var sessions []*mcp.ClientSession
	for range 3 {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, cs)
	}
	var dones []<-chan struct{}
	for _, cs := range sessions {
		dones = append(dones, sessionDone(t, gw, cs.ID()))
	}
	callDone := make(chan struct{})
	go func() {
		defer close(callDone)
		sessions[0].CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{"ms": 20000}})
	}()
	waitFor(t, "the slow call in flight", func() bool { return countFlights(gw) == 1 })

	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	for i, done := range dones {
		if !within(done, 10*time.Second) {
			t.Errorf("session %d goes on after shutdown", i)
		}
	}
	waitFor(t, "an empty session table", func() bool { n, _ := gw.clients.count(""); return n == 0 })
	gw.Close(context.Background())
	for _, cs := range sessions {
		cs.Close()
	}
	<-callDone
	hc.CloseIdleConnections()
	goleak.VerifyNone(t, before)
}

// TestSessionProtocolVersion: a session's record knows the version its
// initialize negotiated, as the client was told.
func TestSessionProtocolVersion(t *testing.T) {
	gw, srv := newHTTPGateway(t, nil)
	for _, tc := range []struct{ asked, want string }{
		{asked: "2025-06-18", want: "2025-06-18"},
		{asked: "2025-11-25", want: "2025-11-25"},
		{asked: "2024-01-01", want: latestSessionVersion},
	} {
		t.Run(tc.asked, func(t *testing.T) {
			resp, body := post(t, srv.URL+"/mcp", strings.Replace(initBody, "2025-11-25", tc.asked, 1), nil)
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"protocolVersion":"`+tc.want+`"`) {
				t.Fatalf("initialize asking for %s: %d %s, want %s", tc.asked, resp.StatusCode, body, tc.want)
			}
			v, ok := gw.clients.byID.Load(resp.Header.Get("Mcp-Session-Id"))
			if !ok {
				t.Fatal("the session is not in the table")
			}
			if got := v.(*client).protocolVersion(); got != tc.want {
				t.Errorf("the record's version is %s, want %s", got, tc.want)
			}
		})
	}
}
