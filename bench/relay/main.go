// Command relay is the bench suite's reference: the least a Go process can
// do in the gateway's place, so that the gateway's own CPU per call can be
// read against what the machine charges any Go proxy for the same traffic.
//
//	relay --mode tcp  --upstream 127.0.0.1:PORT   # bytes copied both ways
//	relay --mode http --upstream 127.0.0.1:PORT   # HTTP/1.1 requests relayed one by one
//
// It listens on 127.0.0.1:0 (or --listen), prints http://ADDR/mcp on stdout
// and serves until SIGTERM. Each downstream connection gets its own upstream
// connection. In tcp mode two goroutines copy bytes with a 32 KiB buffer,
// read then write, nothing parsed. In http mode one goroutine per connection
// reads a request with http.ReadRequest, writes it upstream, reads the
// response with http.ReadResponse and writes it back, its body flushed
// whenever the upstream has nothing more buffered (so SSE streams flow); no
// net/http server or transport, no JSON.
//
// It is benchmark tooling: it forwards anything to its upstream, checks
// nothing, and must never face anything but the bench's own load.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

func main() {
	mode := flag.String("mode", "tcp", "tcp (copy bytes) or http (relay HTTP/1.1 requests)")
	listen := flag.String("listen", "127.0.0.1:0", "`address` to listen on")
	upstream := flag.String("upstream", "", "`host:port` of the server to relay to (required)")
	flag.Parse()
	if *upstream == "" || (*mode != "tcp" && *mode != "http") {
		fmt.Fprintln(os.Stderr, "relay: --upstream is required and --mode is tcp or http")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	serve(ctx, ln, *upstream, *mode == "http")
}

// serve accepts connections on ln until ctx ends, relaying each to
// upstream, and returns once every connection has ended.
func serve(ctx context.Context, ln net.Listener, upstream string, http bool) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			c.Close()
		}
	})
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			break
		}
		mu.Lock()
		if ctx.Err() != nil {
			mu.Unlock()
			c.Close()
			break
		}
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			defer func() {
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				c.Close()
			}()
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				return
			}
			defer u.Close()
			if http {
				relayHTTP(c, u, upstream)
			} else {
				relayTCP(c, u)
			}
		})
	}
	ln.Close()
	wg.Wait()
}

// relayTCP copies bytes between c and u until either side ends.
func relayTCP(c, u net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		copyBytes(u, c)
		u.(*net.TCPConn).CloseWrite()
	}()
	copyBytes(c, u)
	c.Close()
	<-done
}

// copyBytes copies src to dst, one read then one write: no splice, no
// ReadFrom, so the cost is that of the plainest loop.
func copyBytes(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// relayHTTP relays HTTP/1.1 requests from c to u, the server at host, one
// at a time, until either side ends or a message cannot be relayed.
func relayHTTP(c, u net.Conn, host string) {
	br, bw := bufio.NewReader(c), bufio.NewWriter(c)
	ubr, ubw := bufio.NewReader(u), bufio.NewWriter(u)
	buf := make([]byte, 32<<10)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		req.Host = host
		if req.Write(ubw) != nil || ubw.Flush() != nil {
			return
		}
		resp, err := http.ReadResponse(ubr, req)
		if err != nil {
			return
		}
		if relayResponse(bw, resp, ubr, buf) != nil || resp.Close || req.Close {
			return
		}
	}
}

// relayResponse writes resp to bw: its head, then its body as it comes
// (with its length if known, else chunked), flushed whenever ubr, the
// upstream's reader, holds nothing more.
func relayResponse(bw *bufio.Writer, resp *http.Response, ubr *bufio.Reader, buf []byte) error {
	defer resp.Body.Close()
	fmt.Fprintf(bw, "HTTP/1.1 %s\r\n", resp.Status)
	resp.Header.Del("Transfer-Encoding")
	chunked := resp.ContentLength < 0
	if chunked {
		resp.Header.Del("Content-Length")
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	} else {
		resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	resp.Header.Write(bw)
	bw.WriteString("\r\n")
	var body io.Writer = bw
	var cw io.WriteCloser
	if chunked {
		cw = httputil.NewChunkedWriter(bw)
		body = cw
	}
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := body.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if ubr.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
	}
	if chunked {
		cw.Close()
		bw.WriteString("\r\n")
	}
	return bw.Flush()
}
