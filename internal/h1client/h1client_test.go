package h1client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/rawio"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a test server that counts the connections it accepted.
type server struct {
	*httptest.Server
	conns atomic.Int32
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{Server: httptest.NewUnstartedServer(h)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// heldServer is a server whose handler starts its answer with start and
// then holds the request until the client leaves or the test ends.
func heldServer(t *testing.T, start http.HandlerFunc) *server {
	t.Helper()
	unblock := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		start(w, r)
		select {
		case <-unblock:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(unblock) }) // before the server's Close
	return srv
}

// idleCount is the number of connections tr keeps idle.
func (t *Transport) idleCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, cs := range t.idle {
		n += len(cs)
	}
	return n
}

func post(t *testing.T, tr *Transport, ctx context.Context, url, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return tr.RoundTrip(req)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return string(b)
}

// TestExchangesReuseTheConnection: answers of every framing (a length,
// chunks, none at all) come back whole, and a body read to its end leaves
// its connection for the next request: one connection serves them all.
func TestExchangesReuseTheConnection(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		in, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/length":
			w.Header().Set("Content-Length", fmt.Sprint(len(in)+1))
			w.Write(append(in, '!'))
		case "/chunked":
			w.Write(in)
			w.(http.Flusher).Flush()
			w.Write([]byte("!"))
		case "/empty":
			w.WriteHeader(http.StatusAccepted)
		}
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	for i, path := range []string{"/length", "/chunked", "/empty", "/length", "/chunked"} {
		resp, err := post(t, tr, context.Background(), srv.URL+path, fmt.Sprintf(`{"n":%d}`, i))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		got := readAll(t, resp)
		want := fmt.Sprintf(`{"n":%d}!`, i)
		if path == "/empty" {
			want = ""
			if resp.StatusCode != http.StatusAccepted {
				t.Errorf("%s: status %d", path, resp.StatusCode)
			}
		}
		if got != want {
			t.Errorf("%s: body %q, want %q", path, got, want)
		}
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("the server accepted %d connections, want 1", n)
	}
	if n := tr.idleCount(); n != 1 {
		t.Errorf("%d idle connections kept, want 1", n)
	}
}

// TestConcurrentRequestsEachTakeAConnection: requests in flight at once
// each have a connection of their own, and all are kept afterwards.
func TestConcurrentRequestsEachTakeAConnection(t *testing.T) {
	release := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(3)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-release
		w.Write([]byte("ok"))
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			resp, err := post(t, tr, context.Background(), srv.URL, "{}")
			if err != nil {
				t.Error(err)
				return
			}
			if got := readAll(t, resp); got != "ok" {
				t.Errorf("body %q", got)
			}
		})
	}
	arrived.Wait()
	close(release)
	wg.Wait()
	if n := srv.conns.Load(); n != 3 {
		t.Errorf("the server accepted %d connections, want 3", n)
	}
	if n := tr.idleCount(); n != 3 {
		t.Errorf("%d idle connections kept, want 3", n)
	}
}

// TestConnectionNotReused: a connection is closed, not kept, when its body
// is closed before its end, when the server or the request asks for it, or
// when the server closed it while it sat idle.
func TestConnectionNotReused(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		w.Write([]byte(strings.Repeat("x", 100<<10)))
	})
	tests := []struct {
		name string
		do   func(t *testing.T, tr *Transport)
	}{
		{"body closed early", func(t *testing.T, tr *Transport) {
			resp, err := post(t, tr, context.Background(), srv.URL, "{}")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Read(make([]byte, 10))
			resp.Body.Close()
		}},
		{"server asks", func(t *testing.T, tr *Transport) {
			resp, err := post(t, tr, context.Background(), srv.URL+"/close", "{}")
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
		}},
		{"request asks", func(t *testing.T, tr *Transport) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			req.Close = true
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &Transport{}
			defer tr.CloseIdleConnections()
			tt.do(t, tr)
			if n := tr.idleCount(); n != 0 {
				t.Errorf("%d idle connections kept, want 0", n)
			}
		})
	}

	t.Run("server closed it idle", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("the check before reuse peeks with a Linux system call")
		}
		tr := &Transport{}
		defer tr.CloseIdleConnections()
		before := srv.conns.Load()
		resp, err := post(t, tr, context.Background(), srv.URL, "{}")
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		srv.CloseClientConnections()
		// The close reaches the client's end asynchronously; the check
		// before reuse must see it once it has.
		tr.mu.Lock()
		var c *conn
		for _, cs := range tr.idle {
			c = cs[0]
		}
		tr.mu.Unlock()
		if c == nil {
			t.Fatal("no idle connection")
		}
		for i := 0; rawio.Open(c.nc); i++ {
			if i == 500 {
				t.Fatal("the server's close never reached the client")
			}
			time.Sleep(2 * time.Millisecond)
		}
		resp, err = post(t, tr, context.Background(), srv.URL, "{}")
		if err != nil {
			t.Fatalf("the next request failed: %v", err)
		}
		readAll(t, resp)
		if n := srv.conns.Load() - before; n != 2 {
			t.Errorf("the server accepted %d connections, want 2", n)
		}
	})
}

