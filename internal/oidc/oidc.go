// Package oidc is the OpenID Connect sign-in at the JWT issuer (auth.jwt.oidc) that both the
// operator console (internal/console) and the gateway's OAuth start page (gateway/
// oauthidentity.go) run: discovery of the issuer's endpoints, the authorization code flow with
// PKCE (S256), a state kept in a bounded pending map with a TTL, and the code exchange. What a
// caller does with the tokens (check them as a client's, start a session) is its own.
//
// The package knows nothing of cookies or pages: the caller binds a state to the browser that
// started the sign-in (a cookie holding it) and checks it on the callback with SameState.
package oidc

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
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

// Settings are the client's settings at the issuer, as configured.
type Settings struct {
	Issuer       string
	ClientID     string
	ClientSecret string // "" for a public client
	Scopes       []string
}

// Defaults and bounds of a Flow.
const (
	// PendingTTL bounds a sign-in between the redirect to the issuer and its callback.
	PendingTTL = 10 * time.Minute
	// MaxPending bounds the sign-ins in progress; at the limit the one expiring first is
	// dropped. A sign-in replaces the one in progress with the same Data, so that one caller
	// beginning again and again keeps one.
	MaxPending  = 1000
	discoverTTL = time.Hour
	maxBody     = 1 << 20
)

// Flow holds the sign-ins in progress and the issuers' discovered endpoints. Its methods are
// safe for concurrent use.
type Flow struct {
	client *http.Client
	now    func() time.Time

	mu         sync.Mutex
	pending    map[string]*Pending   // by state
	byData     map[string]string     // the state of each Data's sign-in, but ""
	discovered map[string]*Endpoints // by issuer
}

// Pending is one sign-in sent to the issuer. Its values are secrets: never log them.
type Pending struct {
	Verifier, Nonce string
	// Redirect is the redirect_uri sent, repeated at the token endpoint.
	Redirect string
	// Data is the caller's, kept with the sign-in (the gateway's start link id): a sign-in
	// begun with the Data of one in progress replaces it, unless Data is "".
	Data    string
	Expires time.Time
}

// Endpoints are the issuer's, from its discovery document.
type Endpoints struct {
	Issuer        string `json:"issuer"`
	Authorization string `json:"authorization_endpoint"`
	Token         string `json:"token_endpoint"`
	fetched       time.Time
}

// Tokens is the token endpoint's answer.
type Tokens struct {
	AccessToken string `json:"access_token"`
	IDToken     string `json:"id_token"`
	Error       string `json:"error"`
}

// NewFlow returns a Flow talking to issuers with client (nil: a client with a 10s timeout),
// on the clock now (nil: time.Now).
func NewFlow(client *http.Client, now func() time.Time) *Flow {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	if now == nil {
		now = time.Now
	}
	return &Flow{client: client, now: now, pending: map[string]*Pending{}, byData: map[string]string{}, discovered: map[string]*Endpoints{}}
}

// Begin starts a sign-in at the issuer of s: it keeps a pending sign-in (fresh state, PKCE
// verifier and nonce) with data, in place of any in progress with the same data, redirecting
// to redirect, and returns the issuer's authorization URL the browser goes to and the state,
// which the caller binds to the browser.
func (f *Flow) Begin(ctx context.Context, s Settings, redirect, data string) (authURL, state string, err error) {
	return f.BeginNamed(ctx, s, redirect, data, nil)
}

// BeginNamed is Begin with the state sent to the issuer made by name from the pending
// sign-in's key (nil: the key itself), so that the state can say more than the key, such
// as which process holds the sign-in; Take wants the key back. A name that fails or is
// empty fails BeginNamed, which then keeps nothing.
func (f *Flow) BeginNamed(ctx context.Context, s Settings, redirect, data string, name func(key string) (string, error)) (authURL, state string, err error) {
	ep, err := f.Discover(ctx, s.Issuer)
	if err != nil {
		return "", "", err
	}
	key := RandomID()
	state = key
	if name != nil {
		if state, err = name(key); err != nil {
			return "", "", fmt.Errorf("naming the state: %w", err)
		}
		if state == "" { // no callback's state would ever match it
			return "", "", errors.New("naming the state: empty")
		}
	}
	p := &Pending{Verifier: RandomID(), Nonce: RandomID(), Redirect: redirect, Data: data, Expires: f.now().Add(PendingTTL)}
	f.add(key, p)
	challenge := sha256.Sum256([]byte(p.Verifier))
	scopes := s.Scopes
	if len(scopes) == 0 {
		scopes = []string{"openid"}
	}
	q := url.Values{
		"response_type": {"code"}, "client_id": {s.ClientID}, "redirect_uri": {redirect},
		"scope": {strings.Join(scopes, " ")}, "state": {state}, "nonce": {p.Nonce},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(challenge[:])}, "code_challenge_method": {"S256"},
	}
	sep := "?"
	if strings.Contains(ep.Authorization, "?") {
		sep = "&"
	}
	return ep.Authorization + sep + q.Encode(), state, nil
}

