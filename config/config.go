// Package config holds Manifold's typed gateway configuration: loading it from a YAML or JSON
// file (or the embedded default), expanding ${VAR} references, applying MANIFOLD_<SECTION>__…
// environment overrides and secret files, and validating it strictly, reporting every problem
// at once with the file and key it comes from.
//
// koanf (github.com/knadh/koanf/v2) reads the file and merges the overrides over it
// (layers.go); a strict decoder then walks the merged tree with one field table per section
// (decode.go), so unknown keys are errors and defaults stay typed.
//
// The upstream servers use the mcpServers shape of Claude Desktop, Claude Code and Cursor, so a
// host's existing file loads unchanged: keys that hosts keep for themselves are ignored (logged
// at debug), while unknown keys in the gateway's own sections are errors. REFERENCE.md in this
// folder documents every key.
//
// Environment overrides: a variable MANIFOLD_<SECTION>__<KEY>… (double underscore between
// levels) sets a key of any section, matched case-insensitively against the keys and against
// the server names the file uses, and beats the file:
//
//	MANIFOLD_GATEWAY__LISTEN=0.0.0.0:9000                gateway.listen
//	MANIFOLD_GATEWAY__LIMITS__MAXSESSIONS=10             gateway.limits.maxSessions
//	MANIFOLD_GATEWAY__ALLOWEDHOSTS=a.test,b.test         gateway.allowedHosts (comma-separated)
//	MANIFOLD_MCPSERVERS__EVERYTHING__URL=https://e.test  mcpServers.everything.url
//	MANIFOLD_AUTH__JWT__ISSUER=https://idp.test          auth.jwt.issuer
//
// Variables without "__" (such as MANIFOLD_BINARY) are not overrides. An override naming no
// known key is an error whose source is "environment"; override values are used literally.
//
// Everything here is safe for concurrent use: loading shares no state, and a loaded *Config is
// meant to be treated as an immutable snapshot.
package config

import (
	"errors"
	"slices"
	"strings"
	"time"
)

// Transport types of an upstream server (Server.Type).
const (
	TypeStdio = "stdio"
	TypeHTTP  = "http"
	TypeSSE   = "sse"
)

// Session modes of an upstream server (Server.Session).
const (
	SessionShared    = "shared"
	SessionPerClient = "per-client"
)

// Capabilities the gateway can relay from a server to clients (Server.Relay).
const (
	RelaySampling    = "sampling"
	RelayElicitation = "elicitation"
	RelayRoots       = "roots"
	RelayNone        = "none"
)

// DefaultSource is the Config.Source of the embedded default config.
const DefaultSource = "embedded default"

// Default values of the gateway section, applied to keys that are absent.
const (
	defaultListen             = "127.0.0.1:8080"
	defaultSeparator          = "__"
	defaultMaxToolNameLength  = 64
	defaultMaxSessions        = 1000
	defaultMaxSessionsPerPrin = 100
	defaultMaxMessageBytes    = 4 << 20
	defaultMaxConcurrentCalls = 64
	defaultSessionIdleTimeout = 30 * time.Minute
	defaultConnectTimeout     = 30 * time.Second
	defaultCallTimeout        = 60 * time.Second
	defaultDrainTimeout       = 10 * time.Second
	defaultRequestBodyTimeout = 30 * time.Second
	defaultIdleConnTimeout    = 2 * time.Minute
	defaultBackoffInitial     = 500 * time.Millisecond
	defaultBackoffMax         = 30 * time.Second
	defaultLogLevel           = "info"
	defaultLogFormat          = "json"
)

// Config is one complete gateway configuration. A *Config returned by Load, Parse or
// LoadDefault is valid, has its defaults applied, and must not be modified: share it as a
// snapshot.
type Config struct {
	// Servers are the upstream MCP servers by name, from the "mcpServers" key (or VS Code's
	// "servers" when "mcpServers" is absent). Disabled servers are included; see Enabled.
	Servers map[string]Server
	// Gateway holds the gateway's own settings (key "gateway").
	Gateway Gateway
	// Auth says who may connect over HTTP (key "auth"); see Auth.Enabled.
	Auth Auth
	// Policy says who may see and use what (key "policy"); nil allows everything.
	Policy *Policy
	// Audit configures the audit log (key "audit"); nil means no audit log.
	Audit *Audit
	// Telemetry configures traces and metrics (key "telemetry"); the zero value means none.
	Telemetry Telemetry
	// Plugins are the hook plugins (key "plugins"), in the file's order; see Plugin.
	Plugins []Plugin
	// Toolsets are the named subsets of the catalog served on their own endpoints (key
	// "toolsets"), by name.
	Toolsets map[string]Toolset
	// RateLimits are the call rate limits (key "rateLimits"), in order; see RateLimit.
	RateLimits []RateLimit
	// Source is the path the config was loaded from, or DefaultSource. It is not read from the
	// file; errors from Validate name it.
	Source string
	// Hash identifies the document the config was parsed from: "sha256:" and the hex SHA-256
	// of its bytes. Equal documents have equal hashes (environment values are not included).
	Hash string
	// ServersKey is the top-level key the servers were read from: "mcpServers", or "servers"
	// for a VS Code file. Empty means "mcpServers". Errors name server keys under it.
	ServersKey string
}

