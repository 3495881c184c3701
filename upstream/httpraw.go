package upstream

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/lifecycle"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// rawConn is a connection that takes raw calls: a stdio upstream's pipe
// (stdioConn) or a streamable HTTP upstream's endpoint (httpRaw). call
// sends a request for method with params (raw JSON; nil sends none) and
// returns the result as the upstream wrote it, or its JSON-RPC error, or
// the failure; when ctx ends or the deadline (zero: none) passes first
// (then the error is errCallTimeout), the upstream is sent
// notifications/cancelled. The deadline is kept by the connection's sweep
// (expiry.go), not by a timer per call.
type rawConn interface {
	call(ctx context.Context, deadline time.Time, method string, params []byte) ([]byte, *jsonrpc.Error, error)
}

var (
	_ rawConn = (*stdioConn)(nil)
	_ rawConn = (*httpRaw)(nil)
)

// Errors of the HTTP raw path.
var (
	// errSessionLost: the upstream answered 404 to our session id; it has
	// forgotten the session, which must be made anew.
	errSessionLost = errors.New("the upstream lost the session (HTTP 404)")
	// errRawClosed: the connection closed while the call was in flight.
	errRawClosed = fmt.Errorf("%w: http connection closed", mcp.ErrConnectionClosed)
	// errNoAnswer: the answer stream ended before the response.
	errNoAnswer = fmt.Errorf("%w: the answer stream ended before the response", io.ErrUnexpectedEOF)
)

// httpStatusError is an HTTP answer to a raw call that is neither a
// JSON-RPC message nor a lost session.
type httpStatusError struct{ status int }

func (e *httpStatusError) Error() string {
	return "HTTP " + strconv.Itoa(e.status) + " " + http.StatusText(e.status)
}

// requestOverhead is room enough for a raw request's envelope beside its
// method, params and _meta members.
const requestOverhead = 96

// cancelTimeout bounds the POST of notifications/cancelled and of the
// answer to a server request.
const cancelTimeout = 5 * time.Second

// Header values shared by every raw request (never modified: a header set
// later replaces the slice).
var (
	hdrJSON   = []string{"application/json"}
	hdrAccept = []string{"application/json, text/event-stream"}
)

// httpRaw takes raw calls to a streamable HTTP upstream: each is a plain
// POST to the endpoint, through the SDK transport's own http.Client (its
// RoundTripper adds the configured headers and trace context and bounds
// every message, see newHTTPClient), with the session's headers. The SDK
// session keeps the connection (initialize, lists, the GET stream); a raw
// call reads only its own answer: application/json, or an event stream on
// which the server's notifications and requests for the call are relayed
// as the SDK session relays them (relay.go), and the response to our id is
// returned as bytes, never decoded.
//
// Ids are strings (rawIDPrefix), where the SDK's are numbers. A 404 to the
// session id means the upstream forgot the session: lost is closed, and the
// supervisor reconnects. Close waits for the cancellations and the answers
// to server requests it started.
type httpRaw struct {
	u       *Upstream
	client  *http.Client
	url     string
	session []string // Mcp-Session-Id; nil without a session
	version []string // Mcp-Protocol-Version
	// meta holds, for stateless versions, the _meta members that every
	// request carries (protocol version, client info and capabilities) as
	// `"key":value,…` without braces; nil for older versions.
	meta   []byte
	nextID atomic.Uint64
	group  *lifecycle.Group
	// params caches the x-mcp-header bindings of the current catalog's
	// tools (stateless versions).
	params atomic.Pointer[paramHeaders]

	lost     chan struct{}
	lostOnce sync.Once

	// flights are the calls in flight, whose deadlines expiry keeps.
	mu      sync.Mutex
	flights map[uint64]*flight
	expiry  *expiry
}

// flight is one raw call in flight over HTTP: its request ends with cancel
// when the deadline passes, with cause.
type flight struct {
	cancel   context.CancelCauseFunc
	deadline time.Time // zero: none; guarded by httpRaw.mu
	cause    error     // guarded by httpRaw.mu
}

