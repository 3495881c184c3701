package gateway

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/cluster"
	"github.com/manifold-mcp/manifold/internal/pins"
	"github.com/manifold-mcp/manifold/internal/upcred"
	"go.uber.org/zap"
)

// pinPollInterval is how often a replica reads the shared pin set to
// notice a change another replica or `manifold pins approve` made.
const pinPollInterval = 2 * time.Second

// pinStoreName names the pin store cfg configures: the shared store's
// key, or the file's path.
func pinStoreName(cfg *config.Pinning) string {
	if cfg.Store == config.StoreCluster {
		return pins.SharedKey
	}
	return cfg.File
}

// openPins returns the pin store cfg configures. Without a shared store
// (gateway.cluster.store changed by a reload: it is opened at start only)
// it is one that fails, so decisions are made on the pins last read.
func (g *Gateway) openPins(cfg *config.Pinning) pins.Store {
	if cfg.Store != config.StoreCluster {
		return pins.NewFileStore(cfg.File)
	}
	if g.store == nil {
		return failedPins{}
	}
	return pins.NewSharedStore(g.store)
}

// pollPins reads the shared pin set every pinPollInterval and merges again
// when its encoding changed (an approval, or another replica's record),
// for as long as the gateway runs or until stop. Polling one key costs one
// GET per interval and needs nothing of Redis' configuration; keyspace
// notifications would need notify-keyspace-events set on the server (off
// by default, often not allowed on managed Redis) and lose events across a
// reconnection.
func (g *Gateway) pollPins(store *pins.SharedStore) {
	if !g.life.Running() {
		return // New merges before Start: the poll starts with the next merge
	}
	ctx, cancel := context.WithCancel(g.life.Context())
	started := g.life.Go(func(context.Context) {
		t := time.NewTicker(pinPollInterval)
		defer t.Stop()
		last, err := store.Raw(ctx)
		failing := err != nil
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			cur, err := store.Raw(ctx)
			if err != nil {
				if !failing && ctx.Err() == nil {
					g.log.Warn("cannot read the shared pins; approvals apply when it answers again", zap.Error(err))
				}
				failing = true
				continue
			}
			if failing || !bytes.Equal(cur, last) {
				g.notifyChanged()
			}
			last, failing = cur, false
		}
	})
	if !started {
		cancel()
		return
	}
	g.pinning.watching = cancel
}

// failedPins is the pin store of gateway.pinning.store: cluster without a
// shared store.
type failedPins struct{}

var errNoSharedStore = errors.New("pins: gateway.pinning.store is cluster but no gateway.cluster.store was opened at start")

func (failedPins) Load(context.Context) (*pins.Set, error) { return nil, errNoSharedStore }
func (failedPins) Update(context.Context, func(*pins.Set) error) (*pins.Set, error) {
	return nil, errNoSharedStore
}

// openTokenStore returns the token store cfg configures: in the cluster's
// shared store for gateway.tokenStore.store: cluster, else upcred's
// (a file, or memory).
func openTokenStore(cfg config.TokenStore, shared *cluster.RedisStore) (upcred.Store, error) {
	if cfg.Store != config.StoreCluster {
		return upcred.OpenStore(cfg)
	}
	if shared == nil {
		return nil, errors.New("gateway.tokenStore.store is cluster but no gateway.cluster.store was opened at start")
	}
	return upcred.OpenSharedStore(cfg, shared)
}
