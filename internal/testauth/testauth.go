// Package testauth is a small OAuth authorization server and protected MCP server for tests
// of the gateway's upstream credentials: the client credentials grant (client_secret_basic,
// client_secret_post, private_key_jwt), the RFC 8693 token exchange and the refresh token
// grant, with short-lived opaque tokens; and an MCP server whose "whoami" tool answers the
// principal of the bearer token it was called with, recording every Authorization header it
// saw. It serves tests only: tokens are kept in memory and nothing is persisted.
package testauth

import (
	"context"
	"crypto"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Grant types the server accepts.
const (
	GrantClientCredentials = "client_credentials"
	GrantTokenExchange     = "urn:ietf:params:oauth:grant-type:token-exchange"
	GrantRefreshToken      = "refresh_token"
)

// Client is a registered client: Secret for client_secret_basic/post, Key (a public key) for
// private_key_jwt.
type Client struct {
	Secret string
	Key    crypto.PublicKey
	// Public clients (dynamically registered) authenticate with their client_id alone and
	// may use only their RedirectURIs.
	Public       bool
	RedirectURIs []string
}

// Issued is what the server knows of an access token it issued.
type Issued struct {
	Principal string // the exchanged subject, or "client:<id>" for client credentials
	ClientID  string
	Audience  string
	Resource  string
	Scope     string // of an authorization code grant
	Expiry    time.Time
}

// Request is one token request as the server saw it, without its secrets.
type Request struct {
	Grant      string
	ClientAuth string // client_secret_basic, client_secret_post or private_key_jwt
	Audience   string
	Resource   string
	Scope      string
}

// Server is the authorization server. Set its fields before serving.
type Server struct {
	// Clients are the registered clients by id.
	Clients map[string]Client
	// TokenURL is the token endpoint's URL as clients reach it (the audience of client
	// assertions); set it once the listener is known.
	TokenURL string
	// TTL is the lifetime of access tokens; default one hour.
	TTL time.Duration
	// Subject verifies an exchanged subject token and returns its principal.
	Subject func(token string) (string, error)
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Issuer is the server's URL (authorization code grant, authcode.go); Users are the
	// people who can sign in there.
	Issuer string
	Users  []string
	// JWTSecret, when set, makes the server an OpenID provider too (oidc.go): code grants
	// with scope "openid" earn HS256 JWTs with audience JWTAudience.
	JWTSecret   []byte
	JWTAudience string

	mu       sync.Mutex
	issued   map[string]Issued
	refresh  map[string]Issued
	requests []Request
	seen     []string // Authorization headers the protected resource saw
	codes    map[string]codeGrant
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Requests returns the token requests served so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Seen returns the Authorization headers the protected MCP server received.
func (s *Server) Seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// Lookup returns what the server knows of access token tok.
func (s *Server) Lookup(tok string) (Issued, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.issued[tok]
	return i, ok
}

// ServeHTTP serves POST /token.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.handleAuthCode(w, r) || s.serveOIDC(w, r) {
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/token" {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	id, method, ok := s.authenticate(r)
	if !ok {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	f := r.PostForm
	req := Request{Grant: f.Get("grant_type"), ClientAuth: method, Audience: f.Get("audience"), Resource: f.Get("resource"), Scope: f.Get("scope")}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	iss := Issued{ClientID: id, Audience: req.Audience, Resource: req.Resource}
	switch req.Grant {
	case GrantAuthorizationCode:
		var ok bool
		if iss, ok = s.exchangeCode(id, f); !ok {
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
	case GrantClientCredentials:
		iss.Principal = "client:" + id
	case GrantTokenExchange:
		if s.Subject == nil || f.Get("subject_token_type") == "" {
			oauthError(w, http.StatusBadRequest, "invalid_request")
			return
		}
		p, err := s.Subject(f.Get("subject_token"))
		if err != nil || req.Audience == "" {
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		iss.Principal = p
	case GrantRefreshToken:
		s.mu.Lock()
		old, ok := s.refresh[f.Get("refresh_token")]
		delete(s.refresh, f.Get("refresh_token")) // rotated
		s.mu.Unlock()
		if !ok || old.ClientID != id {
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		iss.Principal, iss.Audience, iss.Resource = old.Principal, old.Audience, old.Resource
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	ttl := s.TTL
	if ttl == 0 {
		ttl = time.Hour
	}
	iss.Expiry = s.now().Add(ttl)
	at, rt := randomToken("at"), randomToken("rt")
	if req.Grant == GrantAuthorizationCode && s.openID(iss.Scope) {
		var err error
		if at, err = s.signJWT(iss.Principal, ttl); err != nil {
			oauthError(w, http.StatusInternalServerError, "server_error")
			return
		}
	}
	s.mu.Lock()
	if s.issued == nil {
		s.issued, s.refresh = map[string]Issued{}, map[string]Issued{}
	}
	s.issued[at] = iss
	s.refresh[rt] = iss
	s.mu.Unlock()
	body := map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": int(ttl / time.Second)}
	if req.Grant != GrantClientCredentials {
		body["refresh_token"] = rt
	}
	if req.Grant == GrantTokenExchange {
		body["issued_token_type"] = "urn:ietf:params:oauth:token-type:access_token"
	}
	if req.Scope != "" {
		body["scope"] = req.Scope
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(body)
}

// authenticate checks the client's credentials: HTTP Basic, client_secret in the body, or a
// client assertion signed with its key.
func (s *Server) authenticate(r *http.Request) (id, method string, ok bool) {
	if u, p, basic := r.BasicAuth(); basic {
		s.mu.Lock()
		c, known := s.Clients[u]
		s.mu.Unlock()
		return u, "client_secret_basic", known && c.Secret != "" && c.Secret == p
	}
	f := r.PostForm
	if a := f.Get("client_assertion"); a != "" {
		if f.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
			return "", "", false
		}
		var claims jwt.RegisteredClaims
		_, err := jwt.ParseWithClaims(a, &claims, func(t *jwt.Token) (any, error) {
			sub, _ := t.Claims.GetSubject()
			c, known := s.Clients[sub]
			if !known || c.Key == nil {
				return nil, errors.New("unknown client")
			}
			return c.Key, nil
		}, jwt.WithAudience(s.TokenURL), jwt.WithIssuedAt(), jwt.WithExpirationRequired(), jwt.WithTimeFunc(s.now))
		if err != nil || claims.Issuer != claims.Subject || (f.Get("client_id") != "" && f.Get("client_id") != claims.Subject) {
			return "", "", false
		}
		return claims.Subject, "private_key_jwt", true
	}
	id = f.Get("client_id")
	s.mu.Lock()
	c, known := s.Clients[id]
	s.mu.Unlock()
	if known && c.Public && f.Get("client_secret") == "" {
		return id, "none", true
	}
	return id, "client_secret_post", known && c.Secret != "" && c.Secret == f.Get("client_secret")
}

func oauthError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

func randomToken(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// Protected returns an MCP server (streamable HTTP) that accepts only this server's unexpired
// access tokens whose audience is audience (any audience when empty). Its tool "whoami"
// answers the token's principal; every Authorization header it receives is recorded (Seen).
func (s *Server) Protected(audience string) http.Handler { return s.protected(audience, nil) }

func (s *Server) protected(audience string, opts *auth.RequireBearerTokenOptions) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "testauth-protected", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "the principal of the bearer token"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			who := ""
			if ti := req.Extra.TokenInfo; ti != nil {
				who = ti.UserID
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: who}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		i, ok := s.Lookup(tok)
		if !ok || !s.now().Before(i.Expiry) || (audience != "" && i.Audience != audience && i.Resource != audience) {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: i.Principal, Expiration: i.Expiry}, nil
	}
	protected := auth.RequireBearerToken(verify, opts)(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen = append(s.seen, r.Header.Get("Authorization"))
		s.mu.Unlock()
		protected.ServeHTTP(w, r)
	})
}

// CountGrants returns how many token requests used grant.
func (s *Server) CountGrants(grant string) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Grant == grant {
			n++
		}
	}
	return n
}

// HMACSubject returns a Subject verifier of JWTs signed with the HMAC secret (any issuer and
// audience): the principal is their "sub".
func HMACSubject(secret []byte) func(string) (string, error) {
	return func(tok string) (string, error) {
		var c jwt.RegisteredClaims
		if _, err := jwt.ParseWithClaims(tok, &c, func(*jwt.Token) (any, error) { return secret, nil }); err != nil {
			return "", errors.New("bad subject token")
		}
		return c.Subject, nil
	}
}

// Start serves s (setting TokenURL) and its protected MCP server for audience on loopback
// test listeners. It returns the MCP server's URL and a function that closes both; close
// them after the clients of the MCP server, whose open streams it waits for.
func Start(s *Server, audience string) (mcpURL string, stop func()) {
	as := httptest.NewServer(s)
	s.TokenURL = as.URL + "/token"
	up := httptest.NewServer(s.Protected(audience))
	return up.URL, func() { up.Close(); as.Close() }
}
