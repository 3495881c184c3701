package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/manifold-mcp/manifold/internal/oidc"
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
	oidcCookie     = "manifold_console_oidc"
	oidcPath       = "/ui/oidc"
	oidcCallback   = oidcPath + "/callback"
	oidcPendingTTL = oidc.PendingTTL
)

// oidcFlow is the shared sign-in flow (internal/oidc).
type oidcFlow struct{ *oidc.Flow }

func newOIDCFlow(client *http.Client, now func() time.Time) *oidcFlow {
	return &oidcFlow{oidc.NewFlow(client, now)}
}

// discover returns the issuer's endpoints (oidc.Flow.Discover).
func (f *oidcFlow) discover(ctx context.Context, issuer string) (*oidc.Endpoints, error) {
	return f.Discover(ctx, issuer)
}

// idTokenNonce returns the "nonce" claim of a verified JWT (oidc.IDTokenNonce).
func idTokenNonce(jwt string) string { return oidc.IDTokenNonce(jwt) }

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
	redirect := o.RedirectURL
	if redirect == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		redirect = scheme + "://" + r.Host + oidcCallback
	}
	to, state, err := c.oidc.Begin(r.Context(), o.settings(), redirect, "")
	if err != nil {
		c.signInFailed(w, http.StatusBadGateway, "the issuer cannot be reached: "+err.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: state, Path: oidcPath, MaxAge: int(oidcPendingTTL.Seconds()),
		Secure: c.secure(r), HttpOnly: true, SameSite: http.SameSiteLaxMode})
	// A page that moves on by itself, not a redirect: the sign-in page's form-action policy
	// ('self') would stop a redirect to the issuer.
	c.nextPage(w, nextData{Title: "Signing in", URL: to, Label: "continue at the issuer"})
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
		Secure: c.secure(r), HttpOnly: true, SameSite: http.SameSiteLaxMode})
	q := r.URL.Query()
	ck, err := r.Cookie(oidcCookie)
	state := q.Get("state")
	if err != nil || !oidc.SameState(state, ck.Value) {
		c.signInFailed(w, http.StatusBadRequest, "the sign-in was not started in this browser, or took too long: start again")
		return
	}
	p, ok := c.oidc.Take(state)
	if !ok {
		c.signInFailed(w, http.StatusBadRequest, "the sign-in expired or was already used: start again")
		return
	}
	if e := q.Get("error"); e != "" {
		c.signInFailed(w, http.StatusUnauthorized, "the issuer refused the sign-in: "+e)
		return
	}
	tokens, err := c.oidc.Exchange(r.Context(), o.settings(), p, q.Get("code"))
	if err != nil {
		c.signInFailed(w, http.StatusUnauthorized, "the issuer's tokens could not be obtained: "+err.Error())
		return
	}
	token, err := c.acceptedToken(r.Context(), tokens, p.Nonce)
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

// acceptedToken returns the token to keep: the access token if the Source accepts it, else
// the ID token if it carries the nonce sent and the Source accepts it.
func (c *Console) acceptedToken(ctx context.Context, t *oidc.Tokens, nonce string) (string, error) {
	accept := func(ctx context.Context, token string) error {
		_, err := c.src.Authorize(ctx, token)
		return err
	}
	token, err := oidc.AcceptedToken(ctx, t, nonce, accept, func(err error) bool { return errors.Is(err, ErrForbidden) })
	if errors.Is(err, oidc.ErrNonce) {
		return "", fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	return token, err
}

// settings are o's at the issuer.
func (o OIDC) settings() oidc.Settings {
	return oidc.Settings{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret, Scopes: o.Scopes}
}
