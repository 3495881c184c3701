package cluster

import (
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"
)

// Kind says what a token names.
type Kind byte

// The kinds of tokens.
const (
	// KindSession names a streamable HTTP session (its Mcp-Session-Id).
	KindSession Kind = 1
	// KindSSE names a legacy SSE session (the session in its endpoint URL).
	KindSSE Kind = 2
)

// PrincipalSize is the size of a principal's digest in a token.
const PrincipalSize = 16

// Principal is the digest of a principal as bound to a token: who opened
// it, and how they authenticated (the caller chooses the string; see
// PrincipalOf).
type Principal [PrincipalSize]byte

// PrincipalOf is the digest of principal, a string the caller builds so
// that two principals never give the same one.
func PrincipalOf(principal string) Principal {
	sum := sha256.Sum256([]byte(principal))
	var p Principal
	copy(p[:], sum[:])
	return p
}

// Token is what a session id names, sealed (encrypted and authenticated)
// under the cluster key: only replicas holding the secret can read or make
// one, and a token altered in any bit does not open.
type Token struct {
	Kind Kind
	// Owner is the advertised address of the replica that holds it.
	Owner string
	// Boot is the owner's boot id: a replica that restarted at the same
	// address has another, and holds nothing the token names.
	Boot uint64
	// Expires is when the token stops opening (second precision).
	Expires time.Time
	// Principal is who may use it.
	Principal Principal
	// Local is what the owner needs to find it besides the token itself
	// (the SDK's id of an SSE session); may be empty.
	Local string
}

const (
	tokenVersion = 1
	nonceSize    = 12
	tagSize      = 16
	// fixed part of the plaintext: kind, boot, expiry, principal, owner length.
	plainFixed = 1 + 8 + 8 + PrincipalSize + 1
	// maxTokenLen bounds an encoded token, so a huge header costs nothing.
	maxTokenLen = 1024
)

// tokenAAD binds ciphertexts to their use.
var tokenAAD = []byte("manifold session token v1")

var b64 = base64.RawURLEncoding.Strict()

// Seal returns t encoded as a token under the issuing key.
func (k *Keys) Seal(t *Token) (string, error) { return seal(k.token[0], tokenAAD, t) }

// seal encodes t under aead, bound to aad.
func seal(aead cipher.AEAD, aad []byte, t *Token) (string, error) {
	if len(t.Owner) > 255 {
		return "", fmt.Errorf("cluster: owner address %q too long", t.Owner)
	}
	plain := make([]byte, 0, plainFixed+len(t.Owner)+len(t.Local))
	plain = append(plain, byte(t.Kind))
	plain = binary.BigEndian.AppendUint64(plain, t.Boot)
	plain = binary.BigEndian.AppendUint64(plain, uint64(t.Expires.Unix()))
	plain = append(plain, t.Principal[:]...)
	plain = append(plain, byte(len(t.Owner)))
	plain = append(plain, t.Owner...)
	plain = append(plain, t.Local...)

	out := make([]byte, 1+nonceSize, 1+nonceSize+len(plain)+tagSize)
	out[0] = tokenVersion
	if _, err := rand.Read(out[1 : 1+nonceSize]); err != nil {
		return "", fmt.Errorf("cluster: token nonce: %w", err)
	}
	out = aead.Seal(out, out[1:1+nonceSize], plain, aad)
	if b64.EncodedLen(len(out)) > maxTokenLen {
		return "", fmt.Errorf("cluster: token over %d bytes", maxTokenLen)
	}
	return b64.EncodeToString(out), nil
}

// Open returns what token s names, if a cluster key (current or previous)
// sealed it and it has not expired at now. Errors are ErrMalformed,
// ErrForged or ErrExpired.
func (k *Keys) Open(s string, now time.Time) (Token, error) { return open(k.token, tokenAAD, s, now) }

// open opens s under the first of aeads that opens it, bound to aad.
func open(aeads []cipher.AEAD, aad []byte, s string, now time.Time) (Token, error) {
	if len(s) > maxTokenLen || b64.DecodedLen(len(s)) < 1+nonceSize+tagSize+plainFixed {
		return Token{}, ErrMalformed
	}
	// Two small allocations: slices passed to the AEAD (an interface)
	// escape anyway.
	raw := make([]byte, b64.DecodedLen(len(s)))
	n, err := b64.Decode(raw, []byte(s))
	if err != nil || raw[0] != tokenVersion || n < 1+nonceSize+tagSize+plainFixed {
		return Token{}, ErrMalformed
	}
	raw = raw[:n]
	nonce, sealed := raw[1:1+nonceSize], raw[1+nonceSize:]
	scratch := make([]byte, 0, len(sealed))
	var plain []byte
	for _, aead := range aeads {
		// Not in place: a failed Open clears its output, and the next key
		// needs the ciphertext.
		if p, err := aead.Open(scratch, nonce, sealed, aad); err == nil {
			plain = p
			break
		}
	}
	if plain == nil {
		return Token{}, ErrForged
	}
	owner := int(plain[plainFixed-1])
	if len(plain) < plainFixed+owner {
		return Token{}, ErrMalformed // sealed by us, so never: a version skew
	}
	t := Token{
		Kind:    Kind(plain[0]),
		Boot:    binary.BigEndian.Uint64(plain[1:9]),
		Expires: time.Unix(int64(binary.BigEndian.Uint64(plain[9:17])), 0),
		Owner:   string(plain[plainFixed : plainFixed+owner]),
		Local:   string(plain[plainFixed+owner:]),
	}
	copy(t.Principal[:], plain[17:17+PrincipalSize])
	if !now.Before(t.Expires) {
		return Token{}, ErrExpired
	}
	return t, nil
}
