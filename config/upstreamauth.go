package config

import (
	"fmt"
	"net/url"
	"slices"
)

// Types of per-server upstream authentication (UpstreamAuth.Type).
const (
	// UpstreamAuthClientCredentials: the gateway's own machine identity (OAuth client
	// credentials grant), one token for every caller.
	UpstreamAuthClientCredentials = "client_credentials"
	// UpstreamAuthTokenExchange: the caller's validated JWT exchanged (RFC 8693) for a token
	// for this upstream, per principal.
	UpstreamAuthTokenExchange = "token-exchange"
	// UpstreamAuthOAuth: the gateway is an OAuth 2.1 client of the upstream for each
	// principal (authorization code with PKCE, after the principal's consent).
	UpstreamAuthOAuth = "oauth"
)

// Client authentication methods at a token endpoint (UpstreamAuth.TokenEndpointAuth).
const (
	ClientSecretBasic = "client_secret_basic"
	ClientSecretPost  = "client_secret_post"
	PrivateKeyJWT     = "private_key_jwt"
)

// Lists modes of an upstream server (Server.Lists).
const (
	ListsShared    = "shared"
	ListsPerClient = "per-client"
)

// UpstreamAuth is a server's "auth" key: how the gateway authenticates to an http or sse
// upstream, beside its static headers. The zero value (Type empty) means no such
// authentication. Secrets are read when the server is connected and never logged.
type UpstreamAuth struct {
	// Type is UpstreamAuthClientCredentials or UpstreamAuthTokenExchange.
	Type string
	// TokenURL (key "tokenURL") is the authorization server's token endpoint; https, or http
	// on loopback only.
	TokenURL string
	// ClientID (key "clientID") is the gateway's client at the authorization server.
	ClientID string
	// ClientSecret (key "clientSecret") authenticates it (client_secret_basic or
	// client_secret_post), usually "${VAR}"; ClientSecretFile (key "clientSecretFile") names a
	// file holding it instead (surrounding white space is dropped).
	ClientSecret     string
	ClientSecretFile string
	// TokenEndpointAuth (key "tokenEndpointAuth") is ClientSecretBasic (the default with a
	// secret), ClientSecretPost or PrivateKeyJWT (the default with a private key).
	TokenEndpointAuth string
	// PrivateKeyFile (key "privateKeyFile") names a PEM private key (RSA, ECDSA P-256 or
	// Ed25519) that signs the client assertion of private_key_jwt; KeyID (key "keyID") is put
	// in its "kid" header when set.
	PrivateKeyFile string
	KeyID          string
	// Scopes are requested with every token.
	Scopes []string
	// Audience (key "audience") is sent as the "audience" parameter: required for
	// token-exchange (the upstream's audience), optional for client_credentials.
	Audience string
	// Resource (key "resource") is sent as the RFC 8707 "resource" parameter when set.
	Resource string
	// SubjectTokenType (key "subjectTokenType") is the type of the caller's token in a token
	// exchange; default "urn:ietf:params:oauth:token-type:access_token".
	SubjectTokenType string
	// RequestedTokenType (key "requestedTokenType") is sent when set (token-exchange).
	RequestedTokenType string
	// ClientMetadataURL (key "clientMetadataURL", oauth only) is the https URL of the
	// gateway's Client ID Metadata Document: the client_id at authorization servers that
	// support such documents.
	ClientMetadataURL string
}

// ListsMode returns the server's effective lists mode: Lists when set, else ListsPerClient
// with a per-user credential (what a server lists may depend on who asks), else ListsShared.
func (s Server) ListsMode() string {
	switch {
	case s.Lists != "":
		return s.Lists
	case s.Auth.PerPrincipal():
		return ListsPerClient
	}
	return ListsShared
}

// Enabled reports whether the server has upstream authentication configured.
func (a UpstreamAuth) Enabled() bool { return a.Type != "" }

// PerPrincipal reports whether the upstream credential depends on the caller (every type but
// client_credentials).
func (a UpstreamAuth) PerPrincipal() bool {
	return a.Type != "" && a.Type != UpstreamAuthClientCredentials
}

// TokenStore is the "gateway.tokenStore" section: where per-principal upstream tokens are
// kept, encrypted at rest with AES-GCM under a key derived from Secret (its own secret, not
// shared with anything else). Absent (File empty): tokens are kept in memory only.
type TokenStore struct {
	// File is the encrypted store's path; it is created when absent.
	File string
	// Store (key "store") is StoreCluster to keep the tokens, each sealed, in the cluster's
	// shared store (gateway.cluster.store) instead of a file: what several replicas need.
	Store string
	// Secret (at least 32 bytes, usually "${VAR}") or SecretFile (key "secretFile") is the
	// secret the store's key is derived from; exactly one is required with File.
	Secret     string
	SecretFile string
}

// MinTokenStoreSecretLength is the shortest secret accepted for the token store.
const MinTokenStoreSecretLength = 32

func upstreamAuthFields(a *UpstreamAuth) []field {
	return []field{
		{name: "type", ptr: &a.Type},
		{name: "tokenURL", ptr: &a.TokenURL},
		{name: "clientID", ptr: &a.ClientID},
		{name: "clientSecret", ptr: &a.ClientSecret},
		{name: "clientSecretFile", ptr: &a.ClientSecretFile},
		{name: "tokenEndpointAuth", ptr: &a.TokenEndpointAuth},
		{name: "privateKeyFile", ptr: &a.PrivateKeyFile},
		{name: "keyID", ptr: &a.KeyID},
		{name: "scopes", ptr: &a.Scopes},
		{name: "audience", ptr: &a.Audience},
		{name: "resource", ptr: &a.Resource},
		{name: "subjectTokenType", ptr: &a.SubjectTokenType},
		{name: "requestedTokenType", ptr: &a.RequestedTokenType},
		{name: "clientMetadataURL", ptr: &a.ClientMetadataURL},
	}
}

