package authn

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/policy"
)

// apiKey is one configured API key: the SHA-256 of the token, its key id and the principal it
// proves.
type apiKey struct {
	hash      [sha256.Size]byte
	id        string
	principal *policy.Principal
}

// keyIDPrefix starts every key id.
const keyIDPrefix = "key-"

// KeyID returns the key id of the API key whose SHA-256 is hash: "key-" and 24 hex digits of a
// hash of it under a label of its own. It names the key in sessions and requestStates without
// revealing the key or its configured keyHash, and stays the same across reloads as long as
// the key does.
func KeyID(hash [sha256.Size]byte) string {
	h := sha256.New()
	h.Write([]byte("manifold api key id\x00"))
	h.Write(hash[:])
	return keyIDPrefix + hex.EncodeToString(h.Sum(nil)[:12])
}

// newAPIKeys hashes the configured keys, or decodes their hashes, and builds each principal
// once. Only the hashes are kept.
func newAPIKeys(cfg []config.APIKey) ([]apiKey, error) {
	if len(cfg) == 0 {
		return nil, nil
	}
	keys := make([]apiKey, 0, len(cfg))
	for i, k := range cfg {
		var key apiKey
		switch {
		case (k.Key == "") == (k.KeyHash == ""):
			return nil, fmt.Errorf("auth.apiKeys[%d]: set exactly one of key and keyHash", i)
		case k.Key != "":
			key.hash = sha256.Sum256([]byte(k.Key))
		default:
			h, ok := strings.CutPrefix(k.KeyHash, config.KeyHashPrefix)
			b, err := hex.DecodeString(h)
			if !ok || err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("auth.apiKeys[%d].keyHash: must be %q followed by 64 hex digits", i, config.KeyHashPrefix)
			}
			copy(key.hash[:], b)
		}
		key.id = KeyID(key.hash)
		key.principal = policy.NewPrincipal(k.Name, k.Groups)
		keys = append(keys, key)
	}
	return keys, nil
}

// matchAPIKey returns the key equal to token, or nil. It compares the token's
// hash with every key in constant time and without stopping at a match, so its duration tells
// nothing about which keys exist or how close the token came.
func matchAPIKey(keys []apiKey, token string) *apiKey {
	if len(keys) == 0 {
		return nil
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range keys {
		eq := subtle.ConstantTimeCompare(sum[:], keys[i].hash[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return nil
	}
	return &keys[found]
}
