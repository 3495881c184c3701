// Package authn authenticates the bearer tokens of HTTP requests from the "auth" section of the
// configuration: static API keys, kept and compared as SHA-256 hashes in constant time, and
// JWTs verified with a PEM public key, an HMAC secret or the keys published at a JWKS URL, which
// are refreshed in the background. [New] builds an [Authenticator] once per configuration, and
// [Authenticator.Authenticate] turns a token into an [Identity] or an error wrapping
// [ErrInvalidToken].
package authn

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/policy"
)

// Methods of authentication, as in Identity.Method.
const (
	MethodAPIKey = "apikey"
	MethodJWT    = "jwt"
)

// MaxTokenLength is the length in bytes of the longest bearer token accepted (8 KiB).
const MaxTokenLength = 8 << 10

// ErrInvalidToken is wrapped by every error rejecting a token. The message adds a short reason,
// as in "invalid token: token expired", that never holds the token, a key, a secret or a claim
// value, so it may be shown to the client.
var ErrInvalidToken = errors.New("invalid token")

// Identity is an authenticated caller.
type Identity struct {
	// Principal is the caller's name and groups, for the policy.
	Principal *policy.Principal
	// Method is MethodAPIKey or MethodJWT.
	Method string
	// Expiry is when the JWT expires ("exp"); zero for API keys.
	Expiry time.Time
	// Scopes are those of the JWT's "scope" claim (space-separated) or, without it, of its "scp"
	// claim (a list, or a space-separated string); nil for API keys and JWTs without them.
	Scopes []string
	// Source names the credential, without holding a secret: for an API key its key id (see
	// KeyID), for a JWT its issuer.
	Source string

	// verifier is the fingerprint of the JWT settings that verified a JWT (jwtVerifier.id).
	verifier string
	// token is the JWT itself, for a token exchange (SubjectToken); "" for API keys. Never
	// logged or serialized.
	token string
}

// SubjectToken returns the JWT id was authenticated with, for an RFC 8693 token exchange
// with the upstream's authorization server; "" for an API key. It must never be sent to an
// upstream as a credential of its own, logged or stored.
func (id *Identity) SubjectToken() string {
	if id == nil {
		return ""
	}
	return id.token
}

// Resolve returns the principal that id's credential proves under a, which may be another
// Authenticator than the one that authenticated id (a reload built a new one): for an API key,
// the principal of the same key now, with its current name and groups; for a JWT, id's own
// principal while a verifies JWTs with the same settings. ok is false when the credential no
// longer authenticates under a: the key was removed, or the JWT settings changed. a may be
// nil (auth is off), which resolves nothing. Resolve allocates nothing and is safe for
// concurrent use.
func (a *Authenticator) Resolve(id *Identity) (p *policy.Principal, ok bool) {
	if a == nil || !a.enabled || id == nil {
		return nil, false
	}
	switch id.Method {
	case MethodAPIKey:
		p = a.byKeyID[id.Source]
		return p, p != nil
	case MethodJWT:
		return id.Principal, a.jwt != nil && id.verifier == a.jwt.id
	}
	return nil, false
}

// Options configures an Authenticator. The zero value (or nil) gives the defaults.
type Options struct {
	// Logger receives the events of the Authenticator; nil logs nothing. Rejected tokens are
	// logged at debug level with their reason, never with the token.
	Logger *zap.Logger
	// HTTPClient fetches the JWKS. Nil: a client of its own with a 10s timeout whose idle
	// connections Close closes.
	HTTPClient *http.Client
	// Now returns the current time, to check "exp", "nbf" and "iat"; nil means time.Now.
	Now func() time.Time

	// timing overrides the JWKS timings, for tests; zero fields keep the defaults.
	timing jwksTiming
}

// Authenticator checks bearer tokens against the API keys and the JWT settings of a
// configuration. It is immutable once built, except for the JWKS keys it refreshes, and safe for
// concurrent use. Close stops its background work.
type Authenticator struct {
	log     *zap.Logger
	keys    []apiKey // nil without API keys
	byKeyID map[string]*policy.Principal
	jwt     *jwtVerifier // nil without JWT
	enabled bool

	cancel    context.CancelFunc // ends the background work; nil without a JWKS
	wg        sync.WaitGroup     // the background goroutine
	closeIdle func()             // closes the idle connections of the client New made; may be nil
	closeOnce sync.Once
}