// newHTTPRaw returns the raw path of cs, a streamable HTTP session over
// client.
func (u *Upstream) newHTTPRaw(cs *mcp.ClientSession, client *http.Client) (*httpRaw, error) {
	h := &httpRaw{u: u, client: client, url: u.cfg.URL, lost: make(chan struct{}), flights: map[uint64]*flight{}}
	h.expiry = newExpiry(h.expire)
	if id := cs.ID(); id != "" {
		h.session = []string{id}
	}
	pv := cs.InitializeResult().ProtocolVersion
	h.version = []string{pv}
	if mcpx.Stateless(pv) {
		m, err := requestMeta(pv, u.opts.ClientInfo, u.opts.Capabilities)
		if err != nil {
			return nil, err
		}
		h.meta = m
	}
	h.group = lifecycle.New(u.log)
	h.group.Start(context.Background())
	return h, nil
}

// requestMeta encodes the _meta members of a stateless request, as the
// SDK's client sends them.
func requestMeta(version string, info *mcp.Implementation, caps *mcp.ClientCapabilities) ([]byte, error) {
	if caps == nil {
		caps = &mcp.ClientCapabilities{}
	}
	// The SDK's wire form of the capabilities: roots from RootsV2.
	wire := struct {
		*mcp.ClientCapabilities
		Roots *mcpx.RootCapabilities `json:"roots,omitempty"`
	}{caps, mcpx.RootsV2(caps)}
	c, err := json.Marshal(wire)
	if err != nil {
		return nil, fmt.Errorf("encoding client capabilities: %w", err)
	}
	m := envelope.AppendString(nil, mcp.MetaKeyProtocolVersion)
	m = append(m, ':')
	m = envelope.AppendString(m, version)
	if info != nil {
		i, err := json.Marshal(info)
		if err != nil {
			return nil, fmt.Errorf("encoding client info: %w", err)
		}
		m = append(m, ',')
		m = envelope.AppendString(m, mcp.MetaKeyClientInfo)
		m = append(append(m, ':'), i...)
	}
	m = append(m, ',')
	m = envelope.AppendString(m, mcp.MetaKeyClientCapabilities)
	return append(append(m, ':'), c...), nil
}

// lostC is closed when the upstream lost the session; nil (never ready)
// for a nil h.
func (h *httpRaw) lostC() <-chan struct{} {
	if h == nil {
		return nil
	}
	return h.lost
}

// close ends the calls in flight and waits for the goroutines.
func (h *httpRaw) close() {
	if h != nil {
		h.group.Close()
		h.expiry.stop()
	}
}

// expire ends the calls whose deadline has passed (expiry), each with its
// cause.
func (h *httpRaw) expire(now time.Time) bool {
	type due struct {
		cancel context.CancelCauseFunc
		cause  error
	}
	var expired []due
	waiting := false
	h.mu.Lock()
	for _, f := range h.flights {
		switch {
		case f.deadline.IsZero():
		case now.Before(f.deadline):
			waiting = true
		default:
			expired = append(expired, due{f.cancel, f.cause})
		}
	}
	h.mu.Unlock()
	for _, d := range expired {
		d.cancel(d.cause)
	}
	return waiting
}

// land removes call n from the flights.
func (h *httpRaw) land(n uint64) {
	h.mu.Lock()
	delete(h.flights, n)
	h.mu.Unlock()
}

// draining gives flight f drainWait more to read the rest of its answer
// stream, with errDrainTimeout as the cause of its end.
func (h *httpRaw) draining(f *flight) {
	h.mu.Lock()
	f.deadline, f.cause = time.Now().Add(drainWait), errDrainTimeout
	h.mu.Unlock()
	h.expiry.started(minSweepTick)
}

