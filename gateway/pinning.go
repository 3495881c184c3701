package gateway

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/audit"
	"github.com/manifold-mcp/manifold/internal/pins"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// Tool pinning (docs/architecture.md, Tool pinning): at every merge, each
// tool and prompt definition a pinning server serves is hashed as the
// upstream serves it (pins.Digest), before anything of the gateway's
// touches it, and compared with the pin file. What is not approved is held:
// merge leaves it out of the routing tables, so it is absent from every
// list and a call to it is answered as for a name that does not exist, on
// both call paths, without a line of the call path knowing about pins.
//
// Approval (`manifold pins approve`) writes the pin file; the gateway
// watches it and merges again, so an approval applies without a restart.
// With several replicas the pins are in the cluster's shared store
// (gateway.pinning.store: cluster), which each replica polls instead
// (sharedstate.go).

// pinning is the gateway's pinning state. merge owns it (under syncMu).
type pinning struct {
	store pins.Store // nil while nothing pins
	// where names the store in logs and tells when it changes: the
	// file's path, or the shared store's key.
	where string
	// watching is the stop of the store's watcher (or poller) goroutine;
	// nil when none.
	watching context.CancelFunc
	// tools and prompts cache the digests of the definitions of the
	// current catalogs, by pointer: an upstream replaces its lists when
	// they change, so an unchanged definition is hashed once.
	tools   map[*mcp.Tool]digest
	prompts map[*mcp.Prompt]digest
	// last is the last set read from the store, used when it fails.
	last *pins.Set
	// held describes what the last merge held, for status (pinstatus.go).
	held []HeldStatus
}

type digest struct {
	canonical []byte
	hash      string
}

// heldKey names an item held by pinning: server, kind (pins.KindTool or
// pins.KindPrompt) and the name the upstream serves it under.
type heldKey struct{ server, kind, name string }

// pinnedItem is one definition of a pinning server, with the server's
// pinning settings.
type pinnedItem struct {
	pins.Item
	mode string
	hold bool
}

// pinEvent is something Observe found, reported after the store took it.
type pinEvent struct {
	it   pinnedItem
	ev   pins.Event
	prev string // the approved hash, for a change
}

// checkPins compares the definitions the upstreams serve with the pin file
// under snap's settings, records what is new, reports it (log, audit,
// metric), and returns the items to hold: those not approved, of servers
// in block mode, and new ones under newTools: hold. Called by merge with
// syncMu held; nil when nothing pins.
func (g *Gateway) checkPins(ups []*upstream.Upstream, snap *snapshot) map[heldKey]bool {
	p := &g.pinning
	cfg := snap.cfg
	if !cfg.Pins() {
		p.stop()
		p.store, p.tools, p.prompts, p.last, p.held = nil, nil, nil, nil, nil
		return nil
	}
	if where := pinStoreName(&cfg.Gateway.Pinning); p.store == nil || p.where != where {
		p.stop()
		p.store, p.where, p.last = g.openPins(&cfg.Gateway.Pinning), where, nil
	}
	if p.watching == nil {
		switch st := p.store.(type) {
		case *pins.FileStore:
			g.watchPins(st)
		case *pins.SharedStore:
			g.pollPins(st)
		}
	}
	items := p.items(ups, cfg, g.log)
	now := time.Now()
	var events []pinEvent
	var held map[heldKey]bool
	observe := func(s *pins.Set) error {
		events, held = events[:0], map[heldKey]bool{}
		for _, it := range items {
			prev := ""
			if pin := s.Lookup(it.Server, it.Kind, it.Name); pin != nil && pin.Approved != nil {
				prev = pin.Approved.Hash
			}
			ok, ev := s.Observe(it.Item, it.hold, now)
			if ev != pins.EventNone {
				events = append(events, pinEvent{it: it, ev: ev, prev: prev})
			}
			if !ok && (it.mode == config.PinningBlock || s.Lookup(it.Server, it.Kind, it.Name).Approved == nil) {
				held[heldKey{it.Server, it.Kind, it.Name}] = true
			}
		}
		if len(events) == 0 {
			return pins.ErrUnchanged
		}
		return nil
	}
	s, err := p.store.Update(context.Background(), observe)
	if err != nil {
		// The file is kept as it is (a corrupt file is not overwritten);
		// decisions are made on the last set read, in memory.
		g.log.Error("pin store unusable; deciding on the pins last read", zap.String(keyPinFile, p.where), zap.Error(err))
		if p.last == nil {
			p.last = pins.NewSet()
		}
		_ = observe(p.last)
	} else {
		p.last = s
	}
	for _, e := range events {
		g.reportPin(e, now)
	}
	p.held = heldStatus(p.last, held)
	return held
}

