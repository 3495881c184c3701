// Package h1client is an HTTP/1.1 client transport for plain http:// URLs
// that makes each exchange on the calling goroutine: it writes the request
// and reads the response's head there, and the response body is read from
// the connection by whoever reads the body. The request is written and the
// response parsed by net/http itself (Request.Write, ReadResponse); this
// package only owns the connections.
//
// Why: net/http's Transport runs two goroutines per connection, one that
// writes requests and one that reads responses, and hands each request and
// response between them and the caller over channels. A call therefore
// wakes three or four goroutines beside the caller, and at low concurrency
// each wake-up costs a sleeping thread woken by the kernel: on the
// gateway's raw calls to a streamable HTTP upstream that was most of the
// gateway's CPU per call (docs/architecture.md, Direct system calls). Here
// the caller waits for its answer in the runtime's poller, and no other
// goroutine runs.
//
// What it leaves out: TLS, proxies, HTTP/2, protocol upgrades and retries.
// Requests it does not make (another scheme, as after a redirect to https;
// a proxy; an upgrade) go to its Fallback. A request whose connection
// fails is not sent again (net/http, too, sends a POST again only when
// nothing of it was written); a kept connection is checked before it is
// reused, so a connection the server closed while it sat idle is not
// used. A server that answers before it has read the whole request (a 413,
// a 401) has its answer returned, on a connection that is not kept, unless
// the request's context has ended. Headers net/http's Transport refuses
// (an invalid name, a value with a line break) are refused here too.
package h1client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manifold-mcp/manifold/internal/rawio"
	"golang.org/x/net/http/httpguts"
)

// Defaults of the Transport's fields.
const (
	DefaultMaxIdle     = 100
	DefaultIdleTimeout = 90 * time.Second
	dialTimeout        = 30 * time.Second
	keepAlive          = 30 * time.Second
	bufferSize         = 4 << 10 // net/http's, for reads and writes
	// MaxResponseHeaderBytes bounds the head of a response (its status
	// line and headers, and any informational answers before it), as
	// net/http's Transport bounds it (10 MiB by default there).
	MaxResponseHeaderBytes = 1 << 20
)

// Errors of the Transport.
var (
	// ErrUnsupported: the request is not one the Transport makes (not
	// http://, or it asks for a protocol upgrade).
	ErrUnsupported = errors.New("h1client: unsupported request")
	// ErrBodyClosed: a Read of a response body after its Close.
	ErrBodyClosed = errors.New("h1client: read on closed response body")
	// ErrHeadTooLarge: the response's head is over MaxResponseHeaderBytes.
	ErrHeadTooLarge = fmt.Errorf("h1client: response head over %d bytes", MaxResponseHeaderBytes)
)

// Transport is an http.RoundTripper that keeps connections alive between
// requests, as net/http's Transport does, and makes each exchange on the
// calling goroutine (see the package doc). The zero value is ready to use;
// its methods are safe for concurrent use.
type Transport struct {
	// Dial opens a connection to addr ("host:port"); nil dials TCP with a
	// 30 s timeout and keep-alive probes every 30 s. Connections are read
	// and written with direct system calls where the system has them
	// (rawio.NewConn).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxIdle bounds the connections kept idle per address
	// (DefaultMaxIdle when 0).
	MaxIdle int
	// IdleTimeout closes a connection idle this long (DefaultIdleTimeout
	// when 0).
	IdleTimeout time.Duration
	// Fallback makes the requests this Transport does not (see
	// ErrUnsupported) and those Proxy sends through a proxy; nil refuses
	// them with ErrUnsupported.
	Fallback http.RoundTripper
	// Proxy, when set, says which requests go through a proxy (as
	// http.Transport's Proxy field): those go to Fallback.
	Proxy func(*http.Request) (*url.URL, error)

	mu    sync.Mutex
	idle  map[string][]*conn // per address, the most recently used last
	sweep *time.Timer        // armed while a connection is idle
	// gen counts CloseIdleConnections: a connection taken out before the
	// last one is closed when its exchange ends, not kept.
	gen uint64
}

// conn is one connection to the server; it serves one exchange at a time.
type conn struct {
	nc        net.Conn
	br        *bufio.Reader // reads headReader{c}
	bw        *bufio.Writer
	addr      string
	gen       uint64 // Transport.gen when it was taken out
	idleSince time.Time
	// headLeft is what the response's head may still read; below zero
	// while a body is read (no bound here: the caller bounds bodies).
	headLeft int64
}

// headReader reads the connection, within headLeft while a head is read.
type headReader struct{ c *conn }

