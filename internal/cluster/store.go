package cluster

import (
	"context"
	"errors"
	"fmt"
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

// Close implements Store.
func (s *RedisStore) Close() error { return s.c.Close() }
