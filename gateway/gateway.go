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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/audit"
	"github.com/manifold-mcp/manifold/internal/authn"
	"github.com/manifold-mcp/manifold/internal/cluster"
	"github.com/manifold-mcp/manifold/internal/lifecycle"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/internal/telemetry"
	"github.com/manifold-mcp/manifold/plugins"
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
	// Level, when set, is the root logger's level: a reload sets it from
	// gateway.log.level.
	Level *zap.AtomicLevel
	// Version is reported as the gateway's serverInfo version. Default "dev".
	Version string
	// GuardPath is the manifold executable, used to start stdio upstreams under
	// `manifold upstream-guard` (see upstream.RunGuard). Empty: no guard.
	GuardPath string
	// Transports, when it has an entry for a server name, replaces that
	// server's configured transport (see upstream.Options.Transport).
	Transports map[string]func() (mcp.Transport, error)
	// Pipes, when it has an entry for a server name (and Transports has
	// none), replaces that server's configured transport with a byte
	// stream spoken as a stdio upstream's, which takes raw calls (see
	// upstream.Options.Pipe). For in-process upstreams and tests.
	Pipes map[string]func() (io.ReadCloser, io.WriteCloser, error)
	// LoadConfig loads the config again for Reload: the file the gateway was
	// started with, with the same overrides. Nil: Reload is refused.
	LoadConfig func() (*config.Config, error)
	// Audit receives one record per tools/call, prompts/get and
	// resources/read, denials included. Nil: no audit log. The caller owns
	// it and closes it after Close; a reload keeps it.
	Audit *audit.Log
	// Telemetry traces each request (a server span, and a client span per
	// upstream call) and records the metrics. Nil: neither. The caller owns
	// it and shuts it down after Close; a reload keeps it.
	Telemetry *telemetry.Telemetry
}

