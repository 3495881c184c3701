package upcred

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// OAuth (`auth.type: oauth`; docs/architecture.md, Upstream credentials): the gateway is an
// OAuth 2.1 client of one upstream for each principal. The authorization code flow itself —
// discovery from the upstream's 401 (protected resource metadata, authorization server
// metadata and the 2025-03-26 fallbacks), client registration (Client ID Metadata Document,
// pre-registered client, dynamic registration), scopes from WWW-Authenticate or
// scopes_supported and their union on step-up, PKCE S256, the resource parameter, the RFC
// 9207 issuer check and the token request (golang.org/x/oauth2) — is the go-sdk's
// auth.AuthorizationCodeHandler, one per principal. What this file adds: the code is not
// fetched by the process but by the principal's browser, through the gateway's start page
// and callback, so a flow waits (at most ConsentTTL, or until the principal opens a newer
// start link) for Callback; tokens, refreshed ones included, are kept in the token store per
// principal and server.

// ConsentTTL bounds a sign-in: its start link and the flow waiting for the callback.
const ConsentTTL = 10 * time.Minute

// maxPendingConsents bounds the sign-ins in progress at once, per server: those waiting
// for their start link to be opened and those waiting for their callback.
const maxPendingConsents = 1024

// ErrConsentUnknown: a start link or callback state that is unknown, used or expired.
var ErrConsentUnknown = errors.New("unknown, used or expired sign-in link")

// ConsentRequiredError says that a principal must sign in at the upstream's authorization
// server before the request can succeed: URL is the gateway's start page for it.
type ConsentRequiredError struct {
	Server    string
	Principal string
	URL       string
	ID        string // the sign-in's id, the elicitation id of a URL elicitation
}

// Error does not carry the link (errors are logged): the answer to the client does.
func (e *ConsentRequiredError) Error() string {
	return fmt.Sprintf("upstream %q: principal %q has not signed in", e.Server, e.Principal)
}

// OAuthLinks are the gateway's addresses a sign-in goes through.
type OAuthLinks interface {
	// StartURL is the link for the sign-in id, to the gateway's start page.
	StartURL(id string) string
	// RedirectURL is the gateway's callback, the redirect_uri registered with the
	// authorization server.
	RedirectURL() string
}

// OAuth is one server's authorization code flow, for every principal.
type OAuth struct {
	server   string
	cfg      config.UpstreamAuth
	secret   string
	store    Store
	links    OAuthLinks
	hc       *http.Client
	ctx      context.Context // bounds the flows waiting for their callback
	onStored func(principal string)
	goFn     func(f func(context.Context)) bool
	names    SignInNames

	refreshMu sync.Mutex // one refresh at a time: refresh tokens may rotate
	mu        sync.Mutex
	byPrinc   map[string]*principalFlow
	pending   map[string]*pendingConsent // by start id
	byState   map[string]*pendingConsent // by OAuth state
	started   map[string]*pendingConsent // the one whose link was opened, by principal
	lastClean time.Time
}

// principalFlow is one principal's handler.
type principalFlow struct {
	h *auth.AuthorizationCodeHandler
}

// pendingConsent is a sign-in waiting for its browser step.
type pendingConsent struct {
	id, state, principal string
	flowState            string // the handler's own state, when state names it (SignInNames)
	authURL              string
	started              bool
	expires              time.Time
	code                 chan *auth.AuthorizationResult // the callback's; buffered 1
	done                 chan error                     // the flow's end; buffered 1
	cancel               context.CancelFunc             // ends the flow
}

// OAuthOptions configures NewOAuth. HTTPClient makes discovery, registration and token
// requests (default: 30 s timeout, proxy from the environment); OnStored is called after a
// principal's token was stored by a callback.
type OAuthOptions struct {
	HTTPClient *http.Client
	OnStored   func(principal string)
	// Go runs a sign-in's goroutine, which returns when ctx of NewOAuth is done or the
	// sign-in ends, and reports false when it cannot (shutting down); default: a plain
	// goroutine.
	Go func(f func(context.Context)) bool
	// Names names each sign-in in its start link and in the OAuth state sent
	// to the authorization server (cluster mode: sealed tokens naming this
	// replica); default: a random start id, and the handler's own state.
	Names SignInNames
}

