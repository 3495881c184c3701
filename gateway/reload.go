package gateway

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Reload triggers (ReloadResult.Trigger).
const (
	TriggerFile   = "file"   // the config file changed
	TriggerSignal = "signal" // SIGHUP
	TriggerAPI    = "api"    // POST /reload
)

// Reload outcomes (ReloadResult.Result).
const (
	ReloadApplied   = "applied"
	ReloadRejected  = "rejected"
	ReloadUnchanged = "unchanged"
)

// ReloadResult describes one reload attempt.
type ReloadResult struct {
	Trigger string    `json:"trigger"`
	At      time.Time `json:"at"`
	// DurationMS is the time from the start of the attempt to the new
	// config serving (or to the rejection), in milliseconds.
	DurationMS float64 `json:"durationMs"`
	Result     string  `json:"result"`
	// Error says why a config was rejected; Problems lists every problem
	// found, each naming the file and key.
	Error    string   `json:"error,omitempty"`
	Problems []string `json:"problems,omitempty"`
	// Hash is the config's Config.Hash.
	Hash string `json:"hash,omitempty"`
	poolChanges
	// RestartRequired names changed keys that apply only when the gateway
	// restarts; until then their running values stay in force.
	RestartRequired []string `json:"restartRequired,omitempty"`
}

// reloadLog counts reloads and keeps the last ones, for status and the
// console.
type reloadLog struct {
	run      sync.Mutex // serializes reloads
	mu       sync.Mutex // guards the fields below
	last     *ReloadResult
	applied  int
	rejected int
	history  []*ReloadResult // the latest reloadHistory attempts, oldest first
}

// reloadHistory is the number of reload attempts the console lists.
const reloadHistory = 20

// Reload loads the config again (Options.LoadConfig) and applies it while
// the gateway serves (docs/architecture.md, Reload; Decisions: reload by snapshot swap):
//
//   - a config that does not load (syntax, unknown key, bad value) is
//     rejected, logged with its file and keys, and changes nothing;
//   - policy, auth, limits, allowed hosts and origins, namespacing and the
//     log level apply to the next request; requests in flight finish on the
//     snapshot they started with;
//   - upstreams whose spec (server entry and the gateway settings their
//     client uses) is unchanged keep their process or connection; changed
//     ones are replaced make-before-break, removed ones drained, added ones
//     connected (see pool);
//   - clients get list_changed for what their lists may have gained or
//     lost: once per list, debounced.
//
// gateway.listen, gateway.tls, gateway.timeouts.idleConnection,
// gateway.log.format and the audit and telemetry sections apply only at
// restart: the new config must be valid with the running values, which stay
// in force (the audit log and the telemetry providers are kept as they are).
// Each applied or rejected reload counts in manifold_config_reloads_total. With trigger
// TriggerFile, a config whose bytes are those serving is not applied again.
// Reloads are serialized; Reload returns once the new config serves, while
// replacements of changed upstreams finish in the background.
func (g *Gateway) Reload(ctx context.Context, trigger string) (*ReloadResult, error) {
	g.reloads.run.Lock()
	defer g.reloads.run.Unlock()
	start := time.Now()
	res := &ReloadResult{Trigger: trigger, At: start}
	err := g.reload(ctx, res)
	res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	g.reloads.mu.Lock()
	defer g.reloads.mu.Unlock()
	if res.Result != ReloadUnchanged {
		g.obs.metrics.Reload(ctx, err == nil)
	}
	switch {
	case err != nil:
		res.Result, res.Error = ReloadRejected, err.Error()
		for _, fe := range config.FieldErrors(err) {
			res.Problems = append(res.Problems, fe.Error())
		}
		g.reloads.rejected++
		g.log.Error("config rejected; the previous config keeps serving",
			zap.String(keyTrigger, trigger), zap.Error(err))
	case res.Result == ReloadUnchanged:
	default:
		res.Result = ReloadApplied
		g.reloads.applied++
		g.log.Info("config reloaded", zap.String(keyTrigger, trigger), zap.String(keyHash, res.Hash),
			zap.Strings("added", res.Added), zap.Strings("removed", res.Removed), zap.Strings("restarted", res.Restarted),
			zap.Float64("ms", res.DurationMS))
		if len(res.RestartRequired) > 0 {
			g.log.Warn("changed settings apply only at restart; their running values stay in force",
				zap.Strings(keyKey, res.RestartRequired))
		}
	}
	g.reloads.last = res
	if len(g.reloads.history) == reloadHistory {
		g.reloads.history = append(g.reloads.history[:0], g.reloads.history[1:]...)
	}
	g.reloads.history = append(g.reloads.history, res)
	return res, err
}