func (r headReader) Read(p []byte) (int, error) {
	c := r.c
	if c.headLeft < 0 {
		return c.nc.Read(p)
	}
	if c.headLeft == 0 {
		return 0, ErrHeadTooLarge
	}
	if int64(len(p)) > c.headLeft {
		p = p[:c.headLeft]
	}
	n, err := c.nc.Read(p)
	c.headLeft -= int64(n)
	return n, err
}

// aLongTimeAgo is the deadline that ends the connection's waits at once.
var aLongTimeAgo = time.Unix(1, 0)

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	err := supported(req)
	if err == nil && t.Proxy != nil {
		if proxy, perr := t.Proxy(req); perr != nil || proxy != nil {
			err = fmt.Errorf("%w: through a proxy", ErrUnsupported)
		}
	}
	if err != nil {
		if t.Fallback != nil {
			return t.Fallback.RoundTrip(req)
		}
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	if err := validHeader(req.Header); err != nil {
		closeBody(req)
		return nil, err
	}
	c, err := t.conn(ctx, hostPort(req))
	if err != nil {
		closeBody(req)
		return nil, err
	}
	// The context ends the exchange by ending the connection's waits;
	// such a connection is closed, never reused.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	resp, err := c.exchange(req)
	if err != nil {
		stop()
		c.nc.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	b := &body{t: t, c: c, rc: resp.Body, ctx: ctx, stop: stop, keep: !resp.Close && !req.Close}
	if resp.Body == http.NoBody {
		b.finish(true)
		return resp, nil
	}
	resp.Body = b
	return resp, nil
}

// supported checks that req is one the Transport makes.
func supported(req *http.Request) error {
	switch {
	case req.URL == nil:
		return fmt.Errorf("%w: no URL", ErrUnsupported)
	case req.URL.Scheme != "http":
		return fmt.Errorf("%w: scheme of %q is not http", ErrUnsupported, req.URL.Redacted())
	case req.URL.Host == "":
		return fmt.Errorf("%w: no host", ErrUnsupported)
	case req.Header.Get("Upgrade") != "":
		return fmt.Errorf("%w: protocol upgrade", ErrUnsupported)
	}
	return nil
}

// validHeader refuses a header net/http's Transport refuses: an invalid
// field name, or a value with a control character such as a line break
// (Request.Write would send the value with its line breaks made spaces).
func validHeader(h http.Header) error {
	for k, vs := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("h1client: invalid header field name %q", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("h1client: invalid header field value for %q", k)
			}
		}
	}
	return nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// hostPort is the address of req's server, port 80 when the URL has none.
func hostPort(req *http.Request) string {
	if port := req.URL.Port(); port != "" {
		return net.JoinHostPort(req.URL.Hostname(), port)
	}
	return net.JoinHostPort(req.URL.Hostname(), "80")
}

// earlyAnswerWait bounds the wait for an answer the server may have sent
// before it stopped reading the request (exchange).
const earlyAnswerWait = 50 * time.Millisecond

// exchange writes req and reads the head of its response, skipping
// informational (1xx) answers. When the write fails, an answer the server
// sent before it stopped reading (a 413 to an oversized request, say) is
// returned, on a connection not kept; else the write's error.
func (c *conn) exchange(req *http.Request) (*http.Response, error) {
	err := req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		if req.Context().Err() != nil {
			// The write failed because the context ended (RoundTrip's
			// watch): there is no answer to wait for.
			return nil, err
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(earlyAnswerWait))
		resp, rerr := c.readHead(req)
		// The body reads without the bound; a context that ended meanwhile
		// keeps its deadline (RoundTrip's watch may have run before), and
		// the exchange ends with it.
		_ = c.nc.SetReadDeadline(time.Time{})
		if req.Context().Err() != nil {
			_ = c.nc.SetDeadline(aLongTimeAgo)
			if rerr == nil {
				resp.Body.Close()
			}
			return nil, err
		}
		if rerr != nil {
			return nil, err
		}
		resp.Close = true
		return resp, nil
	}
	return c.readHead(req)
}

// readHead reads the head of req's response, skipping informational (1xx)
// answers, within MaxResponseHeaderBytes.
func (c *conn) readHead(req *http.Request) (*http.Response, error) {
	c.headLeft = MaxResponseHeaderBytes - int64(c.br.Buffered())
	defer func() { c.headLeft = -1 }()
	for {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			resp.Body.Close()
			return nil, fmt.Errorf("%w: the server switched protocols", ErrUnsupported)
		case resp.StatusCode >= 100 && resp.StatusCode <= 199:
			continue // 1xx: the final answer follows
		}
		return resp, nil
	}
}

