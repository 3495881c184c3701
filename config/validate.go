package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// Validate reports every problem in c at once: an errors.Join of *FieldError sorted by source
// and key (see FieldErrors), or nil. It reads the files the config names (caFile, tls) to check
// that they exist. Load, Parse and LoadDefault call it; a Config built in code needs
// ApplyDefaults first, because zero values are errors here.
func (c *Config) Validate() error {
	return joinErrors(c.validate(nil, nil))
}

// validator collects problems. origins maps keys set by environment overrides to the variable
// that set them; failed holds keys the decoder already reported.
type validator struct {
	source  string
	origins map[string]string
	failed  map[string]bool
	errs    []*FieldError
}

func (v *validator) add(key, msg string) {
	if name, ok := v.origins[key]; ok {
		v.errs = append(v.errs, &FieldError{Source: envSource, Key: name, Msg: msg})
		return
	}
	v.errs = append(v.errs, &FieldError{Source: v.source, Key: key, Msg: msg})
}

func (c *Config) validate(origins map[string]string, failed map[string]bool) []*FieldError {
	v := &validator{source: c.Source, origins: origins, failed: failed}
	v.gateway(&c.Gateway, c.Auth.Enabled())
	v.auth(&c.Auth)
	v.tokenStore(c.Gateway.TokenStore)
	v.publicURL(c.Gateway.PublicURL)
	v.oidcStart(c) // oidcstart.go
	if c.Policy != nil {
		v.policy(c.Policy)
	}
	if c.Audit != nil {
		v.audit(c.Audit)
	}
	v.telemetry(&c.Telemetry, &c.Gateway)
	v.plugins(c.Plugins)
	section := c.ServersKey
	if section == "" {
		section = keyServers
	}
	v.catalog(c, section)
	v.traffic(c, section)
	names := make([]string, 0, len(c.Servers))
	for name := range c.Servers {
		names = append(names, name)
	}
	slices.Sort(names)
	namespaces := make(map[string]string) // namespace → first enabled server using it
	for _, name := range names {
		s := c.Servers[name]
		key := joinKey(section, name)
		v.server(key, name, s)
		v.upstreamAuth(key, s, s.Type, c.Auth.JWT != nil)
		if s.Disabled || v.failed[joinKey(key, "prefix")] {
			continue
		}
		s.Name = name
		ns := s.Namespace()
		if ns == "" {
			continue
		}
		if first, ok := namespaces[ns]; ok {
			v.add(key, fmt.Sprintf("namespace %q is also the namespace of server %q: set a distinct prefix on one of them", ns, first))
			continue
		}
		namespaces[ns] = name
	}
	return v.errs
}

func (v *validator) server(key, name string, s Server) {
	if name == "" {
		v.add(key, "a server name must not be empty")
	}
	if s.Prefix != nil && strings.ContainsFunc(*s.Prefix, func(r rune) bool { return !isNameChar(r) }) {
		v.add(joinKey(key, "prefix"), "may contain only letters, digits, _ and -")
	}
	if s.Timeout < 0 {
		v.add(joinKey(key, "timeout"), "must not be negative (0 means gateway.timeouts.call)")
	}
	if s.MaxConcurrency < 0 {
		v.add(joinKey(key, "maxConcurrency"), "must not be negative (0 means gateway.limits.maxConcurrentCalls)")
	}
	switch s.Session {
	case "", SessionShared, SessionPerClient:
	default:
		v.add(joinKey(key, "session"), "must be shared or per-client")
	}
	for i, c := range s.Relay {
		switch c {
		case RelaySampling, RelayElicitation, RelayRoots:
		case RelayNone:
			if len(s.Relay) > 1 {
				v.add(fmt.Sprintf("%s[%d]", joinKey(key, "relay"), i), "none must be the only entry")
			}
		default:
			v.add(fmt.Sprintf("%s[%d]", joinKey(key, "relay"), i), "must be sampling, elicitation, roots or none")
		}
	}
	for _, k := range []string{"type", "transportType", "command", "url", "httpUrl", "serverUrl"} {
		if v.failed[joinKey(key, k)] {
			return // the transport is unknown; its problem is already reported
		}
	}

	typ := s.Type
	if typ == "" {
		typ = inferType(s)
	}
	switch {
	case s.Command != "" && s.URL != "":
		v.add(key, "set either command (a stdio server) or url (an http or sse server), not both")
		return
	case s.Command == "" && s.URL == "":
		v.add(key, "needs command (a stdio server) or url (an http or sse server)")
		return
	case typ != TypeStdio && typ != TypeHTTP && typ != TypeSSE:
		v.add(joinKey(key, "type"), "must be stdio, http (also spelt streamableHttp) or sse")
		return
	case typ == TypeStdio && s.Command == "":
		v.add(joinKey(key, "type"), "type stdio needs command, not url")
		return
	case typ != TypeStdio && s.URL == "":
		v.add(joinKey(key, "type"), "type "+typ+" needs url, not command")
		return
	}

	if typ == TypeStdio {
		for k, set := range map[string]bool{"headers": len(s.Headers) > 0, "caFile": s.CAFile != ""} {
			if set {
				v.add(joinKey(key, k), "only valid for http and sse servers")
			}
		}
		return
	}
	for k, set := range map[string]bool{"args": len(s.Args) > 0, "env": len(s.Env) > 0, "cwd": s.Cwd != ""} {
		if set {
			v.add(joinKey(key, k), "only valid for stdio servers")
		}
	}
	if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add(joinKey(key, "url"), "must be an absolute http(s) URL")
	}
	if s.CAFile != "" && !s.Disabled {
		v.caFile(joinKey(key, "caFile"), s.CAFile)
	}
}

