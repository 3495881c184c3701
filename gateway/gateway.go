// Package gateway is Manifold's downstream side: one MCP server that merges
// the tools, prompts, resources and templates of every upstream under
// namespaced names, routes each call to the upstream that owns the name, and
// serves clients over streamable HTTP (all protocol versions on one /mcp),
// legacy SSE (/sse) and stdio.
//
// Merging is table-driven: every time an upstream's lists change, a new
// immutable routes generation is built (package namespacing) and swapped in
// atomically, and the difference is registered on the mcp.Server, which
// sends list_changed to the clients.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/authn"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/namespacing"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// mergeDelay debounces upstream changes into one merge.
const mergeDelay = 20 * time.Millisecond

// instructionsHeader opens the gateway's instructions to clients; each
// upstream's own instructions follow under its name.
const instructionsHeader = "Manifold MCP gateway. Tools and prompts are named <server>__<name>; resource URIs of a server are prefixed manifold://<server>/."

// Options configures a Gateway. The zero value of each field is its default.
type Options struct {
	// Logger is the root logger; nil = no-op.
	Logger *zap.Logger
	// Version is reported as the gateway's serverInfo version. Default "dev".
	Version string
	// GuardPath is the manifold executable, used to start stdio upstreams under
	// `manifold upstream-guard` (see upstream.RunGuard). Empty: no guard.
	GuardPath string
	// Transports, when it has an entry for a server name, replaces that
	// server's configured transport (see upstream.Options.Transport).
	Transports map[string]func() (mcp.Transport, error)
}