// TestContextEndsTheExchange: a context that ends while the server has
// not answered, or while the body is being read, ends the wait at once
// with the context's error, and the connection is closed.
func TestContextEndsTheExchange(t *testing.T) {
	srv := heldServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("data: one\n\n"))
			w.(http.Flusher).Flush()
		}
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()

	t.Run("waiting for the head", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := post(t, tr, ctx, srv.URL, "{}")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want the context's", err)
		}
	})
	t.Run("reading the body", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := post(t, tr, ctx, srv.URL+"/stream", "{}")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || line != "data: one\n" {
			t.Fatalf("first line %q, %v", line, err)
		}
		cancel()
		// The context's error, not the timeout of the past deadline that
		// ended the read.
		if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
			t.Fatalf("the body read on after the context ended: %v, want context.Canceled", err)
		}
	})
	if n := tr.idleCount(); n != 0 {
		t.Errorf("%d idle connections kept, want 0", n)
	}
}

// TestCloseEndsARead: Close from another goroutine ends a Read of the body
// waiting for the server.
func TestCloseEndsARead(t *testing.T) {
	srv := heldServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	resp, err := post(t, tr, context.Background(), srv.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		read <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the Read wait
	resp.Body.Close()
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the Read")
	}
}

// TestIdleConnectionsExpire: connections idle past IdleTimeout are closed,
// and a MaxIdle of one keeps one.
func TestIdleConnectionsExpire(t *testing.T) {
	release := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(2)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			arrived.Done()
			<-release
		}
		w.Write([]byte("ok"))
	})
	tr := &Transport{MaxIdle: 1, IdleTimeout: 30 * time.Millisecond}
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			resp, err := post(t, tr, context.Background(), srv.URL+"/wait", "{}")
			if err != nil {
				t.Error(err)
				return
			}
			readAll(t, resp)
		})
	}
	arrived.Wait()
	close(release)
	wg.Wait()
	if n := tr.idleCount(); n != 1 {
		t.Fatalf("%d idle connections kept, want MaxIdle 1", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for tr.idleCount() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle connection was never closed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	tr.mu.Lock()
	armed := tr.sweep != nil
	tr.mu.Unlock()
	if armed {
		t.Error("the sweep is still armed with nothing idle")
	}
}

// TestUnsupportedRequests are refused before anything is sent.
func TestUnsupportedRequests(t *testing.T) {
	tr := &Transport{}
	for _, tt := range []struct {
		name string
		req  func() *http.Request
	}{
		{"https", func() *http.Request { r, _ := http.NewRequest("GET", "https://127.0.0.1:1/", nil); return r }},
		{"upgrade", func() *http.Request {
			r, _ := http.NewRequest("GET", "http://127.0.0.1:1/", nil)
			r.Header.Set("Upgrade", "websocket")
			return r
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tr.RoundTrip(tt.req()); !errors.Is(err, ErrUnsupported) {
				t.Errorf("error %v, want ErrUnsupported", err)
			}
		})
	}
}

// TestInformationalAnswersSkipped: a 1xx answer before the final one is
// passed over.
func TestInformationalAnswersSkipped(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusEarlyHints)
		w.Write([]byte("final"))
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	resp, err := post(t, tr, context.Background(), srv.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || readAll(t, resp) != "final" {
		t.Errorf("status %d", resp.StatusCode)
	}
}

// BenchmarkRoundTrip compares the exchange of a small POST through this
// Transport and through net/http's, one caller at a time.
func BenchmarkRoundTrip(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":"m1","result":{}}`))
	}))
	defer srv.Close()
	for _, tt := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"h1client", &Transport{}},
		{"net-http", http.DefaultTransport.(*http.Transport).Clone()},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":"m1","method":"tools/call"}`))
				resp, err := tt.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			tt.rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
		})
	}
}

// oneConnServer accepts one connection on 127.0.0.1, runs serve on it and
// then reads it until the client closes it (a close with the request
// unread would reset the connection, and what serve wrote with it). done
// stops the server and waits for it.
func oneConnServer(t *testing.T, serve func(c net.Conn)) (addr string, done func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
		io.Copy(io.Discard, c)
	}()
	var once sync.Once
	done = func() {
		once.Do(func() {
			ln.Close()
			<-served
		})
	}
	t.Cleanup(done)
	return ln.Addr().String(), done
}

