package cluster

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// goneNotFound is the gone answer of these tests: a session's.
func goneNotFound(w http.ResponseWriter) { http.Error(w, "gone", http.StatusNotFound) }

// forwarder returns a node and an entry replica that forwards every request to owner,
// closed when t ends, and the count of the times the gone fallback ran (answering 404).
func forwarder(t *testing.T, owner *httptest.Server) (*Node, *httptest.Server, *atomic.Int32) {
	t.Helper()
	n, err := NewNode(mustKeys(t, secretA), "127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var gone atomic.Int32
	entry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Forward(w, r, strings.TrimPrefix(owner.URL, "http://"), func(w http.ResponseWriter) {
			gone.Add(1) // for a 2026-07-28 call: served here, the call run again
			goneNotFound(w)
		})
	}))
	t.Cleanup(entry.Close)
	return n, entry, &gone
}

// TestForwardOverLimitBodyIs413: a body that runs over the caller's
// http.MaxBytesReader limit gets 413, whether it has a length (read whole
// before the owner is asked) or not (streamed to the owner, whose
// transport fails reading it), with the owner's text for the latter; not
// 502, as if the owner had failed.
func TestForwardOverLimitBodyIs413(t *testing.T) {
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer owner.Close()
	n, _ := NewNode(mustKeys(t, secretA), "127.0.0.1:1", nil)
	entry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 10)
		n.Forward(w, r, strings.TrimPrefix(owner.URL, "http://"), goneNotFound)
	}))
	defer entry.Close()
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(strings.Repeat("x", 1000))
		if chunked {
			body = struct{ io.Reader }{body} // no length: streamed
		}
		req, _ := http.NewRequest(http.MethodPost, entry.URL, body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("chunked=%v: %d %q, want 413", chunked, resp.StatusCode, got)
		}
		if want := "request body exceeds 10 bytes\n"; chunked && string(got) != want {
			t.Errorf("chunked: %q, want %q", got, want)
		}
	}
}

// TestForwardBadClientBodyIs400: a streamed body the client fails to send
// (a malformed chunk) gets 400, not 502 as if the owner had failed.
func TestForwardBadClientBodyIs400(t *testing.T) {
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer owner.Close()
	_, entry, goneRan := forwarder(t, owner)
	c, err := net.Dial("tcp", entry.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: gateway.example\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(string(got), "reading the request body: ") {
		t.Errorf("malformed chunked body: %d %q, want 400 reading the request body", resp.StatusCode, got)
	}
	if goneRan.Load() != 0 {
		t.Error("the gone answer ran for the client's malformed body")
	}
}

// TestForwardDoesNotRerunAReachedRequest: the owner receives the whole
// request (and may act on it: a tools/call of a per-client server at the
// principal's home) and dies before answering. The request left this
// replica, so gone (which for a 2026-07-28 request serves it here) must
// not run: the entry answers 502, and the request runs once.
func TestForwardDoesNotRerunAReachedRequest(t *testing.T) {
	var owner *httptest.Server
	got := make(chan string, 1)
	owner = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b) // the owner has the call (and acts on it) ...
		owner.Listener.Close()
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close() // ... and dies before answering
		}
	}))
	defer owner.Close()
	_, entry, servedHere := forwarder(t, owner)
	resp, err := http.Post(entry.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-got:
	default:
		t.Fatal("the owner did not get the request")
	}
	if servedHere.Load() != 0 {
		t.Errorf("the owner got the request, then the entry served it again (gone ran %d time(s)); status %d", servedHere.Load(), resp.StatusCode)
	}
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d, want 502", resp.StatusCode)
	}
}

// TestNodeCloseEndsForwards: Close ends a forward in flight (an SSE
// stream from the owner), which closes its connection to the owner, and a
// forward after Close gets 503 without reaching the owner or running gone.
func TestNodeCloseEndsForwards(t *testing.T) {
	var reached atomic.Int32
	ownerDone := make(chan struct{})
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reached.Add(1) > 1 {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the entry closed the connection
		close(ownerDone)
	}))
	defer owner.Close()
	n, entry, goneRan := forwarder(t, owner)
	resp, err := http.Post(entry.URL, "application/json", strings.NewReader("listen"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	n.Close()
	select {
	case <-ownerDone:
	case <-time.After(3 * time.Second):
		t.Fatal("the forward to the owner still runs 3s after Close")
	}
	resp2, err := http.Post(entry.URL, "application/json", strings.NewReader("ping"))
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusServiceUnavailable || reached.Load() != 1 || goneRan.Load() != 0 {
		t.Errorf("a forward after Close: %d, owner reached %d time(s), gone ran %d time(s); want 503, 1, 0", resp2.StatusCode, reached.Load(), goneRan.Load())
	}
}