// Gateway fronts the upstreams of one config. Create it with New, Start it,
// serve it with Handler or ServeStdio, and Close it. Reload replaces its
// config while it serves.
type Gateway struct {
	opts Options
	log  *zap.Logger
	obs  recorder
	// flights are the upstream calls in flight, for relaying what upstreams
	// send back toward clients (relay.go).
	flights *flights
	// bridge runs the calls of 2026-07-28 clients to older upstreams
	// (bridge.go).
	bridge bridge
	subs   subscriptions
	// calls are the requests in flight per streamable HTTP session, which
	// a DELETE of the session cancels (sessioncalls.go).
	calls sessionCalls
	// perClient holds the upstream sessions of per-client servers.
	perClient perClient
	// creds are the token sources of servers with auth (upcreds.go).
	creds upstreamCreds
	oauth oauthClients // servers with auth type oauth (oauthconsent.go)
	// sessLists holds the routing generations of sessions with per-client
	// lists (*mcp.ServerSession → *sessionRoutes); listOpens bounds the
	// dedicated sessions opened for lists at once (sessionlists.go).
	sessLists    sync.Map
	listOpens    chan struct{}
	prinLists    principalLists // of sessionless clients (principallists.go)
	consentWaits consentWaits   // retries waiting for a sign-in (oauthretry.go)
	listens      listens        // listen streams of sessionless principals (listenlists.go)
	server       *mcp.Server
	// capabilities are what server advertises; fixed at New.
	capabilities *mcp.ServerCapabilities

	snap atomic.Pointer[snapshot] // the applied config; see snapshot
	// toolsetsSeen is set once a config with toolsets applies: before, no
	// request can name one (toolsets.go).
	toolsetsSeen atomic.Bool
	notes        toolsetNotes // the toolsets' own list_changed
	pool         pool         // the upstreams, by name
	routes       atomic.Pointer[routes]
	views        atomic.Pointer[viewCache]
	inflight     lifecycle.Gauge // requests being handled, for draining
	// search is progressive discovery's index (searchindex.go).
	search atomic.Pointer[searchIndex]
	// rawServed counts the calls the raw path served (rawcall.go): which
	// path a request took, for tests and the status page.
	rawServed atomic.Int64
	// stdioFastServed counts those the stdio fast path served (stdiofast.go).
	stdioFastServed atomic.Int64
	// statelessMeta remembers the 2026-07-28 per-request members the raw
	// path found valid (rawmeta.go).
	statelessMeta statelessMetaCache
	// serverInfo is the gateway's implementation, encoded: what a
	// 2026-07-28 result names in its _meta (rawresult.go).
	serverInfo []byte
	reloads    reloadLog

	syncMu   sync.Mutex // serializes merge + registration
	registry *registry
	problems map[string]bool // last reported merge problems, to log each once
	// lastProblems are the last merge's problems, for status.
	lastProblems []mergeProblem
	pinning      pinning // tool pinning's state (pinning.go)

	changed chan struct{} // an upstream changed (buffered 1)
	// life is the one owner of the gateway's run: running from Start to
	// Close, its context is the one upstreams and background work run
	// under, and every goroutine the gateway starts (the merge loop,
	// replacements, drains, bridged calls, session watchers, the idle
	// sweeper and reaper, deliveries) runs through life.Go, so Close ends and waits
	// for them all. Nothing new starts before Start or once Close has
	// begun.
	life *lifecycle.Group

	// started is set when Start has returned, draining when Serve has begun
	// shutting the HTTP front down; see Readiness.
	started, draining atomic.Bool

	// clients are the downstream HTTP sessions, by principal (clients.go).
	clients clients
	// cluster is this replica's node in cluster mode, nil otherwise
	// (cluster.go); fixed at New. store is the store replicas share
	// (gateway.cluster.store), nil without one.
	cluster *cluster.Node
	store   *cluster.RedisStore
	// plugins runs the hook plugins of the config in force (plugins.go).
	plugins *plugins.Host
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
	if err := CheckCatalog(cfg); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	an, err := newAuthenticator(context.Background(), &cfg.Auth, o.Logger)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g := &Gateway{
		listOpens: make(chan struct{}, maxListOpens),
		opts:      o,
		log:       o.Logger.Named("gateway"),
		obs:       newRecorder(o.Audit, o.Telemetry),
		flights:   newFlights(),
		registry:  newRegistry(),
		problems:  map[string]bool{},
		changed:   make(chan struct{}, 1),
		life:      lifecycle.New(o.Logger.Named("gateway")),
	}
	g.clients.wake = make(chan struct{}, 1)
	if g.cluster, err = newClusterNode(&cfg.Gateway, o.Logger); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if g.store, err = openClusterStore(&cfg.Gateway.Cluster); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.creds.shared = g.store
	if g.cluster != nil {
		g.bridge.once.Do(func() {
			g.bridge.signer = clusterSigner(func() [][]byte { return g.cluster.Keys().StateKeys() }, g.cluster.Self(), g.cluster.Boot())
		})
	}
	g.plugins = g.newPluginHost()
	g.toolsetsSeen.Store(len(cfg.Toolsets) > 0)
	g.snap.Store(g.shareLimits(newSnapshot(cfg, an)))
	g.capabilities = &mcp.ServerCapabilities{
		Tools:       &mcp.ToolCapabilities{ListChanged: true},
		Prompts:     &mcp.PromptCapabilities{ListChanged: true},
		Resources:   &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
		Completions: &mcp.CompletionCapabilities{},
	}
	mcpx.SetLogging(g.capabilities, &mcpx.LoggingCapabilities{})
	serverOpts := &mcp.ServerOptions{
		Capabilities:       g.capabilities,
		CompletionHandler:  g.complete,
		SubscribeHandler:   g.subscribe,
		UnsubscribeHandler: g.unsubscribe,
		KeepAlive:          0,
	}
	// Announced to the client's per-client upstream sessions.
	mcpx.SetRootsListChangedHandler(serverOpts, g.rootsChanged)
	impl := &mcp.Implementation{Name: "manifold", Title: "Manifold MCP gateway", Version: o.Version}
	g.server = mcp.NewServer(impl, serverOpts)
	g.serverInfo, _ = json.Marshal(impl) // plain strings: cannot fail
	// Outermost first: recover, then cancellation by session deletion, then
	// the session's last use (clients.go), then the call meta-tool's
	// unwrapping (discovery.go), then spans, metrics and audit, then the
	// gateway's own interception.
	g.calls.watch = g.watchSession
	g.server.AddReceivingMiddleware(mcpx.Recover(g.log), g.calls.track, g.trackClient, g.unwrapCall, g.observe, g.joinToolset, g.interceptor)
	// Resource updates reach only sessions that may read the URI now, and
	// per-client ones their own session only.
	g.server.AddSendingMiddleware(g.filterUpdates, g.sessionNotices)
	// A toolset's sessions hear of their toolset's changes only
	// (toolsetnotes.go). Added last, so it is outermost: it sees a
	// per-client notice before sessionNotices turns it into list_changed.
	g.server.AddSendingMiddleware(g.filterListChanged)

	g.pool.members = map[string]*member{}
	for _, s := range cfg.Enabled() {
		g.pool.members[s.Name] = &member{spec: specOf(s, &cfg.Gateway), up: g.newUpstream(s, &cfg.Gateway)}
	}
	g.pool.publish()
	g.merge()
	return g, nil
}

