package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEnvOverridesEverySection sets one key of each section through MANIFOLD_<SECTION>__…,
// reads it back from the loaded Config, and checks that the file's spelling of names wins.
func TestEnvOverridesEverySection(t *testing.T) {
	const file = `mcpServers:
  Everything: {command: npx, args: [a]}
  acme.search: {url: "https://acme.test/mcp", headers: {Authorization: "Bearer ${TOKEN}"}}
gateway: {listen: "127.0.0.1:7000"}
auth:
  apiKeys: [{name: ci, key: "0123456789abcdef"}]
policy: {default: allow}
telemetry: {traces: {endpoint: "http://127.0.0.1:4318"}}
toolsets: {Dev: {tools: ["Everything__*"]}}
`
	tests := []struct {
		name    string
		environ []string
		check   func(t *testing.T, c *Config)
	}{
		{
			name:    "mcpServers: a server named with other case, a scalar and a list",
			environ: []string{"MANIFOLD_MCPSERVERS__EVERYTHING__COMMAND=node", "MANIFOLD_MCPSERVERS__everything__ARGS=x.js, --stdio"},
			check: func(t *testing.T, c *Config) {
				s, ok := c.Servers["Everything"]
				if !ok || len(c.Servers) != 2 {
					t.Fatalf("servers = %v, want Everything and acme.search only", keysOf(c.Servers))
				}
				if s.Command != "node" || !cmp.Equal(s.Args, []string{"x.js", "--stdio"}) {
					t.Errorf("Everything = %q %q", s.Command, s.Args)
				}
			},
		},
		{
			name:    "mcpServers: a dotted server name and a header entry matched ignoring case",
			environ: []string{"MANIFOLD_MCPSERVERS__ACME.SEARCH__URL=https://other.test/mcp", "MANIFOLD_MCPSERVERS__ACME.SEARCH__HEADERS__AUTHORIZATION=Bearer ${NOT_EXPANDED}"},
			check: func(t *testing.T, c *Config) {
				s := c.Servers["acme.search"]
				if s.URL != "https://other.test/mcp" {
					t.Errorf("URL = %q", s.URL)
				}
				if !cmp.Equal(s.Headers, map[string]string{"Authorization": "Bearer ${NOT_EXPANDED}"}) {
					t.Errorf("headers = %v: the override must replace the file's entry, literally", s.Headers)
				}
			},
		},
		{
			name:    "mcpServers: a new map entry is added as written",
			environ: []string{"MANIFOLD_MCPSERVERS__EVERYTHING__ENV__LOG_LEVEL=debug"},
			check: func(t *testing.T, c *Config) {
				if got := c.Servers["Everything"].Env; !cmp.Equal(got, map[string]string{"LOG_LEVEL": "debug"}) {
					t.Errorf("env = %v", got)
				}
			},
		},
		{
			name:    "toolsets: a toolset named with other case, a list",
			environ: []string{"MANIFOLD_TOOLSETS__DEV__TOOLS=Everything__echo,!acme.search__*"},
			check: func(t *testing.T, c *Config) {
				ts, ok := c.Toolsets["Dev"]
				if !ok || len(c.Toolsets) != 1 {
					t.Fatalf("toolsets = %v, want Dev only", keysOf(c.Toolsets))
				}
				if !cmp.Equal(ts.Tools, []string{"Everything__echo", "!acme.search__*"}) {
					t.Errorf("Dev.tools = %q", ts.Tools)
				}
			},
		},
		{
			name:    "gateway",
			environ: []string{"MANIFOLD_GATEWAY__TIMEOUTS__CONNECT=5s"},
			check: func(t *testing.T, c *Config) {
				if c.Gateway.Timeouts.Connect != 5*time.Second || c.Gateway.Listen != "127.0.0.1:7000" {
					t.Errorf("gateway = %+v", c.Gateway)
				}
			},
		},
		{
			name:    "auth",
			environ: []string{"MANIFOLD_AUTH__OPERATORS=ci,group:ops", "MANIFOLD_AUTH__LOCAL__NAME=me"},
			check: func(t *testing.T, c *Config) {
				if !cmp.Equal(c.Auth.Operators, []string{"ci", "group:ops"}) || c.Auth.Local.Name != "me" {
					t.Errorf("auth = %+v", c.Auth)
				}
			},
		},
		{
			name:    "auth.jwt, a section the file does not have",
			environ: []string{"MANIFOLD_AUTH__JWT__ISSUER=https://issuer.test", "MANIFOLD_AUTH__JWT__SECRET=0123456789abcdef0123456789abcdef", "MANIFOLD_AUTH__JWT__AUDIENCE=mcp"},
			check: func(t *testing.T, c *Config) {
				if j := c.Auth.JWT; j == nil || j.Issuer != "https://issuer.test" || len(j.Secret) != 32 || !cmp.Equal(j.Audience, []string{"mcp"}) {
					t.Errorf("jwt = %+v", c.Auth.JWT)
				}
			},
		},
		{
			name:    "policy",
			environ: []string{"MANIFOLD_POLICY__DEFAULT=deny"},
			check: func(t *testing.T, c *Config) {
				if c.Policy.Default != Deny {
					t.Errorf("policy.default = %q", c.Policy.Default)
				}
			},
		},
		{
			name:    "audit, a section the file does not have",
			environ: []string{"MANIFOLD_AUDIT__STDOUT=true", "MANIFOLD_AUDIT__ARGUMENTS=none"},
			check: func(t *testing.T, c *Config) {
				if a := c.Audit; a == nil || !a.Stdout || a.Arguments != ArgumentsNone || a.Buffer != defaultAuditBuffer {
					t.Errorf("audit = %+v", c.Audit)
				}
			},
		},
		{
			name:    "telemetry",
			environ: []string{"MANIFOLD_TELEMETRY__TRACES__SAMPLERATIO=0.25", "MANIFOLD_TELEMETRY__METRICS__LISTEN=127.0.0.1:9999"},
			check: func(t *testing.T, c *Config) {
				if tr := c.Telemetry.Traces; tr.Ratio() != 0.25 || tr.Endpoint != "http://127.0.0.1:4318" {
					t.Errorf("traces = %+v", tr)
				}
				if m := c.Telemetry.Metrics; m == nil || m.Listen != "127.0.0.1:9999" {
					t.Errorf("metrics = %+v", m)
				}
			},
		},
		{
			name:    "variables without a double underscore are not overrides",
			environ: []string{"MANIFOLD_CLUSTER_SECRET=x", "MANIFOLD_BINARY=/bin/manifold", "MANIFOLD_AUDIT_HASH_KEY=y"},
			check: func(t *testing.T, c *Config) {
				if c.Audit != nil {
					t.Errorf("audit = %+v", c.Audit)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]string{"TOKEN": "t"}
			cfg, err := Parse([]byte(file), FormatYAML, "m.yaml", testOpts(vars, tt.environ...))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tt.check(t, cfg)
		})
	}
}

