package pins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/manifold-mcp/manifold/internal/cluster"
)

// SharedKey is the key of the pin set in a cluster's shared store.
const SharedKey = "manifold:pins"

// SharedStore is a Store in a cluster's shared store (gateway.pinning.store: cluster): the
// whole set under one key (SharedKey), so that every replica decides on the same pins and
// `manifold pins approve` reaches them all. Update is the shared store's atomic
// read-modify-write: when another replica wrote meanwhile, the change runs again on its set.
type SharedStore struct {
	kv cluster.Store
}

var _ Store = (*SharedStore)(nil)

// NewSharedStore returns the pin store in kv.
func NewSharedStore(kv cluster.Store) *SharedStore { return &SharedStore{kv: kv} }

// Load implements Store.
func (s *SharedStore) Load(ctx context.Context) (*Set, error) {
	data, ok, err := s.kv.Get(ctx, SharedKey)
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	return decodeShared(data, ok)
}

// Raw returns the stored set's encoding (nil when none): what the gateway compares to notice
// another replica's change without decoding.
func (s *SharedStore) Raw(ctx context.Context) ([]byte, error) {
	data, _, err := s.kv.Get(ctx, SharedKey)
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	return data, nil
}

// Update implements Store.
func (s *SharedStore) Update(ctx context.Context, change func(*Set) error) (*Set, error) {
	var set *Set
	_, err := s.kv.Update(ctx, SharedKey, func(old []byte, ok bool) ([]byte, error) {
		var err error
		if set, err = decodeShared(old, ok); err != nil {
			return nil, err
		}
		if err := change(set); err != nil {
			if errors.Is(err, ErrUnchanged) {
				return nil, nil
			}
			return nil, err
		}
		data, err := json.Marshal(set)
		if err != nil {
			return nil, fmt.Errorf("pins: encoding: %w", err)
		}
		return data, nil
	})
	if err != nil {
		var e *sharedError
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, fmt.Errorf("pins: %w", err)
	}
	return set, nil
}

// sharedError is a stored set that does not parse (returned as is, not wrapped twice).
type sharedError struct{ err error }

func (e *sharedError) Error() string {
	return fmt.Sprintf("pins: %s in the cluster store: %v", SharedKey, e.err)
}
func (e *sharedError) Unwrap() error { return e.err }

// decodeShared parses a stored set; none stored is an empty set.
func decodeShared(data []byte, ok bool) (*Set, error) {
	if !ok {
		return NewSet(), nil
	}
	if len(data) > maxFileBytes {
		return nil, &sharedError{fmt.Errorf("larger than %d bytes", maxFileBytes)}
	}
	set, err := Parse(data)
	if err != nil {
		return nil, &sharedError{err}
	}
	return set, nil
}
