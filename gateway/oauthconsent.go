package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/internal/upcred"
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// Sign-in per user (`auth.type: oauth`; docs/architecture.md, Upstream credentials: oauth).
// Each principal's dedicated upstream session presents that principal's token
// (upcred.OAuth). Without one, the upstream's 401 starts a sign-in, and the request that
// needed the token answers with a link to the gateway's start page (oauthpages.go), by
// protocol version and client capability (consentAnswer). Until the principal has signed
// in, its lists of the server hold one tool, <prefix>__sign_in, whose call asks for the
// same consent. The callback stores the token and tells the sessions that waited that
// their lists changed.

// signInTool is the name of the synthetic tool of a server awaiting a sign-in.
const signInTool = "sign_in"

// oauthClients are the OAuth clients of the servers with auth type oauth, and the
// sessions waiting for a principal's sign-in.
type oauthClients struct {
	mu      sync.Mutex
	servers map[string]*oauthServer
	// waiting are the sessions that listed a sign-in tool, by server and principal key.
	waiting map[oauthWaitKey]map[*mcp.ServerSession]bool
	// base is the gateway's public base URL of start links and the callback, when not
	// configured (serve --stdio: its loopback listener).
	base atomic.Pointer[string]
	// served is the address the HTTP listener serves on.
	served atomic.Pointer[string]
	// identity checks who opens a start link (oauthidentity.go).
	identity oauthIdentity
}

type oauthServer struct {
	auth  config.UpstreamAuth
	url   string
	store upcred.Store // the token store oa keeps tokens in
	oa    *upcred.OAuth
	err   error
}

type oauthWaitKey struct{ server, principal string }

// oauthBaseURL returns the base of sign-in links: the loopback listener's under serve
// --stdio, else gateway.publicURL, else the listen address.
func (g *Gateway) oauthBaseURL() string {
	if b := g.oauth.base.Load(); b != nil {
		return *b
	}
	gw := &g.current().cfg.Gateway
	if gw.PublicURL != "" {
		return strings.TrimSuffix(gw.PublicURL, "/")
	}
	scheme, addr := "http", gw.Listen
	if gw.TLS.CertFile != "" {
		scheme = "https"
	}
	if a := g.oauth.served.Load(); a != nil {
		addr = *a
	}
	return scheme + "://" + addr
}

// oauthLinks are the gateway's sign-in addresses (upcred.OAuthLinks).
type oauthLinks struct{ g *Gateway }

func (l oauthLinks) StartURL(id string) string { return l.g.oauthBaseURL() + oauthStartPath + id }
func (l oauthLinks) RedirectURL() string       { return l.g.oauthBaseURL() + oauthCallbackPath }

// oauthOf returns the OAuth client of s, made on first use and again when its auth or
// the token store changed.
func (g *Gateway) oauthOf(s config.Server) (*upcred.OAuth, error) {
	store, storeErr := g.creds.tokenStore(g.current().cfg.Gateway.TokenStore)
	o := &g.oauth
	o.mu.Lock()
	defer o.mu.Unlock()
	if os := o.servers[s.Name]; os != nil && os.url == s.URL && os.store == store && reflect.DeepEqual(os.auth, s.Auth) {
		return os.oa, os.err
	}
	os := &oauthServer{auth: s.Auth, url: s.URL, store: store, err: storeErr}
	if storeErr == nil {
		name := s.Name
		os.oa, os.err = upcred.NewOAuth(g.life.Context(), name, s.Auth, store, oauthLinks{g}, &upcred.OAuthOptions{
			OnStored: func(principal string) { g.signedIn(name, principal) },
			Go:       g.life.Go,
			Names:    g.signInNames(name), // sealed in cluster mode (oauthcluster.go)
		})
	}
	if o.servers == nil {
		o.servers = map[string]*oauthServer{}
	}
	o.servers[s.Name] = os
	return os.oa, os.err
}

// oauthServers returns the OAuth clients made so far.
func (g *Gateway) oauthServers() []*upcred.OAuth {
	o := &g.oauth
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*upcred.OAuth
	for _, os := range o.servers {
		if os.oa != nil {
			out = append(out, os.oa)
		}
	}
	return out
}

// oauthCredential is one principal's credential at an oauth server.
type oauthCredential struct {
	oa        *upcred.OAuth
	principal string
}

