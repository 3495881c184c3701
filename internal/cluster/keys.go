// Package cluster lets several gateway replicas serve one set of clients
// behind a plain round-robin load balancer, without affinity and without a
// shared store (docs/architecture.md, Cluster mode). What lives in one
// replica's memory is named by a token that every replica can verify and
// that names its owner: session ids (Token), signed states (Keys.State),
// and forwarded requests (the hop header, Node.Forward). Keys are derived
// once from the cluster secret with HKDF, never per request.
//
// The package knows nothing of MCP or of the gateway's sessions: it seals
// and opens tokens, signs and checks hops, picks a principal's home replica
// (rendezvous hashing over the live peers) and reverse-proxies a request to
// another replica.
package cluster

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
)

// MinSecretLen is the shortest cluster secret accepted, in bytes.
const MinSecretLen = 32

// The HKDF info strings: one key per purpose, so that no value made for one
// purpose verifies for another.
const (
	infoToken = "manifold cluster v1: session token AEAD"
	infoHop   = "manifold cluster v1: hop header HMAC"
	infoState = "manifold cluster v1: requestState HMAC"
	// infoSignIn seals the start links and OAuth states of upstream
	// sign-ins (signin.go).
	infoSignIn = "manifold cluster v1: oauth sign-in AEAD"
	// infoSignInCookie MACs the gateway's sign-in cookie, which every
	// replica accepts.
	infoSignInCookie = "manifold v1: oauth sign-in cookie HMAC"
)

// Keys are the purpose keys derived from the cluster secrets: the first of
// each list from the current secret (the one that issues), the rest from
// the previous secrets (still accepted, never issued). Immutable after
// NewKeys; safe for concurrent use.
type Keys struct {
	token  []cipher.AEAD
	signIn []cipher.AEAD
	hop    [][]byte
	state  [][]byte
	cookie [][]byte
}

// ErrShortSecret is returned for a secret under MinSecretLen bytes.
var ErrShortSecret = fmt.Errorf("cluster secret shorter than %d bytes", MinSecretLen)

// NewKeys derives the purpose keys of secret (which issues) and previous
// (accepted until removed), each at least MinSecretLen bytes.
func NewKeys(secret []byte, previous [][]byte) (*Keys, error) {
	k := &Keys{}
	for i, s := range append([][]byte{secret}, previous...) {
		if len(s) < MinSecretLen {
			if i == 0 {
				return nil, ErrShortSecret
			}
			return nil, fmt.Errorf("previous secret %d: %w", i, ErrShortSecret)
		}
		aead, err := newAEAD(s, infoToken)
		if err != nil {
			return nil, err
		}
		signIn, err := newAEAD(s, infoSignIn)
		if err != nil {
			return nil, err
		}
		hk, err := derive(s, infoHop)
		if err != nil {
			return nil, err
		}
		sk, err := derive(s, infoState)
		if err != nil {
			return nil, err
		}
		ck, err := derive(s, infoSignInCookie)
		if err != nil {
			return nil, err
		}
		k.token = append(k.token, aead)
		k.signIn = append(k.signIn, signIn)
		k.hop = append(k.hop, hk)
		k.state = append(k.state, sk)
		k.cookie = append(k.cookie, ck)
	}
	return k, nil
}

// StateKeys returns the requestState HMAC keys, the issuing one first.
func (k *Keys) StateKeys() [][]byte { return k.state }

// SignInCookieKeys returns the sign-in cookie's HMAC keys, the issuing one
// first.
func (k *Keys) SignInCookieKeys() [][]byte { return k.cookie }

// newAEAD is AES-256-GCM under the key of secret for info.
func newAEAD(secret []byte, info string) (cipher.AEAD, error) {
	key, err := derive(secret, info)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("cluster: cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("cluster: cipher: %w", err)
	}
	return aead, nil
}

func derive(secret []byte, info string) ([]byte, error) {
	key, err := hkdf.Key(sha256.New, secret, nil, info, 32)
	if err != nil {
		return nil, fmt.Errorf("cluster: deriving a key: %w", err)
	}
	return key, nil
}

// Sentinel errors of token and hop checks. Callers answer every one of them
// as a session that does not exist (404), and log which it was.
var (
	// ErrMalformed: not a token of this format (truncated, bad encoding).
	ErrMalformed = errors.New("malformed token")
	// ErrForged: no cluster key opens it (forged, altered, or sealed under a
	// secret no longer accepted).
	ErrForged = errors.New("token not sealed under a cluster key")
	// ErrExpired: past its expiry.
	ErrExpired = errors.New("token expired")
)
