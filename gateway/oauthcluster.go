package gateway

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/manifold-mcp/manifold/internal/cluster"
	"github.com/manifold-mcp/manifold/internal/upcred"
	"go.uber.org/zap"
)

// Upstream sign-ins across replicas (docs/architecture.md, Cluster mode:
// upstream sign-ins). A sign-in of an `auth.type: oauth` server waits in
// the memory of the replica that started it: the go-sdk's authorization
// code handler there holds its PKCE verifier, its client registration and
// its own state, and completes the token request. In cluster mode the start
// link id and the OAuth state sent to the authorization server are sign-in
// tokens (cluster.SignIn: sealed, naming that replica process, the server,
// the principal, expiring with upcred.ConsentTTL), so a browser request
// under /oauth/ that lands on another replica is forwarded to the owner
// with the hop header, and refused with a clear page when the owner is
// gone or restarted. Single use is the owner's: it forgets a link once
// opened and a state once answered. Without cluster mode, ids are random
// and nothing here runs but one nil check.

// oauthSignInNames names one server's sign-ins with sign-in tokens of
// this replica (upcred.SignInNames).
type oauthSignInNames struct {
	node   *cluster.Node
	server string
}

func (n oauthSignInNames) StartID(principal, nonce string, expires time.Time) (string, error) {
	return n.node.IssueSignIn(cluster.KindSignInStart, n.server, cluster.PrincipalOf(principal), nonce, expires)
}

func (n oauthSignInNames) State(principal, state string, expires time.Time) (string, error) {
	return n.node.IssueSignIn(cluster.KindSignInState, n.server, cluster.PrincipalOf(principal), state, expires)
}

// signInNames returns how server's sign-ins are named: sign-in tokens in
// cluster mode, else nil (upcred's random ids).
func (g *Gateway) signInNames(server string) upcred.SignInNames {
	if g.cluster == nil {
		return nil
	}
	return oauthSignInNames{node: g.cluster, server: server}
}

// signInPageValue returns the value a page under /oauth/ sends out for
// principal's sign-in at server and gets back in its state parameter (an
// identity provider's state, say), made of local (random, the page's own
// key): in cluster mode a sign-in token naming this replica, so that the
// answer is forwarded here wherever it lands (oauthCluster), else local.
func (g *Gateway) signInPageValue(server, principal, local string, expires time.Time) (string, error) {
	if g.cluster == nil {
		return local, nil
	}
	return g.cluster.IssueSignIn(cluster.KindSignInPage, server, cluster.PrincipalOf(principal), local, expires)
}

// signInServer returns the server of start link id in cluster mode, where
// the id is a sign-in token that names it; else "".
func (g *Gateway) signInServer(id string) string {
	if g.cluster == nil {
		return ""
	}
	t, err := g.cluster.OpenSignIn(id)
	if err != nil {
		return ""
	}
	return t.Server
}

// signInPageLocal returns the local part of value, as signInPageValue made it.
func (g *Gateway) signInPageLocal(value string) (string, bool) {
	if g.cluster == nil {
		return value, true
	}
	t, err := g.cluster.OpenSignIn(value)
	if err != nil || t.Kind != cluster.KindSignInPage {
		return "", false
	}
	return t.Local, true
}

// oauthCluster serves, in cluster mode, the requests under /oauth/ that
// belong to another replica (routeSignIn); next serves the others.
func (g *Gateway) oauthCluster(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.cluster == nil {
			next.ServeHTTP(w, r)
			return
		}
		value, strict := signInValue(r)
		if g.routeSignIn(w, r, value, strict) {
			next.ServeHTTP(w, r)
		}
	})
}

// signInValue is the sign-in token r names: the id of a start link
// (/oauth/start/<id>), else its state parameter (the OAuth callback, and
// any other page under /oauth/ whose state signInPageValue made). strict
// says that it must be one: the start page and the callback know no other.
func signInValue(r *http.Request) (value string, strict bool) {
	if id, ok := strings.CutPrefix(r.URL.Path, oauthStartPath); ok {
		return id, true
	}
	return r.URL.Query().Get("state"), r.URL.Path == oauthCallbackPath
}

// routeSignIn serves r, a request of the sign-in token value, when it is
// not this process's: forwarded to the owner, or answered with a page when
// the token does not open (forged, truncated, expired, of another cluster:
// logged without the token; only when strict, else the page decides) or
// its owner is gone, restarted, or r was forwarded already. It reports
// whether r is this process's to serve (also when value is empty: nothing
// names an owner).
func (g *Gateway) routeSignIn(w http.ResponseWriter, r *http.Request, value string, strict bool) bool {
	if !g.clusterHop(w, r) {
		return false
	}
	if value == "" {
		return true
	}
	t, err := g.cluster.OpenSignIn(value)
	if err != nil && !strict {
		return true
	}
	if err != nil {
		g.log.Warn("sign-in request refused", zap.String(keyAddr, r.RemoteAddr), zap.String(keyReason, err.Error()))
		text := "This sign-in link or answer is not valid here. Retry the request in your client for a new link."
		if errors.Is(err, cluster.ErrExpired) {
			text = "This sign-in has expired. Retry the request in your client for a new link."
		}
		writeOAuthPage(w, http.StatusNotFound, oauthPageData{Title: "Unknown sign-in", Text: text})
		return false
	}
	if g.cluster.Owns(t.Owner, t.Boot) {
		return true
	}
	forwarded := r.Header.Get(cluster.HopHeader) != ""
	if t.Owner == g.cluster.Self() || forwarded {
		// Restarted here, or forwarded here by a replica that took this one
		// for the owner: never forwarded twice.
		g.log.Info("sign-in of a process gone", zap.String(keyOwner, t.Owner), zap.String(keyServer, t.Server), zap.Bool("forwarded", forwarded))
		signInGone(w)
		return false
	}
	g.cluster.Forward(w, r, t.Owner, signInGone)
	return false
}

// signInGone answers for a sign-in whose replica is gone: it held the
// flow, which cannot be completed anywhere else.
func signInGone(w http.ResponseWriter) {
	writeOAuthPage(w, http.StatusGone, oauthPageData{Title: "Sign-in interrupted",
		Text: "This sign-in was started on a gateway replica that is gone or restarted. Retry the request in your client for a new link."})
}
