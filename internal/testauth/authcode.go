package testauth

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// The authorization code grant, for tests of `auth.type: oauth`: authorization server
// metadata (RFC 8414), dynamic registration of public clients (RFC 7591), GET /authorize
// with PKCE S256 — whose "browser sign-in" is the query parameter user, one of Users —,
// the authorization_code grant at /token, and protected resource metadata (RFC 9728) in
// front of the protected MCP server.

// GrantAuthorizationCode is the authorization code grant type.
const GrantAuthorizationCode = "authorization_code"

// codeGrant is an issued authorization code.
type codeGrant struct {
	clientID, redirectURI, challenge, resource, scope, user string
	expiry                                                  time.Time
}

// handleAuthCode serves the authorization code endpoints; false when r is none of them.
func (s *Server) handleAuthCode(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/.well-known/oauth-authorization-server":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": s.Issuer, "authorization_endpoint": s.Issuer + "/authorize", "token_endpoint": s.Issuer + "/token",
			"registration_endpoint": s.Issuer + "/register", "response_types_supported": []string{"code"},
			"grant_types_supported":                 []string{GrantAuthorizationCode, GrantRefreshToken},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none", "client_secret_basic", "client_secret_post"},
		})
	case r.Method == http.MethodPost && r.URL.Path == "/register":
		var meta oauthex.ClientRegistrationMetadata
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&meta); err != nil || len(meta.RedirectURIs) == 0 {
			oauthError(w, http.StatusBadRequest, "invalid_client_metadata")
			return true
		}
		id := randomToken("client")
		s.mu.Lock()
		if s.Clients == nil {
			s.Clients = map[string]Client{}
		}
		s.Clients[id] = Client{Public: true, RedirectURIs: meta.RedirectURIs}
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"client_id": id, "redirect_uris": meta.RedirectURIs, "token_endpoint_auth_method": "none"})
	case r.Method == http.MethodGet && r.URL.Path == "/authorize":
		q := r.URL.Query()
		s.mu.Lock()
		c, known := s.Clients[q.Get("client_id")]
		s.mu.Unlock()
		ok := known && q.Get("response_type") == "code" && q.Get("code_challenge_method") == "S256" && q.Get("code_challenge") != ""
		ok = ok && contains(c.RedirectURIs, q.Get("redirect_uri")) && contains(s.Users, q.Get("user"))
		if !ok {
			http.Error(w, "bad authorization request (or unknown user)", http.StatusBadRequest)
			return true
		}
		code := randomToken("code")
		s.mu.Lock()
		if s.codes == nil {
			s.codes = map[string]codeGrant{}
		}
		s.codes[code] = codeGrant{clientID: q.Get("client_id"), redirectURI: q.Get("redirect_uri"), challenge: q.Get("code_challenge"),
			resource: q.Get("resource"), scope: q.Get("scope"), user: q.Get("user"), expiry: s.now().Add(time.Minute)}
		s.mu.Unlock()
		to, _ := url.Parse(q.Get("redirect_uri"))
		v := to.Query()
		v.Set("code", code)
		v.Set("state", q.Get("state"))
		to.RawQuery = v.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	default:
		return false
	}
	return true
}

// exchangeCode checks an authorization_code grant (form already parsed) and returns what
// the token it earns is for.
func (s *Server) exchangeCode(clientID string, f url.Values) (Issued, bool) {
	s.mu.Lock()
	g, ok := s.codes[f.Get("code")]
	delete(s.codes, f.Get("code")) // single use
	s.mu.Unlock()
	sum := sha256.Sum256([]byte(f.Get("code_verifier")))
	if !ok || g.clientID != clientID || g.redirectURI != f.Get("redirect_uri") || !s.now().Before(g.expiry) ||
		base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
		return Issued{}, false
	}
	return Issued{Principal: g.user, ClientID: clientID, Resource: g.resource, Scope: g.scope}, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s && s != "" {
			return true
		}
	}
	return false
}

// ProtectedWithMetadata is Protected behind its protected resource metadata: a 401 names
// the metadata, which names this server (Issuer) as the authorization server.
func (s *Server) ProtectedWithMetadata(resourceURL, audience string) http.Handler {
	prm := &oauthex.ProtectedResourceMetadata{Resource: resourceURL, AuthorizationServers: []string{s.Issuer}}
	mux := http.NewServeMux()
	u, _ := url.Parse(resourceURL)
	path := "/.well-known/oauth-protected-resource" + u.Path
	mux.Handle(path, auth.ProtectedResourceMetadataHandler(prm))
	u.Path = path
	mux.Handle("/", s.protected(audience, &auth.RequireBearerTokenOptions{ResourceMetadataURL: u.String()}))
	return mux
}

// StartAuthCode serves s as an authorization server with the authorization code grant for
// users, and its protected MCP server with protected resource metadata, on loopback test
// listeners (any audience). It returns the MCP server's URL and a function closing both.
func StartAuthCode(s *Server, users ...string) (mcpURL string, stop func()) {
	as := httptest.NewServer(s)
	s.Issuer, s.TokenURL, s.Users = as.URL, as.URL+"/token", users
	up := httptest.NewUnstartedServer(nil)
	mcpURL = "http://" + up.Listener.Addr().String() + "/mcp"
	up.Config.Handler = s.ProtectedWithMetadata(mcpURL, "")
	up.Start()
	return mcpURL, func() { up.Close(); as.Close() }
}