// call implements rawConn.
func (h *httpRaw) call(ctx context.Context, deadline time.Time, method string, params []byte) ([]byte, *jsonrpc.Error, error) {
	n := h.nextID.Add(1)
	// One allocation at the request's size, not pooled: the transport may
	// still read a request body after RoundTrip returned (net/http), and
	// limitTransport reads it again to answer an oversized message.
	body, name, err := appendRequest(make([]byte, 0, requestOverhead+len(method)+len(params)+len(h.meta)), n, method, params, h.meta)
	if err != nil {
		return nil, nil, err
	}

	// The request ends with ctx, the deadline or the connection; the
	// request carries the trace context of ctx and none of its values
	// (see detach). Neither a goroutine nor a timer per call watches
	// them: the exchange runs on this goroutine (h1client), and each would
	// cost wake-ups of their own (expiry.go).
	rctx, cancel := context.WithCancelCause(withTraceContext(h.group.Context(), ctx))
	stopWatch := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	f := &flight{cancel: cancel, deadline: deadline, cause: errCallTimeout}
	h.mu.Lock()
	h.flights[n] = f
	h.mu.Unlock()
	h.expiry.started(minSweepTick)
	defer func() {
		h.land(n)
		stopWatch()
		cancel(context.Canceled)
	}()

	req, err := http.NewRequestWithContext(context.WithValue(rctx, boundsItsEvents{}, true), http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	h.setHeaders(req.Header)
	if h.meta != nil {
		req.Header["Mcp-Method"] = []string{method}
		if name != "" {
			req.Header["Mcp-Name"] = []string{headerValue(name)}
		}
		if method == "tools/call" {
			if b := h.toolBindings(name); b != nil {
				setParamHeaders(req.Header, b, params)
			}
		}
	}
	result, rpcErr, err := h.exchange(req, n, f)
	if err != nil && rctx.Err() != nil {
		switch cause := context.Cause(rctx); {
		case errors.Is(cause, errCallTimeout):
			h.notifyCancelled(n, errCallTimeout)
			return nil, nil, errCallTimeout
		case ctx.Err() != nil:
			h.notifyCancelled(n, cause)
			return nil, nil, ctx.Err()
		default:
			return nil, nil, errRawClosed
		}
	}
	return result, rpcErr, err
}

// setHeaders sets the headers of every POST of the session.
func (h *httpRaw) setHeaders(hdr http.Header) {
	hdr["Content-Type"] = hdrJSON
	hdr["Accept"] = hdrAccept
	hdr["Mcp-Protocol-Version"] = h.version
	if h.session != nil {
		hdr["Mcp-Session-Id"] = h.session
	}
}

// appendRequest appends the request of raw call n and returns, when meta
// is not nil (a stateless version), the value of its Mcp-Name header. Then
// the params' _meta gets meta, the members every request carries (see
// requestMeta), ours replacing any of the same keys: the upstream's client
// is the gateway. Both raw connections, stdio and HTTP, write their
// requests with it.
func appendRequest(dst []byte, n uint64, method string, params, meta []byte) ([]byte, string, error) {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendRawID(dst, n)
	dst = append(dst, `,"method":`...)
	dst = envelope.AppendString(dst, method)
	if meta == nil {
		if params != nil {
			dst = append(append(dst, `,"params":`...), params...)
		}
		return append(dst, '}'), "", nil
	}
	if params == nil {
		params = []byte("{}")
	}
	start := len(dst) + len(`,"params":`)
	dst = append(append(append(dst, `,"params":`...), params...), '}')
	env, err := envelope.Scan(dst)
	if err != nil || env.ProtocolVersion.Present() || env.ClientCapabilities.Present() || env.ClientInfo.Present() {
		// Not simple, or our keys already there: decode and re-encode.
		p, name, err := mergeMeta(params, meta)
		if err != nil {
			return dst, "", err
		}
		dst = append(dst[:start], p...)
		return append(dst, '}'), name, nil
	}
	name := string(envelope.Text(env.Name.In(dst)))
	if env.URI.Present() {
		name = string(envelope.Text(env.URI.In(dst)))
	}
	// Insert meta at the start of _meta, or a new _meta at the start of
	// params.
	var at int
	var ins []byte
	if env.Meta.Present() {
		at = env.Meta.Start + 1
		ins = meta
		if !emptyObject(env.Meta.In(dst)) {
			ins = append(append([]byte(nil), ins...), ',')
		}
	} else {
		at = env.Params.Start + 1
		ins = append(append(append([]byte(`"_meta":{`), meta...), '}'), ',')
		if emptyObject(env.Params.In(dst)) {
			ins = ins[:len(ins)-1]
		}
	}
	dst = append(dst, ins...)
	copy(dst[at+len(ins):], dst[at:len(dst)-len(ins)])
	copy(dst[at:], ins)
	return dst, name, nil
}

func emptyObject(obj []byte) bool {
	return len(bytes.TrimSpace(obj[1:len(obj)-1])) == 0
}

// mergeMeta returns params with meta's members set in its _meta, and its
// name (or URI), decoding it fully: the slow path of appendRequest.
func mergeMeta(params, meta []byte) ([]byte, string, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, "", fmt.Errorf("params: %w", err)
	}
	if p == nil {
		p = map[string]json.RawMessage{}
	}
	m := map[string]json.RawMessage{}
	if raw, ok := p["_meta"]; ok {
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, "", fmt.Errorf("params._meta: %w", err)
		}
		if m == nil {
			m = map[string]json.RawMessage{}
		}
	}
	var ours map[string]json.RawMessage
	if err := json.Unmarshal(append(append([]byte{'{'}, meta...), '}'), &ours); err != nil {
		return nil, "", err
	}
	for k, v := range ours {
		m[k] = v
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, "", err
	}
	p["_meta"] = raw
	var name string
	for _, k := range []string{"uri", "name"} {
		if v, ok := p[k]; ok && json.Unmarshal(v, &name) == nil {
			break
		}
	}
	out, err := json.Marshal(p)
	return out, name, err
}