// SignInNames names the sign-ins of one server. A sign-in stays in the
// memory of the process that started it; the names are what the browser
// brings back, each unique and used once.
type SignInNames interface {
	// StartID is the start link id of principal's sign-in, whose random
	// nonce is nonce, valid until expires.
	StartID(principal, nonce string, expires time.Time) (string, error)
	// State is the OAuth state of principal's sign-in, whose authorization
	// code handler sent state, valid until expires.
	State(principal, state string, expires time.Time) (string, error)
}

// NewOAuth returns the OAuth client of server. Flows
// waiting for a callback end with ctx.
func NewOAuth(ctx context.Context, server string, cfg config.UpstreamAuth, store Store, links OAuthLinks, opts *OAuthOptions) (*OAuth, error) {
	o := &OAuth{server: server, cfg: cfg, secret: cfg.ClientSecret, store: store, links: links, ctx: ctx,
		byPrinc: map[string]*principalFlow{}, pending: map[string]*pendingConsent{}, byState: map[string]*pendingConsent{},
		started: map[string]*pendingConsent{}}
	if opts != nil {
		o.hc, o.onStored, o.goFn, o.names = opts.HTTPClient, opts.OnStored, opts.Go, opts.Names
	}
	if o.goFn == nil {
		o.goFn = func(f func(context.Context)) bool { go f(ctx); return true }
	}
	if o.hc == nil {
		o.hc = &http.Client{Timeout: defaultTokenCallTimeout}
	}
	base := o.hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc := *o.hc
	hc.Transport = &legacyMetadata{base: base} // 2025-03-26 servers' metadata (legacymeta.go)
	o.hc = &hc
	if cfg.ClientSecretFile != "" {
		b, err := os.ReadFile(cfg.ClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: auth.clientSecretFile: %w", server, err)
		}
		o.secret = strings.TrimSpace(string(b))
	}
	return o, nil
}

// flow returns principal's handler, made on first use; o.mu is held.
func (o *OAuth) flowLocked(principal string) (*principalFlow, error) {
	if f := o.byPrinc[principal]; f != nil {
		return f, nil
	}
	f := &principalFlow{}
	hc := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL: o.links.RedirectURL(),
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			return o.fetch(ctx, principal, args.URL)
		},
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{o.links.RedirectURL()},
			ClientName:   "Manifold",
			GrantTypes:   []string{"authorization_code", "refresh_token"},
		}},
		Client: o.hc,
		ScopeFilter: func(discovered []string) []string {
			out := slices.Clone(discovered)
			for _, s := range o.cfg.Scopes {
				if !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
			return out
		},
		RequestRefreshToken: true,
		NewTokenSource: func(ctx context.Context, oc *oauth2.Config, t *oauth2.Token) (oauth2.TokenSource, error) {
			if err := o.put(ctx, principal, t, oc); err != nil {
				return nil, err
			}
			return &storingSource{o: o, principal: principal, oc: oc, base: oc.TokenSource(ctx, t), last: t.AccessToken}, nil
		},
	}
	if o.cfg.ClientMetadataURL != "" {
		hc.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: o.cfg.ClientMetadataURL}
	}
	if o.cfg.ClientID != "" {
		hc.PreregisteredClient = &oauthex.ClientCredentials{ClientID: o.cfg.ClientID}
		if o.secret != "" {
			hc.PreregisteredClient.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: o.secret}
		}
	}
	h, err := auth.NewAuthorizationCodeHandler(hc)
	if err != nil {
		return nil, fmt.Errorf("upstream %q: auth: %w", o.server, err)
	}
	f.h = h
	o.byPrinc[principal] = f
	return f, nil
}

