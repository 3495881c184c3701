package config

import (
	"net/url"
	"strings"
)

// hostOnlyKey reports whether k is a per-server key that host apps (Claude Desktop and Code,
// Cursor, Cline, VS Code, Windsurf, Gemini CLI) keep for themselves. The gateway ignores them,
// logging at debug, so a host's file loads unchanged.
func hostOnlyKey(k string) bool {
	switch k {
	case "alwaysAllow", "autoApprove", "description", "disabledTools", "excludeTools", "includeTools", "trust":
		return true
	}
	return false
}

// unsupportedKey returns why k, a per-server key of host apps whose meaning the gateway cannot
// honour, is an error (ignoring it would change what the server does), or "" for other keys.
func unsupportedKey(k string) string {
	switch k {
	case "envFile":
		return "not supported: set the variables in env instead (values may use ${VAR})"
	case "oauth":
		return "not supported yet in this version: set an Authorization header in headers instead"
	}
	return ""
}

// serverAliases are spellings of the transport and URL that other hosts use; see decodeServer.
type serverAliases struct {
	transportType *string // Cline: "stdio" | "sse" | "streamableHttp" (or "http")
	httpURL       *string // Gemini CLI: a streamable HTTP URL
	serverURL     *string // Windsurf: a remote server URL
}

// serverFields describes one mcpServers entry with destinations in s and a.
func serverFields(s *Server, a *serverAliases) []field {
	return []field{
		{name: "type", ptr: &s.Type},
		{name: "command", ptr: &s.Command},
		{name: "args", ptr: &s.Args},
		{name: "env", ptr: &s.Env},
		{name: "cwd", ptr: &s.Cwd},
		{name: "url", ptr: &s.URL},
		{name: "headers", ptr: &s.Headers},
		{name: "caFile", ptr: &s.CAFile},
		{name: "prefix", ptr: &s.Prefix},
		{name: "session", ptr: &s.Session},
		{name: "relay", ptr: &s.Relay},
		{name: "timeout", ptr: &s.Timeout},
		{name: "maxConcurrency", ptr: &s.MaxConcurrency},
		{name: "disabled", ptr: &s.Disabled},
		{name: "required", ptr: &s.Required},
		{name: "tools"},
		{name: "prompts"},
		{name: "auth", sub: upstreamAuthFields(&s.Auth)},
		{name: "lists", ptr: &s.Lists},
		{name: "pinning", sub: serverPinningFields(&s.Pinning)},
		{name: "transportType", ptr: &a.transportType},
		{name: "httpUrl", ptr: &a.httpURL},
		{name: "serverUrl", ptr: &a.serverURL},
	}
}

// servers decodes the servers mapping found under the top-level key sectionKey.
func (d *decoder) servers(sectionKey string, v any) map[string]Server {
	m, ok := asMap(v)
	if !ok {
		if v != nil {
			d.fail(sectionKey, "must be a mapping of server names to servers")
		}
		return nil
	}
	out := make(map[string]Server, len(m))
	for _, name := range sortedKeys(m) {
		key := joinKey(sectionKey, name)
		if s, ok := d.server(key, name, m[name]); ok {
			out[name] = s
		}
	}
	return out
}

// server decodes one mcpServers entry. Host-only keys are skipped before expansion, so their
// own placeholders cannot fail the load.
func (d *decoder) server(key, name string, v any) (Server, bool) {
	m, ok := asMap(v)
	if !ok {
		d.fail(key, "must be a mapping of keys to values")
		return Server{}, false
	}
	s := Server{Name: name}
	var a serverAliases
	fields := serverFields(&s, &a)
	own := make(map[string]any, len(m))
	for _, k := range sortedKeys(m) {
		switch {
		case hostOnlyKey(k):
			d.ignore(joinKey(key, k), "kept by host apps for themselves")
		case unsupportedKey(k) != "":
			d.fail(joinKey(key, k), unsupportedKey(k))
		case k == "tools" || k == "prompts":
			d.serverOverrides(joinKey(key, k), &s, k == "tools", m[k])
		default:
			own[k] = m[k] // unknown keys are reported by section
		}
	}
	d.section(key, fields, own)
	d.resolveAliases(key, &s, a)
	return s, true
}

// resolveAliases folds other hosts' spellings into URL and Type, and infers Type when absent.
func (d *decoder) resolveAliases(key string, s *Server, a serverAliases) {
	urls := 0
	for _, u := range []*string{&s.URL, a.httpURL, a.serverURL} {
		if u != nil && *u != "" {
			urls++
		}
	}
	switch {
	case urls > 1:
		d.fail(joinKey(key, "url"), "set only one of url, httpUrl and serverUrl")
	case a.httpURL != nil && *a.httpURL != "":
		s.URL = *a.httpURL
		if s.Type == "" {
			s.Type = TypeHTTP
		}
	case a.serverURL != nil && *a.serverURL != "":
		s.URL = *a.serverURL
	}

	if isStreamableHTTP(s.Type) {
		s.Type = TypeHTTP // Cline's and Cursor's spelling
	}
	if a.transportType != nil {
		if s.Type != "" {
			d.ignore(joinKey(key, "transportType"), "type is set")
		} else {
			switch t := *a.transportType; {
			case t == TypeStdio, t == TypeSSE, t == TypeHTTP:
				s.Type = t
			case isStreamableHTTP(t):
				s.Type = TypeHTTP
			default:
				d.fail(joinKey(key, "transportType"), "must be stdio, sse, streamableHttp or http")
			}
		}
	}
	if s.Type == "" {
		s.Type = inferType(*s)
	}
}

// isStreamableHTTP reports whether t is another host's name for the streamable HTTP
// transport: "streamableHttp" (Cline, Cursor) or "streamable-http".
func isStreamableHTTP(t string) bool {
	return strings.EqualFold(t, "streamableHttp") || strings.EqualFold(t, "streamable-http")
}

// inferType returns the transport implied by a server's command or URL: stdio for a command,
// sse for a URL whose path ends in "/sse", http for other URLs, and "" when neither is set.
func inferType(s Server) string {
	switch {
	case s.Command != "" && s.URL == "":
		return TypeStdio
	case s.URL != "" && s.Command == "":
		if u, err := url.Parse(s.URL); err == nil && strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/sse") {
			return TypeSSE
		}
		return TypeHTTP
	}
	return ""
}
