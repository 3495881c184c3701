package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/oidc"
	"github.com/manifold-mcp/manifold/internal/upcred"
	"go.uber.org/zap"
)

// Who opens a start link (docs/architecture.md, Upstream credentials: oauth). The start page
// (oauthpages.go) makes sure the person who opened a link is the principal it was made for:
//
//   - with auth.jwt and its OIDC client configured (auth.jwt.oidc), a principal that is not
//     an API key's is sent to sign in at the issuer (authorization code + PKCE, the state
//     bound to the browser by a cookie, internal/oidc); the callback, oauthOIDCCallbackPath,
//     checks the token it gets exactly as a client's (authn) and compares principals: the
//     same one goes on to the upstream's authorization server, another gets 403 and the
//     link stays valid for its owner;
//   - otherwise the page asks for the API key or token the client uses (oauthpages.go);
//   - either success leaves a sign-in cookie naming the principal, MACed with a key the
//     gateway holds, with which the same browser skips both for later links of the same
//     principal (12 hours; never for another principal's link).

const (
	// oauthOIDCPath is where the issuer sends the browser back: the redirect URL to register
	// at the issuer is the gateway's public base URL + oauthOIDCCallbackPath.
	oauthOIDCPath         = "/oauth/oidc/"
	oauthOIDCCallbackPath = config.OAuthOIDCCallbackPath
	// oauthOIDCCookie binds a sign-in at the issuer to the browser that started it.
	// SameSite=Lax: the issuer's redirect back is a cross-site navigation.
	oauthOIDCCookie = "manifold_oauth_oidc"
	// signInCookie names the principal a browser proved to be (signInCookieTTL).
	signInCookie     = "manifold_signin"
	signInCookiePath = "/oauth/"
	signInCookieTTL  = 12 * time.Hour
	// maxSignInCookie bounds the cookie's length read.
	maxSignInCookie = 1024
)

// oauthIdentity is the state of the start page's checks: the sign-ins at the issuer in
// progress and the sign-in cookie's key outside cluster mode. Its methods are safe for
// concurrent use.
type oauthIdentity struct {
	once sync.Once
	flow *oidc.Flow
	// random is this process's cookie key outside cluster mode.
	random []byte
}

// init makes the flow and the random key on first use.
func (id *oauthIdentity) init() {
	id.once.Do(func() {
		id.flow = oidc.NewFlow(nil, nil)
		id.random = make([]byte, 32)
		_, _ = rand.Read(id.random) // never fails (crypto/rand)
	})
}

// oidcFlow returns the start page's OIDC flow.
func (id *oauthIdentity) oidcFlow() *oidc.Flow {
	id.init()
	return id.flow
}

// signInKeys returns the sign-in cookie's MAC keys, the issuing one first: in cluster mode
// the keys in force derived from the cluster secrets (current and previous, rotated at
// reload with the other cluster keys), so that every replica accepts the cookie; else a
// random key of this process, so that a restart signs everyone out. Never derived per
// request.
func (g *Gateway) signInKeys() [][]byte {
	if g.cluster != nil {
		return g.cluster.Keys().SignInCookieKeys()
	}
	id := &g.oauth.identity
	id.init()
	return [][]byte{id.random}
}