// maxCAFileBytes bounds how much of a caFile is read.
const maxCAFileBytes = 16 << 20

func (v *validator) caFile(key, path string) {
	if !v.checkFile(key, path) {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		v.add(key, fileProblem(err))
		return
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCAFileBytes))
	switch {
	case err != nil:
		v.add(key, fileProblem(err))
	case !x509.NewCertPool().AppendCertsFromPEM(data):
		v.add(key, "contains no PEM certificate")
	}
}

func (v *validator) gateway(g *Gateway, authenticated bool) {
	v.listen(g.Listen, g.Insecure || authenticated)
	if !isName(g.Separator) {
		v.add("gateway.separator", "must be non-empty and contain only letters, digits, _ and -")
	}
	if g.MaxToolNameLength < 16 || g.MaxToolNameLength > 1024 {
		v.add("gateway.maxToolNameLength", "must be between 16 and 1024")
	}
	v.discovery(g.Discovery)
	for i, h := range g.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/ \t\r\n@?#") {
			v.add(fmt.Sprintf("gateway.allowedHosts[%d]", i), "must be a host or host:port, without scheme or path")
		}
	}
	for i, o := range g.AllowedOrigins {
		if u, err := url.Parse(o); err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			v.add(fmt.Sprintf("gateway.allowedOrigins[%d]", i), "must be an origin: scheme://host[:port], without path")
		}
	}

	switch tls := g.TLS; {
	case (tls.CertFile == "") != (tls.KeyFile == ""):
		v.add("gateway.tls", "set both certFile and keyFile, or neither")
	case tls.CertFile != "":
		for k, path := range map[string]string{"certFile": tls.CertFile, "keyFile": tls.KeyFile} {
			v.checkFile("gateway.tls."+k, path)
		}
	}

	for key, n := range map[string]int64{
		"gateway.limits.maxSessions":             int64(g.Limits.MaxSessions),
		"gateway.limits.maxSessionsPerPrincipal": int64(g.Limits.MaxSessionsPerPrincipal),
		"gateway.limits.maxMessageBytes":         g.Limits.MaxMessageBytes,
		"gateway.limits.maxConcurrentCalls":      int64(g.Limits.MaxConcurrentCalls),
	} {
		if n <= 0 {
			v.add(key, "must be greater than 0")
		}
	}
	for key, d := range map[string]time.Duration{
		"gateway.limits.sessionIdleTimeout": g.Limits.SessionIdleTimeout,
		"gateway.timeouts.connect":          g.Timeouts.Connect,
		"gateway.timeouts.call":             g.Timeouts.Call,
		"gateway.timeouts.drain":            g.Timeouts.Drain,
		"gateway.timeouts.requestBody":      g.Timeouts.RequestBody,
		"gateway.timeouts.idleConnection":   g.Timeouts.IdleConnection,
		"gateway.backoff.initial":           g.Backoff.Initial,
		"gateway.backoff.max":               g.Backoff.Max,
	} {
		if d <= 0 {
			v.add(key, "must be greater than 0")
		}
	}
	if g.Backoff.Initial > 0 && g.Backoff.Max > 0 && g.Backoff.Initial > g.Backoff.Max {
		v.add("gateway.backoff.initial", "must not exceed gateway.backoff.max")
	}

	switch g.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.add("gateway.log.level", "must be debug, info, warn or error")
	}
	switch g.Log.Format {
	case "json", "console":
	default:
		v.add("gateway.log.format", "must be json or console")
	}
	v.cluster(&g.Cluster)
	v.fileStores(g)
	v.sharedStores(g)
}

// listen checks the listen address and that a non-loopback one is authenticated or
// explicitly insecure.
func (v *validator) listen(addr string, allowed bool) {
	const key = "gateway.listen"
	host, ok := v.hostPort(key, addr, "127.0.0.1:8080")
	if !ok {
		return
	}
	if !allowed && !isLoopback(host) {
		v.add(key, "a non-loopback address requires authentication (auth.apiKeys or auth.jwt), or "+
			"gateway.insecure: true to accept that anyone who can reach the address may use every upstream server")
	}
}

// isLoopback reports whether host is localhost or a loopback IP address. The empty host (all
// interfaces) is not.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// checkFile reports a problem and returns false unless path names a readable regular file.
// It never reads from the file, so a device or a named pipe cannot block or exhaust it.
func (v *validator) checkFile(key, path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		v.add(key, fileProblem(err))
		return false
	}
	if !fi.Mode().IsRegular() {
		v.add(key, "must be a regular file")
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		v.add(key, fileProblem(err))
		return false
	}
	f.Close()
	return true
}

// fileProblem describes why a named file cannot be used, without repeating its path.
func fileProblem(err error) string {
	var pe *os.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "file does not exist"
	case errors.Is(err, fs.ErrPermission):
		return "file is not readable (permission denied)"
	case errors.As(err, &pe):
		return "cannot read the file: " + pe.Err.Error()
	}
	return "cannot read the file"
}
