package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/authn"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"go.uber.org/zap"
)

// prmPath is where OAuth 2.0 Protected Resource Metadata (RFC 9728) is
// served; the resource's path is appended to it (…/mcp).
const prmPath = "/.well-known/oauth-protected-resource"

// identityCtxKey carries the identity from require to the SDK's token-info
// hook, and to the handlers of the legacy SSE session a GET opens.
type identityCtxKey struct{}

// httpAuth authenticates HTTP requests to the MCP endpoints. Requests carry
// their bearer token every time (per MCP authorization); the identity goes
// into the SDK's auth.TokenInfo, which binds a streamable session to its
// principal and hands the identity to every request of the session. Legacy
// SSE sessions are bound here, by session id.
type httpAuth struct {
	g        *Gateway
	tokenHop func(http.Handler) http.Handler
	sse      sync.Map // SSE session id → *sseSession
}

// sseSession is who a legacy SSE session belongs to, and the identity its
// latest POST authenticated with: its messages carry no token of their own,
// so their handlers take this one (identity), and a JWT the client renewed
// brings its claims to the next message.
type sseSession struct {
	owner  string // sessionOwner
	latest atomic.Pointer[authn.Identity]
}

// sseSessionKey is the context key of the *sseSession of the GET that
// opened a session, in which its handlers run.
type sseSessionKey struct{}

func newHTTPAuth(g *Gateway) *httpAuth {
	h := &httpAuth{g: g}
	h.tokenHop = auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		id, ok := ctx.Value(identityCtxKey{}).(*authn.Identity)
		if !ok {
			return nil, fmt.Errorf("%w: not authenticated", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{
			UserID:     sessionOwner(id),
			Scopes:     id.Scopes,
			Expiration: id.Expiry,
			Extra:      map[string]any{identityKey: id},
		}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true, ClockSkew: g.jwtLeeway()})
	return h
}

func (g *Gateway) jwtLeeway() (d time.Duration) {
	if j := g.current().cfg.Auth.JWT; j != nil {
		d = j.Leeway
	}
	return d
}

// require wraps an MCP endpoint: without auth it passes every request (as
// the local principal); with auth it answers 401 to a request without a
// valid bearer token.
func (h *httpAuth) require(next http.Handler) http.Handler {
	authed := h.tokenHop(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := h.g.current().access
		if a.authn == nil {
			next.ServeHTTP(w, r)
			return
		}
		id, ok := h.authenticate(w, r, a)
		if !ok {
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), identityCtxKey{}, id))
		sse := isSSEPath(r.URL.Path)
		if sse && !h.bindSSE(w, r, id) {
			return
		}
		if sse && r.Method == http.MethodGet {
			sess := &sseSession{owner: sessionOwner(id)}
			sess.latest.Store(id)
			r = r.WithContext(context.WithValue(r.Context(), sseSessionKey{}, sess))
			sniff := &sseSniffer{ResponseWriter: w}
			defer func() {
				if sniff.id != "" {
					h.sse.Delete(sniff.id)
				}
			}()
			sniff.onID = func(sid string) { h.sse.Store(sid, sess) }
			w = sniff
		}
		authed.ServeHTTP(w, r)
	})
}

// admin wraps the gateway's own endpoints (/status, /reload): with auth on
// they need a valid bearer token, like /mcp, of an operator (auth.operators;
// 403 for anyone else); without auth only a loopback peer may use them, even
// on a listener opened with gateway.insecure (and, mounted behind
// loopbackHost, only under a Host that names loopback). The principal is in
// the request context.
func (h *httpAuth) admin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := h.g.current().access
		if a.authn == nil {
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			if !isLoopback(host) {
				http.Error(w, "forbidden: without auth, this endpoint answers loopback clients only", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), a.local)))
			return
		}
		id, ok := h.authenticate(w, r, a)
		if !ok {
			return
		}
		if !a.operators.Contains(id.Principal) {
			h.g.log.Warn("request refused: not an operator", zap.String(keyAddr, r.RemoteAddr), zap.String(keyName, r.URL.Path))
			http.Error(w, "forbidden: operators only (auth.operators)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), id.Principal)))
	})
}

// authenticate checks r's bearer token with a's authenticator, answering
// 401 itself when it is missing or invalid.
func (h *httpAuth) authenticate(w http.ResponseWriter, r *http.Request, a *access) (*authn.Identity, bool) {
	token, ok := authn.BearerToken(r.Header.Get("Authorization"))
	if !ok {
		reason := "no bearer token"
		if r.Header.Get("Authorization") != "" {
			reason = "malformed Authorization header"
		}
		h.g.log.Debug("request refused: "+reason, zap.String(keyAddr, r.RemoteAddr))
		h.unauthorized(w, r, reason, r.Header.Get("Authorization") != "")
		return nil, false
	}
	id, err := a.authn.Authenticate(r.Context(), token)
	if err != nil {
		reason := "invalid token"
		if errors.Is(err, authn.ErrInvalidToken) {
			reason = err.Error()
		}
		h.g.log.Warn("authentication failed", zap.String(keyAddr, r.RemoteAddr), zap.String(keyReason, reason))
		h.unauthorized(w, r, reason, true)
		return nil, false
	}
	return id, true
}

