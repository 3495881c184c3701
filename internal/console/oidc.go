package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// OIDC is the JWT issuer's OpenID Connect sign-in for the console, as configured
// (auth.jwt.oidc). The console runs the authorization code flow with PKCE (S256) and a state
// bound to the browser by a cookie; the access token it obtains must be one the gateway
// accepts from MCP clients (Source.Authorize), and is kept like a key entered in the form.
type OIDC struct {
	Issuer       string
	ClientID     string
	ClientSecret string // "" for a public client
	Scopes       []string
	// RedirectURL is the callback as the browser reaches it; "" derives it from the request.
	RedirectURL string
}

// OIDCSource is implemented by a Source whose config may turn the OIDC sign-in on.
type OIDCSource interface {
	// OIDC returns the sign-in's settings under the config serving now, and whether it is on.
	OIDC() (OIDC, bool)
}

const (
	// oidcCookie binds a pending sign-in to the browser that started it. SameSite=Lax: the
	// issuer's redirect back is a cross-site navigation, on which a Strict cookie is not sent.
	oidcCookie      = "manifold_console_oidc"
	oidcPath        = "/ui/oidc"
	oidcCallback    = oidcPath + "/callback"
	oidcPendingTTL  = 10 * time.Minute
	oidcMaxPending  = 1000
	oidcDiscoverTTL = time.Hour
	oidcMaxBody     = 1 << 20
)

// oidcFlow holds the sign-ins in progress and the issuers' discovered endpoints. Its methods
// are safe for concurrent use.
type oidcFlow struct {
	client *http.Client
	now    func() time.Time

	mu         sync.Mutex
	pending    map[string]*pendingSignIn // by state
	discovered map[string]*endpoints     // by issuer
}

// pendingSignIn is one sign-in sent to the issuer.
type pendingSignIn struct {
	verifier, nonce, redirect string
	expires                   time.Time
}

// endpoints are the issuer's, from its discovery document.
type endpoints struct {
	Issuer        string `json:"issuer"`
	Authorization string `json:"authorization_endpoint"`
	Token         string `json:"token_endpoint"`
	fetched       time.Time
}

func newOIDCFlow(client *http.Client, now func() time.Time) *oidcFlow {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &oidcFlow{client: client, now: now, pending: map[string]*pendingSignIn{}, discovered: map[string]*endpoints{}}
}

// oidcSettings returns the sign-in's settings, if the Source has them on.
func (c *Console) oidcSettings() (OIDC, bool) {
	if s, ok := c.src.(OIDCSource); ok {
		return s.OIDC()
	}
	return OIDC{}, false
}

// serveOIDCStart sends the browser to the issuer to sign in.
func (c *Console) serveOIDCStart(w http.ResponseWriter, r *http.Request) {
	o, on := c.oidcSettings()
	if !on {
		http.NotFound(w, r)
		return
	}
	if !sameSite(r) {
		c.forbidden(w, true, "cross-site sign-in refused")
		return
	}
	ep, err := c.oidc.discover(r.Context(), o.Issuer)
	if err != nil {
		c.signInFailed(w, http.StatusBadGateway, "the issuer cannot be reached: "+err.Error())
		return
	}
	state, verifier, nonce := randomID(), randomID(), randomID()
	redirect := o.RedirectURL
	if redirect == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		redirect = scheme + "://" + r.Host + oidcCallback
	}
	c.oidc.add(state, &pendingSignIn{verifier: verifier, nonce: nonce, redirect: redirect, expires: c.oidc.now().Add(oidcPendingTTL)})
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: state, Path: oidcPath, MaxAge: int(oidcPendingTTL.Seconds()),
		Secure: r.TLS != nil, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	challenge := sha256.Sum256([]byte(verifier))
	scopes := o.Scopes
	if len(scopes) == 0 {
		scopes = []string{"openid"}
	}
	q := url.Values{
		"response_type": {"code"}, "client_id": {o.ClientID}, "redirect_uri": {redirect},
		"scope": {strings.Join(scopes, " ")}, "state": {state}, "nonce": {nonce},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(challenge[:])}, "code_challenge_method": {"S256"},
	}
	sep := "?"
	if strings.Contains(ep.Authorization, "?") {
		sep = "&"
	}
	// A page that moves on by itself, not a redirect: the sign-in page's form-action policy
	// ('self') would stop a redirect to the issuer.
	c.nextPage(w, nextData{Title: "Signing in", URL: ep.Authorization + sep + q.Encode(), Label: "continue at the issuer"})
}

// nextData fills a sign-in step page.
type nextData struct {
	Title, URL, Label string
}

// nextPage answers a sign-in step: a page that moves on to d.URL by itself (next.js), with
// a link for browsers without scripts.
func (c *Console) nextPage(w http.ResponseWriter, d nextData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = c.next.Execute(w, d)
}

