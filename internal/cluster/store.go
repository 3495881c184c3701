package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store is the state replicas share (gateway.cluster.store): small values
// by key, each with a time to live. It is for what must be the same on
// every replica (per-user upstream tokens, definition pins, global rate
// limits); sessions never go through it. Implementations are safe for
// concurrent use.
type Store interface {
	// Get returns the value of key; ok is false when there is none.
	Get(ctx context.Context, key string) (value []byte, ok bool, err error)
	// Set stores value under key for ttl (0: no expiry).
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// Delete removes key; a missing key is no error.
	Delete(ctx context.Context, key string) error
	// Incr adds n to the counter key and returns its new value; a counter
	// it creates expires after ttl (a rate-limit window).
	Incr(ctx context.Context, key string, n int64, ttl time.Duration) (int64, error)
	// Update is an atomic read-modify-write of key against every replica:
	// change gets the current value (ok false when there is none) and
	// returns the new one, or nil to write nothing; when another writer
	// changed key meanwhile, change runs again on its value (a bounded
	// number of times). Update returns the value stored at the end.
	Update(ctx context.Context, key string, change func(old []byte, ok bool) ([]byte, error)) ([]byte, error)
	// Keys returns the keys that start with prefix, sorted.
	Keys(ctx context.Context, prefix string) ([]string, error)
	// Close releases the store's connections.
	Close() error
}

// OpenStore opens the store of url: redis://[user:password@]host:port/db
// or rediss://… (TLS). It does not connect: Ping does.
func OpenStore(url string) (*RedisStore, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("cluster store: %w", err)
	}
	return &RedisStore{c: redis.NewClient(opts)}, nil
}

// RedisStore is a Store on Redis (github.com/redis/go-redis/v9).
type RedisStore struct {
	c *redis.Client
}

var _ Store = (*RedisStore)(nil)

// Ping checks that the store answers.
func (s *RedisStore) Ping(ctx context.Context) error {
	if err := s.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cluster store: %w", err)
	}
	return nil
}

// Get implements Store.
func (s *RedisStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	v, err := s.c.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("cluster store: get: %w", err)
	}
	return v, true, nil
}

// Set implements Store.
func (s *RedisStore) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := s.c.Set(ctx, key, value, ttl).Err(); err != nil {
		return fmt.Errorf("cluster store: set: %w", err)
	}
	return nil
}

// Delete implements Store.
func (s *RedisStore) Delete(ctx context.Context, key string) error {
	if err := s.c.Del(ctx, key).Err(); err != nil {
		return fmt.Errorf("cluster store: delete: %w", err)
	}
	return nil
}

// Incr implements Store: INCRBY and, for a counter it created, EXPIRE NX,
// in one transaction.
func (s *RedisStore) Incr(ctx context.Context, key string, n int64, ttl time.Duration) (int64, error) {
	var incr *redis.IntCmd
	_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		incr = p.IncrBy(ctx, key, n)
		if ttl > 0 {
			p.ExpireNX(ctx, key, ttl)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cluster store: incr: %w", err)
	}
	return incr.Val(), nil
}

// maxUpdateTries bounds Update's retries when other writers keep winning.
const maxUpdateTries = 32

// ErrContended: Update lost the race for its key maxUpdateTries times.
var ErrContended = errors.New("cluster store: update: too many concurrent writers")

// Update implements Store: WATCH key, GET, then SET in MULTI/EXEC, which
// Redis aborts when key changed after the WATCH (optimistic locking); an
// aborted transaction runs again.
func (s *RedisStore) Update(ctx context.Context, key string, change func(old []byte, ok bool) ([]byte, error)) ([]byte, error) {
	var result []byte
	txf := func(tx *redis.Tx) error {
		old, err := tx.Get(ctx, key).Bytes()
		ok := err == nil
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		next, err := change(old, ok)
		if err != nil {
			return err
		}
		if next == nil {
			result = old
			return nil
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, next, redis.KeepTTL)
			return nil
		})
		result = next
		return err
	}
	for range maxUpdateTries {
		err := s.c.Watch(ctx, txf, key)
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cluster store: update: %w", err)
		}
		return result, nil
	}
	return nil, ErrContended
}

// Keys implements Store with SCAN MATCH (never KEYS, which blocks the
// server); glob characters in prefix are escaped.
func (s *RedisStore) Keys(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	it := s.c.Scan(ctx, 0, globEscape(prefix)+"*", 256).Iterator()
	for it.Next(ctx) {
		out = append(out, it.Val())
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("cluster store: keys: %w", err)
	}
	slices.Sort(out)
	return slices.Compact(out), nil // SCAN may return a key twice
}

// globEscape escapes the characters Redis' MATCH pattern treats specially.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\^`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Close implements Store.
func (s *RedisStore) Close() error { return s.c.Close() }