// put stores t as principal's token, obtained with the client oc.
func (o *OAuth) put(ctx context.Context, principal string, t *oauth2.Token, oc *oauth2.Config) error {
	tok := &Token{AccessToken: t.AccessToken, TokenType: t.TokenType, RefreshToken: t.RefreshToken, Expiry: t.Expiry, Obtained: time.Now(),
		Client: &RefreshClient{TokenURL: oc.Endpoint.TokenURL, ClientID: oc.ClientID, ClientSecret: oc.ClientSecret, AuthStyle: int(oc.Endpoint.AuthStyle)}}
	if s, ok := t.Extra("scope").(string); ok {
		tok.Scopes = strings.Fields(s)
	}
	if err := o.store.Put(ctx, principal, o.server, tok); err != nil {
		return fmt.Errorf("upstream %q: storing the token: %w", o.server, err)
	}
	return nil
}

// storingSource refreshes through golang.org/x/oauth2 and stores each new token.
type storingSource struct {
	o         *OAuth
	principal string
	oc        *oauth2.Config
	base      oauth2.TokenSource
	mu        sync.Mutex
	last      string
}

func (s *storingSource) Token() (*oauth2.Token, error) {
	t, err := s.base.Token()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.AccessToken != s.last {
		if err := s.o.put(context.Background(), s.principal, t, s.oc); err != nil {
			return nil, err
		}
		s.last = t.AccessToken
	}
	return t, nil
}

