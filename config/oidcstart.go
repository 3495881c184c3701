package config

import (
	"net"
	"net/url"
	"strings"
)

// The OAuth start page's sign-in at the JWT issuer (docs/architecture.md, Upstream
// credentials: oauth): with auth.jwt.oidc on and a server of auth type oauth, the start page
// sends JWT principals to the issuer with the redirect URL <gateway.publicURL>/oauth/oidc/
// callback, derived like the upstream sign-in's /oauth/callback; it needs no key of its own.
// auth.jwt.oidc.redirectURL stays the console's callback.

// OAuthOIDCCallbackPath is the path of the start page's OIDC callback, under the gateway's
// public base URL.
const OAuthOIDCCallbackPath = "/oauth/oidc/callback"

// consoleOIDCCallbackPath ends the console's OIDC callback URL.
const consoleOIDCCallbackPath = "/ui/oidc/callback"

// oidcStart checks the keys the start page's OIDC sign-in depends on.
func (v *validator) oidcStart(c *Config) {
	j := c.Auth.JWT
	if j == nil || !j.OIDC.Enabled() {
		return
	}
	if r := j.OIDC.RedirectURL; r != "" {
		if u, err := url.Parse(r); err == nil && !strings.HasSuffix(u.Path, consoleOIDCCallbackPath) {
			v.add("auth.jwt.oidc.redirectURL", "is the console's callback and must end in "+consoleOIDCCallbackPath+
				" (the OAuth start page's, "+OAuthOIDCCallbackPath+", is derived from gateway.publicURL)")
		}
	}
	if c.Gateway.PublicURL != "" || !c.anyServerAuth(UpstreamAuthOAuth) {
		return
	}
	if host, _, err := net.SplitHostPort(c.Gateway.Listen); err == nil && (host == "" || net.ParseIP(host).IsUnspecified()) {
		v.add("gateway.publicURL", "is required with auth.jwt.oidc and a server of auth type oauth when gateway.listen names no host: "+
			"the start page's OIDC callback, <publicURL>"+OAuthOIDCCallbackPath+", is registered at the issuer")
	}
}

// anyServerAuth reports whether a server that is not disabled has auth of type typ.
func (c *Config) anyServerAuth(typ string) bool {
	for _, s := range c.Servers {
		if s.Auth.Type == typ && !s.Disabled {
			return true
		}
	}
	return false
}
