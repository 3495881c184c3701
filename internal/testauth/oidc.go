package testauth

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// OpenID Connect, for tests of the gateway's sign-in at its JWT issuer (auth.jwt.oidc): with
// JWTSecret set, the server also serves /.well-known/openid-configuration, and an
// authorization code grant whose scope holds "openid" earns a JWT access token (HS256 with
// JWTSecret; iss Issuer, sub the user who signed in, aud JWTAudience) that a gateway
// configured with the same secret accepts from its clients.

// serveOIDC serves the OpenID discovery document; false when r is not for it or OIDC is off.
func (s *Server) serveOIDC(w http.ResponseWriter, r *http.Request) bool {
	if s.JWTSecret == nil || r.Method != http.MethodGet || r.URL.Path != "/.well-known/openid-configuration" {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"issuer": s.Issuer, "authorization_endpoint": s.Issuer + "/authorize", "token_endpoint": s.Issuer + "/token",
		"response_types_supported": []string{"code"}, "subject_types_supported": []string{"public"},
		"id_token_signing_alg_values_supported": []string{"HS256"}, "code_challenge_methods_supported": []string{"S256"},
	})
	return true
}

// openID reports whether a grant of scope earns a JWT.
func (s *Server) openID(scope string) bool {
	return s.JWTSecret != nil && slices.Contains(strings.Fields(scope), "openid")
}

// signJWT returns the JWT access token of sub, valid for ttl.
func (s *Server) signJWT(sub string, ttl time.Duration) (string, error) {
	now := s.now()
	return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": s.Issuer, "sub": sub, "aud": s.JWTAudience, "iat": now.Unix(), "exp": now.Add(ttl).Unix(),
	}).SignedString(s.JWTSecret)
}

// Register adds a client, safely while the server serves.
func (s *Server) Register(id string, c Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Clients == nil {
		s.Clients = map[string]Client{}
	}
	s.Clients[id] = c
}
