package upstream

import (
	"context"
	"net/http"
)

// Credential supplies the bearer token of an http or sse upstream's requests: the server's
// `auth` (docs/architecture.md, Upstream credentials). Its methods are called for every HTTP
// request to the upstream and must be safe for concurrent use; AccessToken may make a token
// request (bounded by ctx) and should answer from its cache otherwise.
type Credential interface {
	// AccessToken returns the token to send as "Authorization: Bearer".
	AccessToken(ctx context.Context) (string, error)
	// Reject is told a token the upstream answered 401 to, so that it is not sent again.
	Reject(token string)
}

// Authorizer is a Credential that can answer the upstream's 401, or 403, itself
// (`auth.type: oauth`): Authorize returns an error (a sign-in is needed: the request fails
// with it) or nil (the answer passes as it is). It must not read or close resp's body.
type Authorizer interface {
	Credential
	Authorize(ctx context.Context, req *http.Request, resp *http.Response) error
}

// credentialTransport sets the Authorization header of every request from cred, after the
// configured headers (it replaces a static Authorization), and tells cred about a 401.
type credentialTransport struct {
	base http.RoundTripper
	cred Credential
}

func (t *credentialTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.cred.AccessToken(req.Context())
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	req = req.Clone(req.Context())
	if tok != "" { // none yet: the upstream's 401 says how to get one (Authorizer)
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode == http.StatusUnauthorized && tok != "" {
		t.cred.Reject(tok)
	}
	if a, ok := t.cred.(Authorizer); ok && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		if aerr := a.Authorize(req.Context(), req, resp); aerr != nil {
			resp.Body.Close()
			return nil, aerr
		}
	}
	return resp, nil
}

// CloseIdleConnections closes the base transport's idle connections.
func (t *credentialTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