// newAuthenticator returns the authenticator of c, or nil while auth is off.
func newAuthenticator(ctx context.Context, c *config.Auth, log *zap.Logger) (*authn.Authenticator, error) {
	if !c.Enabled() {
		return nil, nil
	}
	// A JWKS that does not answer quickly is fetched in the background.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return authn.New(ctx, c, &authn.Options{Logger: log.Named("auth")})
}

// newUpstream returns the (unstarted) upstream of s under the gateway
// settings gw.
func (g *Gateway) newUpstream(s config.Server, gw *config.Gateway) *upstream.Upstream {
	return upstream.New(s, g.upstreamOptions(s, gw))
}

// upstreamOptions returns the options of s's pool upstream under the
// gateway settings gw.
func (g *Gateway) upstreamOptions(s config.Server, gw *config.Gateway) *upstream.Options {
	return &upstream.Options{
		Logger:          g.opts.Logger.Named("upstream").With(zap.String(keyServer, s.Name)),
		ConnectTimeout:  gw.Timeouts.Connect,
		CallTimeout:     gw.Timeouts.Call,
		BackoffInitial:  gw.Backoff.Initial,
		BackoffMax:      gw.Backoff.Max,
		MaxConcurrency:  gw.Limits.MaxConcurrentCalls,
		MaxMessageBytes: int(gw.Limits.MaxMessageBytes),
		GuardPath:       g.opts.GuardPath,
		ClientInfo:      &mcp.Implementation{Name: "manifold", Version: g.opts.Version},
		Transport:       g.opts.Transports[s.Name],
		Pipe:            g.opts.Pipes[s.Name],
		OnChange:        func(*upstream.Upstream) { g.notifyChanged() },
		Capabilities:    relayCapabilities(s),
		Relay:           relay{g},
		Credential:      g.poolCredential(s, gw),
		Standby:         poolStandby(s), // upcreds.go
	}
}

// Start connects every upstream in parallel and returns once each has
// finished its first attempt (ready or failed), which the connect timeout
// bounds. A failed upstream keeps retrying in the background; the others
// serve meanwhile. Only the first Start before Close does anything.
func (g *Gateway) Start(ctx context.Context) {
	// Under pool.mu: a reload cannot start upstreams before these have.
	g.pool.mu.Lock()
	if !g.life.Start(ctx) {
		g.pool.mu.Unlock()
		return // started before, or closed
	}
	runCtx := g.life.Context()
	ups := g.pool.serving()
	for _, up := range ups {
		up.Start(runCtx)
	}
	g.pool.mu.Unlock()
	if m := g.obs.metrics; m != nil {
		g.life.Defer(m.ObserveUpstreams(g.upstreamStates))
		if g.obs.audit != nil {
			g.life.Defer(m.ObserveAuditDropped(g.obs.audit.Dropped))
		}
	}
	g.applyPlugins(runCtx, g.current().cfg)
	g.life.Go(g.mergeLoop)
	g.life.Go(g.sweepIdle)
	if g.cluster != nil {
		g.life.Go(g.cluster.Run)
	}
	if g.store != nil {
		g.life.Defer(g.closeStore(ctx))
	}
	waitFirstAttempts(ctx, ups, g.current().cfg.Gateway.Timeouts.Connect+time.Second)
	g.merge()
	g.started.Store(true)
	for _, up := range ups {
		s := up.Status()
		if s.State == upstream.StateReady {
			g.log.Info("upstream connected", zap.String(keyServer, s.Name), zap.Int(keyPID, s.PID))
		} else if s.State == upstream.StateStandby {
			g.log.Info("upstream connects per user", zap.String(keyServer, s.Name), zap.String(keyReason, s.Note))
		} else {
			g.log.Warn("upstream not ready; retrying in the background", zap.String(keyServer, s.Name),
				zap.String(keyState, string(s.State)), zap.String(keyError, s.Error))
		}
	}
}

