package gateway

import (
	"context"
	"errors"
	"html/template"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/manifold-mcp/manifold/internal/upcred"
	"go.uber.org/zap"
)

// The sign-in pages of `auth.type: oauth` servers (oauthconsent.go): the start page a
// consent links to, and the OAuth callback. The start link is unguessable (256 random
// bits), works once and for upcred.ConsentTTL; that is necessary but not sufficient, so
// the page also checks that the person who opened it is the principal it was made for:
// with authentication on, it asks for that principal's credential (API key or token) and
// compares principals; under serve --stdio and without authentication, the principal is
// the local user, and the pages listen on loopback only. It then redirects to the
// upstream's authorization server, whose answer comes back to the callback, which accepts
// it only in the browser that passed the check (its sign-in cookie).

const (
	oauthStartPath    = "/oauth/start/"
	oauthCallbackPath = "/oauth/callback"
	// maxOAuthForm bounds the start page's form.
	maxOAuthForm = 16 << 10
)

// oauthHandler serves the start page and the callback; local says that the principal
// of every sign-in is the local user (serve --stdio).
func (g *Gateway) oauthHandler(local bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(oauthStartPath, func(w http.ResponseWriter, r *http.Request) { g.serveOAuthStart(w, r, local) })
	mux.HandleFunc(oauthCallbackPath, func(w http.ResponseWriter, r *http.Request) { g.serveOAuthCallback(w, r, local) })
	mux.HandleFunc(oauthOIDCCallbackPath, g.serveOAuthOIDCCallback) // oauthidentity.go
	// Another replica's sign-ins are forwarded to it (oauthcluster.go).
	return g.oauthCluster(mux)
}

var oauthPage = template.Must(template.New("p").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Manifold sign-in</title></head><body>
<h1>{{.Title}}</h1><p>{{.Text}}</p>
{{if .Form}}<form method="post"><label>API key or token of the account that asked: <input type="password" name="credential" autocomplete="off"></label>
<button type="submit">Continue</button></form>{{end}}
</body></html>`))

type oauthPageData struct {
	Title, Text string
	Form        bool
}

func writeOAuthPage(w http.ResponseWriter, code int, d oauthPageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Frame-Options", "DENY")
	w.WriteHeader(code)
	_ = oauthPage.Execute(w, d)
}

// serveOAuthStart checks who opened a start link and sends them to the authorization
// server.
func (g *Gateway) serveOAuthStart(w http.ResponseWriter, r *http.Request, local bool) {
	id := strings.TrimPrefix(r.URL.Path, oauthStartPath)
	var oa *upcred.OAuth
	var principal string
	for _, o := range g.oauthServers() {
		if p, ok := o.Pending(id); ok {
			oa, principal = o, p
			break
		}
	}
	if oa == nil {
		writeOAuthPage(w, http.StatusNotFound, oauthPageData{Title: "Link expired", Text: "This sign-in link is unknown, was used already or has expired. Retry the request in your client for a new one."})
		return
	}
	a := g.current().access
	if !local && a.authn != nil && a.authn.Enabled() && !g.signedInAs(r, principal) { // oauthidentity.go
		if g.startOIDC(w, r, id, principal) {
			return
		}
		if r.Method != http.MethodPost {
			writeOAuthPage(w, http.StatusOK, oauthPageData{Title: "Confirm who you are", Text: "Enter the credential your client uses with this gateway.", Form: true})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxOAuthForm)
		if err := r.ParseForm(); err != nil {
			writeOAuthPage(w, http.StatusBadRequest, oauthPageData{Title: "Bad request", Text: "The form could not be read."})
			return
		}
		who, err := a.authn.Authenticate(r.Context(), strings.TrimSpace(r.PostFormValue("credential")))
		var name string
		if err == nil {
			if p, ok := a.authn.Resolve(who); ok {
				name = p.Name()
			}
		}
		if name == "" || name != principal {
			g.log.Warn("sign-in link refused: opened by another principal", zap.String(keyAddr, r.RemoteAddr))
			writeOAuthPage(w, http.StatusForbidden, oauthPageData{Title: "Not your link", Text: "This sign-in link was made for another account.", Form: true})
			return
		}
		g.setSignInCookie(w, principal)
	}
	to, err := oa.Start(id)
	if err != nil {
		writeOAuthPage(w, http.StatusNotFound, oauthPageData{Title: "Link expired", Text: "This sign-in link was used already or has expired."})
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, to, http.StatusFound)
}

// serveOAuthCallback completes a sign-in with the authorization server's answer. With
// authentication on (and not local), only in the browser that passed the start page's
// check, which holds the principal's sign-in cookie: the authorization server's URL
// the start page redirects to could otherwise be handed to someone else, whose
// account at the upstream would then be stored as the principal's.
func (g *Gateway) serveOAuthCallback(w http.ResponseWriter, r *http.Request, local bool) {
	q := r.URL.Query()
	state := q.Get("state")
	if e := q.Get("error"); e != "" {
		writeOAuthPage(w, http.StatusBadRequest, oauthPageData{Title: "Sign-in refused", Text: "The authorization server answered: " + e})
		return
	}
	a := g.current().access
	checked := !local && a.authn != nil && a.authn.Enabled()
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	for _, o := range g.oauthServers() {
		if checked {
			principal, ok := o.StateOwner(state)
			if !ok {
				continue
			}
			if !g.signedInAs(r, principal) { // oauthidentity.go
				g.log.Warn("upstream sign-in refused: its answer reached a browser that did not open the link", zap.String(keyAddr, r.RemoteAddr))
				writeOAuthPage(w, http.StatusForbidden, oauthPageData{Title: "Not your sign-in", Text: "This sign-in was started in another browser or by another account. Open the link your client shows in this browser."})
				return
			}
		}
		_, ok, err := o.Callback(ctx, state, q.Get("code"), q.Get("iss"))
		if !ok {
			continue
		}
		if err != nil {
			g.log.Warn("upstream sign-in failed", zap.Error(err))
			text := "The sign-in could not be completed. Retry the request in your client for a new link."
			if errors.Is(err, upcred.ErrConsentUnknown) {
				text = "This sign-in has expired or was completed already."
			}
			writeOAuthPage(w, http.StatusBadRequest, oauthPageData{Title: "Sign-in failed", Text: text})
			return
		}
		writeOAuthPage(w, http.StatusOK, oauthPageData{Title: "Signed in", Text: "You can close this window and retry the request in your client."})
		return
	}
	writeOAuthPage(w, http.StatusBadRequest, oauthPageData{Title: "Unknown sign-in", Text: "This answer matches no sign-in in progress."})
}

// startOAuthListener serves the sign-in pages on a loopback port of its own (serve
// --stdio, which has no HTTP listener), until ctx is done; the links name it.
func (g *Gateway) startOAuthListener(ctx context.Context) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	g.oauth.base.Store(&base)
	srv := &http.Server{Handler: g.oauthHandler(true), ReadHeaderTimeout: readHeaderTimeout}
	g.life.Go(func(context.Context) { _ = srv.Serve(ln) })
	g.life.Go(func(lctx context.Context) {
		select {
		case <-ctx.Done():
		case <-lctx.Done():
		}
		_ = srv.Close()
	})
	return nil
}
