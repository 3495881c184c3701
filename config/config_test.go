package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testOpts isolates a test from the process environment: vars answers ${VAR}, environ holds
// the override candidates.
func testOpts(vars map[string]string, environ ...string) *LoadOptions {
	return &LoadOptions{
		LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		Environ:   append([]string{}, environ...),
	}
}

// wantGateway is the documented default gateway section, written out independently of the code.
func wantGateway() Gateway {
	return Gateway{
		Listen:            "127.0.0.1:8080",
		Separator:         "__",
		MaxToolNameLength: 64,
		Limits: Limits{
			MaxSessions:             1000,
			MaxSessionsPerPrincipal: 100,
			MaxMessageBytes:         4194304,
			MaxConcurrentCalls:      64,
			SessionIdleTimeout:      30 * time.Minute,
		},
		Timeouts: Timeouts{Connect: 30 * time.Second, Call: 60 * time.Second, Drain: 10 * time.Second,
			RequestBody: 30 * time.Second, IdleConnection: 2 * time.Minute},
		Backoff: Backoff{Initial: 500 * time.Millisecond, Max: 30 * time.Second},
		Log:     Log{Level: "info", Format: "json"},
	}
}

func ptr[T any](v T) *T { return &v }

func TestParse(t *testing.T) {
	tests := []struct {
		name   string
		format string
		doc    string
		vars   map[string]string
		want   *Config
	}{
		{
			name:   "empty YAML document gets the defaults",
			format: FormatYAML,
			doc:    "",
			want:   &Config{Auth: wantAuth, Source: "test", ServersKey: "mcpServers", Gateway: wantGateway()},
		},
		{
			name:   "Claude Desktop file works unchanged",
			format: FormatJSON,
			doc: `{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]
    },
    "github": {
      "command": "docker",
      "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"},
      "autoApprove": ["get_me"],
      "alwaysAllow": ["search"],
      "description": "GitHub",
      "disabled": false
    }
  }
}`,
			vars: map[string]string{"GITHUB_TOKEN": "ghp_123"},
			want: &Config{Auth: wantAuth, Source: "test", ServersKey: "mcpServers", Gateway: wantGateway(), Servers: map[string]Server{
				"filesystem": {Name: "filesystem", Type: "stdio", Command: "npx",
					Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"}},
				"github": {Name: "github", Type: "stdio", Command: "docker",
					Args: []string{"run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"},
					Env:  map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_123"}},
			}},
		},
		{
			name:   "Cursor file with http servers and headers",
			format: FormatJSON,
			doc: `{"mcpServers": {
  "weather": {"url": "https://weather.example.com/mcp", "headers": {"Authorization": "Bearer ${env:WEATHER_TOKEN}"}},
  "legacy": {"url": "http://localhost:3001/sse"},
  "tools": {"type": "sse", "url": "https://tools.example.com/events", "disabledTools": ["x"]}
}}`,
			vars: map[string]string{"WEATHER_TOKEN": "tok"},
			want: &Config{Auth: wantAuth, Source: "test", ServersKey: "mcpServers", Gateway: wantGateway(), Servers: map[string]Server{
				"weather": {Name: "weather", Type: "http", URL: "https://weather.example.com/mcp",
					Headers: map[string]string{"Authorization": "Bearer tok"}},
				"legacy": {Name: "legacy", Type: "sse", URL: "http://localhost:3001/sse"},
				"tools":  {Name: "tools", Type: "sse", URL: "https://tools.example.com/events"},
			}},
		},
		{
			name:   "VS Code servers file with comments, trailing commas and inputs",
			format: FormatJSON,
			doc: `{
  // VS Code keeps its prompts here; they are ignored.
  "inputs": [{"type": "promptString", "id": "token", "password": true}],
  "servers": {
    "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch",],},
    /* a remote one */
    "docs": {"type": "http", "url": "https://docs.example.com/mcp"},
  },
}`,
			want: &Config{Auth: wantAuth, Source: "test", ServersKey: "servers", Gateway: wantGateway(), Servers: map[string]Server{
				"fetch": {Name: "fetch", Type: "stdio", Command: "uvx", Args: []string{"mcp-server-fetch"}},
				"docs":  {Name: "docs", Type: "http", URL: "https://docs.example.com/mcp"},
			}},
		},
		{
			name:   "JSON with a byte order mark",
			format: FormatJSON,
			doc:    "\ufeff{\"mcpServers\": {\"a\": {\"command\": \"x\"}}}",
			want: &Config{Auth: wantAuth, Source: "test", ServersKey: "mcpServers", Gateway: wantGateway(), Servers: map[string]Server{
				"a": {Name: "a", Type: "stdio", Command: "x"},
			}},
		},
		{
			name:   "mcpServers wins over servers",
			format: FormatYAML,
			doc:    "servers: {a: {command: x}}\nmcpServers: {b: {command: y}}",
			want: &Config{Auth: wantAuth, Source: "test", ServersKey: "mcpServers", Gateway: wantGateway(), Servers: map[string]Server{
				"b": {Name: "b", Type: "stdio", Command: "y"},
			}},
		},
		{
			name:   "Cline file with transportType and a dotted name",
			format: FormatJSON,
			doc: `{"mcpServers": {
  "github.com/org/remote": {"url": "https://r.example.com/mcp", "transportType": "streamableHttp", "disabled": true, "autoApprove": []},
  "events": {"url": "https://e.example.com/events", "transportType": "sse"},
  "local": {"command": "node", "args": ["s.js"], "transportType": "stdio"}
}}`,
			want: &Config{Auth: wantAuth, Source: "test", ServersKey: "mcpServers", Gateway: wantGateway(), Servers: map[string]Server{
				"github.com/org/remote": {Name: "github.com/org/remote", Type: "http", URL: "https://r.example.com/mcp", Disabled: true},
				"events":                {Name: "events", Type: "sse", URL: "https://e.example.com/events"},
				"local":                 {Name: "local", Type: "stdio", Command: "node", Args: []string{"s.js"}},
			}},
		},
		{
			name:   "Gemini httpUrl and Windsurf serverUrl",
			format: FormatJSON,
			doc: `{"mcpServers": {
  "gem": {"httpUrl": "https://g.example.com/sse", "trust": true, "includeTools": ["a"], "excludeTools": ["b"]},
  "surf": {"serverUrl": "https://w.example.com/sse"}
}}`,
			want: &Config{Auth: wantAuth, Source: "test", ServersKey: "mcpServers", Gateway: wantGateway(), Servers: map[string]Server{
				"gem":  {Name: "gem", Type: "http", URL: "https://g.example.com/sse"},
				"surf": {Name: "surf", Type: "sse", URL: "https://w.example.com/sse"},
			}},
		},
		{
			name:   "YAML with every gateway key and server extras",
			format: FormatYAML,
			doc: `
mcpServers:
  everything:
    command: npx
    args: ["-y", "@modelcontextprotocol/server-everything"]
    env: { LOG_LEVEL: info }
    cwd: /srv/everything
    prefix: ev
    session: shared
    timeout: 90s
    maxConcurrency: 4
    required: true
  plain:
    type: http
    url: https://plain.example.com/mcp/sse
    prefix: ""
gateway:
  listen: 0.0.0.0:9000
  separator: "-"
  maxToolNameLength: 60
  insecure: true
  allowedHosts: [mcp.example.com, "mcp.example.com:9000"]
  allowedOrigins: ["https://app.example.com"]
  limits: {maxSessions: 5, maxSessionsPerPrincipal: 3, maxMessageBytes: 1024, maxConcurrentCalls: 2, sessionIdleTimeout: 1m}
  timeouts: {connect: 1s, call: 2s, drain: 3s, requestBody: 4s, idleConnection: 5s}
  backoff: {initial: 100ms, max: 1s}
  log: {level: debug, format: console}
`,
			want: &Config{Auth: wantAuth, Source: "test", ServersKey: "mcpServers", Servers: map[string]Server{
				"everything": {Name: "everything", Type: "stdio", Command: "npx",
					Args: []string{"-y", "@modelcontextprotocol/server-everything"},
					Env:  map[string]string{"LOG_LEVEL": "info"}, Cwd: "/srv/everything",
					Prefix: ptr("ev"), Session: "shared", Timeout: 90 * time.Second, MaxConcurrency: 4, Required: true},
				"plain": {Name: "plain", Type: "http", URL: "https://plain.example.com/mcp/sse", Prefix: ptr("")},
			}, Gateway: Gateway{
				Listen: "0.0.0.0:9000", Separator: "-", MaxToolNameLength: 60, Insecure: true,
				AllowedHosts:   []string{"mcp.example.com", "mcp.example.com:9000"},
				AllowedOrigins: []string{"https://app.example.com"},
				Limits:         Limits{MaxSessions: 5, MaxSessionsPerPrincipal: 3, MaxMessageBytes: 1024, MaxConcurrentCalls: 2, SessionIdleTimeout: time.Minute},
				Timeouts: Timeouts{Connect: time.Second, Call: 2 * time.Second, Drain: 3 * time.Second,
					RequestBody: 4 * time.Second, IdleConnection: 5 * time.Second},
				Backoff: Backoff{Initial: 100 * time.Millisecond, Max: time.Second},
				Log:     Log{Level: "debug", Format: "console"},
			}},
		},
		{
			name:   "JSON numbers, null prefix and partial sections keep the other defaults",
			format: FormatJSON,
			doc:    `{"mcpServers": {"a": {"command": "x", "prefix": null}}, "gateway": {"limits": {"maxSessions": 7}, "log": {}}}`,
			want: &Config{Auth: wantAuth, Source: "test", ServersKey: "mcpServers", Servers: map[string]Server{
				"a": {Name: "a", Type: "stdio", Command: "x"},
			}, Gateway: func() Gateway { g := wantGateway(); g.Limits.MaxSessions = 7; return g }()},
		},
		{
			name:   "YAML anchors and merge keys",
			format: FormatYAML,
			doc: `
x-base: &base {command: srv, env: {MODE: fast}}
mcpServers:
  one: {<<: *base, args: [one]}
  two: {<<: *base, args: [two]}
`,
			want: &Config{Auth: wantAuth, Source: "test", ServersKey: "mcpServers", Gateway: wantGateway(), Servers: map[string]Server{
				"one": {Name: "one", Type: "stdio", Command: "srv", Args: []string{"one"}, Env: map[string]string{"MODE": "fast"}},
				"two": {Name: "two", Type: "stdio", Command: "srv", Args: []string{"two"}, Env: map[string]string{"MODE": "fast"}},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.doc), tt.format, "test", testOpts(tt.vars))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, ignoreHash); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTypeInference(t *testing.T) {
	tests := []struct {
		name   string
		server string
		want   string
	}{
		{name: "command is stdio", server: `{command: x}`, want: "stdio"},
		{name: "url is http", server: `{url: "https://h/mcp"}`, want: "http"},
		{name: "url ending in /sse is sse", server: `{url: "https://h/v1/sse"}`, want: "sse"},
		{name: "trailing slash after /sse is sse", server: `{url: "https://h/sse/"}`, want: "sse"},
		{name: "sse in a query is http", server: `{url: "https://h/mcp?x=/sse"}`, want: "http"},
		{name: "ssex is http", server: `{url: "https://h/ssex"}`, want: "http"},
		{name: "explicit type wins", server: `{type: http, url: "https://h/sse"}`, want: "http"},
		{name: "type wins over transportType", server: `{type: sse, transportType: stdio, url: "https://h/x"}`, want: "sse"},
		{name: "transportType http", server: `{transportType: http, url: "https://h/sse"}`, want: "http"},
		{name: "transportType streamableHttp", server: `{transportType: streamableHttp, url: "https://h/sse"}`, want: "http"},
		{name: "type streamableHttp (Cline, Cursor)", server: `{type: streamableHttp, url: "https://h/sse"}`, want: "http"},
		{name: "type streamable-http", server: `{type: streamable-http, url: "https://h/x"}`, want: "http"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte("mcpServers: {s: "+tt.server+"}"), FormatYAML, "test", testOpts(nil))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := cfg.Servers["s"].Type; got != tt.want {
				t.Errorf("Type = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name    string
		path    string
		wantErr string // substring; "" means success
	}{
		{name: "yaml", path: write("a.yaml", "mcpServers: {a: {command: x}}")},
		{name: "yml upper case", path: write("b.YML", "mcpServers: {a: {command: x}}")},
		{name: "json", path: write("c.json", `{"mcpServers": {"a": {"command": "x"}}}`)},
		{name: "json content in a yaml file", path: write("d.yml", `{"mcpServers": {"a": {"command": "x"}}}`)},
		{name: "unknown extension", path: write("e.toml", ""), wantErr: "unknown file extension"},
		{name: "missing file", path: filepath.Join(dir, "missing.yaml"), wantErr: "no such file"},
		{name: "invalid yaml names the file and line", path: write("f.yaml", "a: [1\n"), wantErr: "f.yaml: invalid YAML: line"},
		{name: "invalid json names line and column", path: write("g.json", "{\n  \"a\": x\n}"), wantErr: "g.json: invalid JSON: line 2 column 8"},
		{name: "top-level list", path: write("h.yaml", "- a\n"), wantErr: "must be a mapping"},
		{name: "top-level json array", path: write("i.json", "[1]"), wantErr: "must be a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(tt.path, testOpts(nil))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if cfg.Source != tt.path || cfg.Servers["a"].Command != "x" {
					t.Errorf("Load = %+v", cfg)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Load error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseUnknownFormat(t *testing.T) {
	if _, err := Parse(nil, "toml", "x", testOpts(nil)); !errors.Is(err, ErrUnknownFormat) {
		t.Fatalf("Parse error = %v", err)
	}
}

// ignoreHash leaves Config.Hash to TestHash.
var ignoreHash = cmpopts.IgnoreFields(Config{}, "Hash")

func TestHash(t *testing.T) {
	parse := func(doc string) string {
		t.Helper()
		cfg, err := Parse([]byte(doc), FormatYAML, "test", testOpts(nil))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		return cfg.Hash
	}
	a, b := parse("mcpServers: {one: {command: srv}}\n"), parse("mcpServers: {one: {command: srv}}\n")
	if a != b || !strings.HasPrefix(a, "sha256:") || len(a) != len("sha256:")+64 {
		t.Errorf("equal documents: hashes %q and %q, want one sha256:<64 hex>", a, b)
	}
	if c := parse("mcpServers: {one: {command: srv2}}\n"); c == a {
		t.Errorf("different documents share the hash %q", c)
	}
}

func TestLoadDefault(t *testing.T) {
	cfg, err := LoadDefault(testOpts(map[string]string{"MANIFOLD_BINARY": "/usr/bin/manifold"}, "MANIFOLD_BINARY=/ignored"))
	if err != nil {
		t.Fatalf("LoadDefault: %v", err)
	}
	want := &Config{Auth: wantAuth, Source: "embedded default", ServersKey: "mcpServers", Gateway: wantGateway(), Servers: map[string]Server{
		"alpha": {Name: "alpha", Type: "stdio", Command: "/usr/bin/manifold", Args: []string{"demo-server", "--name", "alpha"}},
		"beta":  {Name: "beta", Type: "stdio", Command: "/usr/bin/manifold", Args: []string{"demo-server", "--name", "beta"}},
	}}
	if diff := cmp.Diff(want, cfg, ignoreHash); diff != "" {
		t.Errorf("LoadDefault mismatch (-want +got):\n%s", diff)
	}

	t.Run("without MANIFOLD_BINARY it says so", func(t *testing.T) {
		_, err := LoadDefault(testOpts(nil))
		if err == nil || !strings.Contains(err.Error(), "embedded default: mcpServers.alpha.command: environment variable MANIFOLD_BINARY is not set") {
			t.Fatalf("LoadDefault error = %v", err)
		}
	})
	t.Run("Default returns a copy", func(t *testing.T) {
		b := Default()
		b[0] = 'X'
		if Default()[0] == 'X' {
			t.Fatal("Default shares its bytes")
		}
	})
}

func TestNamespace(t *testing.T) {
	tests := []struct {
		name   string
		server Server
		want   string
	}{
		{name: "plain name", server: Server{Name: "weather"}, want: "weather"},
		{name: "dots and slashes replaced", server: Server{Name: "github.com/org/x"}, want: "github_com_org_x"},
		{name: "non-ASCII rune becomes one underscore", server: Server{Name: "café"}, want: "caf_"},
		{name: "prefix wins", server: Server{Name: "weather", Prefix: ptr("wx")}, want: "wx"},
		{name: "explicit empty prefix", server: Server{Name: "weather", Prefix: ptr("")}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.server.Namespace(); got != tt.want {
				t.Errorf("Namespace() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSessionModeAndRelays(t *testing.T) {
	tests := []struct {
		name   string
		server Server
		mode   string
		relays []string // of sampling, elicitation, roots
	}{
		{name: "stdio defaults to shared", server: Server{Type: TypeStdio}, mode: SessionShared, relays: []string{RelaySampling, RelayElicitation, RelayRoots}},
		{name: "http defaults to per-client", server: Server{Type: TypeHTTP}, mode: SessionPerClient, relays: []string{RelaySampling, RelayElicitation, RelayRoots}},
		{name: "sse defaults to per-client", server: Server{Type: TypeSSE}, mode: SessionPerClient, relays: []string{RelaySampling, RelayElicitation, RelayRoots}},
		{name: "explicit shared http", server: Server{Type: TypeHTTP, Session: SessionShared, Relay: []string{RelayRoots}}, mode: SessionShared, relays: []string{RelayRoots}},
		{name: "explicit per-client stdio, relaying nothing", server: Server{Type: TypeStdio, Session: SessionPerClient, Relay: []string{RelayNone}}, mode: SessionPerClient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.server.SessionMode(); got != tt.mode {
				t.Errorf("SessionMode() = %q, want %q", got, tt.mode)
			}
			for _, c := range []string{RelaySampling, RelayElicitation, RelayRoots} {
				if got, want := tt.server.Relays(c), slices.Contains(tt.relays, c); got != want {
					t.Errorf("Relays(%q) = %v, want %v", c, got, want)
				}
			}
		})
	}
}

func TestEnabled(t *testing.T) {
	cfg := &Config{Servers: map[string]Server{
		"c": {Name: "c", Command: "x"},
		"a": {Command: "x"},
		"b": {Name: "b", Command: "x", Disabled: true},
	}}
	var names []string
	for _, s := range cfg.Enabled() {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"a", "c"}, names); diff != "" {
		t.Errorf("Enabled names (-want +got):\n%s", diff)
	}
}

func TestApplyDefaultsThenValidate(t *testing.T) {
	cfg := &Config{Servers: map[string]Server{"w": {URL: "https://w.example.com/sse"}}}
	if err := cfg.Validate(); err == nil {
		t.Fatal("Validate of a zero gateway succeeded, want errors for the zero values")
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate after ApplyDefaults: %v", err)
	}
	if diff := cmp.Diff(Server{Name: "w", Type: "sse", URL: "https://w.example.com/sse"}, cfg.Servers["w"]); diff != "" {
		t.Errorf("server (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantGateway(), DefaultGateway()); diff != "" {
		t.Errorf("DefaultGateway (-want +got):\n%s", diff)
	}
}

func TestFieldErrorString(t *testing.T) {
	tests := []struct {
		name string
		err  FieldError
		want string
	}{
		{name: "all parts", err: FieldError{Source: "manifold.yaml", Key: "mcpServers.weather.url", Msg: "must be an absolute http(s) URL"},
			want: "manifold.yaml: mcpServers.weather.url: must be an absolute http(s) URL"},
		{name: "no key", err: FieldError{Source: "m.json", Msg: "invalid JSON"}, want: "m.json: invalid JSON"},
		{name: "no source", err: FieldError{Key: "gateway.listen", Msg: "bad"}, want: "gateway.listen: bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

// wantAuth is the auth section of a config that has none.
var wantAuth = Auth{Local: Principal{Name: "local"}}

func TestParseAccess(t *testing.T) {
	doc := `
auth:
  apiKeys:
    - { name: alice, key: "${ALICE_KEY}", groups: [dev] }
    - { name: bob, keyHash: "sha256:` + strings.Repeat("AB", 32) + `", groups: [contractor] }
  jwt: { issuer: "https://idp.example", jwksURL: "https://idp.example/jwks", groupsClaim: roles, oidc: { clientID: console } }
  resource: "https://mcp.example/mcp"
  local: { name: me, groups: [ops] }
  operators: [alice, "group:sre"]
policy:
  default: deny
  rules:
    - { allow: { tools: ["*"] }, principals: ["group:dev"] }
    - { name: no-deletes, deny: { tools: ["*__delete_*"], servers: [prod] } }
`
	cfg, err := Parse([]byte(doc), FormatYAML, "m.yaml", testOpts(map[string]string{"ALICE_KEY": "alice-key-0123456789"}))
	if err != nil {
		t.Fatal(err)
	}
	wantAuth := Auth{
		APIKeys: []APIKey{
			{Name: "alice", Key: "alice-key-0123456789", Groups: []string{"dev"}},
			{Name: "bob", KeyHash: "sha256:" + strings.Repeat("AB", 32), Groups: []string{"contractor"}},
		},
		JWT: &JWT{Issuer: "https://idp.example", JWKSURL: "https://idp.example/jwks", PrincipalClaim: "sub",
			GroupsClaim: "roles", Leeway: 30 * time.Second, OIDC: OIDC{ClientID: "console"}},
		Resource:  "https://mcp.example/mcp",
		Local:     Principal{Name: "me", Groups: []string{"ops"}},
		Operators: []string{"alice", "group:sre"},
	}
	if diff := cmp.Diff(wantAuth, cfg.Auth); diff != "" {
		t.Errorf("auth (-want +got):\n%s", diff)
	}
	wantPolicy := &Policy{Default: Deny, Rules: []Rule{
		{Effect: Allow, Match: Match{Tools: []string{"*"}}, Principals: []string{"group:dev"}},
		{Effect: Deny, Name: "no-deletes", Match: Match{Tools: []string{"*__delete_*"}, Servers: []string{"prod"}}},
	}}
	if diff := cmp.Diff(wantPolicy, cfg.Policy); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
	if !cfg.Auth.Enabled() {
		t.Error("Auth.Enabled() = false with keys and JWT")
	}
}
