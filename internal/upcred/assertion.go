package upcred

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// assertionLifetime is how long a private_key_jwt client assertion is valid.
const assertionLifetime = time.Minute

// assertionSigner signs the client assertions of private_key_jwt (RFC 7523, section 2.2).
type assertionSigner struct {
	key    crypto.Signer
	method jwt.SigningMethod
	kid    string
}

func newAssertionSigner(path, kid string) (*assertionSigner, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block found")
	}
	var key any
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, errors.New("cannot parse the private key")
	}
	s := &assertionSigner{kid: kid}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		s.key, s.method = k, jwt.SigningMethodRS256
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, errors.New("an ECDSA key must be on P-256 (ES256)")
		}
		s.key, s.method = k, jwt.SigningMethodES256
	case ed25519.PrivateKey:
		s.key, s.method = k, jwt.SigningMethodEdDSA
	default:
		return nil, fmt.Errorf("unsupported key type %T", key)
	}
	return s, nil
}

// sign returns a client assertion of clientID for the token endpoint aud, issued at now.
func (s *assertionSigner) sign(clientID, aud string, now time.Time) (string, error) {
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", err
	}
	t := jwt.NewWithClaims(s.method, jwt.RegisteredClaims{
		Issuer:    clientID,
		Subject:   clientID,
		Audience:  jwt.ClaimStrings{aud},
		ID:        hex.EncodeToString(jti),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(assertionLifetime)),
	})
	if s.kid != "" {
		t.Header["kid"] = s.kid
	}
	return t.SignedString(s.key)
}