// conn returns a kept connection to addr that is still open, or a new one.
func (t *Transport) conn(ctx context.Context, addr string) (*conn, error) {
	now := time.Now()
	for {
		c := t.takeIdle(addr)
		if c == nil {
			break
		}
		// A connection the server closed, or that holds bytes nobody
		// asked for, or that idled too long, is not reused.
		if now.Sub(c.idleSince) < t.idleTimeout() && c.br.Buffered() == 0 && rawio.Open(c.nc) {
			return c, nil // takeIdle set its gen
		}
		c.nc.Close()
	}
	dial := t.Dial
	if dial == nil {
		d := &net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
		dial = d.DialContext
	}
	// The generation is the one the dial started in: a connection dialled
	// while CloseIdleConnections ran is not kept after its exchange.
	t.mu.Lock()
	gen := t.gen
	t.mu.Unlock()
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: rawio.NewConn(nc), addr: addr, gen: gen, headLeft: -1}
	c.br = bufio.NewReaderSize(headReader{c}, bufferSize)
	c.bw = bufio.NewWriterSize(c.nc, bufferSize)
	return c, nil
}

// takeIdle removes and returns the most recently used idle connection to
// addr; nil when there is none.
func (t *Transport) takeIdle(addr string) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	cs := t.idle[addr]
	if len(cs) == 0 {
		return nil
	}
	c := cs[len(cs)-1]
	cs[len(cs)-1] = nil
	t.idle[addr] = cs[:len(cs)-1]
	c.gen = t.gen
	return c
}

// put keeps c for a later request, or closes it when MaxIdle are kept.
func (t *Transport) put(c *conn) {
	c.idleSince = time.Now()
	t.mu.Lock()
	max := t.MaxIdle
	if max <= 0 {
		max = DefaultMaxIdle
	}
	if len(t.idle[c.addr]) >= max || c.gen != t.gen {
		t.mu.Unlock()
		c.nc.Close()
		return
	}
	if t.idle == nil {
		t.idle = map[string][]*conn{}
	}
	t.idle[c.addr] = append(t.idle[c.addr], c)
	if t.sweep == nil {
		t.sweep = time.AfterFunc(t.idleTimeout(), t.closeStale)
	}
	t.mu.Unlock()
}

func (t *Transport) idleTimeout() time.Duration {
	if t.IdleTimeout > 0 {
		return t.IdleTimeout
	}
	return DefaultIdleTimeout
}

// closeStale closes the connections idle longer than IdleTimeout, and
// comes back while some are left.
func (t *Transport) closeStale() {
	cutoff := time.Now().Add(-t.idleTimeout())
	var stale []*conn
	t.mu.Lock()
	left := 0
	for addr, cs := range t.idle {
		kept := cs[:0]
		for _, c := range cs {
			if c.idleSince.Before(cutoff) {
				stale = append(stale, c)
			} else {
				kept = append(kept, c)
			}
		}
		clear(cs[len(kept):])
		if len(kept) == 0 {
			delete(t.idle, addr)
		} else {
			t.idle[addr] = kept
		}
		left += len(kept)
	}
	if left > 0 {
		t.sweep.Reset(t.idleTimeout())
	} else {
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, c := range stale {
		c.nc.Close()
	}
}

// CloseIdleConnections closes the connections kept idle, and those in use
// when their exchange ends; connections opened or taken afterwards are
// kept as before.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	t.gen++
	idle := t.idle
	t.idle = nil
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.nc.Close()
		}
	}
}

// body is a response body read from its connection. When it has been read
// to its end the connection is kept for the next request (unless the
// server or the request asked to close it, or the context ended); closed
// before its end, the connection is closed with it.
type body struct {
	t    *Transport
	c    *conn
	rc   io.ReadCloser // net/http's reader of the body's framing
	ctx  context.Context
	stop func() bool // stops the context's watch; false: it ended
	keep bool
	// state: bodyOpen, then bodyRead (read to its end) or bodyClosed.
	state atomic.Uint32
}

// body states.
const (
	bodyOpen = iota
	bodyRead
	bodyClosed
)

func (b *body) Read(p []byte) (int, error) {
	switch b.state.Load() {
	case bodyRead:
		return 0, io.EOF
	case bodyClosed:
		return 0, ErrBodyClosed
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.finish(true)
	case err != nil:
		b.finish(false)
		if cerr := b.ctx.Err(); cerr != nil {
			// The watch ended the read with a past deadline: the caller
			// is told why, as net/http tells it, not of a timeout.
			err = cerr
		}
	}
	return n, err
}

// Close ends the body; before its end, it ends a Read in progress too.
func (b *body) Close() error {
	b.finish(false)
	return nil
}

// finish hands the connection back (read: the body was read to its end)
// or closes it, once.
func (b *body) finish(read bool) {
	state := uint32(bodyClosed)
	if read {
		state = bodyRead
	}
	if !b.state.CompareAndSwap(bodyOpen, state) {
		return
	}
	if watching := b.stop(); read && watching && b.keep {
		b.t.put(b.c)
		return
	}
	b.c.nc.Close()
}
