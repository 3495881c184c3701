package authn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/manifold-mcp/manifold/internal/redact"
)

// jwksTiming holds the timings of a JWKS. Zero fields mean the defaults (withDefaults).
type jwksTiming struct {
	timeout    time.Duration // one fetch, and a token's wait for the fetch its unknown kid triggers
	refresh    time.Duration // between fetches while there are keys
	unknownKID time.Duration // between fetches triggered by tokens with an unknown kid
	retryMin   time.Duration // first wait between fetches while there are no keys, doubling…
	retryMax   time.Duration // …up to this
}

// withDefaults returns t with its zero fields set to the defaults.
func (t jwksTiming) withDefaults() jwksTiming {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.timeout, 10*time.Second)
	def(&t.refresh, 15*time.Minute)
	def(&t.unknownKID, time.Minute)
	def(&t.retryMin, time.Second)
	def(&t.retryMax, 30*time.Second)
	return t
}

// newHTTPClient returns the client fetching the JWKS when Options.HTTPClient is nil, and the
// function closing its idle connections.
func newHTTPClient() (*http.Client, func()) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &http.Client{
		Transport: limitBody{base: tr, max: maxJWKSBytes},
		Timeout:   10 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return errors.New("refused a redirect from https to " + req.URL.Scheme)
			}
			return nil
		},
	}, tr.CloseIdleConnections
}

// maxJWKSBytes bounds a JWKS response (jwkset reads it whole); a real key set is a few KiB.
const maxJWKSBytes = 1 << 20

// limitBody cuts response bodies after max bytes, which then fail to parse.
type limitBody struct {
	base http.RoundTripper
	max  int64
}

func (l limitBody) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	if err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, l.max), resp.Body}
	}
	return resp, err
}

// refreshKID is a key ID no JWKS has: reading it makes a jwkset HTTP client refresh its keys.
const refreshKID = "\x00manifold-refresh"

// jwks holds the signing keys published at a URL. Its goroutine (run) fetches them, re-fetches
// them every timing.refresh, and retries with a backoff while there are none; tokens with an
// unknown kid also trigger a fetch, rate-limited to one per timing.unknownKID.
type jwks struct {
	url    string
	logURL string // url without its userinfo, query values and fragment (redact.URL)
	client *http.Client
	log    *zap.Logger
	timing jwksTiming
	state  atomic.Pointer[jwksState] // nil until run has built the storage
}

// jwksState is the key storage of a jwks and the keyfunc reading it.
type jwksState struct {
	store jwkset.Storage // the keys of the URL
	kf    keyfunc.Keyfunc
}

// startJWKS starts the goroutine of a jwks on wg, bound to bg, and waits until its first fetch
// is over or ctx ends.
func startJWKS(ctx, bg context.Context, wg *sync.WaitGroup, u string, client *http.Client, log *zap.Logger, timing jwksTiming) *jwks {
	j := &jwks{url: u, logURL: redact.URL(u), client: client, log: log, timing: timing}
	ready := make(chan struct{})
	wg.Go(func() { j.run(bg, ready) })
	select {
	case <-ready:
	case <-ctx.Done():
		j.log.Warn("JWKS not fetched before startup ended: JWTs are rejected until it is", zap.String(keyURL, j.logURL))
	}
	return j
}