// Server is one upstream MCP server (an entry of mcpServers).
type Server struct {
	// Name is the server's key in mcpServers; the loader fills it in.
	Name string
	// Type is the transport: TypeStdio, TypeHTTP (streamable HTTP) or TypeSSE (legacy HTTP+SSE).
	// When absent it is inferred: command → stdio; url → http, except a URL whose path ends in
	// "/sse" → sse. Cline's "transportType" is accepted when "type" is absent.
	Type string

	// Command, Args, Env and Cwd start a stdio server. Env is added to the gateway's own
	// environment; Cwd empty means the gateway's working directory.
	Command string
	Args    []string
	Env     map[string]string
	Cwd     string

	// URL, Headers and CAFile reach an http or sse server. CAFile (key "caFile") names a PEM
	// bundle trusted for this server in addition to the system roots.
	URL     string
	Headers map[string]string
	CAFile  string

	// Prefix (key "prefix") replaces the server name as namespace when set; an explicit ""
	// exposes the server's names and URIs unchanged. Nil means the default; see Namespace.
	Prefix *string
	// Session (key "session") is SessionShared or SessionPerClient; empty means the default
	// for the transport (see SessionMode).
	Session string
	// Relay (key "relay") lists what the gateway offers to relay from this server to clients in
	// shared mode: any of RelaySampling, RelayElicitation and RelayRoots, or RelayNone alone.
	// Absent (or []) means all three. A per-client session declares its client's own
	// capabilities instead.
	Relay []string
	// Timeout is the per-call timeout for this server; 0 means gateway.timeouts.call.
	Timeout time.Duration
	// MaxConcurrency (key "maxConcurrency") caps in-flight calls to this server; 0 means
	// gateway.limits.maxConcurrentCalls.
	MaxConcurrency int
	// Disabled servers are parsed and checked for shape but not started; Enabled skips them.
	Disabled bool
	// Required servers must be ready for the gateway to report itself ready (GET /readyz).
	// It changes nothing else: a required server that fails is retried like any other, and
	// the gateway serves the others meanwhile. Changing it on reload does not restart the
	// server.
	Required bool
	// Tools and Prompts (keys "tools", "prompts") reshape the server's tools and prompts, by the
	// upstream's own name (see Override). A change applies on reload without restarting the
	// server.
	Tools   map[string]Override
	Prompts map[string]Override
	// Auth (key "auth") is how the gateway authenticates to this http or sse server (see
	// UpstreamAuth); the zero value means its static headers only.
	Auth UpstreamAuth
	// Lists (key "lists") is ListsShared (empty means shared) or ListsPerClient: each
	// client's lists of the server come from its own upstream session (needs per-client
	// sessions).
	Lists string
	// Pinning (key "pinning") overrides gateway.pinning for this server.
	Pinning ServerPinning
}

// SessionMode returns the server's effective session mode: Session when set, else
// SessionPerClient for remote servers (an upstream session is one HTTP handshake, and exact
// routing of server→client requests needs no call in flight) and SessionShared for stdio
// servers (a per-client session is one more process per client).
func (s Server) SessionMode() string {
	switch {
	case s.Session != "":
		return s.Session
	case s.Type == TypeHTTP || s.Type == TypeSSE:
		return SessionPerClient
	}
	return SessionShared
}

// Relays reports whether the gateway offers to relay capability c (RelaySampling,
// RelayElicitation or RelayRoots) from this server in shared mode.
func (s Server) Relays(c string) bool {
	return len(s.Relay) == 0 || slices.Contains(s.Relay, c)
}

// Namespace returns the server's effective prefix: *Prefix when set, else the server name with
// every character outside [A-Za-z0-9_-] replaced by '_'. An empty result means names and URIs
// are exposed unchanged.
func (s Server) Namespace() string {
	if s.Prefix != nil {
		return *s.Prefix
	}
	return strings.Map(func(r rune) rune {
		if isNameChar(r) {
			return r
		}
		return '_'
	}, s.Name)
}

