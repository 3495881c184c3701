package config

import (
	"fmt"
	"net/url"
	"slices"
)

// oauthAuth checks the keys of an `auth` of type oauth: everything is discovered from the
// upstream except the client's registration, which is a pre-registered clientID (with an
// optional secret), a Client ID Metadata Document URL, or else dynamic registration.
func (v *validator) oauthAuth(key string, a UpstreamAuth) {
	for k, set := range map[string]bool{"tokenURL": a.TokenURL != "", "privateKeyFile": a.PrivateKeyFile != "",
		"audience": a.Audience != "", "subjectTokenType": a.SubjectTokenType != "", "requestedTokenType": a.RequestedTokenType != ""} {
		if set {
			v.add(joinKey(key, k), "not used by oauth (its endpoints are discovered from the upstream)")
		}
	}
	if a.ClientMetadataURL != "" {
		if u, err := url.Parse(a.ClientMetadataURL); err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" {
			v.add(joinKey(key, "clientMetadataURL"), "must be an https URL with a path (the client_id of a Client ID Metadata Document)")
		}
	}
	if (a.ClientSecret != "" || a.ClientSecretFile != "") && a.ClientID == "" {
		v.add(joinKey(key, "clientID"), "is required with a client secret")
	}
	if a.ClientSecret != "" && a.ClientSecretFile != "" {
		v.add(joinKey(key, "clientSecret"), "set clientSecret or clientSecretFile, not both")
	}
	if a.ClientSecretFile != "" {
		v.checkFile(joinKey(key, "clientSecretFile"), a.ClientSecretFile)
	}
	switch a.TokenEndpointAuth {
	case "", ClientSecretBasic, ClientSecretPost:
	default:
		v.add(joinKey(key, "tokenEndpointAuth"), "must be client_secret_basic or client_secret_post with oauth")
	}
	for i, sc := range a.Scopes {
		if sc == "" || slices.ContainsFunc([]byte(sc), func(c byte) bool { return c <= ' ' || c == '"' || c == '\\' }) {
			v.add(fmt.Sprintf("%s[%d]", joinKey(key, "scopes"), i), "must be a non-empty scope token (no spaces, quotes or backslashes)")
		}
	}
}

// publicURL checks gateway.publicURL.
func (v *validator) publicURL(s string) {
	if s == "" {
		return
	}
	if u, err := url.Parse(s); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		v.add("gateway.publicURL", "must be an http or https URL without query or fragment")
	}
}