func TestEnvOverrideErrors(t *testing.T) {
	const file = "mcpServers: {a: {command: x}, A: {command: y}, b: {command: z}}\nauth: {apiKeys: [{name: ci, key: \"0123456789abcdef\"}]}\n"
	environ := []string{
		"MANIFOLD_GATEWAY__LISTNE=0.0.0.0:1",
		"MANIFOLD_MCPSERVERS__NOPE__URL=https://x",
		"MANIFOLD_MCPSERVERS__A__URL=https://x",
		"MANIFOLD_MCPSERVERS__B=x",
		"MANIFOLD_MCPSERVERS__B__ENV=x",
		"MANIFOLD_MCPSERVERS__B__COMAND=x",
		"MANIFOLD_AUTH__APIKEYS__0__KEY=0123456789abcdefXX",
		"MANIFOLD_POLICYY__DEFAULT=deny",
		"MANIFOLD_AUDIT__BUFFER=lots",
	}
	_, err := Parse([]byte(file), FormatYAML, "m.yaml", testOpts(nil, environ...))
	checkErrors(t, err, []wantErr{
		{"environment", "MANIFOLD_AUDIT__BUFFER", "audit needs file or stdout"},
		{"environment", "MANIFOLD_AUDIT__BUFFER", "must be an integer"},
		{"environment", "MANIFOLD_AUTH__APIKEYS__0__KEY", "auth.apiKeys is a list of entries"},
		{"environment", "MANIFOLD_GATEWAY__LISTNE", `unknown key (did you mean "listen"?)`},
		{"environment", "MANIFOLD_MCPSERVERS__A__URL", "differ only in case"},
		{"environment", "MANIFOLD_MCPSERVERS__B", "names the server mcpServers.b"},
		{"environment", "MANIFOLD_MCPSERVERS__B__COMAND", `did you mean "command"?`},
		{"environment", "MANIFOLD_MCPSERVERS__B__ENV", "names the mapping mcpServers.b.env"},
		{"environment", "MANIFOLD_MCPSERVERS__NOPE__URL", `no server in the file is named "NOPE"`},
		{"environment", "MANIFOLD_POLICYY__DEFAULT", `unknown section "POLICYY"`},
	})
}