// run builds the key storage with a first fetch, closes ready, then refreshes the keys until ctx
// ends.
func (j *jwks) run(ctx context.Context, ready chan<- struct{}) {
	signal := sync.OnceFunc(func() { close(ready) })
	defer signal()
	defer func() {
		if r := recover(); r != nil {
			j.log.Error("JWKS refresh stopped by a panic: JWT keys are no longer refreshed", zap.Any(keyReason, r))
		}
	}()
	// No RefreshInterval: jwkset would start a goroutine that Close could not wait for; the loop
	// below refreshes instead.
	store, err := jwkset.NewStorageFromHTTP(j.url, jwkset.HTTPClientStorageOptions{
		Client:                    j.client,
		Ctx:                       ctx,
		HTTPTimeout:               j.timing.timeout,
		NoErrorReturnFirstHTTPReq: true,
		RefreshErrorHandler: func(_ context.Context, err error) {
			if ctx.Err() == nil {
				j.log.Warn("JWKS fetch failed", zap.String(keyURL, j.logURL), zap.Error(redact.Error(err)))
			}
		},
	})
	if err != nil {
		j.log.Error("JWKS unusable: JWTs are rejected", zap.String(keyURL, j.logURL), zap.Error(redact.Error(err)))
		return
	}
	urls := map[string]jwkset.Storage{j.url: store}
	// Tokens read through onDemand; a kid it does not know makes it fetch the keys again.
	onDemand, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          urls,
		RateLimitWaitMax:  j.timing.timeout,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(j.timing.unknownKID), 1),
	})
	if err != nil {
		j.log.Error("JWKS unusable: JWTs are rejected", zap.String(keyURL, j.logURL), zap.Error(redact.Error(err)))
		return
	}
	kf, err := keyfunc.New(keyfunc.Options{
		Ctx:          ctx,
		Storage:      onDemand,
		UseWhitelist: []jwkset.USE{jwkset.UseSig, ""}, // never a key published for encryption
	})
	if err != nil {
		j.log.Error("JWKS unusable: JWTs are rejected", zap.String(keyURL, j.logURL), zap.Error(redact.Error(err)))
		return
	}
	// The loop fetches through background, whose limiter never waits: reading refreshKID fetches.
	background, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          urls,
		RefreshUnknownKID: rate.NewLimiter(rate.Inf, 1),
	})
	if err != nil {
		j.log.Error("JWKS unusable: JWTs are rejected", zap.String(keyURL, j.logURL), zap.Error(redact.Error(err)))
		return
	}
	j.state.Store(&jwksState{store: store, kf: kf})

	n := countKeys(ctx, store)
	j.logCount(0, n)
	signal()
	delay := j.timing.retryMin
	for {
		wait := j.timing.refresh
		if n == 0 {
			wait, delay = delay, min(2*delay, j.timing.retryMax)
			j.log.Debug("JWKS fetch retry", zap.Duration(keyRetryIn, wait))
		} else {
			delay = j.timing.retryMin
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		fctx, cancel := context.WithTimeout(ctx, j.timing.timeout)
		_, _ = background.KeyRead(fctx, refreshKID) // failures go to RefreshErrorHandler
		cancel()
		prev := n
		if n = countKeys(ctx, store); (n == 0) != (prev == 0) {
			j.logCount(prev, n)
		}
	}
}

// logCount logs a change in the number of keys that matters: none, or some after none.
func (j *jwks) logCount(prev, n int) {
	switch {
	case n > 0 && prev == 0:
		j.log.Info("JWKS fetched", zap.String(keyURL, j.logURL), zap.Int(keyKeys, n))
	case n == 0 && prev > 0:
		j.log.Warn("JWKS has no usable signing key: JWTs are rejected", zap.String(keyURL, j.logURL))
	case n == 0 && prev == 0:
		j.log.Warn("no JWKS signing keys yet: JWTs are rejected until they are fetched", zap.String(keyURL, j.logURL))
	}
}

func countKeys(ctx context.Context, s jwkset.Storage) int {
	keys, err := s.KeyReadAll(ctx)
	if err != nil {
		return 0
	}
	return len(keys)
}

// noKeys is the keyfunc before the key storage exists.
func noKeys(*jwt.Token) (any, error) { return nil, errNoKeys }

// keyfunc returns the jwt.Keyfunc finding a token's key in the JWKS: by its kid (fetching the
// keys again, rate-limited, when the kid is unknown), or, when it has none, every key that a
// token with that key's kid could use (signingKeys).
func (j *jwks) keyfunc(ctx context.Context) jwt.Keyfunc {
	st := j.state.Load()
	if st == nil {
		return noKeys
	}
	inner := st.kf.KeyfuncCtx(ctx)
	return func(t *jwt.Token) (any, error) {
		kid, hasKID := t.Header["kid"]
		if _, ok := kid.(string); hasKID && !ok {
			return nil, errMalformed
		}
		if !hasKID {
			return signingKeys(ctx, st.store, t.Method)
		}
		key, err := inner(t)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("reading the JWKS: %w", ctx.Err())
		case err != nil && countKeys(ctx, st.store) == 0:
			return nil, errNoKeys
		case err != nil:
			// Not found, even after a fetch; fetches rate-limited; or the key's "alg" or "use"
			// does not allow the token.
			return nil, errUnknownKID
		}
		if !keyFits(t.Method, key) {
			return nil, errKeyMismatch
		}
		return key, nil
	}
}

// signingKeys returns the keys of store that may verify a token of method that names no kid:
// those a token naming their kid could use. Their "use" is "sig" or absent (never a key
// published for encryption), their "alg", if any, is the token's, and their type fits the
// algorithm (keyFits).
func signingKeys(ctx context.Context, store jwkset.Storage, method jwt.SigningMethod) (any, error) {
	keys, err := store.KeyReadAll(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("reading the JWKS: %w", ctx.Err())
	case err != nil || len(keys) == 0:
		return nil, errNoKeys
	}
	var fit jwt.VerificationKeySet
	for _, k := range keys {
		m := k.Marshal()
		if (m.USE == jwkset.UseSig || m.USE == "") && (m.ALG == "" || m.ALG.String() == method.Alg()) &&
			keyFits(method, k.Key()) {
			fit.Keys = append(fit.Keys, k.Key())
		}
	}
	if len(fit.Keys) == 0 {
		return nil, errKeyMismatch
	}
	return fit, nil
}