// AccessToken returns principal's token: the stored one while valid, else one refreshed
// with its refresh token at the token endpoint and with the client stored with it (so a
// restart keeps refreshing); "" when there is none (the upstream's 401 then starts
// Authorize).
func (o *OAuth) AccessToken(ctx context.Context, principal string) (string, error) {
	t, err := o.store.Get(ctx, principal, o.server)
	if errors.Is(err, ErrNotFound) || (err == nil && t == nil) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if t.Valid(time.Now(), defaultEarlyExpiry) {
		return t.AccessToken, nil
	}
	if t.Client == nil || t.RefreshToken == "" {
		return "", nil
	}
	o.refreshMu.Lock()
	defer o.refreshMu.Unlock()
	if t2, err := o.store.Get(ctx, principal, o.server); err == nil && t2.Valid(time.Now(), defaultEarlyExpiry) {
		return t2.AccessToken, nil // refreshed meanwhile
	}
	oc := &oauth2.Config{ClientID: t.Client.ClientID, ClientSecret: t.Client.ClientSecret,
		Endpoint: oauth2.Endpoint{TokenURL: t.Client.TokenURL, AuthStyle: oauth2.AuthStyle(t.Client.AuthStyle)}}
	rctx := context.WithValue(ctx, oauth2.HTTPClient, o.hc)
	nt, err := oc.TokenSource(rctx, &oauth2.Token{RefreshToken: t.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		return "", nil // refused: sign in again
	}
	if nt.RefreshToken == "" {
		nt.RefreshToken = t.RefreshToken
	}
	if err := o.put(ctx, principal, nt, oc); err != nil {
		return "", err
	}
	return nt.AccessToken, nil
}

// Reject forgets principal's token after the upstream refused it (401).
func (o *OAuth) Reject(ctx context.Context, principal, token string) {
	if t, err := o.store.Get(ctx, principal, o.server); err == nil && t != nil && t.AccessToken == token {
		if t.RefreshToken != "" {
			t.Expiry = time.Unix(1, 0) // refresh before signing in again
			_ = o.store.Put(ctx, principal, o.server, t)
			return
		}
		_, _ = o.store.Revoke(ctx, principal, o.server)
	}
}

// Authorize answers the upstream's 401, or 403 with insufficient_scope, to a request
// made for principal: it starts a sign-in and returns the ConsentRequiredError that links
// to it (a sign-in of principal already waiting is linked again); any other 403 is no
// business of it (nil). resp's body is the caller's to close.
func (o *OAuth) Authorize(ctx context.Context, principal string, req *http.Request, resp *http.Response) error {
	if resp.StatusCode == http.StatusForbidden && !insufficientScope(resp.Header.Values("WWW-Authenticate")) {
		return nil
	}
	o.mu.Lock()
	o.cleanLocked()
	for _, p := range o.pending {
		if p.principal == principal && !p.started {
			o.mu.Unlock()
			return o.consentError(p)
		}
	}
	if len(o.byState) >= maxPendingConsents { // byState holds the pending ones too
		o.mu.Unlock()
		return fmt.Errorf("upstream %q: too many sign-ins in progress", o.server)
	}
	f, err := o.flowLocked(principal)
	o.mu.Unlock()
	if err != nil {
		return err
	}
	// The handler reads the challenge's headers and request URL only.
	r := &http.Response{StatusCode: resp.StatusCode, Header: resp.Header.Clone(), Body: io.NopCloser(strings.NewReader(""))}
	fctx, cancel := context.WithTimeout(o.ctx, ConsentTTL)
	fl := &flowRun{published: make(chan *pendingConsent, 1), cancel: cancel}
	fctx = context.WithValue(fctx, flowKey{}, fl)
	failed := make(chan error, 1)
	rq := req.Clone(fctx)
	run := func(context.Context) { // bounded by ConsentTTL and o.ctx
		defer cancel()
		err := f.h.Authorize(fctx, rq, r)
		if err == nil && o.onStored != nil {
			o.onStored(principal) // before the callback answers: a retry sees the change
		}
		if fl.p != nil {
			o.forget(fl.p) // no longer in progress
			fl.p.done <- err
		}
		failed <- err
	}
	if !o.goFn(run) {
		cancel()
		return fmt.Errorf("upstream %q: %w", o.server, context.Canceled)
	}
	select {
	case p := <-fl.published:
		return o.consentError(p)
	case err := <-failed:
		if err == nil {
			return nil
		}
		return fmt.Errorf("upstream %q: authorization: %w", o.server, err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flowRun is one run of a principal's handler: the sign-in it published.
type flowRun struct {
	published chan *pendingConsent
	cancel    context.CancelFunc // ends the run
	p         *pendingConsent    // written and read by the flow's goroutine
}

type flowKey struct{}

// fetch is the handler's AuthorizationCodeFetcher: it publishes authURL as a pending
// sign-in and waits for its callback.
func (o *OAuth) fetch(ctx context.Context, principal, authURL string) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	p := &pendingConsent{id: rand.Text() + rand.Text(), state: q.Get("state"), principal: principal, authURL: authURL,
		expires: time.Now().Add(ConsentTTL), code: make(chan *auth.AuthorizationResult, 1), done: make(chan error, 1)}
	p.flowState = p.state
	if o.names != nil {
		if p.id, err = o.names.StartID(principal, p.id, p.expires); err != nil {
			return nil, fmt.Errorf("upstream %q: naming the sign-in: %w", o.server, err)
		}
		if p.state, err = o.names.State(principal, p.flowState, p.expires); err != nil {
			return nil, fmt.Errorf("upstream %q: naming the sign-in: %w", o.server, err)
		}
		q.Set("state", p.state)
		u.RawQuery = q.Encode()
		p.authURL = u.String()
	}
	fl, _ := ctx.Value(flowKey{}).(*flowRun)
	if fl != nil {
		p.cancel = fl.cancel
	}
	o.mu.Lock()
	o.pending[p.id], o.byState[p.state] = p, p
	o.mu.Unlock()
	if fl != nil {
		fl.p = p
		fl.published <- p
	}
	select {
	case res := <-p.code:
		return res, nil
	case <-ctx.Done():
		o.forget(p)
		return nil, ctx.Err()
	}
}

// consentError is the error that links to p.
func (o *OAuth) consentError(p *pendingConsent) error {
	return &ConsentRequiredError{Server: o.server, Principal: p.principal, URL: o.links.StartURL(p.id), ID: p.id}
}

// Waiting returns the sign-in of principal that waits for its start link to be opened,
// or nil.
func (o *OAuth) Waiting(principal string) *ConsentRequiredError {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for _, p := range o.pending {
		if p.principal == principal && !p.started && now.Before(p.expires) {
			return o.consentError(p).(*ConsentRequiredError)
		}
	}
	return nil
}

// InProgress reports whether principal has a sign-in in progress: waiting for its start
// link to be opened, or opened and waiting for the authorization server's callback.
func (o *OAuth) InProgress(principal string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if p := o.started[principal]; p != nil && now.Before(p.expires) {
		return true
	}
	for _, p := range o.pending {
		if p.principal == principal && !p.started && now.Before(p.expires) {
			return true
		}
	}
	return false
}

// Pending returns the principal of the sign-in id, when it waits for its start.
func (o *OAuth) Pending(id string) (principal string, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.pending[id]
	if p == nil || p.started || time.Now().After(p.expires) {
		return "", false
	}
	return p.principal, true
}

// StateOwner returns the principal of the sign-in whose OAuth state is state, without
// using it; ok is false when state is none of this server's.
func (o *OAuth) StateOwner(state string) (principal string, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p := o.byState[state]; p != nil {
		return p.principal, true
	}
	return "", false
}

// Start uses the start link id (once) and returns the authorization server's URL to send
// the browser to. A principal has one started sign-in at most: starting one ends the
// principal's previous one, whose callback is then refused.
func (o *OAuth) Start(id string) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.pending[id]
	if p == nil || p.started || time.Now().After(p.expires) {
		return "", ErrConsentUnknown
	}
	p.started = true
	delete(o.pending, id)
	if prev := o.started[p.principal]; prev != nil {
		o.forgetLocked(prev)
		if prev.cancel != nil {
			prev.cancel() // its flow's goroutine returns
		}
	}
	o.started[p.principal] = p
	return p.authURL, nil
}

// Callback completes the sign-in whose OAuth state is state with the authorization
// server's answer (code and RFC 9207 iss): the code is exchanged and the token stored.
// It returns the principal signed in. ok is false when state is none of this server's.
func (o *OAuth) Callback(ctx context.Context, state, code, iss string) (principal string, ok bool, err error) {
	o.mu.Lock()
	p := o.byState[state]
	if p != nil {
		delete(o.byState, state)
	}
	o.mu.Unlock()
	if p == nil {
		return "", false, nil
	}
	if !p.started || time.Now().After(p.expires) {
		return p.principal, true, ErrConsentUnknown
	}
	p.code <- &auth.AuthorizationResult{Code: code, State: p.flowState, Iss: iss}
	select {
	case err := <-p.done:
		if err != nil {
			if r := refusal(err); r != nil {
				err = r // without the endpoint's answer: the error is logged
			}
			return p.principal, true, fmt.Errorf("upstream %q: sign-in: %w", o.server, err)
		}
		return p.principal, true, nil
	case <-ctx.Done():
		return p.principal, true, ctx.Err()
	}
}

// forget drops p from the sign-ins in progress.
func (o *OAuth) forget(p *pendingConsent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.forgetLocked(p)
}

// forgetLocked is forget with o.mu held.
func (o *OAuth) forgetLocked(p *pendingConsent) {
	if o.started[p.principal] == p {
		delete(o.started, p.principal)
	}
	if o.pending[p.id] == p {
		delete(o.pending, p.id)
	}
	if o.byState[p.state] == p {
		delete(o.byState, p.state)
	}
}

// cleanLocked drops expired sign-ins, at most once a minute; o.mu is held.
func (o *OAuth) cleanLocked() {
	now := time.Now()
	if now.Sub(o.lastClean) < time.Minute {
		return
	}
	o.lastClean = now
	for id, p := range o.pending {
		if now.After(p.expires) {
			delete(o.pending, id)
		}
	}
	for st, p := range o.byState {
		if now.After(p.expires) {
			delete(o.byState, st)
		}
	}
	for pr, p := range o.started {
		if now.After(p.expires) {
			delete(o.started, pr)
		}
	}
}

// insufficientScope reports whether a WWW-Authenticate challenge says insufficient_scope.
func insufficientScope(h []string) bool {
	cs, err := oauthex.ParseWWWAuthenticate(h)
	if err != nil {
		return false
	}
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params["error"] == "insufficient_scope" {
			return true
		}
	}
	return false
}