var _ upstream.Authorizer = (*oauthCredential)(nil)

func (c *oauthCredential) AccessToken(ctx context.Context) (string, error) {
	return c.oa.AccessToken(ctx, c.principal)
}

func (c *oauthCredential) Reject(token string) {
	c.oa.Reject(context.Background(), c.principal, token)
}

func (c *oauthCredential) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	return c.oa.Authorize(ctx, c.principal, req, resp)
}

// oauthCredentialFor returns the credential of principal at s.
func (g *Gateway) oauthCredentialFor(s config.Server, principal string) upstream.Credential {
	oa, err := g.oauthOf(s)
	if err != nil {
		return failedCredential{err}
	}
	return &oauthCredential{oa: oa, principal: principal}
}

// errSignInPerUser is the pool upstream's error at an oauth server: tokens are each
// principal's.
var errSignInPerUser = errors.New("signs in per user: only each client's own session connects")

// consentRequired returns the sign-in that principal's failed connection to up (err)
// waits for, if any. The upstream's error chain may not keep the credential's error, so
// the server's OAuth client is asked.
func (g *Gateway) consentRequired(err error, up *upstream.Upstream, principal string) *upcred.ConsentRequiredError {
	if err == nil || up.Config().Auth.Type != config.UpstreamAuthOAuth {
		return nil
	}
	var ce *upcred.ConsentRequiredError
	if errors.As(err, &ce) {
		return ce
	}
	oa, oerr := g.oauthOf(up.Config())
	if oerr != nil {
		return nil
	}
	return oa.Waiting(principal)
}

// waitSignIn notes that ss listed the sign-in tool of server for principal, until
// principal signs in there or ss ends (stopWaitingSignIn).
func (g *Gateway) waitSignIn(server, principal string, ss *mcp.ServerSession) {
	o := &g.oauth
	o.mu.Lock()
	if o.waiting == nil {
		o.waiting = map[oauthWaitKey]map[*mcp.ServerSession]bool{}
	}
	k := oauthWaitKey{server, principal}
	if o.waiting[k] == nil {
		o.waiting[k] = map[*mcp.ServerSession]bool{}
	}
	o.waiting[k][ss] = true
	o.mu.Unlock()
	g.watchSession(ss) // after noting it: an end already released forgets it again
}

// stopWaitingSignIn forgets ss, a session that ended, in the sessions waiting for a
// sign-in.
func (g *Gateway) stopWaitingSignIn(ss *mcp.ServerSession) {
	o := &g.oauth
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, sessions := range o.waiting {
		delete(sessions, ss)
		if len(sessions) == 0 {
			delete(o.waiting, k)
		}
	}
}

// signedIn is called after principal's token for server was stored: each session that
// waited rebuilds its lists at its next list, and is told its tools changed.
func (g *Gateway) signedIn(server, principal string) {
	o := &g.oauth
	o.mu.Lock()
	k := oauthWaitKey{server, principal}
	sessions := o.waiting[k]
	delete(o.waiting, k)
	o.mu.Unlock()
	g.log.Info("upstream sign-in completed", zap.String(keyServer, server))
	g.principalSignedIn(server, principal) // sessionless clients' (principallists.go, oauthretry.go)
	for ss := range sessions {
		if v, ok := g.sessLists.Load(ss); ok {
			v.(*sessionRoutes).stale.Store(true)
		}
		_ = ss.NotifyProgress(context.Background(), &mcp.ProgressNotificationParams{ProgressToken: listChangedTokens[0]})
	}
}