// Gateway fronts the upstreams of one config. Create it with New, Start it,
// serve it with Handler or ServeStdio, and Close it.
type Gateway struct {
	cfg    *config.Config
	opts   Options
	log    *zap.Logger
	server *mcp.Server
	// capabilities are what server advertises; fixed at New.
	capabilities *mcp.ServerCapabilities
	ups          []*upstream.Upstream // sorted by name
	nsOpts       namespacing.Options

	routes   atomic.Pointer[routes]
	access   atomic.Pointer[access]
	views    atomic.Pointer[viewCache]
	authn    *authn.Authenticator // nil while auth is off; closed by Close
	inflight atomic.Int64         // requests being handled, for draining

	syncMu   sync.Mutex // serializes merge + registration
	registry *registry
	problems map[string]bool // last reported merge problems, to log each once

	changed chan struct{} // an upstream changed (buffered 1)
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New builds a Gateway for cfg, which must be valid (config.Load validates).
// It starts nothing.
func New(cfg *config.Config, opts *Options) (*Gateway, error) {
	if cfg == nil {
		return nil, errors.New("gateway: nil config")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	var an *authn.Authenticator
	if cfg.Auth.Enabled() {
		// A JWKS that does not answer quickly is fetched in the background.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var err error
		an, err = authn.New(ctx, &cfg.Auth, &authn.Options{Logger: o.Logger.Named("auth")})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
	}
	g := &Gateway{
		cfg:      cfg,
		opts:     o,
		log:      o.Logger.Named("gateway"),
		nsOpts:   namespacing.Options{Separator: cfg.Gateway.Separator, MaxLength: cfg.Gateway.MaxToolNameLength},
		registry: newRegistry(),
		problems: map[string]bool{},
		changed:  make(chan struct{}, 1),
		authn:    an,
	}
	g.access.Store(newAccess(cfg, an))
	g.capabilities = &mcp.ServerCapabilities{
		Tools:       &mcp.ToolCapabilities{ListChanged: true},
		Prompts:     &mcp.PromptCapabilities{ListChanged: true},
		Resources:   &mcp.ResourceCapabilities{ListChanged: true},
		Completions: &mcp.CompletionCapabilities{},
	}
	g.server = mcp.NewServer(&mcp.Implementation{Name: "manifold", Title: "Manifold MCP gateway", Version: o.Version}, &mcp.ServerOptions{
		Capabilities:      g.capabilities,
		CompletionHandler: g.complete,
		KeepAlive:         0,
	})
	// Outermost first: recover, then the gateway's own interception.
	g.server.AddReceivingMiddleware(mcpx.Recover(g.log), g.interceptor)

	upLog := o.Logger.Named("upstream")
	for _, s := range cfg.Enabled() {
		g.ups = append(g.ups, upstream.New(s, &upstream.Options{
			Logger:          upLog.With(zap.String(keyServer, s.Name)),
			ConnectTimeout:  cfg.Gateway.Timeouts.Connect,
			CallTimeout:     cfg.Gateway.Timeouts.Call,
			BackoffInitial:  cfg.Gateway.Backoff.Initial,
			BackoffMax:      cfg.Gateway.Backoff.Max,
			MaxConcurrency:  cfg.Gateway.Limits.MaxConcurrentCalls,
			MaxMessageBytes: int(cfg.Gateway.Limits.MaxMessageBytes),
			GuardPath:       o.GuardPath,
			ClientInfo:      &mcp.Implementation{Name: "manifold", Version: o.Version},
			Transport:       o.Transports[s.Name],
			OnChange:        func(*upstream.Upstream) { g.notifyChanged() },
		}))
	}
	sort.Slice(g.ups, func(i, j int) bool { return g.ups[i].Name() < g.ups[j].Name() })
	g.merge()
	return g, nil
}

// Start connects every upstream in parallel and returns once each has
// finished its first attempt (ready or failed), which the connect timeout
// bounds. A failed upstream keeps retrying in the background; the others
// serve meanwhile.
func (g *Gateway) Start(ctx context.Context) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g.cancel = cancel
	for _, up := range g.ups {
		up.Start(runCtx)
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.mergeLoop(runCtx)
	}()
	deadline := time.Now().Add(g.cfg.Gateway.Timeouts.Connect + time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		pending := 0
		for _, up := range g.ups {
			if s := up.Status(); s.State == upstream.StateConnecting && s.Restarts == 0 {
				pending++
			}
		}
		if pending == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	g.merge()
	for _, up := range g.ups {
		s := up.Status()
		if s.State == upstream.StateReady {
			g.log.Info("upstream connected", zap.String(keyServer, s.Name), zap.Int(keyPID, s.PID))
		} else {
			g.log.Warn("upstream not ready; retrying in the background", zap.String(keyServer, s.Name),
				zap.String(keyState, string(s.State)), zap.String(keyError, s.Error))
		}
	}
}

// Close stops every upstream (gracefully, in parallel) and the merge loop,
// waiting at most until ctx is done.
func (g *Gateway) Close(ctx context.Context) error {
	if g.authn != nil {
		g.authn.Close()
	}
	if g.cancel == nil {
		return nil
	}
	g.cancel()
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, up := range g.ups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := up.Close(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	g.wg.Wait()
	return errors.Join(errs...)
}

// Server returns the underlying MCP server, for serving it over other
// transports and for tests.
func (g *Gateway) Server() *mcp.Server { return g.server }

// Upstreams returns the status of every upstream, sorted by name.
func (g *Gateway) Upstreams() []upstream.Status {
	out := make([]upstream.Status, len(g.ups))
	for i, up := range g.ups {
		out[i] = up.Status()
	}
	return out
}

func (g *Gateway) notifyChanged() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// mergeLoop merges after upstream changes, debounced.
func (g *Gateway) mergeLoop(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.changed:
			t.Reset(mergeDelay)
		case <-t.C:
			g.merge()
		}
	}
}

// merge builds a new routes generation from the upstreams' catalogs, swaps
// it in, then registers the difference on the MCP server. New routes go in
// first, so a client that reacts to list_changed finds them.
func (g *Gateway) merge() {
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	r, problems := buildRoutes(g.ups, g.nsOpts, instructionsHeader)
	g.routes.Store(r)
	g.apply(r)
	seen := make(map[string]bool, len(problems))
	for _, p := range problems {
		msg := p.String()
		seen[msg] = true
		if !g.problems[msg] {
			g.log.Error("upstream item skipped", zap.String(keyServer, p.server), zap.String(keyReason, msg))
		}
	}
	g.problems = seen
}