// sealSignIn returns a sign-in cookie value naming principal until expires:
// "v1.<unix expiry>.<base64url principal>.<base64url HMAC-SHA256 of the rest>".
func sealSignIn(key []byte, principal string, expires time.Time) string {
	body := "v1." + strconv.FormatInt(expires.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString([]byte(principal))
	return body + "." + base64.RawURLEncoding.EncodeToString(signInMAC(key, body))
}

func signInMAC(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// errSignInCookie: the cookie is malformed, forged (no key verifies it) or expired.
var errSignInCookie = errors.New("invalid sign-in cookie")

// openSignIn returns the principal a sign-in cookie value names, if one of keys MACs it
// (compared in constant time) and it has not expired at now.
func openSignIn(keys [][]byte, v string, now time.Time) (string, error) {
	if len(v) > maxSignInCookie {
		return "", errSignInCookie
	}
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return "", errSignInCookie
	}
	body, sum := v[:i], v[i+1:]
	mac, err := base64.RawURLEncoding.DecodeString(sum)
	if err != nil {
		return "", errSignInCookie
	}
	if !slices.ContainsFunc(keys, func(k []byte) bool { return hmac.Equal(mac, signInMAC(k, body)) }) {
		return "", errSignInCookie
	}
	parts := strings.Split(body, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return "", errSignInCookie
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || !now.Before(time.Unix(exp, 0)) {
		return "", errSignInCookie
	}
	p, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(p) == 0 {
		return "", errSignInCookie
	}
	return string(p), nil
}

// secureCookies reports whether the sign-in pages' cookies are Secure: their base URL is
// https.
func (g *Gateway) secureCookies() bool { return strings.HasPrefix(g.oauthBaseURL(), "https://") }

// signedInAs reports whether r carries a sign-in cookie naming principal.
func (g *Gateway) signedInAs(r *http.Request, principal string) bool {
	ck, err := r.Cookie(signInCookie)
	if err != nil {
		return false
	}
	p, err := openSignIn(g.signInKeys(), ck.Value, time.Now())
	return err == nil && p == principal
}

// setSignInCookie gives the browser the sign-in cookie of principal.
func (g *Gateway) setSignInCookie(w http.ResponseWriter, principal string) {
	exp := time.Now().Add(signInCookieTTL)
	http.SetCookie(w, &http.Cookie{Name: signInCookie, Value: sealSignIn(g.signInKeys()[0], principal, exp), Path: signInCookiePath,
		MaxAge: int(signInCookieTTL / time.Second), Secure: g.secureCookies(), HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// startOIDC sends the browser that opened start link id of principal to sign in at the JWT
// issuer, when that is how principal proves who they are: auth.jwt.oidc is on and principal
// is not an API key's (whose owner types the key). It reports whether it answered; when the
// issuer cannot be reached it does not, and the page asks for the credential instead.
func (g *Gateway) startOIDC(w http.ResponseWriter, r *http.Request, id, principal string) bool {
	s, ok := g.oidcSettings()
	if !ok || r.Method != http.MethodGet || g.apiKeyPrincipal(principal) {
		return false
	}
	// In cluster mode the state names this replica, which holds the sign-in: the issuer's
	// answer is forwarded here from whichever replica it reaches (oauthCluster).
	name := func(key string) (string, error) {
		return g.signInPageValue(g.signInServer(id), principal, key, time.Now().Add(oidc.PendingTTL))
	}
	to, state, err := g.oauth.identity.oidcFlow().BeginNamed(r.Context(), s, g.oauthBaseURL()+oauthOIDCCallbackPath, id, name)
	if err != nil { // the form still checks who it is
		g.log.Warn("sign-in at the issuer unavailable: the start page asks for the credential", zap.Error(err))
		return false
	}
	http.SetCookie(w, &http.Cookie{Name: oauthOIDCCookie, Value: state, Path: oauthOIDCPath, MaxAge: int(oidc.PendingTTL / time.Second),
		Secure: g.secureCookies(), HttpOnly: true, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, to, http.StatusFound)
	return true
}

// oidcSettings returns the OIDC client at the JWT issuer under the config serving now, if on.
func (g *Gateway) oidcSettings() (oidc.Settings, bool) {
	j := g.current().cfg.Auth.JWT
	if j == nil || !j.OIDC.Enabled() {
		return oidc.Settings{}, false
	}
	return oidc.Settings{Issuer: j.Issuer, ClientID: j.OIDC.ClientID, ClientSecret: j.OIDC.ClientSecret, Scopes: j.OIDC.Scopes}, true
}

// apiKeyPrincipal reports whether principal is named by an API key of the config serving now.
func (g *Gateway) apiKeyPrincipal(principal string) bool {
	return slices.ContainsFunc(g.current().cfg.Auth.APIKeys, func(k config.APIKey) bool { return k.Name == principal })
}

// serveOAuthOIDCCallback takes the issuer's answer to a start page's sign-in: it checks the
// state against the browser's cookie, exchanges the code, authenticates the token as a
// client's and compares its principal with the start link's. The same principal goes on to
// the upstream's authorization server (and gets the sign-in cookie); another gets 403, and
// the link stays valid for its owner. The only place it redirects to is the start link's
// authorization server.
func (g *Gateway) serveOAuthOIDCCallback(w http.ResponseWriter, r *http.Request) {
	s, on := g.oidcSettings()
	a := g.current().access
	if !on || a.authn == nil || !a.authn.Enabled() {
		http.NotFound(w, r)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: oauthOIDCCookie, Value: "", Path: oauthOIDCPath, MaxAge: -1,
		Secure: g.secureCookies(), HttpOnly: true, SameSite: http.SameSiteLaxMode})
	q := r.URL.Query()
	ck, err := r.Cookie(oauthOIDCCookie)
	state := q.Get("state")
	if err != nil || !oidc.SameState(state, ck.Value) {
		writeOAuthPage(w, http.StatusBadRequest, oauthPageData{Title: "Sign-in refused", Text: "This sign-in was not started in this browser, or took too long. Open the link again."})
		return
	}
	flow := g.oauth.identity.oidcFlow()
	key, ok := g.signInPageLocal(state)
	var p *oidc.Pending
	if ok {
		p, ok = flow.Take(key)
	}
	if !ok {
		writeOAuthPage(w, http.StatusBadRequest, oauthPageData{Title: "Sign-in refused", Text: "This sign-in expired or was completed already. Open the link again."})
		return
	}
	if e := q.Get("error"); e != "" {
		writeOAuthPage(w, http.StatusUnauthorized, oauthPageData{Title: "Sign-in refused", Text: "The identity provider refused the sign-in."})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	tokens, err := flow.Exchange(ctx, s, p, q.Get("code"))
	if err != nil {
		g.log.Warn("sign-in at the issuer failed", zap.Error(err))
		writeOAuthPage(w, http.StatusUnauthorized, oauthPageData{Title: "Sign-in failed", Text: "The identity provider's tokens could not be obtained. Open the link again."})
		return
	}
	var who string
	accept := func(ctx context.Context, token string) error {
		id, err := a.authn.Authenticate(ctx, token)
		if err != nil {
			return err
		}
		pr, ok := a.authn.Resolve(id)
		if !ok {
			return errors.New("unknown principal")
		}
		who = pr.Name()
		return nil
	}
	if _, err := oidc.AcceptedToken(ctx, tokens, p.Nonce, accept, nil); err != nil {
		writeOAuthPage(w, http.StatusUnauthorized, oauthPageData{Title: "Sign-in refused", Text: "The identity provider's token is not one this gateway accepts."})
		return
	}
	oa, principal := g.pendingStart(p.Data)
	if oa == nil {
		writeOAuthPage(w, http.StatusNotFound, oauthPageData{Title: "Link expired", Text: "This sign-in link was used already or has expired. Retry the request in your client for a new one."})
		return
	}
	if who != principal {
		g.log.Warn("sign-in link refused: opened by another principal", zap.String(keyAddr, r.RemoteAddr))
		writeOAuthPage(w, http.StatusForbidden, oauthPageData{Title: "Not your link", Text: "This sign-in link was made for another account: you signed in as someone else."})
		return
	}
	g.setSignInCookie(w, principal)
	to, err := oa.Start(p.Data)
	if err != nil {
		writeOAuthPage(w, http.StatusNotFound, oauthPageData{Title: "Link expired", Text: "This sign-in link was used already or has expired."})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, to, http.StatusFound)
}

// pendingStart returns the OAuth client and principal of start link id, if it is pending.
func (g *Gateway) pendingStart(id string) (*upcred.OAuth, string) {
	for _, o := range g.oauthServers() {
		if p, ok := o.Pending(id); ok {
			return o, p
		}
	}
	return nil, ""
}