// Gateway holds the gateway's own settings (key "gateway").
type Gateway struct {
	// Listen is the HTTP listen address, host:port; default "127.0.0.1:8080". A host other than
	// loopback (127.0.0.0/8, ::1, localhost), including an empty host, requires Insecure.
	Listen string
	// Separator joins a namespace and a name; default "__", non-empty, only [A-Za-z0-9_-].
	Separator string
	// MaxToolNameLength (key "maxToolNameLength") caps the length of the names clients see;
	// default 64, valid 16..1024.
	MaxToolNameLength int
	// Insecure must be true to listen on a non-loopback address: there is no authentication yet.
	Insecure bool
	// AllowedHosts (key "allowedHosts") are extra Host header values accepted, besides the
	// loopback names (DNS-rebinding protection). Each is a host or host:port.
	AllowedHosts []string
	// AllowedOrigins (key "allowedOrigins") are browser Origin values accepted, each
	// scheme://host[:port].
	AllowedOrigins []string
	// TLS (key "tls") serves HTTPS when both files are set.
	TLS TLS
	// Limits, Timeouts, Backoff and Log are the keys of the same names (lower case).
	Limits   Limits
	Timeouts Timeouts
	Backoff  Backoff
	Log      Log
	// Cluster (key "cluster") turns on cluster mode; see Cluster.
	Cluster Cluster
	// Discovery (key "discovery") chooses full or progressive tool discovery.
	Discovery Discovery
	// TokenStore (key "tokenStore") keeps per-principal upstream tokens; see TokenStore.
	TokenStore TokenStore
	// Pinning (key "pinning") pins tool and prompt definitions; see Pinning.
	Pinning Pinning
	// PublicURL (key "publicURL") is the gateway's address as browsers reach it
	// (scheme://host[:port][/path]): the base of its sign-in links and of the OAuth callback
	// of `auth.type: oauth` servers. Default: http(s):// and the listen address.
	PublicURL string
}

// TLS names the certificate and key files to serve HTTPS with (keys "certFile", "keyFile");
// both or neither.
type TLS struct {
	CertFile string
	KeyFile  string
}

// Limits bound the gateway's resource use (key "gateway.limits").
type Limits struct {
	// MaxSessions (key "maxSessions") caps concurrent downstream sessions; default 1000.
	MaxSessions int
	// MaxSessionsPerPrincipal (key "maxSessionsPerPrincipal") caps the downstream sessions one
	// principal holds while auth is on; default 100. At the cap, a new session of that
	// principal ends its own session idle the longest.
	MaxSessionsPerPrincipal int
	// MaxMessageBytes (key "maxMessageBytes") caps one JSON-RPC message; default 4 MiB.
	MaxMessageBytes int64
	// MaxConcurrentCalls (key "maxConcurrentCalls") caps in-flight calls per upstream;
	// default 64. Server.MaxConcurrency overrides it per server.
	MaxConcurrentCalls int
	// SessionIdleTimeout (key "sessionIdleTimeout") closes idle sessions; default 30m.
	SessionIdleTimeout time.Duration
}

// Timeouts of the gateway (key "gateway.timeouts").
type Timeouts struct {
	// Connect bounds connecting to and initializing an upstream; default 30s.
	Connect time.Duration
	// Call bounds one upstream call unless Server.Timeout is set; default 60s.
	Call time.Duration
	// Drain bounds waiting for in-flight requests at reload or shutdown; default 10s.
	Drain time.Duration
	// RequestBody (key "requestBody") bounds reading one HTTP request body, from the end of
	// its headers; default 30s. Responses (SSE streams) are not bounded by it.
	RequestBody time.Duration
	// IdleConnection (key "idleConnection") closes a keep-alive HTTP connection that waits
	// this long for its next request; default 2m.
	IdleConnection time.Duration
}

// Backoff paces upstream restarts (key "gateway.backoff"): delays double from Initial
// (default 500ms) up to Max (default 30s).
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
}

// Log configures the gateway's log (key "gateway.log").
type Log struct {
	// Level is debug, info, warn or error; default info.
	Level string
	// Format is json or console; default json.
	Format string
}

// DefaultGateway returns the gateway settings used for keys that are absent.
func DefaultGateway() Gateway {
	var g Gateway
	g.applyDefaults()
	return g
}

// ApplyDefaults fills in what the loader fills in for a Config built in code: zero-valued
// gateway settings get their defaults, and each server gets its Name from its key and its Type
// inferred when empty; a non-nil Audit, Telemetry.Traces or Telemetry.Metrics gets the
// defaults of its section (a trace protocol of http/protobuf, but no endpoint: unlike the
// loader, ApplyDefaults reads no environment variable). Call it before Validate. Load, Parse
// and LoadDefault need no call.
func (c *Config) ApplyDefaults() {
	c.Gateway.applyDefaults()
	c.Auth.applyDefaults()
	if c.Audit != nil {
		c.Audit.applyDefaults()
	}
	c.Telemetry.applyDefaults()
	for i := range c.Plugins {
		c.Plugins[i].applyDefaults()
	}
	for name, s := range c.Servers {
		s.Name = name
		if s.Type == "" {
			s.Type = inferType(s)
		}
		c.Servers[name] = s
	}
}