// reload does Reload's work, filling res; with reloads.run held.
func (g *Gateway) reload(ctx context.Context, res *ReloadResult) error {
	if g.opts.LoadConfig == nil {
		return errors.New("reload: the gateway was not given a config to reload")
	}
	cfg, err := g.opts.LoadConfig()
	if err != nil {
		return err
	}
	if cfg == nil {
		return errors.New("reload: loading the config returned nothing")
	}
	res.Hash = cfg.Hash
	if res.Trigger == TriggerFile && cfg.Hash == config.EmptyHash {
		// The watcher read content, and the file has been truncated since: another in-place
		// write in progress (config.Watcher), whose own change brings the content. Applying
		// it would stop every upstream until then.
		g.log.Info("the config file is empty: a write in progress; the config serving stays", zap.String(keyTrigger, res.Trigger))
		res.Result = ReloadUnchanged
		return nil
	}
	if err := CheckCatalog(cfg); err != nil {
		return err
	}
	old := g.current()
	if res.Trigger == TriggerFile && cfg.Hash == old.cfg.Hash {
		res.Result = ReloadUnchanged
		return nil
	}
	cfg, res.RestartRequired, err = pinRestartOnly(cfg, old.cfg)
	if err != nil {
		return err
	}
	an := old.access.authn
	authChanged := !reflect.DeepEqual(cfg.Auth, old.cfg.Auth)
	if authChanged {
		if an, err = newAuthenticator(ctx, &cfg.Auth, g.opts.Logger); err != nil {
			return fmt.Errorf("%s: auth: %w", cfg.Source, err)
		}
	}
	if err := g.rotateCluster(cfg, old.cfg); err != nil {
		return fmt.Errorf("%s: %w", cfg.Source, err)
	}
	level, err := zapcore.ParseLevel(cfg.Gateway.Log.Level)
	if err != nil {
		return fmt.Errorf("%s: gateway.log.level: %w", cfg.Source, err) // Validate checks it
	}

	g.pool.mu.Lock()
	if !g.life.Running() {
		g.pool.mu.Unlock()
		if authChanged && an != nil {
			an.Close()
		}
		return errors.New("reload: the gateway is not running")
	}
	if len(cfg.Toolsets) > 0 {
		g.toolsetsSeen.Store(true) // before any request can find one
	}
	snap := g.shareLimits(newSnapshot(cfg, an))
	snap.limits.Inherit(old.limits) // unchanged rate limits keep their buckets
	g.snap.Store(snap)
	res.poolChanges = g.updatePool(cfg)
	g.pool.mu.Unlock()
	if cfg.Gateway.Limits.SessionIdleTimeout != old.cfg.Gateway.Limits.SessionIdleTimeout {
		g.clients.wakeSweeper() // sessions idle for the new timeout end now
	}

	if authChanged {
		// Sessions opened with a key that was removed, or now names another
		// principal, end; the others resolve their principal anew per
		// request (access.go).
		if n := g.revokeClients(g.current().access); n > 0 {
			g.log.Info("sessions ended: their credential no longer authenticates", zap.Int("sessions", n))
		}
	}
	if authChanged && old.access.authn != nil {
		old.access.authn.Close()
	}
	if g.opts.Level != nil {
		g.opts.Level.SetLevel(level)
	}
	g.merge()
	g.applyPlugins(ctx, cfg)
	if authChanged || !reflect.DeepEqual(cfg.Policy, old.cfg.Policy) || !reflect.DeepEqual(cfg.Toolsets, old.cfg.Toolsets) || !reflect.DeepEqual(cfg.Gateway.Discovery, old.cfg.Gateway.Discovery) {
		// What each principal (and toolset) may see, or how
		// (gateway.discovery), can have changed while the union registered
		// with the SDK did not.
		g.notifyListsChanged()
	}
	return nil
}

