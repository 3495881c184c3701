package upcred

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/cluster"
)

// SharedKeyPrefix starts the key names of tokens in a cluster's shared store.
const SharedKeyPrefix = "manifold:tokens:"

// SharedStore is a Store in a cluster's shared store (gateway.tokenStore.store: cluster), for
// several replicas: one key per principal and server, SharedKeyPrefix + keyed hashes of both
// names, holding the token and both names sealed as the file store seals its content (AES-GCM
// under the token store's own secret). The store never sees a token or a name in plaintext.
type SharedStore struct {
	kv     cluster.Store
	sealer *sealer
}

var _ Store = (*SharedStore)(nil)

// sharedRecord is the sealed value of one key.
type sharedRecord struct {
	Principal string `json:"principal"`
	Server    string `json:"server"`
	Token     *Token `json:"token"`
}

// NewSharedStore returns the token store in kv, sealed with a key derived from secret (at
// least 32 bytes).
func NewSharedStore(kv cluster.Store, secret []byte) (*SharedStore, error) {
	sl, err := newSealer(secret)
	if err != nil {
		return nil, err
	}
	return &SharedStore{kv: kv, sealer: sl}, nil
}

// OpenSharedStore returns the token store cfg configures in kv, its secret read as OpenStore
// reads it.
func OpenSharedStore(cfg config.TokenStore, kv cluster.Store) (*SharedStore, error) {
	secret, err := storeSecret(cfg)
	if err != nil {
		return nil, err
	}
	return NewSharedStore(kv, secret)
}

// prefix returns the key prefix of principal's tokens (every server's when server is "").
func (s *SharedStore) prefix(principal, server string) string {
	p := SharedKeyPrefix + s.sealer.name(principal) + ":"
	if server != "" {
		p += s.sealer.name(server)
	}
	return p
}

// Get implements Store.
func (s *SharedStore) Get(ctx context.Context, principal, server string) (*Token, error) {
	r, ok, err := s.read(ctx, s.prefix(principal, server))
	if err != nil {
		return nil, err
	}
	if !ok || r.Principal != principal || r.Server != server {
		return nil, fmt.Errorf("server %q: %w", server, ErrNotFound)
	}
	return r.Token, nil
}

// read returns the record under key.
func (s *SharedStore) read(ctx context.Context, key string) (*sharedRecord, bool, error) {
	data, ok, err := s.kv.Get(ctx, key)
	if err != nil || !ok {
		return nil, false, errTokenStore(err)
	}
	plain, err := s.sealer.open(data, "a stored token")
	if err != nil {
		return nil, false, err
	}
	var r sharedRecord
	if err := json.Unmarshal(plain, &r); err != nil || r.Token == nil {
		return nil, false, fmt.Errorf("token store: a decrypted token is malformed")
	}
	return &r, true, nil
}

// Put implements Store.
func (s *SharedStore) Put(ctx context.Context, principal, server string, t *Token) error {
	plain, err := json.Marshal(sharedRecord{Principal: principal, Server: server, Token: t})
	if err != nil {
		return fmt.Errorf("token store: %w", err)
	}
	data, err := s.sealer.seal(plain)
	if err != nil {
		return err
	}
	return errTokenStore(s.kv.Set(ctx, s.prefix(principal, server), data, 0))
}

// Revoke implements Store.
func (s *SharedStore) Revoke(ctx context.Context, principal, server string) (int, error) {
	keys, err := s.kv.Keys(ctx, s.prefix(principal, server))
	if err != nil {
		return 0, errTokenStore(err)
	}
	for i, k := range keys {
		if err := s.kv.Delete(ctx, k); err != nil {
			return i, errTokenStore(err)
		}
	}
	return len(keys), nil
}

// List implements Store: every key of principal (of everyone when ""), decrypted.
func (s *SharedStore) List(ctx context.Context, principal string) ([]Entry, error) {
	prefix := SharedKeyPrefix
	if principal != "" {
		prefix = s.prefix(principal, "")
	}
	keys, err := s.kv.Keys(ctx, prefix)
	if err != nil {
		return nil, errTokenStore(err)
	}
	r := records{}
	for _, k := range keys {
		rec, ok, err := s.read(ctx, k)
		if err != nil {
			return nil, err
		}
		if ok && k == s.prefix(rec.Principal, rec.Server) { // a value moved to another key is not its token
			r.put(rec.Principal, rec.Server, rec.Token)
		}
	}
	return r.list(principal), nil
}

// errTokenStore wraps an error of the shared store; nil stays nil.
func errTokenStore(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("token store: %w", err)
}
