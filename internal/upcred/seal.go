package upcred

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// namesKeyInfo derives the key that hides principal and server names in the shared store's
// key names.
const namesKeyInfo = "manifold upstream token store names v1"

// sealer seals what a token store keeps with AES-256-GCM under a key derived from the store's
// secret (HKDF-SHA256), in a versioned envelope: the file store seals its whole content, the
// shared store each token.
type sealer struct {
	aead  cipher.AEAD
	names []byte // HMAC key of name (shared store key names)
}

// newSealer derives the keys of secret, which must be at least 32 bytes.
func newSealer(secret []byte) (*sealer, error) {
	if len(secret) < 32 {
		return nil, errors.New("token store: the secret must be at least 32 bytes")
	}
	key, err := hkdf.Key(sha256.New, secret, nil, storeKeyInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	names, err := hkdf.Key(sha256.New, secret, nil, namesKeyInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	return &sealer{aead: aead, names: names}, nil
}

// seal encrypts plain into an envelope.
func (s *sealer) seal(plain []byte) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("token store: %w", err)
	}
	return json.Marshal(envelope{Version: fileVersion, Nonce: nonce, Ciphertext: s.aead.Seal(nil, nonce, plain, []byte(storeKeyInfo))})
}

// open decrypts an envelope; what names it in errors ("the file").
func (s *sealer) open(data []byte, what string) ([]byte, error) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil || env.Version != fileVersion || len(env.Nonce) != s.aead.NonceSize() {
		return nil, fmt.Errorf("token store: %s is not a token store of this version", what)
	}
	plain, err := s.aead.Open(nil, env.Nonce, env.Ciphertext, []byte(storeKeyInfo))
	if err != nil {
		return nil, fmt.Errorf("token store: cannot decrypt %s (wrong secret, or it was altered)", what)
	}
	return plain, nil
}

// name returns a keyed hash of a principal or server name (HMAC-SHA256, 128 bits, hex), so
// that key names reveal neither.
func (s *sealer) name(v string) string {
	m := hmac.New(sha256.New, s.names)
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil)[:16])
}
