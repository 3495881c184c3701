package upcred

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Grant and token types of RFC 8693 and RFC 7523.
const (
	grantTokenExchange      = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeAccessToken    = "urn:ietf:params:oauth:token-type:access_token"
	clientAssertionTypeJWT  = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
	defaultEarlyExpiry      = 30 * time.Second
	defaultTokenCallTimeout = 30 * time.Second
)

// Errors of the token sources.
var (
	// ErrNoSubject: a token exchange was needed but the caller presented no JWT.
	ErrNoSubject = errors.New("token exchange needs the caller's JWT")
	// ErrTokenEndpoint: the authorization server refused the token request or could not be
	// reached; the message carries its OAuth error code, never a token.
	ErrTokenEndpoint = errors.New("token endpoint")
)

// Options configures the token sources. The zero value (or nil) gives the defaults.
type Options struct {
	// HTTPClient makes the token requests; default a client with a 30s timeout and the
	// environment's proxy settings.
	HTTPClient *http.Client
	// Now is the clock; default time.Now.
	Now func() time.Time
	// EarlyExpiry renews a token this long before it expires; default 30s.
	EarlyExpiry time.Duration
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.HTTPClient == nil {
		out.HTTPClient = &http.Client{Timeout: defaultTokenCallTimeout}
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	if out.EarlyExpiry == 0 {
		out.EarlyExpiry = defaultEarlyExpiry
	}
	return out
}

// client is the gateway's OAuth client at one token endpoint, for one server.
type client struct {
	server string
	cfg    config.UpstreamAuth
	secret string
	signer *assertionSigner // private_key_jwt; nil otherwise
	opts   Options
}

func newClient(server string, cfg config.UpstreamAuth, opts *Options) (*client, error) {
	c := &client{server: server, cfg: cfg, secret: cfg.ClientSecret, opts: opts.withDefaults()}
	if cfg.ClientSecretFile != "" {
		b, err := os.ReadFile(cfg.ClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: auth.clientSecretFile: %w", server, err)
		}
		c.secret = strings.TrimSpace(string(b))
	}
	if c.method() == config.PrivateKeyJWT {
		s, err := newAssertionSigner(cfg.PrivateKeyFile, cfg.KeyID)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: auth.privateKeyFile: %w", server, err)
		}
		c.signer = s
	}
	return c, nil
}

// method returns the client authentication method in effect.
func (c *client) method() string {
	switch {
	case c.cfg.TokenEndpointAuth != "":
		return c.cfg.TokenEndpointAuth
	case c.cfg.PrivateKeyFile != "":
		return config.PrivateKeyJWT
	}
	return config.ClientSecretBasic
}

// request makes one token request with the grant in params (client_credentials when params
// holds no grant_type) through x/oauth2, authenticating the client as configured.
func (c *client) request(ctx context.Context, params url.Values) (*Token, error) {
	cc := clientcredentials.Config{
		ClientID:       c.cfg.ClientID,
		TokenURL:       c.cfg.TokenURL,
		Scopes:         c.cfg.Scopes,
		EndpointParams: params,
	}
	if c.cfg.Audience != "" && params.Get("audience") == "" {
		params.Set("audience", c.cfg.Audience)
	}
	if c.cfg.Resource != "" {
		params.Set("resource", c.cfg.Resource)
	}
	switch c.method() {
	case config.ClientSecretPost:
		cc.ClientSecret, cc.AuthStyle = c.secret, oauth2.AuthStyleInParams
	case config.PrivateKeyJWT:
		a, err := c.signer.sign(c.cfg.ClientID, c.cfg.TokenURL, c.opts.Now())
		if err != nil {
			return nil, fmt.Errorf("upstream %q: signing the client assertion: %w", c.server, err)
		}
		params.Set("client_assertion_type", clientAssertionTypeJWT)
		params.Set("client_assertion", a)
		cc.AuthStyle = oauth2.AuthStyleInParams
	default:
		cc.ClientSecret, cc.AuthStyle = c.secret, oauth2.AuthStyleInHeader
	}
	t, err := cc.Token(context.WithValue(ctx, oauth2.HTTPClient, c.opts.HTTPClient))
	if err != nil {
		return nil, c.tokenError(err)
	}
	return c.token(t, c.cfg.Scopes), nil
}

// refresh uses t's refresh token (the refresh_token grant, through x/oauth2,
// which keeps the old refresh token when the answer carries none).
func (c *client) refresh(ctx context.Context, t *Token) (*Token, error) {
	style := oauth2.AuthStyleInHeader
	if c.method() == config.ClientSecretPost {
		style = oauth2.AuthStyleInParams
	}
	oc := oauth2.Config{ClientID: c.cfg.ClientID, ClientSecret: c.secret,
		Endpoint: oauth2.Endpoint{TokenURL: c.cfg.TokenURL, AuthStyle: style}}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, c.opts.HTTPClient)
	nt, err := oc.TokenSource(ctx, &oauth2.Token{RefreshToken: t.RefreshToken}).Token()
	if err != nil {
		return nil, c.tokenError(err)
	}
	return c.token(nt, t.Scopes), nil
}

// token converts an x/oauth2 token, obtained now; scopes are those to
// record when the answer names none.
func (c *client) token(t *oauth2.Token, scopes []string) *Token {
	now := c.opts.Now()
	out := &Token{AccessToken: t.AccessToken, TokenType: t.TokenType, RefreshToken: t.RefreshToken,
		Expiry: t.Expiry, Obtained: now, Scopes: scopes}
	if !t.Expiry.IsZero() {
		// x/oauth2 turned expires_in into a time on the real clock: the same lifetime on
		// ours.
		out.Expiry = now.Add(time.Until(t.Expiry).Round(time.Second))
	}
	if s, ok := t.Extra("scope").(string); ok && s != "" {
		out.Scopes = strings.Fields(s)
	}
	return out
}