// SameState reports, in constant time, whether the state of a callback is the one bound to
// the browser (its cookie's value); an empty state never is.
func SameState(callback, bound string) bool {
	return callback != "" && subtle.ConstantTimeCompare([]byte(callback), []byte(bound)) == 1
}

// Discover returns the issuer's endpoints, from its discovery document (cached for an hour),
// whose "issuer" must be the one configured.
func (f *Flow) Discover(ctx context.Context, issuer string) (*Endpoints, error) {
	f.mu.Lock()
	ep := f.discovered[issuer]
	f.mu.Unlock()
	if ep != nil && f.now().Sub(ep.fetched) < discoverTTL {
		return ep, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return nil, err
	}
	ep = &Endpoints{}
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

// Exchange trades code for tokens at the issuer's token endpoint, with p's verifier.
func (f *Flow) Exchange(ctx context.Context, s Settings, p *Pending, code string) (*Tokens, error) {
	if code == "" {
		return nil, errors.New("no code")
	}
	ep, err := f.Discover(ctx, s.Issuer)
	if err != nil {
		return nil, err
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {p.Redirect},
		"code_verifier": {p.Verifier}, "client_id": {s.ClientID}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.Token, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if s.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(s.ClientID), url.QueryEscape(s.ClientSecret))
	}
	var t Tokens
	if err := f.doJSON(req, &t); err != nil {
		return nil, err
	}
	if t.AccessToken == "" {
		return nil, errors.New("no access token")
	}
	return &t, nil
}

// doJSON sends req and decodes a 200 answer's JSON into v.
func (f *Flow) doJSON(req *http.Request, v any) error {
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
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

// add keeps a pending sign-in in place of the one with the same Data, dropping expired ones
// and, at the limit, the one expiring first.
func (f *Flow) add(state string, p *Pending) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.byData[p.Data]; ok {
		f.removeLocked(old)
	}
	now := f.now()
	var first string
	for s, q := range f.pending {
		if !now.Before(q.Expires) {
			f.removeLocked(s)
		} else if first == "" || q.Expires.Before(f.pending[first].Expires) {
			first = s
		}
	}
	if len(f.pending) >= MaxPending {
		f.removeLocked(first)
	}
	f.pending[state] = p
	if p.Data != "" {
		f.byData[p.Data] = state
	}
}

// removeLocked drops the pending sign-in of state; f.mu is held.
func (f *Flow) removeLocked(state string) {
	p, ok := f.pending[state]
	if !ok {
		return
	}
	delete(f.pending, state)
	if f.byData[p.Data] == state {
		delete(f.byData, p.Data)
	}
}

// Take removes and returns the pending sign-in of state, unless expired: a state is good for
// one callback only.
func (f *Flow) Take(state string) (*Pending, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pending[state]
	f.removeLocked(state)
	return p, ok && f.now().Before(p.Expires)
}

// Len returns the number of sign-ins in progress.
func (f *Flow) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

// IDTokenNonce returns the "nonce" claim of a JWT whose signature was verified, or "".
func IDTokenNonce(jwt string) string {
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

// AcceptedToken returns the token to keep from t: the access token if accept takes it, else
// the ID token if accept takes it and it carries nonce. accept checks a token as a client's
// and returns its error; a refusal of the access token that final says is final (such as
// "not an operator") is returned at once.
func AcceptedToken(ctx context.Context, t *Tokens, nonce string, accept func(ctx context.Context, token string) error, final func(error) bool) (string, error) {
	err := accept(ctx, t.AccessToken)
	if err == nil || (final != nil && final(err)) || t.IDToken == "" {
		return t.AccessToken, err
	}
	if err := accept(ctx, t.IDToken); err != nil {
		return "", err
	}
	if IDTokenNonce(t.IDToken) != nonce { // read after the signature was verified
		return "", ErrNonce
	}
	return t.IDToken, nil
}

// ErrNonce: the ID token's nonce is not the one sent.
var ErrNonce = errors.New("the ID token's nonce is not the one sent")

// RandomID returns 256 random bits, base64url.
func RandomID() string {
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(raw[:])
}