func TestEnvOverridesVSCodeServers(t *testing.T) {
	cfg, err := Parse([]byte(`{"servers": {"git": {"type": "stdio", "command": "x"}}}`), FormatJSON, "mcp.json",
		testOpts(nil, "MANIFOLD_MCPSERVERS__GIT__COMMAND=y", "MANIFOLD_SERVERS__GIT__CWD=/tmp"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if s := cfg.Servers["git"]; cfg.ServersKey != keyVSCodeServers || s.Command != "y" || s.Cwd != "/tmp" {
		t.Errorf("ServersKey %q, git = %+v", cfg.ServersKey, s)
	}
}

func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	apiKey := write("api-key", "0123456789abcdef-from-a-file\n")
	hmac := write("hmac", "0123456789abcdef0123456789abcdef\n")
	client := write("client", "s3cret")
	hashKey := write("hash", "0123456789abcdef0123456789abcdef0123")
	short := write("short", "short\n")
	empty := write("empty", "\n")

	t.Run("secrets are read from files", func(t *testing.T) {
		doc := `auth:
  apiKeys: [{name: ci, keyFile: "${DIR}/api-key"}]
  jwt: {issuer: "https://issuer.test", audience: [mcp], secretFile: ` + hmac + `, oidc: {clientID: console, clientSecretFile: ` + client + `}}
audit: {stdout: true, hashKeyFile: ` + hashKey + `}
`
		cfg, err := Parse([]byte(doc), FormatYAML, "m.yaml", testOpts(map[string]string{"DIR": dir}))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if got := cfg.Auth.APIKeys[0]; got.Key != "0123456789abcdef-from-a-file" || got.KeyFile != apiKey {
			t.Errorf("api key = %+v", got)
		}
		if j := cfg.Auth.JWT; j.Secret != "0123456789abcdef0123456789abcdef" || j.OIDC.ClientSecret != "s3cret" {
			t.Errorf("jwt = %+v", j)
		}
		if cfg.Audit.HashKey != "0123456789abcdef0123456789abcdef0123" {
			t.Errorf("hashKey = %q", cfg.Audit.HashKey)
		}
	})
	t.Run("a file path from the environment", func(t *testing.T) {
		cfg, err := Parse([]byte("audit: {stdout: true}\n"), FormatYAML, "m.yaml", testOpts(nil, "MANIFOLD_AUDIT__HASHKEYFILE="+hashKey))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if cfg.Audit.HashKey != "0123456789abcdef0123456789abcdef0123" {
			t.Errorf("hashKey = %q", cfg.Audit.HashKey)
		}
	})
	t.Run("problems name the file key, never the content", func(t *testing.T) {
		doc := `auth:
  apiKeys:
    - {name: a, keyFile: ` + short + `}
    - {name: b, key: "0123456789abcdef", keyFile: ` + apiKey + `}
    - {name: c, keyFile: ` + filepath.Join(dir, "missing") + `}
    - {name: d, keyFile: ` + empty + `}
    - {name: e, keyFile: ` + dir + `}
audit: {stdout: true, hashKeyFile: ` + short + `}
`
		_, err := Parse([]byte(doc), FormatYAML, "m.yaml", testOpts(nil))
		checkErrors(t, err, []wantErr{
			{"m.yaml", "audit.hashKeyFile", "too short"},
			{"m.yaml", "auth.apiKeys[0].keyFile", "too short"},
			{"m.yaml", "auth.apiKeys[1].keyFile", "set only one of key and keyFile"},
			{"m.yaml", "auth.apiKeys[2].keyFile", "file does not exist"},
			{"m.yaml", "auth.apiKeys[3].keyFile", "the file is empty"},
			{"m.yaml", "auth.apiKeys[4].keyFile", "must be a regular file"},
		})
		if err != nil && (strings.Contains(err.Error(), "short\n") || strings.Contains(err.Error(), "from-a-file")) {
			t.Errorf("the error shows a secret: %v", err)
		}
	})
	// Opening a FIFO with no writer blocks: the load (and every reload after it) must not.
	t.Run("a FIFO is refused without waiting for a writer", func(t *testing.T) {
		fifo := filepath.Join(dir, "fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Skip("mkfifo:", err)
		}
		doc := "auth:\n  apiKeys: [{name: ci, keyFile: " + fifo + "}]\n"
		done := make(chan [2]error, 1)
		go func() {
			_, err := Parse([]byte(doc), FormatYAML, "m.yaml", testOpts(nil))
			_, _, cerr := (&Cluster{SecretFile: fifo}).Secrets()
			done <- [2]error{err, cerr}
		}()
		select {
		case errs := <-done:
			checkErrors(t, errs[0], []wantErr{{"m.yaml", "auth.apiKeys[0].keyFile", "must be a regular file"}})
			if errs[1] == nil || !strings.Contains(errs[1].Error(), "must be a regular file") {
				t.Errorf("cluster secret from a FIFO: %v", errs[1])
			}
		case <-time.After(5 * time.Second):
			for range 2 { // a writer lets each blocked open return
				if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Fatal("loading waited on a FIFO secret file")
		}
	})
}