// items returns the definitions of the pinning servers among ups, digested.
func (p *pinning) items(ups []*upstream.Upstream, cfg *config.Config, log *zap.Logger) []pinnedItem {
	tools, prompts := make(map[*mcp.Tool]digest, len(p.tools)), make(map[*mcp.Prompt]digest, len(p.prompts))
	var items []pinnedItem
	for _, up := range ups {
		s, ok := cfg.Servers[up.Name()]
		mode, newTools := cfg.PinningOf(s)
		cat := up.Catalog()
		if !ok || mode == config.PinningOff || cat == nil {
			continue // not pinning, or not connected: its pins stay as they are
		}
		add := func(kind, name string, d digest) {
			items = append(items, pinnedItem{
				Item: pins.Item{Server: up.Name(), Kind: kind, Name: name, Canonical: d.canonical, Hash: d.hash},
				mode: mode, hold: newTools == config.NewToolsHold,
			})
		}
		for _, t := range cat.Tools {
			d, ok := cached(p.tools, tools, t, log)
			if ok {
				add(pins.KindTool, t.Name, d)
			}
		}
		for _, pr := range cat.Prompts {
			d, ok := cached(p.prompts, prompts, pr, log)
			if ok {
				add(pins.KindPrompt, pr.Name, d)
			}
		}
	}
	p.tools, p.prompts = tools, prompts
	return items
}

// cached returns the digest of def from prev, or computes it, and keeps it
// in next.
func cached[T comparable](prev, next map[T]digest, def T, log *zap.Logger) (digest, bool) {
	d, ok := prev[def]
	if !ok {
		c, h, err := pins.Digest(def)
		if err != nil {
			log.Error("definition not pinned: it does not encode", zap.Error(err))
			return digest{}, false
		}
		d = digest{canonical: c, hash: h}
	}
	next[def] = d
	return d, true
}

// reportPin logs, audits and counts what checkPins found.
func (g *Gateway) reportPin(e pinEvent, now time.Time) {
	it := e.it
	fields := []zap.Field{zap.String(keyServer, it.Server), zap.String(keyKind, it.Kind), zap.String(keyName, it.Name),
		zap.String(keyHash, it.Hash)}
	var event, outcome string
	switch e.ev {
	case pins.EventFirstSeen:
		if ce := g.log.Check(zap.DebugLevel, "definition pinned"); ce != nil {
			ce.Write(fields...)
		}
		return
	case pins.EventReverted:
		g.log.Info("definition back to the approved one", fields...)
		return
	case pins.EventHeld:
		g.log.Warn("new definition held until approved (manifold pins approve)", fields...)
		event, outcome = "definition_held", "held"
	case pins.EventChanged:
		outcome = "served"
		if it.mode == config.PinningBlock {
			outcome = "held"
		}
		g.log.Warn("definition changed from the approved one (manifold pins diff)",
			append(fields, zap.String("approved", e.prev), zap.String("mode", it.mode), zap.String(keyOutcome, outcome))...)
		g.obs.metrics.DefinitionChanged(context.Background(), it.Kind, it.Server, it.mode)
		event = "definition_changed"
	default:
		return
	}
	if g.obs.audit == nil {
		return
	}
	method := "tools/list"
	if it.Kind == pins.KindPrompt {
		method = "prompts/list"
	}
	decision := audit.DecisionAllow
	if outcome == "held" {
		decision = audit.DecisionDeny
	}
	g.obs.audit.Write(&audit.Record{
		Time: now, Method: method, Event: event, Server: it.Server, Name: it.Name, UpstreamName: it.Name,
		Decision: decision, Rule: "pinning", Outcome: outcome, DefinitionHash: it.Hash, ApprovedHash: e.prev,
	})
}

// watchPins watches the pin file of store, merging again when it changes
// (an approval), for as long as the gateway runs or until stop.
func (g *Gateway) watchPins(store *pins.FileStore) {
	if !g.life.Running() {
		return // New merges before Start: the watch starts with the next merge
	}
	if _, err := os.Stat(store.Path()); errors.Is(err, fs.ErrNotExist) { // written once, so that it can be watched
		if _, err := store.Update(context.Background(), func(*pins.Set) error { return nil }); err != nil {
			g.log.Error("pin file", zap.String(keyPinFile, store.Path()), zap.Error(err))
		}
	}
	w, err := config.NewWatcher(store.Path(), &config.WatchOptions{Logger: g.log})
	if err != nil {
		g.log.Error("cannot watch the pin file: approvals apply at the next list change or reload",
			zap.String(keyPinFile, store.Path()), zap.Error(err))
		return
	}
	ctx, cancel := context.WithCancel(g.life.Context())
	started := g.life.Go(func(context.Context) { w.Follow(ctx, g.notifyChanged) })
	if !started {
		cancel()
		w.Close()
		return
	}
	g.pinning.watching = cancel
}

// stop ends the pin file's watch, if any.
func (p *pinning) stop() {
	if p.watching != nil {
		p.watching()
		p.watching = nil
	}
}

// heldItem reports whether held holds the item kind (pins.KindTool or
// pins.KindPrompt) name of server: merge leaves it out.
func heldItem(held map[heldKey]bool, server, kind, name string) bool {
	return held[heldKey{server, kind, name}]
}
