package gateway

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/authn"
	"github.com/manifold-mcp/manifold/internal/cluster"
	"github.com/manifold-mcp/manifold/internal/upcred"
	"github.com/manifold-mcp/manifold/upstream"
)

// Upstream credentials (docs/architecture.md, Upstream credentials): a
// server's `auth` gives its upstream sessions a bearer token of their own,
// never the client's. client_credentials: one token of the gateway's
// machine identity, for the pool upstream and every per-client session.
// token-exchange: each per-client session presents its principal's token,
// exchanged for the caller's JWT (which goes to the token endpoint only)
// and kept in the token store until it expires; the pool upstream, which
// lists, authenticates as the gateway itself (client credentials of the
// same client). A server without auth costs nothing here.

// upstreamCreds holds the token store and the token sources of the servers
// with auth, built on first use and again when their config changes.
// Connecting takes mu; calls never do.
type upstreamCreds struct {
	mu       sync.Mutex
	store    upcred.Store
	storeCfg config.TokenStore
	storeErr error
	servers  map[string]*serverCreds
	// shared is the cluster's shared store (gateway.tokenStore.store:
	// cluster), set at New; nil without one.
	shared *cluster.RedisStore
}

// serverCreds are the token sources of one server's auth.
type serverCreds struct {
	auth config.UpstreamAuth
	cc   *upcred.ClientCredentials
	ex   *upcred.Exchanger // token-exchange only
	err  error             // building them failed (unreadable secret or key file)
}

// storeLocked returns the token store of cfg, opening it when cfg changed;
// c.mu is held.
func (c *upstreamCreds) storeLocked(cfg config.TokenStore) (upcred.Store, error) {
	if c.store != nil && cfg == c.storeCfg {
		return c.store, c.storeErr
	}
	c.storeCfg, c.servers = cfg, nil // exchangers hold the old store
	c.store, c.storeErr = openTokenStore(cfg, c.shared)
	if c.storeErr != nil {
		c.store = &upcred.MemoryStore{} // exchangers report storeErr instead
	}
	return c.store, c.storeErr
}

// tokenStore returns the token store of cfg.
func (c *upstreamCreds) tokenStore(cfg config.TokenStore) (upcred.Store, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.storeLocked(cfg)
}

// forServer returns the token sources of s under the token store cfg.
func (c *upstreamCreds) forServer(s config.Server, cfg config.TokenStore) *serverCreds {
	c.mu.Lock()
	defer c.mu.Unlock()
	store, storeErr := c.storeLocked(cfg)
	if sc := c.servers[s.Name]; sc != nil && reflect.DeepEqual(sc.auth, s.Auth) {
		return sc
	}
	sc := &serverCreds{auth: s.Auth}
	sc.cc, sc.err = upcred.NewClientCredentials(s.Name, s.Auth, nil)
	if sc.err == nil && s.Auth.Type == config.UpstreamAuthTokenExchange {
		if storeErr != nil {
			sc.err = storeErr
		} else {
			sc.ex, sc.err = upcred.NewExchanger(s.Name, s.Auth, store, nil)
		}
	}
	if c.servers == nil {
		c.servers = map[string]*serverCreds{}
	}
	c.servers[s.Name] = sc
	return sc
}

// poolCredential returns the credential of s's pool upstream: its client
// credentials, or nil without auth.
func (g *Gateway) poolCredential(s config.Server, gw *config.Gateway) upstream.Credential {
	if !s.Auth.Enabled() {
		return nil
	}
	if s.Auth.Type == config.UpstreamAuthOAuth {
		return failedCredential{errSignInPerUser}
	}
	sc := g.creds.forServer(s, gw.TokenStore)
	if sc.err != nil {
		return failedCredential{sc.err}
	}
	return sc.cc
}

// poolStandby is the Standby note of s's pool upstream: an oauth server's
// pool upstream never connects, since it has no token of its own (each
// principal signs in, and its own session connects); "" for the others.
func poolStandby(s config.Server) string {
	if s.Auth.Type == config.UpstreamAuthOAuth {
		return "awaiting per-user sign-in: the server signs in per user, so only each user's own session connects, after that user signed in"
	}
	return ""
}

// dedicatedCredential returns the credential of a per-client upstream
// session of s for principal: the pool's for client_credentials, the
// principal's exchanged token for token-exchange.
func (g *Gateway) dedicatedCredential(s config.Server, principal string) upstream.Credential {
	if !s.Auth.PerPrincipal() {
		return g.poolCredential(s, &g.current().cfg.Gateway)
	}
	if s.Auth.Type == config.UpstreamAuthOAuth {
		return g.oauthCredentialFor(s, principal)
	}
	sc := g.creds.forServer(s, g.current().cfg.Gateway.TokenStore)
	if sc.err != nil {
		return failedCredential{sc.err}
	}
	return &exchangeCredential{ex: sc.ex, principal: principal}
}

// failedCredential is the credential of a server whose auth could not be
// set up: every request fails with why.
type failedCredential struct{ err error }

func (f failedCredential) AccessToken(context.Context) (string, error) { return "", f.err }
func (failedCredential) Reject(string)                                 {}

// exchangeCredential is one principal's token-exchange credential: the
// stored token while valid, else one exchanged for the caller's latest JWT
// (setSubject).
type exchangeCredential struct {
	ex        *upcred.Exchanger
	principal string
	subject   atomic.Pointer[string]
}

// setSubject records the JWT of the principal's latest request.
func (e *exchangeCredential) setSubject(id *authn.Identity) {
	if s := id.SubjectToken(); s != "" {
		if p := e.subject.Load(); p == nil || *p != s {
			e.subject.Store(&s)
		}
	}
}

// AccessToken implements upstream.Credential.
func (e *exchangeCredential) AccessToken(ctx context.Context) (string, error) {
	var subject string
	if p := e.subject.Load(); p != nil {
		subject = *p
	}
	return e.ex.AccessToken(ctx, e.principal, subject)
}

// Reject implements upstream.Credential.
func (e *exchangeCredential) Reject(token string) {
	e.ex.Reject(context.Background(), e.principal, token)
}

// callerIdentity returns the identity the request of from came with: the
// SDK's request, else (raw path) the one the HTTP front put in ctx, else the
// one its session was opened with; nil without auth.
func (g *Gateway) callerIdentity(ctx context.Context, from downstream) *authn.Identity {
	var id *authn.Identity
	if from.req != nil {
		id = identity(ctx, from.req)
	} else {
		id, _ = ctx.Value(identityCtxKey{}).(*authn.Identity)
	}
	if id == nil && from.ss != nil {
		if v, ok := g.clients.bySession.Load(from.ss); ok {
			id = v.(*client).id
		}
	}
	return id
}
