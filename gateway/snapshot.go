package gateway

import (
	"net"
	"strings"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/authn"
	"github.com/manifold-mcp/manifold/internal/ratelimit"
	"github.com/manifold-mcp/manifold/namespacing"
)

// snapshot is one applied config and everything derived from it that a
// request reads. It is immutable and swapped as a whole by a reload, so a
// request sees one config from start to end: it loads the snapshot once.
type snapshot struct {
	cfg    *config.Config
	access *access
	edge   *edge
	ns     namespacing.Options
	disc   *discoveryMode // gateway.discovery; nil: full for everyone
	// toolsets are the compiled toolsets, by name (toolsets.go).
	toolsets map[string]*toolset
	// limits are the rate limits (ratelimit.go); nil when none.
	limits *ratelimit.Limiter
	// loaded is when the snapshot was applied.
	loaded time.Time
}

func newSnapshot(cfg *config.Config, an *authn.Authenticator) *snapshot {
	return &snapshot{
		cfg:      cfg,
		access:   newAccess(cfg, an),
		edge:     newEdge(&cfg.Gateway),
		ns:       namespacing.Options{Separator: cfg.Gateway.Separator, MaxLength: cfg.Gateway.MaxToolNameLength},
		disc:     newDiscoveryMode(&cfg.Gateway.Discovery),
		limits:   ratelimit.New(cfg.RateLimits),
		loaded:   time.Now(),
		toolsets: compileToolsets(cfg),
	}
}

// current returns the snapshot serving now.
func (g *Gateway) current() *snapshot { return g.snap.Load() }

// edge is the HTTP front door's part of a snapshot: what the outer handler
// checks before the SDK sees a request, precomputed once per snapshot.
type edge struct {
	// loopbackOnly: the listener is on loopback, so Host must name loopback
	// or an allowed host (DNS rebinding protection).
	loopbackOnly bool
	hosts        map[string]bool // gateway.allowedHosts, lower case, no port
	origins      map[string]bool // gateway.allowedOrigins, lower case, no trailing slash
	maxBytes     int64           // gateway.limits.maxMessageBytes
	maxSessions  int             // gateway.limits.maxSessions
	maxPerOwner  int             // gateway.limits.maxSessionsPerPrincipal
}

func newEdge(gw *config.Gateway) *edge {
	listenHost, _, _ := net.SplitHostPort(gw.Listen)
	e := &edge{
		loopbackOnly: isLoopback(listenHost),
		hosts:        make(map[string]bool, len(gw.AllowedHosts)),
		origins:      make(map[string]bool, len(gw.AllowedOrigins)),
		maxBytes:     gw.Limits.MaxMessageBytes,
		maxSessions:  gw.Limits.MaxSessions,
		maxPerOwner:  gw.Limits.MaxSessionsPerPrincipal,
	}
	for _, h := range gw.AllowedHosts {
		e.hosts[strings.ToLower(stripPort(h))] = true
	}
	for _, o := range gw.AllowedOrigins {
		e.origins[strings.TrimSuffix(strings.ToLower(o), "/")] = true
	}
	return e
}
