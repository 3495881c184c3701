// Package upcred holds the credentials the gateway presents to upstream servers on behalf of
// itself or of a principal (docs/architecture.md, Upstream credentials): the encrypted token
// store, kept per principal and server, and the token sources that fill it — the OAuth client
// credentials grant (the gateway's machine identity) and the RFC 8693 token exchange of a
// caller's validated JWT. Token requests go through golang.org/x/oauth2.
//
// Access tokens, refresh tokens, client secrets and subject tokens never appear in logs,
// errors or listings: errors name the server and the token endpoint's OAuth error code only.
package upcred

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
)

// ErrNotFound: the store holds no token for that principal and server.
var ErrNotFound = errors.New("no stored token")

// Token is one stored upstream token. Its fields are secrets except Expiry, Obtained and
// Scopes.
type Token struct {
	AccessToken  string    `json:"access_token"`
	TokenType    string    `json:"token_type,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	Scopes       []string  `json:"scopes,omitempty"`
	Obtained     time.Time `json:"obtained,omitzero"`
	// Client is how to refresh it, for a token of a sign-in (oauth.go): the token endpoint
	// and the client discovered or registered then; nil otherwise.
	Client *RefreshClient `json:"client,omitempty"`
}

// RefreshClient is the client a refresh token is redeemed with. ClientSecret is a secret.
type RefreshClient struct {
	TokenURL     string `json:"token_url"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	AuthStyle    int    `json:"auth_style,omitempty"`
}

// Valid reports whether t holds an access token that does not expire within early of now.
func (t *Token) Valid(now time.Time, early time.Duration) bool {
	return t != nil && t.AccessToken != "" && (t.Expiry.IsZero() || now.Add(early).Before(t.Expiry))
}

// Entry describes a stored token without any secret: what `manifold auth list` shows.
type Entry struct {
	Principal   string    `json:"principal"`
	Server      string    `json:"server"`
	Expiry      time.Time `json:"expiry,omitzero"`
	Obtained    time.Time `json:"obtained,omitzero"`
	Scopes      []string  `json:"scopes,omitempty"`
	Refreshable bool      `json:"refreshable"`
}

// Store keeps tokens per principal and server. Implementations are safe for concurrent use;
// the file store (NewFileStore) serves one instance, and a cluster's shared store can
// implement the same interface.
type Store interface {
	// Get returns the token of principal for server, or an error wrapping ErrNotFound.
	Get(ctx context.Context, principal, server string) (*Token, error)
	// Put stores t for principal and server, replacing any token there.
	Put(ctx context.Context, principal, server string, t *Token) error
	// Revoke removes principal's tokens: for server, or for every server when server is "".
	// It returns how many it removed.
	Revoke(ctx context.Context, principal, server string) (int, error)
	// List describes the stored tokens of principal, or of everyone when principal is "",
	// sorted by principal and server.
	List(ctx context.Context, principal string) ([]Entry, error)
}

// records is the content of a store: tokens by principal, then server.
type records map[string]map[string]*Token

func (r records) get(principal, server string) (*Token, bool) {
	t, ok := r[principal][server]
	return t, ok
}

func (r records) put(principal, server string, t *Token) {
	m := r[principal]
	if m == nil {
		m = map[string]*Token{}
		r[principal] = m
	}
	m[server] = t
}

func (r records) revoke(principal, server string) int {
	m := r[principal]
	n := 0
	for s := range m {
		if server == "" || s == server {
			delete(m, s)
			n++
		}
	}
	if len(m) == 0 {
		delete(r, principal)
	}
	return n
}

func (r records) list(principal string) []Entry {
	var out []Entry
	for p, m := range r {
		if principal != "" && p != principal {
			continue
		}
		for s, t := range m {
			out = append(out, Entry{Principal: p, Server: s, Expiry: t.Expiry, Obtained: t.Obtained,
				Scopes: slices.Clone(t.Scopes), Refreshable: t.RefreshToken != ""})
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := strings.Compare(a.Principal, b.Principal); c != 0 {
			return c
		}
		return strings.Compare(a.Server, b.Server)
	})
	return out
}

func cloneToken(t *Token) *Token {
	c := *t
	c.Scopes = slices.Clone(t.Scopes)
	return &c
}
