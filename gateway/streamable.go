package gateway

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/manifold-mcp/manifold/internal/authn"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// Streamable HTTP sessions (protocol versions before 2026-07-28) are the
// gateway's own (docs/architecture.md, Sessions): it opens each one from the
// SDK's exported pieces, a StreamableServerTransport with a random id
// connected to the gateway's mcp.Server, keeps it in its session table
// (clients.byID), and serves every request of it with the transport's
// ServeHTTP, after the checks the SDK's StreamableHTTPHandler would make:
// the MCP-Protocol-Version header, the method, Content-Type and Accept,
// the session and its principal. Idle sessions are ended by the gateway
// (idle.go), not by the SDK.

// sessionIDHeader names a streamable session.
const sessionIDHeader = "Mcp-Session-Id"

// firstWithoutBatches is the first protocol version without JSON-RPC
// batches.
const firstWithoutBatches = "2025-06-18"

// The protocol versions the gateway speaks with sessions (before
// StatelessVersion), the newest of them, and the answer to a request whose
// MCP-Protocol-Version header is none of them (the SDK's text).
var (
	sessionVersions      = map[string]bool{}
	latestSessionVersion string
	errUnsupportedHeader string
)

func init() {
	all := mcp.SupportedProtocolVersions() // newest first
	for _, v := range all {
		if !mcpx.Stateless(v) {
			sessionVersions[v] = true
			if latestSessionVersion == "" {
				latestSessionVersion = v
			}
		}
	}
	errUnsupportedHeader = "Bad Request: Unsupported protocol version (supported versions: " + strings.Join(all, ",") + ")"
}

