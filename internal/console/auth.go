package console

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/manifold-mcp/manifold/internal/authn"
)

// handler is a console handler that needs an operator.
type handler func(w http.ResponseWriter, r *http.Request, op Operator)

// page wraps a page: a request that is not authenticated gets 401 with the sign-in form.
func (c *Console) page(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if op, ok := c.operator(w, r, true); ok {
			h(w, r, op)
		}
	})
}

// api wraps a JSON endpoint: a request that is not authenticated gets a plain 401.
func (c *Console) api(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if op, ok := c.operator(w, r, false); ok {
			h(w, r, op)
		}
	})
}

// operator returns who sends r, if an operator, answering 401 or 403 itself otherwise (with
// the sign-in form for pages). See New for the rules.
func (c *Console) operator(w http.ResponseWriter, r *http.Request, isPage bool) (Operator, bool) {
	if local, off := c.src.AuthOff(); off {
		if !loopbackPeer(r) {
			c.forbidden(w, isPage, "without auth, the console answers loopback clients only")
			return Operator{}, false
		}
		return Operator{Name: local, authOff: true}, true
	}
	token, viaCookie, id := c.credential(r)
	if token == "" {
		c.unauthorized(w, isPage, "")
		return Operator{}, false
	}
	op, err := c.src.Authorize(r.Context(), token)
	switch {
	case errors.Is(err, ErrForbidden):
		c.forbidden(w, isPage, "your principal is not an operator (auth.operators)")
		return Operator{}, false
	case err != nil:
		if viaCookie {
			c.sessions.remove(id) // the key was removed or the token expired: sign in again
			http.SetCookie(w, c.clearCookie(r))
		}
		c.unauthorized(w, isPage, "your credential is no longer valid: sign in again")
		return Operator{}, false
	}
	op.viaCookie = viaCookie
	return op, true
}

// credential returns the bearer token of r's Authorization header, else the one r's session
// cookie names (viaCookie, with the session id), else "".
func (c *Console) credential(r *http.Request) (token string, viaCookie bool, id string) {
	if h := r.Header.Get("Authorization"); h != "" {
		token, _ = authn.BearerToken(h)
		return token, false, ""
	}
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return "", false, ""
	}
	token, _ = c.sessions.token(ck.Value)
	return token, token != "", ck.Value
}

// serveSignIn answers the sign-in form: with a key (or token) of an operator it starts a
// session and sends the browser to the console; otherwise it shows the form again, with 401
// or 403. The key is never echoed.
func (c *Console) serveSignIn(w http.ResponseWriter, r *http.Request) {
	if !sameSite(r) {
		c.forbidden(w, true, "cross-site sign-in refused")
		return
	}
	if _, off := c.src.AuthOff(); off {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther) // nothing to sign in to
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		c.unauthorized(w, true, "enter an API key or token")
		return
	}
	_, err := c.src.Authorize(r.Context(), token)
	switch {
	case errors.Is(err, ErrForbidden):
		c.forbidden(w, true, "that principal is not an operator (auth.operators)")
		return
	case err != nil:
		c.unauthorized(w, true, "that key or token was not accepted")
		return
	}
	c.startSession(w, r, token)
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// startSession keeps a session for token and gives the browser its cookie.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, token string) {
	id, expires := c.sessions.create(token)
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: id, Path: "/ui", Expires: expires, MaxAge: int(time.Until(expires).Seconds()),
		Secure: c.secure(r), HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
}

// serveSignOut ends the session of r's cookie.
func (c *Console) serveSignOut(w http.ResponseWriter, r *http.Request) {
	if !sameSite(r) {
		c.forbidden(w, true, "cross-site sign-out refused")
		return
	}
	if ck, err := r.Cookie(cookieName); err == nil {
		c.sessions.remove(ck.Value)
	}
	http.SetCookie(w, c.clearCookie(r))
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (c *Console) clearCookie(r *http.Request) *http.Cookie {
	return &http.Cookie{Name: cookieName, Value: "", Path: "/ui", MaxAge: -1,
		Secure: c.secure(r), HttpOnly: true, SameSite: http.SameSiteStrictMode}
}

// sameSite reports whether a state-changing request comes from the console's own pages: a
// browser says so in Sec-Fetch-Site (the gateway has checked Origin already).
func sameSite(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	return site == "" || site == "same-origin" || site == "none"
}

// signInData fills the sign-in page.
type signInData struct {
	Message string
	// Form: show the sign-in form (not while auth is off).
	Form bool
	// Issuer, when the OIDC sign-in is on, is offered as a second way in.
	Issuer string
}

// signInPage renders the sign-in page with msg and status code.
func (c *Console) signInPage(w http.ResponseWriter, code int, msg string, form bool) {
	d := signInData{Message: msg, Form: form}
	if o, on := c.oidcSettings(); on && form {
		d.Issuer = o.Issuer
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_ = c.signIn.Execute(w, d)
}

// signInFailed shows the sign-in page again with why it failed.
func (c *Console) signInFailed(w http.ResponseWriter, code int, msg string) {
	c.signInPage(w, code, msg, true)
}

// unauthorized answers 401: the sign-in form for a page, plain text otherwise.
func (c *Console) unauthorized(w http.ResponseWriter, isPage bool, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="manifold"`)
	if !isPage {
		http.Error(w, "unauthorized: sign in at /ui/ or send Authorization: Bearer", http.StatusUnauthorized)
		return
	}
	c.signInPage(w, http.StatusUnauthorized, msg, true)
}

// forbidden answers 403 with msg.
func (c *Console) forbidden(w http.ResponseWriter, isPage bool, msg string) {
	if !isPage {
		http.Error(w, "forbidden: "+msg, http.StatusForbidden)
		return
	}
	_, off := c.src.AuthOff()
	c.signInPage(w, http.StatusForbidden, "Forbidden: "+msg+".", !off)
}

// loopbackPeer reports whether r comes from a loopback address.
func loopbackPeer(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
