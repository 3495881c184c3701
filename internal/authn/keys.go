package authn

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/manifold-mcp/manifold/config"
)

// minRSABits is the size of the smallest RSA public key accepted, from the configuration or
// a JWKS.
const minRSABits = 2048

// Algorithms accepted by default for each kind of key source. "none" never is.
var (
	rsaAlgorithms  = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	hmacAlgorithms = []string{"HS256", "HS384", "HS512"}
	jwksAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)

// keySource is where the keys verifying JWT signatures come from: one static key (a PEM public
// key or an HMAC secret), or a JWKS.
type keySource struct {
	configKey string   // the configuration key of the source, for messages
	fits      []string // the algorithms its keys can verify

	static   any         // *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey or []byte (HMAC)
	staticFn jwt.Keyfunc // returns static

	jwksURL string
	jwks    *jwks // started by New
}

// newKeySource reads the key source of j: parses a PEM key, reads a key file, or checks the
// JWKS URL (fetched later).
func newKeySource(j *config.JWT) (*keySource, error) {
	n := 0
	for _, s := range []string{j.JWKSURL, j.PublicKey, j.PublicKeyFile, j.Secret} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return nil, errors.New("auth.jwt: set exactly one key source: jwksURL, publicKey, publicKeyFile or secret")
	}
	s := &keySource{}
	switch {
	case j.JWKSURL != "":
		s.configKey = "auth.jwt.jwksURL"
		u, err := url.Parse(j.JWKSURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, errors.New("auth.jwt.jwksURL: must be an absolute https URL")
		}
		s.jwksURL, s.fits = j.JWKSURL, jwksAlgorithms
		return s, nil
	case j.Secret != "":
		s.configKey = "auth.jwt.secret"
		s.static, s.fits = []byte(j.Secret), hmacAlgorithms
	case j.PublicKey != "":
		s.configKey = "auth.jwt.publicKey"
		key, fits, err := parsePublicKey([]byte(j.PublicKey))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.configKey, err)
		}
		s.static, s.fits = key, fits
	default:
		s.configKey = "auth.jwt.publicKeyFile"
		data, err := os.ReadFile(j.PublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.configKey, err)
		}
		key, fits, err := parsePublicKey(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", s.configKey, j.PublicKeyFile, err)
		}
		s.static, s.fits = key, fits
	}
	s.staticFn = s.staticKey
	return s, nil
}

// parsePublicKey returns the public key of the first PEM block of data ("PUBLIC KEY",
// "RSA PUBLIC KEY" or "CERTIFICATE") and the algorithms it can verify.
func parsePublicKey(data []byte) (any, []string, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, nil, errors.New("not a PEM public key")
	}
	var (
		key any
		err error
	)
	switch {
	case block.Type == "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case block.Type == "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case block.Type == "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			key = cert.PublicKey
		}
	case strings.Contains(block.Type, "PRIVATE KEY"):
		return nil, nil, errors.New("a private key, not a public key: keep it secret and give its public key (openssl pkey -pubout)")
	default:
		return nil, nil, fmt.Errorf("not a PEM public key (a %q block)", block.Type)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("not a PEM public key: %w", err)
	}
	switch k := key.(type) {
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < minRSABits {
			return nil, nil, fmt.Errorf("an RSA key of %d bits: at least %d are needed", bits, minRSABits)
		}
		return k, rsaAlgorithms, nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return k, []string{"ES256"}, nil
		case elliptic.P384():
			return k, []string{"ES384"}, nil
		case elliptic.P521():
			return k, []string{"ES512"}, nil
		}
		return nil, nil, fmt.Errorf("an ECDSA key on curve %s: JWTs use P-256, P-384 or P-521", k.Curve.Params().Name)
	case ed25519.PublicKey:
		return k, []string{"EdDSA"}, nil
	}
	return nil, nil, fmt.Errorf("a %T public key: RSA, ECDSA or Ed25519 is needed", key)
}

// algorithms returns the accepted "alg" values: configured ones, which must fit the source, or
// all those that fit it.
func (s *keySource) algorithms(configured []string) ([]string, error) {
	if len(configured) == 0 {
		return slices.Clone(s.fits), nil
	}
	var algs []string
	for i, alg := range configured {
		if !slices.Contains(s.fits, alg) {
			return nil, fmt.Errorf("auth.jwt.algorithms[%d]: %q cannot be verified with the key of %s, which fits %s",
				i, alg, s.configKey, strings.Join(s.fits, ", "))
		}
		if !slices.Contains(algs, alg) {
			algs = append(algs, alg)
		}
	}
	return algs, nil
}

// keyfunc returns the jwt.Keyfunc giving the key that verifies a token.
func (s *keySource) keyfunc(ctx context.Context) jwt.Keyfunc {
	if s.jwks != nil {
		return s.jwks.keyfunc(ctx)
	}
	return s.staticFn
}

// staticKey returns the static key if it is of the kind the token's algorithm needs.
func (s *keySource) staticKey(t *jwt.Token) (any, error) {
	if !keyFits(t.Method, s.static) {
		return nil, errKeyMismatch
	}
	return s.static, nil
}

// keyFits reports whether key is of the type method verifies with, so that no key is ever used
// with an algorithm of another family (an RSA public key as an HMAC secret, say).
func keyFits(method jwt.SigningMethod, key any) bool {
	var ok bool
	switch method.(type) {
	case *jwt.SigningMethodRSA, *jwt.SigningMethodRSAPSS:
		// A JWKS may publish any size: below minRSABits it verifies nothing, as in the config.
		k, isRSA := key.(*rsa.PublicKey)
		ok = isRSA && k.N.BitLen() >= minRSABits
	case *jwt.SigningMethodECDSA:
		_, ok = key.(*ecdsa.PublicKey)
	case *jwt.SigningMethodEd25519:
		_, ok = key.(ed25519.PublicKey)
	case *jwt.SigningMethodHMAC:
		_, ok = key.([]byte)
	}
	return ok
}
