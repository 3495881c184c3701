package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/manifold-mcp/manifold/internal/authn"
	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/telemetry"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The raw path on streamable HTTP for 2026-07-28 requests, which hold no
// session: each POST carries its version in the Mcp-Protocol-Version
// header and in _meta, and its credentials. A POST the raw path takes
// (rawTake) is answered here, on its own response (callResponse: JSON, or
// SSE once the upstream sends a notification for the call); anything else
// goes to the SDK's stateless handler with its body intact. The checks
// that handler makes on a call are made here first, with its answers
// (checkCallHeaders), so that both paths refuse alike.

// statelessFront is the rawFront of one stateless POST.
type statelessFront struct {
	id *authn.Identity // nil while auth is off
}

func (f statelessFront) session() *mcp.ServerSession { return nil }
func (f statelessFront) transport() string           { return telemetry.TransportTCP }
func (f statelessFront) caller() caller {
	if f.id != nil {
		return caller{id: f.id}
	}
	return caller{}
}

// serveStateless serves a 2026-07-28 request, on the raw path when it
// takes it, else with sdk, the SDK's stateless handler.
func (g *Gateway) serveStateless(w http.ResponseWriter, r *http.Request, sdk http.Handler) {
	if r.Method != http.MethodPost || !jsonBody(r.Header) || !acceptsJSONAndSSE(r.Header) || len(r.Header.Values("Last-Event-ID")) > 0 {
		sdk.ServeHTTP(w, r) // the SDK answers with its own status
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		// As the SDK answers a body it cannot read.
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, fmt.Sprintf("failed to read body: %v", err), http.StatusBadRequest)
		return
	}
	if g.cluster != nil && g.clusterStateless(w, r, body, sdk) {
		return // another replica's (cluster.go)
	}
	g.serveStatelessBody(w, r, body, sdk)
}

// serveStatelessBody serves a 2026-07-28 POST whose body was read.
func (g *Gateway) serveStatelessBody(w http.ResponseWriter, r *http.Request, body []byte, sdk http.Handler) {
	env, err := envelope.Scan(body)
	id, _ := r.Context().Value(identityCtxKey{}).(*authn.Identity)
	f := statelessFront{id: id}
	var rr *rawRequest
	if err == nil {
		rr = g.rawTake(r.Context(), f, body, &env)
	}
	version := r.Header.Get(headerProtocolVersion)
	if rr == nil || !rr.stateless || rr.version != version {
		r.Body = io.NopCloser(bytes.NewReader(body))
		sdk.ServeHTTP(w, r)
		return
	}
	out := &callResponse{w: w}
	if rpcErr := checkCallHeaders(r.Header, body, &env, version, rr.m.name, rr.c.name); rpcErr != nil {
		out.finish(http.StatusBadRequest, rawResponse(rr.id(), nil, rpcErr))
		return
	}
	rr.sink = out
	// The client ends the call by closing its request (2026-07-28 has no
	// notifications/cancelled for a stateless call): the upstream is told.
	a := g.serveAnswer(r.Context(), f, rr)
	status := http.StatusOK
	if a.failed {
		status = errorStatus(a.parts[0])
	}
	out.finishParts(status, a.pieces()...)
}

// errorCodeKey is the member of a JSON-RPC error errorStatus reads.
var errorCodeKey = []string{"code"}

// errorStatus is the HTTP status of res, a JSON-RPC response to a
// 2026-07-28 request, as SEP-2575 (and the SDK) map error codes: 404 for
// method not found, 400 for invalid params, an unsupported protocol
// version or missing client capabilities, 200 for anything else.
func errorStatus(res []byte) int {
	env, err := envelope.ScanResponse(res)
	if err != nil || !env.Error.Present() {
		return http.StatusOK
	}
	var code [1]envelope.Span
	if envelope.Members(env.Error.In(res), errorCodeKey, code[:]) != nil {
		return http.StatusOK
	}
	switch string(code[0].In(env.Error.In(res))) {
	case strconv.Itoa(jsonrpc.CodeMethodNotFound):
		return http.StatusNotFound
	case strconv.Itoa(jsonrpc.CodeInvalidParams), strconv.Itoa(mcp.CodeUnsupportedProtocolVersion), strconv.Itoa(mcp.CodeMissingRequiredClientCapabilities):
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// jsonBody reports whether the request's Content-Type is application/json,
// as the SDK requires of a POST.
func jsonBody(h http.Header) bool {
	// The media type as the SDK reads it (mime.ParseMediaType); without
	// parameters, as most clients send it, without its allocations.
	ct := h.Get("Content-Type")
	if !strings.Contains(ct, ";") && isASCII(ct) {
		// ASCII only: EqualFold also folds "ſ" to "s", which the SDK's
		// parser refuses.
		return strings.EqualFold(strings.TrimSpace(ct), "application/json")
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// isASCII reports whether s is all ASCII.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// acceptsJSONAndSSE reports whether Accept names both application/json and
// text/event-stream, as the SDK requires of a POST; wildcards are left to
// the SDK's judgement.
func acceptsJSONAndSSE(h http.Header) bool {
	var j, s bool
	for _, v := range h.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json":
				j = true
			case "text/event-stream":
				s = true
			}
		}
	}
	return j && s
}