// serveOIDCCallback takes the issuer's answer: it checks the state against the browser's
// cookie, exchanges the code (with the PKCE verifier) for tokens, and signs the operator in
// with the access token, or with the ID token (its nonce checked) if only that one is
// accepted.
func (c *Console) serveOIDCCallback(w http.ResponseWriter, r *http.Request) {
	o, on := c.oidcSettings()
	if !on {
		http.NotFound(w, r)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: oidcPath, MaxAge: -1,
		Secure: r.TLS != nil, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	q := r.URL.Query()
	ck, err := r.Cookie(oidcCookie)
	state := q.Get("state")
	if err != nil || state == "" || ck.Value != state {
		c.signInFailed(w, http.StatusBadRequest, "the sign-in was not started in this browser, or took too long: start again")
		return
	}
	p, ok := c.oidc.take(state)
	if !ok {
		c.signInFailed(w, http.StatusBadRequest, "the sign-in expired or was already used: start again")
		return
	}
	if e := q.Get("error"); e != "" {
		c.signInFailed(w, http.StatusUnauthorized, "the issuer refused the sign-in: "+e)
		return
	}
	tokens, err := c.oidc.exchange(r.Context(), o, p, q.Get("code"))
	if err != nil {
		c.signInFailed(w, http.StatusUnauthorized, "the issuer's tokens could not be obtained: "+err.Error())
		return
	}
	token, err := c.acceptedToken(r.Context(), tokens, p.nonce)
	switch {
	case errors.Is(err, ErrForbidden):
		c.forbidden(w, true, "that principal is not an operator (auth.operators)")
		return
	case err != nil:
		c.signInFailed(w, http.StatusUnauthorized, "the issuer's token is not accepted by the gateway (auth.jwt)")
		return
	}
	c.startSession(w, r, token)
	// Not a redirect: at the end of the issuer's cross-site redirect chain the browser would
	// not send the new SameSite=Strict cookie; on a navigation this page starts, it does.
	c.nextPage(w, nextData{Title: "Signed in", URL: "/ui/", Label: "open the console"})
}

// tokenAnswer is the token endpoint's answer.
type tokenAnswer struct {
	AccessToken string `json:"access_token"`
	IDToken     string `json:"id_token"`
	Error       string `json:"error"`
}

// acceptedToken returns the token to keep: the access token if the Source accepts it, else
// the ID token if it carries the nonce sent and the Source accepts it.
func (c *Console) acceptedToken(ctx context.Context, t *tokenAnswer, nonce string) (string, error) {
	_, err := c.src.Authorize(ctx, t.AccessToken)
	if err == nil || errors.Is(err, ErrForbidden) || t.IDToken == "" {
		return t.AccessToken, err
	}
	if _, err := c.src.Authorize(ctx, t.IDToken); err != nil {
		return "", err
	}
	if idTokenNonce(t.IDToken) != nonce { // read after the signature was verified
		return "", fmt.Errorf("%w: the ID token's nonce is not the one sent", ErrUnauthenticated)
	}
	return t.IDToken, nil
}

// idTokenNonce returns the "nonce" claim of a JWT whose signature was verified, or "".
func idTokenNonce(jwt string) string {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Nonce string `json:"nonce"`
	}
	_ = json.Unmarshal(payload, &claims)
	return claims.Nonce
}

// discover returns the issuer's endpoints, from its discovery document (cached for an hour),
// whose "issuer" must be the one configured.
func (f *oidcFlow) discover(ctx context.Context, issuer string) (*endpoints, error) {
	f.mu.Lock()
	ep := f.discovered[issuer]
	f.mu.Unlock()
	if ep != nil && f.now().Sub(ep.fetched) < oidcDiscoverTTL {
		return ep, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return nil, err
	}
	ep = &endpoints{}
	if err := f.doJSON(req, ep); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if ep.Issuer != issuer || ep.Authorization == "" || ep.Token == "" {
		return nil, errors.New("discovery: the document is for another issuer, or lacks the endpoints")
	}
	ep.fetched = f.now()
	f.mu.Lock()
	f.discovered[issuer] = ep
	f.mu.Unlock()
	return ep, nil
}

// exchange trades code for tokens at the issuer's token endpoint.
func (f *oidcFlow) exchange(ctx context.Context, o OIDC, p *pendingSignIn, code string) (*tokenAnswer, error) {
	if code == "" {
		return nil, errors.New("no code")
	}
	ep, err := f.discover(ctx, o.Issuer)
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {p.redirect},
		"code_verifier": {p.verifier}, "client_id": {o.ClientID}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.Token, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if o.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(o.ClientID), url.QueryEscape(o.ClientSecret))
	}
	var t tokenAnswer
	if err := f.doJSON(req, &t); err != nil {
		return nil, err
	}
	if t.AccessToken == "" {
		return nil, errors.New("no access token")
	}
	return &t, nil
}

// doJSON sends req and decodes a 200 answer's JSON into v.
func (f *oidcFlow) doJSON(req *http.Request, v any) error {
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, oidcMaxBody))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		return fmt.Errorf("%s answered %d %s", req.URL.Host, resp.StatusCode, e.Error)
	}
	return json.Unmarshal(body, v)
}

// add keeps a pending sign-in, dropping expired ones and, at the limit, the one expiring
// first.
func (f *oidcFlow) add(state string, p *pendingSignIn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	var first string
	for s, q := range f.pending {
		if !now.Before(q.expires) {
			delete(f.pending, s)
		} else if first == "" || q.expires.Before(f.pending[first].expires) {
			first = s
		}
	}
	if len(f.pending) >= oidcMaxPending {
		delete(f.pending, first)
	}
	f.pending[state] = p
}

// take removes and returns the pending sign-in of state, unless expired.
func (f *oidcFlow) take(state string) (*pendingSignIn, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pending[state]
	delete(f.pending, state)
	return p, ok && f.now().Before(p.expires)
}

// randomID returns 256 random bits, base64url.
func randomID() string {
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(raw[:])
}