func (g *Gateway) applyDefaults() {
	setIfZero(&g.Listen, defaultListen)
	setIfZero(&g.Separator, defaultSeparator)
	setIfZero(&g.MaxToolNameLength, defaultMaxToolNameLength)
	setIfZero(&g.Limits.MaxSessions, defaultMaxSessions)
	setIfZero(&g.Limits.MaxSessionsPerPrincipal, defaultMaxSessionsPerPrin)
	setIfZero(&g.Limits.MaxMessageBytes, defaultMaxMessageBytes)
	setIfZero(&g.Limits.MaxConcurrentCalls, defaultMaxConcurrentCalls)
	setIfZero(&g.Limits.SessionIdleTimeout, defaultSessionIdleTimeout)
	setIfZero(&g.Timeouts.Connect, defaultConnectTimeout)
	setIfZero(&g.Timeouts.Call, defaultCallTimeout)
	setIfZero(&g.Timeouts.Drain, defaultDrainTimeout)
	setIfZero(&g.Timeouts.RequestBody, defaultRequestBodyTimeout)
	setIfZero(&g.Timeouts.IdleConnection, defaultIdleConnTimeout)
	setIfZero(&g.Backoff.Initial, defaultBackoffInitial)
	setIfZero(&g.Backoff.Max, defaultBackoffMax)
	setIfZero(&g.Log.Level, defaultLogLevel)
	setIfZero(&g.Log.Format, defaultLogFormat)
}

// Defaults of the auth section.
const (
	defaultLocalPrincipal = "local"
	defaultPrincipalClaim = "sub"
	defaultGroupsClaim    = "groups"
	defaultJWTLeeway      = 30 * time.Second
)

func (a *Auth) applyDefaults() {
	setIfZero(&a.Local.Name, defaultLocalPrincipal)
	if a.JWT != nil {
		setIfZero(&a.JWT.PrincipalClaim, defaultPrincipalClaim)
		setIfZero(&a.JWT.GroupsClaim, defaultGroupsClaim)
		setIfZero(&a.JWT.Leeway, defaultJWTLeeway)
	}
}

func setIfZero[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// Enabled returns the servers that are not disabled, sorted by name. The Server values are
// copies, but their slices and maps are shared with c and must not be modified.
func (c *Config) Enabled() []Server {
	out := make([]Server, 0, len(c.Servers))
	for name, s := range c.Servers {
		if s.Disabled {
			continue
		}
		if s.Name == "" {
			s.Name = name
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// FieldError is one problem in a config, naming where it is: Source is the file (or
// "environment" for an override, or DefaultSource), Key the dotted key (or the environment
// variable). Msg never contains the value of an environment variable.
type FieldError struct {
	Source string
	Key    string
	Msg    string
}

// Error returns "<source>: <key>: <msg>", leaving out empty parts.
func (e *FieldError) Error() string {
	var b strings.Builder
	for _, part := range []string{e.Source, e.Key} {
		if part != "" {
			b.WriteString(part)
			b.WriteString(": ")
		}
	}
	b.WriteString(e.Msg)
	return b.String()
}

// FieldErrors returns the *FieldError values in err, in order: err may be one *FieldError or
// an errors.Join of them, as returned by Load, Parse and Validate. Other errors are skipped.
func FieldErrors(err error) []*FieldError {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*FieldError
		for _, e := range j.Unwrap() {
			out = append(out, FieldErrors(e)...)
		}
		return out
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return []*FieldError{fe}
	}
	return nil
}

// joinErrors sorts problems by source, key and message, drops duplicates, and joins them;
// nil when there are none.
func joinErrors(errs []*FieldError) error {
	if len(errs) == 0 {
		return nil
	}
	slices.SortFunc(errs, func(a, b *FieldError) int {
		if c := strings.Compare(a.Source, b.Source); c != 0 {
			return c
		}
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.Msg, b.Msg)
	})
	errs = slices.CompactFunc(errs, func(a, b *FieldError) bool { return *a == *b })
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

// isNameChar reports whether r is in [A-Za-z0-9_-], the characters of namespaces and
// separators.
func isNameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}

// isName reports whether s is non-empty and consists of name characters only.
func isName(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return !isNameChar(r) })
}