// exchange sends req and reads its answer to raw call n, in flight f.
func (h *httpRaw) exchange(req *http.Request, n uint64, f *flight) ([]byte, *jsonrpc.Error, error) {
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	mt := mediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// A JSON-RPC error answer (a stateless server's 400 or 404)
		// keeps its code.
		if mt == "application/json" {
			if data, err := io.ReadAll(resp.Body); err == nil {
				if env, err := envelope.ScanResponse(data); err == nil && env.Error.Present() {
					return nil, decodeWireError(env.Error.In(data)), nil
				}
			}
		}
		if resp.StatusCode == http.StatusNotFound && h.session != nil {
			h.lostOnce.Do(func() { close(h.lost) })
			return nil, nil, errSessionLost
		}
		return nil, nil, &httpStatusError{status: resp.StatusCode}
	}
	switch mt {
	case "application/json":
		data, err := readBody(resp)
		if err != nil {
			return nil, nil, err
		}
		ours, result, rpcErr, _, err := answer(data, n)
		if err == nil && !ours {
			err = errors.New("the answer is not the response to the call")
		}
		return result, rpcErr, err
	case "text/event-stream":
		result, rpcErr, err := h.readStream(req.Context(), resp.Body, n)
		if err == nil {
			h.draining(f)
			_, _ = io.CopyN(io.Discard, resp.Body, drainBytes)
		}
		return result, rpcErr, err
	}
	return nil, nil, fmt.Errorf("answer of unsupported content type %q (HTTP %d)", mt, resp.StatusCode)
}

// Draining an answer stream after the response: a server ends the stream
// of a call once it has answered, and a body read to its end lets the
// connection serve the next call (one closed early is torn down, and the
// next call dials anew). The wait is bounded, by the sweep (expiry.go), to
// about drainWait: a server that keeps the stream open loses the
// connection instead.
const (
	drainWait  = 50 * time.Millisecond
	drainBytes = 64 << 10
)

// errDrainTimeout ends a request whose stream stayed open after its answer.
var errDrainTimeout = errors.New("the answer stream stayed open after the response")

// Resuming an answer stream the server ended before the answer (before
// 2026-07-28): at most maxResumes times, after the server's retry interval
// or resumeDelay, the SDK transport's first delay.
const (
	maxResumes  = 5
	resumeDelay = time.Second
)

// resumeStream waits delay, then asks the server to replay its stream from
// after the event lastID (GET with Last-Event-ID), and returns the new
// answer stream.
func (h *httpRaw) resumeStream(ctx context.Context, lastID string, delay time.Duration) (io.ReadCloser, error) {
	t := time.NewTimer(delay)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return nil, context.Cause(ctx)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url, nil)
	if err != nil {
		return nil, err
	}
	h.setHeaders(req.Header)
	req.Header["Accept"] = []string{"text/event-stream"}
	delete(req.Header, "Content-Type")
	req.Header["Last-Event-Id"] = []string{lastID}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		resp.Body.Close()
		return nil, fmt.Errorf("resuming the answer stream: %w", &httpStatusError{status: resp.StatusCode})
	}
	return resp.Body, nil
}

