// Package oidctest is an OpenID provider for tests of the OIDC sign-in (internal/oidc): it
// signs everyone in at once. Its authorization endpoint redirects back with a code, and its
// token endpoint trades the code, with the PKCE verifier that matches the challenge and the
// client's credentials (HTTP Basic), for the access token set with SetToken.
package oidctest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// Issuer is the test OpenID provider, served on a loopback httptest server (URL is its
// issuer) closed when the test ends.
type Issuer struct {
	*httptest.Server
	clientID, secret string

	mu    sync.Mutex
	token string            // the access token it issues
	codes map[string]string // code → code_challenge
	asked url.Values        // the last authorization request
}

// New serves an issuer whose one client is clientID with secret, issuing token.
func New(t testing.TB, clientID, secret, token string) *Issuer {
	f := &Issuer{clientID: clientID, secret: secret, token: token, codes: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": f.URL, "authorization_endpoint": f.URL + "/authorize", "token_endpoint": f.URL + "/token"})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		f.mu.Lock()
		f.asked = q
		code := fmt.Sprint("code-", len(f.codes))
		f.codes[code] = q.Get("code_challenge")
		f.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		id, secret, _ := r.BasicAuth()
		f.mu.Lock()
		challenge, ok := f.codes[r.PostFormValue("code")]
		delete(f.codes, r.PostFormValue("code"))
		token := f.token
		f.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
		if !ok || id != f.clientID || secret != f.secret || base64.RawURLEncoding.EncodeToString(sum[:]) != challenge ||
			r.PostFormValue("grant_type") != "authorization_code" {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"access_token": token, "token_type": "Bearer"})
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// SetToken sets the access token issued from now on: who the next browser signs in as.
func (f *Issuer) SetToken(token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.token = token
}

// Asked returns the last authorization request's parameters.
func (f *Issuer) Asked() url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked
}