// tokenError describes a failed token request without its body (which might echo a secret).
func (c *client) tokenError(err error) error {
	if r := refusal(err); r != nil {
		return fmt.Errorf("upstream %q: %w", c.server, r)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("upstream %q: %w unreachable: %w", c.server, ErrTokenEndpoint, ue.Err)
	}
	return fmt.Errorf("upstream %q: %w: %v", c.server, ErrTokenEndpoint, err)
}

// refusal returns, when err holds a token endpoint's refusal (oauth2.RetrieveError), an
// error that says so with its HTTP status and OAuth error code only, else nil: the
// refusal's own text may hold the endpoint's answer, which might echo a secret.
func refusal(err error) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return nil
	}
	status := 0
	if re.Response != nil {
		status = re.Response.StatusCode
	}
	code := re.ErrorCode
	if code == "" {
		code = "no OAuth error code"
	}
	return fmt.Errorf("%w refused the request (HTTP %d, %s)", ErrTokenEndpoint, status, code)
}

// ClientCredentials is the gateway's machine identity at an upstream (auth type
// client_credentials): one token for every caller, requested with the client credentials
// grant, cached, and requested again shortly before it expires or after the upstream refused
// it. Safe for concurrent use.
type ClientCredentials struct {
	c *client

	mu  sync.Mutex
	tok *Token
}

// NewClientCredentials returns the client credentials source of server; it reads the secret
// or private key file now.
func NewClientCredentials(server string, cfg config.UpstreamAuth, opts *Options) (*ClientCredentials, error) {
	c, err := newClient(server, cfg, opts)
	if err != nil {
		return nil, err
	}
	return &ClientCredentials{c: c}, nil
}

// AccessToken returns a valid access token, requesting one when none is cached or it is
// about to expire.
func (s *ClientCredentials) AccessToken(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok.Valid(s.c.opts.Now(), s.c.opts.EarlyExpiry) {
		return s.tok.AccessToken, nil
	}
	t, err := s.c.request(ctx, url.Values{})
	if err != nil {
		return "", err
	}
	s.tok = t
	return t.AccessToken, nil
}

// Reject forgets token after the upstream refused it (401), so the next request gets a new
// one.
func (s *ClientCredentials) Reject(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok != nil && s.tok.AccessToken == token {
		s.tok = nil
	}
}

// Exchanger exchanges callers' JWTs for tokens of one upstream (auth type token-exchange,
// RFC 8693), keeping each principal's token in a Store until it expires. Safe for concurrent
// use; exchanges for one principal are made one at a time.
type Exchanger struct {
	c     *client
	store Store
	locks sync.Map // principal → *sync.Mutex
}

// NewExchanger returns the token exchange source of server, storing tokens in store.
func NewExchanger(server string, cfg config.UpstreamAuth, store Store, opts *Options) (*Exchanger, error) {
	c, err := newClient(server, cfg, opts)
	if err != nil {
		return nil, err
	}
	return &Exchanger{c: c, store: store}, nil
}

// AccessToken returns principal's token for the upstream: the stored one while it is valid,
// else a new one exchanged for subject, the caller's JWT, which is sent to the token endpoint
// only.
func (e *Exchanger) AccessToken(ctx context.Context, principal, subject string) (string, error) {
	mu, _ := e.locks.LoadOrStore(principal, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	stored, err := e.store.Get(ctx, principal, e.c.server)
	switch {
	case err == nil && stored.Valid(e.c.opts.Now(), e.c.opts.EarlyExpiry):
		return stored.AccessToken, nil
	case err == nil && stored.RefreshToken != "" && e.c.method() != config.PrivateKeyJWT:
		// Refreshed without the caller's JWT; a refused refresh falls back
		// to a new exchange.
		if t, rerr := e.c.refresh(ctx, stored); rerr == nil {
			if err := e.store.Put(ctx, principal, e.c.server, t); err != nil {
				return "", err
			}
			return t.AccessToken, nil
		}
	case err != nil && !errors.Is(err, ErrNotFound):
		return "", err
	}
	if subject == "" {
		return "", fmt.Errorf("upstream %q: %w", e.c.server, ErrNoSubject)
	}
	typ := e.c.cfg.SubjectTokenType
	if typ == "" {
		typ = tokenTypeAccessToken
	}
	params := url.Values{
		"grant_type":         {grantTokenExchange},
		"subject_token":      {subject},
		"subject_token_type": {typ},
	}
	if e.c.cfg.RequestedTokenType != "" {
		params.Set("requested_token_type", e.c.cfg.RequestedTokenType)
	}
	t, err := e.c.request(ctx, params)
	if err != nil {
		return "", err
	}
	if err := e.store.Put(ctx, principal, e.c.server, t); err != nil {
		return "", err
	}
	return t.AccessToken, nil
}

// Reject forgets principal's stored token after the upstream refused it (401), so the next
// request exchanges again.
func (e *Exchanger) Reject(ctx context.Context, principal, token string) {
	if t, err := e.store.Get(ctx, principal, e.c.server); err == nil && t.AccessToken == token {
		_, _ = e.store.Revoke(ctx, principal, e.c.server)
	}
}