// serveSessions serves /mcp for the protocol versions with sessions.
func (g *Gateway) serveSessions(w http.ResponseWriter, r *http.Request) {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !sessionVersions[v] {
		http.Error(w, errUnsupportedHeader, http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodPost:
		g.servePOST(w, r)
	case http.MethodGet:
		g.serveGET(w, r)
	case http.MethodDelete:
		g.serveDELETE(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

// session resolves the streamable session that r names (Mcp-Session-Id,
// which the caller checked is present) to the gateway's record of it, and
// counts r in flight on it (client.begin with unit): the caller calls
// cl.end(unit) once r is served. It answers r itself, and reports false,
// for a session that does not exist or is ending (404), or that another
// principal opened (403). Every request of an existing session goes
// through it, whichever path serves the request.
func (g *Gateway) session(w http.ResponseWriter, r *http.Request, unit int64) (*client, bool) {
	sid := r.Header.Get(sessionIDHeader)
	if g.cluster != nil && !g.clusterSession(w, r, sid) {
		return nil, false // another replica's, or refused (cluster.go)
	}
	v, ok := g.clients.byID.Load(sid)
	if !ok {
		http.Error(w, "session not found", http.StatusNotFound)
		return nil, false
	}
	cl := v.(*client)
	if cl.toolset != toolsetName(r.Context()) {
		// Opened on another endpoint: a session of a toolset cannot reach
		// the whole catalog through /mcp, nor one toolset another.
		http.Error(w, "session not found", http.StatusNotFound)
		return nil, false
	}
	if cl.id != nil {
		// Bound to the principal that opened it, as authenticated now.
		id, _ := r.Context().Value(identityCtxKey{}).(*authn.Identity)
		if id == nil || id.Method != cl.id.Method || id.Principal.Name() != cl.id.Principal.Name() {
			g.log.Warn("request refused: session of another principal", zap.String(keyAddr, r.RemoteAddr))
			http.Error(w, "session user mismatch", http.StatusForbidden)
			return nil, false
		}
	}
	if !cl.begin(unit) {
		http.Error(w, "session not found", http.StatusNotFound)
		return nil, false
	}
	return cl, true
}

// servePOST serves a message of a session, or opens one with an
// initialize.
func (g *Gateway) servePOST(w http.ResponseWriter, r *http.Request) {
	if mediaType(r.Header.Get("Content-Type")) != "application/json" {
		http.Error(w, "Content-Type must be 'application/json'", http.StatusUnsupportedMediaType)
		return
	}
	if jsonOK, streamOK := accepts(r.Header.Values("Accept")); !jsonOK || !streamOK {
		http.Error(w, "Accept must contain both 'application/json' and 'text/event-stream'", http.StatusBadRequest)
		return
	}
	if r.Header.Get(sessionIDHeader) == "" {
		g.openSession(w, r)
		return
	}
	cl, ok := g.session(w, r, 1)
	if !ok {
		return
	}
	defer cl.end(1)
	if v := r.Header.Get("Mcp-Protocol-Version"); v >= firstWithoutBatches && peekBatch(r) {
		http.Error(w, fmt.Sprintf("JSON-RPC batching is not supported in %s and later (request version: %s)", firstWithoutBatches, v), http.StatusBadRequest)
		return
	}
	g.serveSessionPOST(w, r, cl)
}

// serveGET serves a session's stream of messages outside requests; the
// session is busy while it is open.
func (g *Gateway) serveGET(w http.ResponseWriter, r *http.Request) {
	if _, streamOK := accepts(r.Header.Values("Accept")); !streamOK {
		http.Error(w, "Accept must contain 'text/event-stream' for GET requests", http.StatusBadRequest)
		return
	}
	if r.Header.Get(sessionIDHeader) == "" {
		http.Error(w, "Bad Request: GET requires an Mcp-Session-Id header", http.StatusBadRequest)
		return
	}
	cl, ok := g.session(w, r, streamUnit)
	if !ok {
		return
	}
	if g.detachStream(w, r, cl) { // it counts the stream's end
		return
	}
	defer cl.end(streamUnit)
	cl.transport.ServeHTTP(w, r)
}

// serveDELETE ends a session, cancelling its calls in flight first (the
// SDK's Close would wait for them: sessioncalls.go).
func (g *Gateway) serveDELETE(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(sessionIDHeader) == "" {
		http.Error(w, "Bad Request: DELETE requires an Mcp-Session-Id header", http.StatusBadRequest)
		return
	}
	cl, ok := g.session(w, r, 1)
	if !ok {
		return
	}
	g.calls.cancelSession(r)
	g.clients.remove(cl)
	cl.end(1)
	g.endClient(cl, errSessionDeleted)
	w.WriteHeader(http.StatusNoContent)
}

// openSession opens a session for r, which must be an initialize: the
// gateway registers it (within the session limits), connects a new
// transport to the gateway's server, publishes it in the session table,
// and lets it answer r.
func (g *Gateway) openSession(w http.ResponseWriter, r *http.Request) {
	if !readInitialize(w, r) {
		return
	}
	if g.life.Closed() { // Close would not end it
		w.Header().Set("Retry-After", "5")
		http.Error(w, "the gateway is shutting down", http.StatusServiceUnavailable)
		return
	}
	sid := rand.Text()
	if g.cluster != nil {
		var err error
		if sid, err = g.newSessionID(r); err != nil {
			g.log.Error("issuing a session id", zap.Error(err))
			http.Error(w, "failed connection", http.StatusInternalServerError)
			return
		}
	}
	cl, ok := g.openClient(w, r, kindStreamable, nil, sid)
	if !ok {
		return
	}
	defer g.settleOpened(cl)
	// The SDK runs the session's handlers in contexts derived from this
	// one, without its cancellation.
	ss, err := g.server.Connect(r.Context(), endingTransport{cl.transport, func() { g.streamableClosed(cl) }}, nil)
	if err != nil {
		g.log.Error("connecting a session", zap.Error(err))
		http.Error(w, "failed connection", http.StatusInternalServerError)
		return
	}
	cl.ss.Store(ss)
	g.clients.bySession.Store(ss, cl)
	g.trackStreamable(ss) // sessionEnded forgets cl
	if !g.clients.publish(cl) {
		http.Error(w, "session not found", http.StatusNotFound) // ended already
		return
	}
	cl.transport.ServeHTTP(w, r)
}

// publish puts cl, a streamable session whose SDK session exists, in the
// session table, unless it was ended meanwhile; it reports whether it did.
func (c *clients) publish(cl *client) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byOwner[cl.owner][cl]; !ok {
		return false
	}
	c.byID.Store(cl.sid, cl)
	return true
}

// readInitialize reads r's body, which the session limits bound, and puts
// it back for the transport; it reports whether it is one initialize
// request, answering r itself when not (400, or 413 for a body over the
// limit).
func readInitialize(w http.ResponseWriter, r *http.Request) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
			return false
		}
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return false
	}
	if len(body) == 0 {
		http.Error(w, "POST requires a non-empty body", http.StatusBadRequest)
		return false
	}
	var msg struct {
		Method string `json:"method"`
	}
	if err := json.Unmarshal(body, &msg); err != nil && !isArray(body) {
		http.Error(w, fmt.Sprintf("malformed payload: %v", err), http.StatusBadRequest)
		return false
	}
	if msg.Method != "initialize" {
		http.Error(w, "Bad Request: a request without an Mcp-Session-Id header must be a single initialize request", http.StatusBadRequest)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// isArray reports whether JSON text b is an array (a JSON-RPC batch).
func isArray(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '['
}

// peekBatch reports whether r's body is a JSON array (a JSON-RPC batch),
// reading it up to its first byte that is not white space, which it puts
// back in front of the rest.
func peekBatch(r *http.Request) bool {
	p := &peekedBody{ReadCloser: r.Body}
	r.Body = p
	for {
		n, err := p.ReadCloser.Read(p.buf[:])
		if n == 1 && !isSpace(p.buf[0]) {
			p.head = p.buf[:]
			return p.buf[0] == '['
		}
		if err != nil {
			p.err = err
			return false
		}
	}
}

// peekedBody is a request body whose first byte was read: it reads head,
// then err if reading it failed, then the rest of the body.
type peekedBody struct {
	io.ReadCloser
	buf  [1]byte
	head []byte
	err  error
}

func (p *peekedBody) Read(b []byte) (int, error) {
	if len(p.head) > 0 {
		n := copy(b, p.head)
		p.head = p.head[n:]
		return n, nil
	}
	if p.err != nil {
		return 0, p.err
	}
	return p.ReadCloser.Read(b)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// accepts reports whether Accept header values admit application/json and
// text/event-stream, as the SDK reads them.
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for raw := range strings.SplitSeq(value, ",") {
			base, _, _ := strings.Cut(raw, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// mediaType is the media type of a Content-Type value, lower case; ""
// when malformed.
func mediaType(value string) string {
	if !strings.Contains(value, ";") && !strings.ContainsAny(value, "ABCDEFGHIJKLMNOPQRSTUVWXYZ \t") {
		return value // the common case, without parameters, parsed without allocating
	}
	t, _, err := mime.ParseMediaType(value)
	if err != nil {
		return ""
	}
	return t
}