// TestResponseHeadBounded: a server that sends an endless head gets
// ErrHeadTooLarge once MaxResponseHeaderBytes are read, not the client's
// memory.
func TestResponseHeadBounded(t *testing.T) {
	addr, done := oneConnServer(t, func(c net.Conn) {
		go func() {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: ")
			chunk := []byte(strings.Repeat("a", 64<<10))
			for range 2 * MaxResponseHeaderBytes / len(chunk) {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}()
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	if _, err := post(t, tr, context.Background(), "http://"+addr+"/", "{}"); !errors.Is(err, ErrHeadTooLarge) {
		t.Errorf("error %v, want ErrHeadTooLarge", err)
	}
	done()
}

// TestEarlyAnswer: a server that answers before it has read the whole
// request, and stops reading, has its answer returned, not the failed
// write; the connection is not kept.
func TestEarlyAnswer(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.CopyN(io.Discard, r.Body, 64<<10)
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		w.Write([]byte("too large"))
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(strings.Repeat("x", 64<<20)))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("error %v, want the server's 413", err)
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge || readAll(t, resp) != "too large" {
		t.Errorf("status %d", resp.StatusCode)
	}
	if n := tr.idleCount(); n != 0 {
		t.Errorf("%d idle connections kept, want 0", n)
	}
}

// TestFallback: requests the Transport does not make (another scheme, as
// after a redirect to https; one Proxy sends through a proxy) go to its
// Fallback, and those it makes do not.
func TestFallback(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("direct")) })
	var fell []string
	fallback := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		fell = append(fell, req.URL.String())
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
	})
	tr := &Transport{Fallback: fallback, Proxy: func(req *http.Request) (*url.URL, error) {
		if req.URL.Path == "/proxied" {
			return url.Parse("http://127.0.0.1:1")
		}
		return nil, nil
	}}
	defer tr.CloseIdleConnections()
	for _, u := range []string{"https://127.0.0.1:1/", srv.URL + "/proxied", srv.URL + "/"} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		readAll(t, resp)
	}
	if want := []string{"https://127.0.0.1:1/", srv.URL + "/proxied"}; strings.Join(fell, " ") != strings.Join(want, " ") {
		t.Errorf("the fallback made %q, want %q", fell, want)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestEndedContextNeverReused: a body whose context ended is not kept even
// when it is then read to its end from what was already buffered, and the
// next request works.
func TestEndedContextNeverReused(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("small")) })
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := post(t, tr, ctx, srv.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	time.Sleep(10 * time.Millisecond) // let the watch set the deadline
	io.ReadAll(resp.Body)             // the small body was buffered with the head
	resp.Body.Close()
	if n := tr.idleCount(); n != 0 {
		t.Errorf("%d idle connections kept after the context ended, want 0", n)
	}
	resp, err = post(t, tr, context.Background(), srv.URL, "{}")
	if err != nil {
		t.Fatalf("the next request: %v", err)
	}
	if got := readAll(t, resp); got != "small" {
		t.Errorf("body %q", got)
	}
}

// TestCloseIdleEndsConnectionsInUse: a connection in use when
// CloseIdleConnections is called is closed when its exchange ends, not
// kept; later ones are kept again.
func TestCloseIdleEndsConnectionsInUse(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	resp, err := post(t, tr, context.Background(), srv.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	readAll(t, resp)
	if n := tr.idleCount(); n != 0 {
		t.Errorf("%d idle connections kept, want 0", n)
	}
	resp, err = post(t, tr, context.Background(), srv.URL, "{}")
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if n := tr.idleCount(); n != 1 {
		t.Errorf("%d idle connections kept, want 1", n)
	}
}

// TestContextEndedDuringTheWrite: a request whose context ends while its
// body is being written gets the context's error at once, not an answer
// the server sends a moment later (which the early-answer wait would
// otherwise have returned as a success).
func TestContextEndedDuringTheWrite(t *testing.T) {
	addr, done := oneConnServer(t, func(c net.Conn) {
		time.Sleep(30 * time.Millisecond) // reads nothing, then answers
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	body := strings.Repeat("x", 64<<20) // far more than the socket buffers take
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	resp, err := post(t, tr, ctx, "http://"+addr+"/", body)
	if resp != nil {
		t.Errorf("a response (HTTP %d) to a request whose context ended during the write", resp.StatusCode)
		resp.Body.Close()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the context's", err)
	}
	done()
}

// TestDialDuringCloseIdleConnections: a connection whose dial began
// before CloseIdleConnections is not kept after its exchange, as one in
// use at that moment is not.
func TestDialDuringCloseIdleConnections(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	dialing, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	tr := &Transport{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		once.Do(func() { close(dialing); <-proceed })
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	done := make(chan error, 1)
	go func() {
		resp, err := post(t, tr, context.Background(), srv.URL, "{}")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	<-dialing
	tr.CloseIdleConnections()
	close(proceed)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := tr.idleCount(); n != 0 {
		t.Errorf("%d idle connections kept, dialled while CloseIdleConnections ran; want 0", n)
	}
}

// TestInvalidHeadersRefused: a header value with a line break, or an
// invalid name, is refused before anything is sent, as net/http refuses
// it, not sent with the break made a space.
func TestInvalidHeadersRefused(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	for name, h := range map[string]http.Header{
		"value with a line break": {"X-Token": {"abc\nInjected: yes"}},
		"name with a space":       {"X Token": {"abc"}},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
		req.Header = h
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
			t.Errorf("%s: sent, want an error", name)
		}
	}
	if n := srv.conns.Load(); n != 0 {
		t.Errorf("%d connections made, want none", n)
	}
}