// mediaType is the media type of a Content-Type, as the SDK reads it.
func mediaType(ct string) string {
	for i := 0; i < len(ct); i++ {
		if ct[i] == ';' {
			ct = ct[:i]
			break
		}
	}
	return string(bytes.ToLower(bytes.TrimSpace([]byte(ct))))
}

// readBody reads a JSON answer in one allocation when its length is known
// (limitTransport bounds it to max bytes either way).
func readBody(resp *http.Response) ([]byte, error) {
	length := resp.ContentLength
	if jb, ok := resp.Body.(*jsonBody); ok {
		length = jb.length
		if length > int64(jb.t.max) {
			length = -1 // replaced by the error for the call
		}
	}
	if length >= 0 {
		data := make([]byte, length)
		_, err := io.ReadFull(resp.Body, data)
		return data, err
	}
	return io.ReadAll(resp.Body)
}

// answer reads data, one message on the call's answer: ours when it is
// the response to raw call n (then result or rpcErr, or ErrTooLarge when
// limitTransport replaced it), else the message decoded (nil for a
// response to another id).
func answer(data []byte, n uint64) (ours bool, result []byte, rpcErr *jsonrpc.Error, msg jsonrpc.Message, err error) {
	var got uint64
	var r rawReply
	env, err := envelope.Scan(data)
	switch {
	case err == nil && env.IsResponse():
		got, r, ours = scannedReply(data, &env)
	case err == nil || errors.Is(err, envelope.ErrNotSimple):
		if msg, err = jsonrpc.DecodeMessage(data); err != nil {
			return false, nil, nil, nil, err
		}
		got, r, ours = decodedReply(msg)
	default:
		return false, nil, nil, nil, err
	}
	if !ours || got != n {
		return false, nil, nil, msg, nil
	}
	if r.rpcErr != nil && isTooLarge(r.rpcErr) {
		return true, nil, nil, nil, ErrTooLarge
	}
	return true, r.result, r.rpcErr, nil, nil
}

// readStream reads the call's event stream until the response to raw call
// n, relaying the server's messages met on the way.
func (h *httpRaw) readStream(ctx context.Context, body io.Reader, n uint64) ([]byte, *jsonrpc.Error, error) {
	// The reader bounds each event itself (limitTransport leaves the
	// stream of a raw call unbuffered: see boundsItsEvents).
	br := newStreamReader(body)
	defer releaseStreamReader(br)
	r := sseReader{br: br, max: h.u.opts.MaxMessageBytes}
	var s serverRequests
	defer s.cancelAll()
	resumes := 0
	for {
		data, err := r.next()
		if errors.Is(err, io.EOF) && r.lastID != "" && resumes < maxResumes {
			// The server ended the stream before the answer, having named
			// its events: it expects the client back with Last-Event-ID
			// after its retry interval, as the SDK's transport comes back.
			resumes++
			var resumed io.ReadCloser
			if resumed, err = h.resumeStream(ctx, r.lastID, cmp.Or(r.retry, resumeDelay)); err == nil {
				defer resumed.Close()
				br.Reset(resumed)
				r.has = false
				continue
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errNoAnswer
			}
			return nil, nil, err
		}
		if len(bytes.TrimSpace(data)) == 0 {
			continue // a priming event (SEP-1699): no message
		}
		ours, result, rpcErr, msg, err := answer(data, n)
		if len(data) > h.u.opts.MaxMessageBytes {
			// Within the event's bound (limitTransport allows the SSE
			// framing beside the message) but over the message's.
			if ours {
				return nil, nil, ErrTooLarge
			}
			continue
		}
		if ours {
			r.take() // result is a subslice of data
			return result, rpcErr, err
		}
		if err != nil {
			h.u.log.Warn("undecodable message on a raw call's stream", zap.Error(err))
			continue
		}
		if req, ok := msg.(*jsonrpc.Request); ok {
			h.serverMessage(req, &s)
		}
	}
}