// New returns an Authenticator for cfg, which must be validated and have its defaults applied
// (config.Load does both); it reports, naming the configuration key, what only it can check,
// such as a PEM block that is not a public key. Nil opts means the defaults.
//
// With auth.jwt.jwksURL, New fetches the JWKS and keeps refreshing it in a goroutine that Close
// stops: every 15 minutes, every 1s to 30s (doubling) while there are no keys, and when a token
// names an unknown kid, at most once a minute (that token waits for the fetch, up to 10s). ctx
// bounds only the wait for the first fetch: when it fails (the endpoint is down) or ctx ends
// first, New still succeeds, logs a warning, and JWTs are rejected until the keys arrive.
func New(ctx context.Context, cfg *config.Auth, opts *Options) (*Authenticator, error) {
	if cfg == nil {
		return nil, errors.New("authn: nil config")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &Authenticator{log: o.Logger, enabled: cfg.Enabled()}
	keys, err := newAPIKeys(cfg.APIKeys)
	if err != nil {
		return nil, err
	}
	a.keys = keys
	a.byKeyID = make(map[string]*policy.Principal, len(keys))
	for _, k := range keys {
		a.byKeyID[k.id] = k.principal
	}
	if cfg.JWT == nil {
		return a, nil
	}
	src, err := newKeySource(cfg.JWT)
	if err != nil {
		return nil, err
	}
	if a.jwt, err = newJWTVerifier(cfg, src, o.Now); err != nil {
		return nil, err
	}
	if src.jwksURL != "" {
		client := o.HTTPClient
		if client == nil {
			client, a.closeIdle = newHTTPClient()
		}
		bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
		a.cancel = cancel
		src.jwks = startJWKS(ctx, bg, &a.wg, src.jwksURL, client, a.log, o.timing.withDefaults())
	}
	a.log.Info("JWT authentication on",
		zap.String(keyIssuer, cfg.JWT.Issuer),
		zap.Strings(keyAudience, a.jwt.audience),
		zap.String(keyKeySource, src.configKey),
		zap.Strings(keyAlgorithms, a.jwt.algs))
	return a, nil
}

// Enabled reports whether any API key or JWT verification is configured. An Authenticator that
// is not enabled rejects every token.
func (a *Authenticator) Enabled() bool { return a.enabled }

// Authenticate returns the identity that token proves: the principal of the API key it equals,
// else that of the JWT it is. Rejections wrap ErrInvalidToken with a short reason; when ctx ends
// while the JWKS is being refreshed for the token, the error wraps ctx's error instead.
//
// The token is hashed and compared with every API key in constant time, whether or not an
// earlier one matched.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (*Identity, error) {
	id, err := a.authenticate(ctx, token)
	if err != nil {
		if ce := a.log.Check(zap.DebugLevel, "token rejected"); ce != nil {
			ce.Write(zap.String(keyReason, err.Error()))
		}
		return nil, err
	}
	if ce := a.log.Check(zap.DebugLevel, "token accepted"); ce != nil {
		ce.Write(zap.String(keyPrincipal, id.Principal.Name()), zap.String(keyMethod, id.Method))
	}
	return id, nil
}

func (a *Authenticator) authenticate(ctx context.Context, token string) (*Identity, error) {
	switch {
	case !a.enabled:
		return nil, errNotConfigured
	case token == "":
		return nil, errEmptyToken
	case len(token) > MaxTokenLength:
		return nil, errTooLong
	}
	if k := matchAPIKey(a.keys, token); k != nil {
		return &Identity{Principal: k.principal, Method: MethodAPIKey, Source: k.id}, nil
	}
	if a.jwt == nil || (len(a.keys) > 0 && strings.Count(token, ".") != 2) {
		// Not a key, and not a JWT either: three dot-separated parts.
		return nil, errUnknownKey
	}
	id, err := a.jwt.verify(ctx, token)
	if err != nil {
		return nil, err
	}
	id.token = token
	return id, nil
}

// Close stops the background refresh of the JWKS and waits for it to end. It is idempotent;
// Authenticate keeps working after it with the keys already fetched.
func (a *Authenticator) Close() {
	a.closeOnce.Do(func() {
		if a.cancel != nil {
			a.cancel()
		}
		a.wg.Wait()
		if a.closeIdle != nil {
			a.closeIdle()
		}
	})
}

// rejection is an error rejecting a token: ErrInvalidToken with a reason.
type rejection string

func (r rejection) Error() string { return ErrInvalidToken.Error() + ": " + string(r) }
func (r rejection) Unwrap() error { return ErrInvalidToken }

// Rejections that do not depend on the configuration.
const (
	errNotConfigured rejection = "no API key or JWT is configured"
	errEmptyToken    rejection = "empty token"
	errTooLong       rejection = "token too long"
	errUnknownKey    rejection = "unknown API key"
	errMalformed     rejection = "malformed token"
	errAlgorithm     rejection = "algorithm not allowed"
	errSignature     rejection = "signature invalid"
	errKeyMismatch   rejection = "signing key does not fit the algorithm"
	errNoKeys        rejection = "no signing keys available yet"
	errUnknownKID    rejection = "no signing key for kid"
	errExpired       rejection = "token expired"
	errNotYetValid   rejection = "token not valid yet"
	errIssuedFuture  rejection = "token issued in the future"
	errIssuer        rejection = "wrong issuer"
	errAudience      rejection = "wrong audience"
	errClaims        rejection = "invalid claims"
)

// Log field keys of this package.
const (
	keyReason     = "reason"
	keyPrincipal  = "principal"
	keyMethod     = "method"
	keyIssuer     = "issuer"
	keyAudience   = "audience"
	keyKeySource  = "key_source"
	keyAlgorithms = "algorithms"
	keyURL        = "url"
	keyKeys       = "keys"
	keyRetryIn    = "retry_in"
)
