package cluster

import (
	"errors"
	"fmt"
	"time"
)

// Sign-in tokens. An upstream sign-in (`auth.type: oauth`) waits in the
// memory of the replica that started it: the authorization code flow, its
// PKCE verifier and its client registration live there. Its start link and
// the OAuth state it sends to the authorization server are SignIn tokens,
// sealed under a key of their own (so that no session token opens as one,
// nor the reverse), naming that replica; a browser request that lands on
// another replica is forwarded to it.

// The kinds of sign-in tokens.
const (
	// KindSignInStart names the start link of a sign-in.
	KindSignInStart Kind = 3
	// KindSignInState names the OAuth state of a sign-in, which comes back
	// on the callback.
	KindSignInState Kind = 4
	// KindSignInPage names what another page of a sign-in sends out and
	// gets back (the state of a sign-in of the person at an identity
	// provider).
	KindSignInPage Kind = 5
)

// SignIn is what a sign-in token names.
type SignIn struct {
	Kind Kind
	// Owner and Boot name the replica process the sign-in waits in.
	Owner string
	Boot  uint64
	// Expires is when the token stops opening (second precision).
	Expires time.Time
	// Principal is who the sign-in is for.
	Principal Principal
	// Server is the upstream signed in to (at most 255 bytes).
	Server string
	// Local is the owner's key of the sign-in: a random nonce for a start
	// link, the authorization code flow's own state for a state.
	Local string
}

// signInAAD binds sign-in ciphertexts to their use.
var signInAAD = []byte("manifold oauth sign-in token v1")

// errSignInKind: a SignIn of a kind that is not a sign-in's.
var errSignInKind = errors.New("cluster: not a sign-in token kind")

// SealSignIn returns s encoded as a token under the issuing sign-in key.
// The token is at most 1024 characters (a longer one is an error).
func (k *Keys) SealSignIn(s *SignIn) (string, error) {
	if !signInKind(s.Kind) {
		return "", errSignInKind
	}
	if len(s.Server) > 255 {
		return "", fmt.Errorf("cluster: server name %q too long", s.Server)
	}
	local := make([]byte, 0, 1+len(s.Server)+len(s.Local))
	local = append(local, byte(len(s.Server)))
	local = append(local, s.Server...)
	local = append(local, s.Local...)
	return seal(k.signIn[0], signInAAD, &Token{Kind: s.Kind, Owner: s.Owner, Boot: s.Boot, Expires: s.Expires,
		Principal: s.Principal, Local: string(local)})
}

// OpenSignIn returns what the sign-in token s names, if a sign-in key
// (current or previous) sealed it and it has not expired at now. Errors are
// ErrMalformed, ErrForged or ErrExpired.
func (k *Keys) OpenSignIn(s string, now time.Time) (SignIn, error) {
	t, err := open(k.signIn, signInAAD, s, now)
	if err != nil {
		return SignIn{}, err
	}
	if !signInKind(t.Kind) || len(t.Local) < 1 || len(t.Local) < 1+int(t.Local[0]) {
		return SignIn{}, ErrMalformed // sealed by us, so never: a version skew
	}
	n := 1 + int(t.Local[0])
	return SignIn{Kind: t.Kind, Owner: t.Owner, Boot: t.Boot, Expires: t.Expires, Principal: t.Principal,
		Server: t.Local[1:n], Local: t.Local[n:]}, nil
}

// IssueSignIn seals a sign-in token of kind owned by this replica process,
// valid until expires.
func (n *Node) IssueSignIn(kind Kind, server string, principal Principal, local string, expires time.Time) (string, error) {
	return n.Keys().SealSignIn(&SignIn{Kind: kind, Owner: n.self, Boot: n.boot, Expires: expires, Principal: principal,
		Server: server, Local: local})
}

// OpenSignIn opens the sign-in token s (see Keys.OpenSignIn).
func (n *Node) OpenSignIn(s string) (SignIn, error) { return n.Keys().OpenSignIn(s, time.Now()) }

func signInKind(k Kind) bool { return k >= KindSignInStart && k <= KindSignInPage }