// pinRestartOnly returns cfg with the settings that apply only at restart
// set to their running values (from running), and the keys that differed.
// The result must be valid as it will serve: a config that, say, turns auth
// off while the running listener is not on loopback is rejected.
func pinRestartOnly(cfg, running *config.Config) (*config.Config, []string, error) {
	gw, old := cfg.Gateway, running.Gateway
	var keys []string
	if gw.Listen != old.Listen {
		keys = append(keys, "gateway.listen")
	}
	if gw.TLS != old.TLS {
		keys = append(keys, "gateway.tls")
	}
	if gw.Timeouts.IdleConnection != old.Timeouts.IdleConnection {
		keys = append(keys, "gateway.timeouts.idleConnection")
	}
	if gw.Log.Format != old.Log.Format {
		keys = append(keys, "gateway.log.format")
	}
	// The audit log and the telemetry providers are built once, by the
	// command, and live as long as the process.
	if !reflect.DeepEqual(cfg.Audit, running.Audit) {
		keys = append(keys, "audit")
	}
	if !reflect.DeepEqual(cfg.Telemetry, running.Telemetry) {
		keys = append(keys, "telemetry")
	}
	if clusterRestartOnly(gw.Cluster, old.Cluster) {
		keys = append(keys, "gateway.cluster") // but its secrets: rotateCluster
	}
	if len(keys) == 0 {
		return cfg, nil, nil
	}
	pinned := *cfg
	pinned.Gateway.Listen, pinned.Gateway.TLS = old.Listen, old.TLS
	pinned.Gateway.Log.Format = old.Log.Format
	pinned.Gateway.Timeouts.IdleConnection = old.Timeouts.IdleConnection
	pinned.Audit, pinned.Telemetry = running.Audit, running.Telemetry
	pinned.Gateway.Cluster = pinCluster(gw.Cluster, old.Cluster)
	if err := pinned.Validate(); err != nil {
		return nil, nil, fmt.Errorf("with the running values of %s, which apply only at restart (gateway.listen %s): %w",
			strings.Join(keys, ", "), old.Listen, err)
	}
	return &pinned, keys, nil
}

// notifyListsChanged sends tools, prompts and resources list_changed to
// every session, through the SDK's own debounced path: re-registering one
// registered definition of each list marks that list changed. A list with
// nothing registered cannot look different to anyone and is skipped.
func (g *Gateway) notifyListsChanged() {
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	g.notes.moveAll() // before the SDK can send (toolsetnotes.go)
	r := g.routes.Load()
	for _, t := range r.toolDefs {
		if _, ok := g.registry.tools[t.Name]; ok {
			g.safely("tool", t.Name, func() { g.server.AddTool(withoutParamHeaders(t), g.callTool) })
			break
		}
	}
	for _, p := range r.promptDefs {
		if _, ok := g.registry.prompts[p.Name]; ok {
			g.safely("prompt", p.Name, func() { g.server.AddPrompt(p, g.getPrompt) })
			break
		}
	}
	for _, res := range r.resourceDefs {
		if _, ok := g.registry.resources[res.URI]; ok {
			g.safely("resource", res.URI, func() { g.server.AddResource(res, g.readResourceHandler) })
			return
		}
	}
	for _, t := range r.templateDefs {
		if _, ok := g.registry.templates[t.URITemplate]; ok {
			g.safely("resource template", t.URITemplate, func() { g.server.AddResourceTemplate(t, g.readResourceHandler) })
			return
		}
	}
}

// LastReload returns the last reload attempt, or nil before the first, and
// how many were applied and rejected.
func (g *Gateway) LastReload() (last *ReloadResult, applied, rejected int) {
	g.reloads.mu.Lock()
	defer g.reloads.mu.Unlock()
	return g.reloads.last, g.reloads.applied, g.reloads.rejected
}

// reloadAttempts returns the latest reload attempts, newest first.
func (g *Gateway) reloadAttempts() []*ReloadResult {
	g.reloads.mu.Lock()
	defer g.reloads.mu.Unlock()
	out := make([]*ReloadResult, len(g.reloads.history))
	for i, r := range g.reloads.history {
		out[len(out)-1-i] = r
	}
	return out
}