func tokenStoreFields(t *TokenStore) []field {
	return []field{
		{name: "file", ptr: &t.File},
		{name: "store", ptr: &t.Store},
		{name: "secret", ptr: &t.Secret},
		{name: "secretFile", ptr: &t.SecretFile},
	}
}

// upstreamAuth checks a server's auth and lists keys; typ is its transport.
func (v *validator) upstreamAuth(serverKey string, s Server, typ string, jwt bool) {
	key := serverKey
	switch s.Lists {
	case "", ListsShared:
	case ListsPerClient:
		if s.SessionMode() != SessionPerClient {
			v.add(joinKey(key, "lists"), "per-client lists come from each client's own upstream session: they need session: per-client")
		}
	default:
		v.add(joinKey(key, "lists"), "must be shared or per-client")
	}
	a := s.Auth
	if !a.Enabled() {
		return
	}
	key = joinKey(key, "auth")
	switch a.Type {
	case UpstreamAuthClientCredentials, UpstreamAuthTokenExchange, UpstreamAuthOAuth:
	default:
		v.add(joinKey(key, "type"), "must be oauth, client_credentials or token-exchange")
		return
	}
	if typ == TypeStdio {
		v.add(key, "only valid for http and sse servers (a stdio server takes its credentials in env)")
	}
	if a.PerPrincipal() && s.Session == SessionShared {
		v.add(joinKey(serverKey, "session"), "a per-user credential needs session: per-client (one upstream session per client)")
	}
	if a.Type == UpstreamAuthTokenExchange {
		if !jwt {
			v.add(joinKey(key, "type"), "token-exchange exchanges the caller's JWT: it needs auth.jwt")
		}
		if a.Audience == "" {
			v.add(joinKey(key, "audience"), "token-exchange needs the upstream's audience")
		}
	}
	if a.Type == UpstreamAuthOAuth {
		if s.Lists == ListsShared {
			v.add(joinKey(serverKey, "lists"), "an oauth server lists with each user's own token (the gateway has none): lists must be per-client")
		}
		if s.Required {
			v.add(joinKey(serverKey, "required"), "an oauth server connects only with each user's own token, after that user signed in: the gateway has no connection of its own for readiness to wait for; remove required")
		}
		v.oauthAuth(key, a)
		return
	}
	if u, err := url.Parse(a.TokenURL); a.TokenURL == "" || err != nil || u.Host == "" ||
		(u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname()))) {
		v.add(joinKey(key, "tokenURL"), "must be an https URL (or http on a loopback address)")
	}
	if a.ClientID == "" {
		v.add(joinKey(key, "clientID"), "is required")
	}
	if a.ClientSecret != "" && a.ClientSecretFile != "" {
		v.add(joinKey(key, "clientSecret"), "set clientSecret or clientSecretFile, not both")
	}
	if a.ClientSecretFile != "" {
		v.checkFile(joinKey(key, "clientSecretFile"), a.ClientSecretFile)
	}
	if a.PrivateKeyFile != "" {
		v.checkFile(joinKey(key, "privateKeyFile"), a.PrivateKeyFile)
	}
	secret := a.ClientSecret != "" || a.ClientSecretFile != ""
	switch a.TokenEndpointAuth {
	case "":
		if !secret && a.PrivateKeyFile == "" {
			v.add(key, "needs clientSecret, clientSecretFile or privateKeyFile")
		}
		if secret && a.PrivateKeyFile != "" {
			v.add(joinKey(key, "tokenEndpointAuth"), "with both a secret and a private key, say which to use")
		}
	case ClientSecretBasic, ClientSecretPost:
		if !secret {
			v.add(joinKey(key, "tokenEndpointAuth"), a.TokenEndpointAuth+" needs clientSecret or clientSecretFile")
		}
	case PrivateKeyJWT:
		if a.PrivateKeyFile == "" {
			v.add(joinKey(key, "tokenEndpointAuth"), "private_key_jwt needs privateKeyFile")
		}
	default:
		v.add(joinKey(key, "tokenEndpointAuth"), "must be client_secret_basic, client_secret_post or private_key_jwt")
	}
	for i, sc := range a.Scopes {
		if sc == "" || slices.ContainsFunc([]byte(sc), func(c byte) bool { return c <= ' ' || c == '"' || c == '\\' }) {
			v.add(fmt.Sprintf("%s[%d]", joinKey(key, "scopes"), i), "must be a non-empty scope token (no spaces, quotes or backslashes)")
		}
	}
}

// tokenStore checks gateway.tokenStore.
func (v *validator) tokenStore(t TokenStore) {
	const key = "gateway.tokenStore"
	if t.File == "" && t.Store == "" {
		if t.Secret != "" || t.SecretFile != "" {
			v.add(key+".file", "is required with a secret (or store: cluster)")
		}
		return
	}
	switch {
	case t.Secret != "" && t.SecretFile != "":
		v.add(key+".secret", "set secret or secretFile, not both")
	case t.Secret == "" && t.SecretFile == "":
		v.add(key+".secret", "the token store needs secret or secretFile (its encryption key is derived from it)")
	case t.Secret != "" && len(t.Secret) < MinTokenStoreSecretLength:
		v.add(key+".secret", "must be at least 32 bytes")
	case t.SecretFile != "":
		v.checkFile(key+".secretFile", t.SecretFile)
	}
}