// sessionOwner names who a session belongs to: the principal, qualified by
// how it authenticated, so that a JWT whose subject happens to equal an API
// key's name cannot use that key's sessions.
func sessionOwner(id *authn.Identity) string {
	return id.Method + ":" + id.Principal.Name()
}

// isSSEPath reports whether path is a legacy SSE endpoint: /sse, or a
// toolset's /sse/<name>.
func isSSEPath(path string) bool {
	return path == "/sse" || strings.HasPrefix(path, "/sse/")
}

// bindSSE refuses a POST to an SSE session opened by another principal,
// with the answer for an unknown session; for the session's own principal,
// it notes id as the session's latest identity.
func (h *httpAuth) bindSSE(w http.ResponseWriter, r *http.Request, id *authn.Identity) bool {
	if r.Method != http.MethodPost {
		return true
	}
	v, ok := h.sse.Load(r.URL.Query().Get("sessionid"))
	if !ok {
		return true // the SDK answers for an unknown session
	}
	sess := v.(*sseSession)
	if sess.owner != sessionOwner(id) {
		h.g.log.Warn("request refused: SSE session of another principal", zap.String(keyAddr, r.RemoteAddr))
		http.Error(w, "session not found", http.StatusNotFound)
		return false
	}
	sess.latest.Store(id)
	return true
}

// unauthorized answers 401 with a WWW-Authenticate challenge (RFC 6750,
// and RFC 9728's resource_metadata when OAuth metadata is served).
func (h *httpAuth) unauthorized(w http.ResponseWriter, r *http.Request, reason string, presented bool) {
	ac := &h.g.current().cfg.Auth
	params := []string{`realm="manifold"`}
	if servesPRM(ac) {
		params = append(params, fmt.Sprintf("resource_metadata=%q", metadataURL(ac, r)))
	}
	if scopes := ac.Scopes; len(scopes) > 0 {
		params = append(params, fmt.Sprintf("scope=%q", strings.Join(scopes, " ")))
	}
	if presented {
		params = append(params, `error="invalid_token"`, fmt.Sprintf("error_description=%q", strings.ReplaceAll(reason, `"`, "'")))
	}
	w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	http.Error(w, "unauthorized: "+reason, http.StatusUnauthorized)
}

// servesPRM reports whether OAuth protected resource metadata is served:
// when tokens come from an authorization server (JWT, or one configured).
func servesPRM(ac *config.Auth) bool {
	return ac.JWT != nil || len(ac.AuthorizationServers) > 0
}

// resourceURL is the gateway's MCP endpoint as the client reached it, unless
// auth.resource names it.
func resourceURL(ac *config.Auth, r *http.Request) string {
	if res := ac.Resource; res != "" {
		return res
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/mcp"
}

// metadataURL is where the metadata of resourceURL is served (RFC 9728 §3.1).
func metadataURL(ac *config.Auth, r *http.Request) string {
	u, err := url.Parse(resourceURL(ac, r))
	if err != nil {
		return ""
	}
	u.Path = prmPath + strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}

// protectedResource serves the OAuth protected resource metadata.
func (g *Gateway) protectedResource(w http.ResponseWriter, r *http.Request) {
	ac := &g.current().cfg.Auth
	if !servesPRM(ac) {
		http.NotFound(w, r)
		return
	}
	servers := ac.AuthorizationServers
	if len(servers) == 0 {
		servers = []string{ac.JWT.Issuer}
	}
	meta := &oauthex.ProtectedResourceMetadata{
		Resource:               resourceURL(ac, r),
		AuthorizationServers:   servers,
		ScopesSupported:        ac.Scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Manifold MCP gateway",
	}
	auth.ProtectedResourceMetadataHandler(meta).ServeHTTP(w, r)
}

// sseSniffer notes the session id of a legacy SSE stream from the
// "endpoint" event the SDK writes first (…?sessionid=<id>).
type sseSniffer struct {
	http.ResponseWriter
	id   string
	onID func(string)
}

func (s *sseSniffer) Write(p []byte) (int, error) {
	if s.id == "" {
		if _, rest, ok := bytes.Cut(p, []byte("sessionid=")); ok {
			if end := bytes.IndexAny(rest, "&\r\n"); end >= 0 {
				rest = rest[:end]
			}
			if id, err := url.QueryUnescape(string(rest)); err == nil && id != "" {
				s.id = id
				s.onID(id)
			}
		}
	}
	return s.ResponseWriter.Write(p)
}

// Flush passes on the flushes SSE depends on.
func (s *sseSniffer) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *sseSniffer) Unwrap() http.ResponseWriter { return s.ResponseWriter }
