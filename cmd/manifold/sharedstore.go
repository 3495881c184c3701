package main

import (
	"context"
	"errors"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/cluster"
	"github.com/manifold-mcp/manifold/internal/upcred"
)

// openSharedStore opens cfg's gateway.cluster.store, checking that it
// answers, for `manifold pins` and `manifold auth` on a cluster's config.
func openSharedStore(cfg *config.Config) (*cluster.RedisStore, error) {
	if cfg.Gateway.Cluster.Store == "" {
		return nil, errors.New("the config sets no gateway.cluster.store")
	}
	kv, err := cluster.OpenStore(cfg.Gateway.Cluster.Store)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := kv.Ping(ctx); err != nil {
		kv.Close()
		return nil, err
	}
	return kv, nil
}

// openTokenStore opens the token store of cfg: its file, or its keys in
// the cluster's shared store; closeStore, when not nil, closes what it
// opened.
func openTokenStore(cfg *config.Config) (store upcred.Store, closeStore func(), err error) {
	if cfg.Gateway.TokenStore.Store != config.StoreCluster {
		store, err = upcred.OpenStore(cfg.Gateway.TokenStore)
		return store, nil, err
	}
	kv, err := openSharedStore(cfg)
	if err != nil {
		return nil, nil, err
	}
	s, err := upcred.OpenSharedStore(cfg.Gateway.TokenStore, kv)
	if err != nil {
		kv.Close()
		return nil, nil, err
	}
	return s, func() { kv.Close() }, nil
}
