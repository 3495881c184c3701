//go:build linux

package rawio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection, the server's
// accepted through Listener.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := Listener{ln}.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	if _, ok := server.(*Conn); !ok {
		t.Fatalf("Listener accepted a %T, not a *Conn", server)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// TestConnReadWrite: bytes go both ways, past a socket buffer's worth;
// the peer's close is io.EOF.
func TestConnReadWrite(t *testing.T) {
	server, client := tcpPair(t)
	want := strings.Repeat("0123456789abcdef", 256<<10) // 4 MiB
	go func() {
		io.WriteString(client, want)
		client.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(server)
	if err != nil || string(got) != want {
		t.Fatalf("read %d bytes, %v; want the %d written", len(got), err, len(want))
	}
	go io.WriteString(server, want)
	got = make([]byte, len(want))
	if _, err := io.ReadFull(client, got); err != nil || string(got) != want {
		t.Fatalf("client read %v", err)
	}
}

// TestConnErrors: a read deadline ends a waiting Read with a timeout, as
// the net package's; a closed connection's Read is net.ErrClosed.
func TestConnErrors(t *testing.T) {
	server, _ := tcpPair(t)
	server.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := server.Read(make([]byte, 8))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Read past its deadline = %v, want a timeout", err)
	}
	server.SetReadDeadline(time.Time{})
	server.Close()
	if _, err := server.Read(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close = %v, want net.ErrClosed", err)
	}
}

// TestNewConnLeavesOthers: a connection that is not the system's is
// returned as it is.
func TestNewConnLeavesOthers(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if c := NewConn(a); c != a {
		t.Errorf("NewConn(net.Pipe) = %T, want the pipe itself", c)
	}
}

// TestHTTPServerOnListener: net/http serves through a Listener as through
// its own: keep-alive requests with bodies, a streamed answer flushed as
// it goes, and a client that goes away cancelling its request's context
// (net/http learns it from its background read).
func TestHTTPServerOnListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "got %s", b)
		case "/stream":
			fmt.Fprint(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done() // the client goes away
			close(gone)
		}
	})}
	go srv.Serve(Listener{ln})
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for i := range 3 {
		resp, err := client.Post(base+"/echo", "text/plain", strings.NewReader(fmt.Sprint("body ", i)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprint("got body ", i); string(b) != want {
			t.Errorf("answer %q, want %q", b, want)
		}
	}
	resp, err := client.Get(base + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	resp.Body.Close() // closes the connection: the answer was not read to its end
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context did not end when the client went away")
	}
}