// waitFirstAttempts returns when each of ups has finished its first connect
// attempt (upstream.Upstream.Attempted), or after max, or when ctx is done.
func waitFirstAttempts(ctx context.Context, ups []*upstream.Upstream, max time.Duration) {
	deadline := time.NewTimer(max)
	defer deadline.Stop()
	for _, up := range ups {
		select {
		case <-up.Attempted():
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// Close ends the gateway's run: nothing new starts, every goroutine of the
// gateway ends (its downstream sessions are closed, bridged calls and
// drains cut) and is waited for, forwards to other replicas end and their
// pooled connections close, then every upstream still running, those being
// replaced or drained included, is stopped gracefully, in parallel,
// waiting for them at most until ctx is done.
func (g *Gateway) Close(ctx context.Context) error {
	started := g.life.Running()
	defer func() {
		if a := g.current().access.authn; a != nil {
			a.Close()
		}
	}()
	// Refuse new work, cancel the run context (upstream supervisors,
	// bridged calls, drains and watchers end with it), wait for every
	// goroutine of the gateway, then stop the metric callbacks.
	g.life.Close()
	if g.cluster != nil {
		// Forwards to other replicas end, their pooled connections close.
		g.cluster.Close()
	}
	// The plugins stop last: the upstreams' calls in flight may still hook.
	defer func() {
		if err := g.plugins.Close(ctx); err != nil {
			g.log.Warn("stopping plugins", zap.Error(err))
		}
	}()
	if !started {
		return nil
	}
	// Whatever a reload or a per-client session added did so under
	// pool.mu before life closed: it is in these lists now.
	g.pool.mu.Lock()
	all := g.pool.all()
	g.pool.mu.Unlock()
	all = append(all, g.perClient.all()...)
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, up := range all {
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
	return errors.Join(errs...)
}

// Server returns the underlying MCP server, for serving it over other
// transports and for tests.
func (g *Gateway) Server() *mcp.Server { return g.server }

// Upstreams returns the status of every upstream serving, sorted by name.
func (g *Gateway) Upstreams() []upstream.Status {
	ups := g.pool.serving()
	out := make([]upstream.Status, len(ups))
	for i, up := range ups {
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

// merge builds a new routes generation from the upstreams' catalogs and
// swaps it in, with the difference registered on the MCP server: what is
// new before the swap, what went away after (apply). Clients get
// list_changed once the merge is done (filterListChanged).
func (g *Gateway) merge() {
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	snap := g.current()
	held := g.checkPins(g.pool.serving(), snap)
	r, problems := buildRoutes(g.pool.serving(), snap.cfg.Servers, snap.ns, instructionsHeader, held)
	r.listedPerClient, r.held = perClientListed(g.pool.serving()), held
	gone := g.apply(r)
	g.routes.Store(r)
	g.indexCatalog(r)
	g.unregister(gone)
	seen := make(map[string]bool, len(problems))
	for _, p := range problems {
		msg := p.String()
		seen[msg] = true
		if !g.problems[msg] {
			g.log.Error("upstream item skipped", zap.String(keyServer, p.server), zap.String(keyReason, msg))
		}
	}
	g.problems = seen
	g.lastProblems = problems
}