// addSignInTools adds to r the sign-in tool of each server of ups (their pool upstreams),
// for a session whose principal has not signed in there.
func addSignInTools(r *routes, ups []*upstream.Upstream, ns namespacing.Options) {
	if len(ups) == 0 {
		return
	}
	for _, up := range ups {
		name := namespacing.Name(up.Config().Namespace(), signInTool, ns)
		if _, taken := r.tools[name]; taken {
			continue
		}
		r.tools[name] = route{up: up, original: signInMarker}
		r.toolDefs = append(r.toolDefs, &mcp.Tool{
			Name:        name,
			Description: fmt.Sprintf("Sign in to %s: it needs your own authorization before its tools are listed. Call this tool and open the link it gives.", up.Name()),
			InputSchema: &jsonSchemaObject,
		})
	}
	slices.SortFunc(r.toolDefs, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	r.all.tools = r.toolDefs
}

// signInMarker is the upstream name of a sign-in tool's route: no upstream tool has it
// (it holds a NUL).
const signInMarker = "\x00manifold/sign_in"

var jsonSchemaObject = map[string]any{"type": "object"}

// consentMessage is what a client without URL elicitation reads.
func consentText(ce *upcred.ConsentRequiredError) string {
	return fmt.Sprintf("Sign-in required: %s needs your authorization. Open %s in a browser, sign in, then retry this request. (The link works once, for 10 minutes.)", ce.Server, ce.URL)
}

// consentElicitation is the URL elicitation of ce.
func consentElicitation(ce *upcred.ConsentRequiredError) *mcp.ElicitParams {
	return &mcp.ElicitParams{Mode: "url", URL: ce.URL, ElicitationID: ce.ID,
		Message: fmt.Sprintf("Sign in to %s to authorize the gateway to act for you there.", ce.Server)}
}

// wantsURLElicitation reports whether the client on version with caps receives a
// consent as the -32042 error.
func wantsURLElicitation(caps *mcp.ClientCapabilities, version string) bool {
	return knowsURLElicitation(version) && urlElicitation(caps)
}

// urlElicitation reports whether caps declare URL mode elicitation.
func urlElicitation(caps *mcp.ClientCapabilities) bool {
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// wantsInputRequired reports whether the client on version with caps receives a consent
// as an input_required result with a URL elicitation (2026-07-28).
func wantsInputRequired(caps *mcp.ClientCapabilities, version string) bool {
	return mcpx.Stateless(version) && urlElicitation(caps)
}

// consentInputs are the input requests of an input_required answer for ce.
func consentInputs(ce *upcred.ConsentRequiredError) mcp.InputRequestMap {
	return mcp.InputRequestMap{consentInputKey: consentElicitation(ce)}
}

// consentAnswer is the answer to a call of method m that needs the sign-in ce, for the
// client from: the -32042 URL-elicitation-required error for a 2025-11-25 client with URL
// elicitation; otherwise, for tools/call, an isError result with the link and what to do,
// and for prompts/get and resources/read an error whose message carries the link. state
// is the requestState of an input_required answer (oauthretry.go).
func consentAnswer[Q callerRequest, R mcp.Result](m *method[Q, R], from downstream, ce *upcred.ConsentRequiredError, state string) (R, error) {
	var zero R
	caps, version := from.client()
	if wantsURLElicitation(caps, version) {
		return zero, mcp.URLElicitationRequiredError([]*mcp.ElicitParams{consentElicitation(ce)})
	}
	if wantsInputRequired(caps, version) && m.ask != nil {
		return m.ask(consentInputs(ce), state), nil
	}
	if r, ok := m.toolError(consentText(ce)); ok {
		return r, nil
	}
	return zero, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: consentText(ce)}
}

// rawConsentAnswer is consentAnswer on the raw path: the result bytes and whether it is
// a tool error, or the error.
func rawConsentAnswer(kind string, from downstream, ce *upcred.ConsentRequiredError, state string) ([]byte, bool, error) {
	caps, version := from.client()
	if wantsURLElicitation(caps, version) {
		return nil, false, mcp.URLElicitationRequiredError([]*mcp.ElicitParams{consentElicitation(ce)})
	}
	if wantsInputRequired(caps, version) {
		b, err := json.Marshal(map[string]any{"resultType": "input_required", "inputRequests": consentInputs(ce), "requestState": state})
		return b, false, err
	}
	if kind == "tools/call" {
		b, err := json.Marshal(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: consentText(ce)}}})
		return b, true, err
	}
	return nil, false, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: consentText(ce)}
}

// signedInResult answers the sign-in tool of a principal who has signed in.
func signedInResult(server string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "You are signed in to " + server + ": list the tools again to see its tools."}}}
}

// stdioOAuth starts the loopback listener of the sign-in pages when a server signs in
// per user: serve --stdio has no HTTP listener of its own.
func (g *Gateway) stdioOAuth(ctx context.Context) error {
	for _, s := range g.current().cfg.Servers {
		if s.Auth.Type == config.UpstreamAuthOAuth {
			return g.startOAuthListener(ctx)
		}
	}
	return nil
}
