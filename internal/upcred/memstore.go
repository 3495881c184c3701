package upcred

import (
	"context"
	"fmt"
	"sync"
)

// MemoryStore is a Store in memory: tokens are lost when the gateway stops. It is what the
// gateway uses without gateway.tokenStore. The zero value is ready to use.
type MemoryStore struct {
	mu sync.Mutex
	r  records
}

var _ Store = (*MemoryStore)(nil)

// Get implements Store.
func (m *MemoryStore) Get(_ context.Context, principal, server string) (*Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.r.get(principal, server)
	if !ok {
		return nil, fmt.Errorf("server %q: %w", server, ErrNotFound)
	}
	return cloneToken(t), nil
}

// Put implements Store.
func (m *MemoryStore) Put(_ context.Context, principal, server string, t *Token) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.r == nil {
		m.r = records{}
	}
	m.r.put(principal, server, cloneToken(t))
	return nil
}

// Revoke implements Store.
func (m *MemoryStore) Revoke(_ context.Context, principal, server string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.r.revoke(principal, server), nil
}

// List implements Store.
func (m *MemoryStore) List(_ context.Context, principal string) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.r.list(principal), nil
}
