package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/internal/testutil"
)

// wantErr is one expected problem; Msg is a substring of the message.
type wantErr struct {
	Source, Key, Msg string
}

// checkErrors asserts that err holds exactly the want problems, in order.
func checkErrors(t *testing.T, err error, want []wantErr) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %d problems", len(want))
	}
	var got, wantKeys []wantErr
	for _, fe := range FieldErrors(err) {
		got = append(got, wantErr{Source: fe.Source, Key: fe.Key})
	}
	for _, w := range want {
		wantKeys = append(wantKeys, wantErr{Source: w.Source, Key: w.Key})
	}
	if diff := cmp.Diff(wantKeys, got); diff != "" {
		t.Fatalf("problems (-want +got):\n%s\nerror:\n%v", diff, err)
	}
	for i, fe := range FieldErrors(err) {
		if !strings.Contains(fe.Msg, want[i].Msg) {
			t.Errorf("problem %d = %q, want it to contain %q", i, fe.Error(), want[i].Msg)
		}
	}
}

func TestValidationErrors(t *testing.T) {
	dir := t.TempDir()
	caPEM := filepath.Join(dir, "ca.pem")
	notPEM := filepath.Join(dir, "not.pem")
	for path, content := range map[string]string{caPEM: testCA(t), notPEM: "hello"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "missing.pem")

	tests := []struct {
		name string
		doc  string
		want []wantErr
	}{
		{
			name: "three mistakes give exactly three problems",
			doc: `
mcpServers:
  weather:
    url: not-a-url
gateway:
  limits:
    maxSesions: 10
  log:
    level: verbose
`,
			want: []wantErr{
				{"m.yaml", "gateway.limits.maxSesions", `unknown key (did you mean "maxSessions"?)`},
				{"m.yaml", "gateway.log.level", "must be debug, info, warn or error"},
				{"m.yaml", "mcpServers.weather.url", "must be an absolute http(s) URL"},
			},
		},
		{
			name: "every bad plugin key is named",
			doc: `plugins:
  - name: a
    builtin: redact
    command: [x]
  - name: a
    command: [/bin/x]
    sha256: nothex
    mode: enforcing
    onError: closed
    timeout: -1s
    colour: red
    match: {servers: [s], tool: [t], principals: ["group:"]}
  - builtin: nope
  - name: "bad name"
  - name: c
    command: [/bin/c]
    config: [1]
`,
			want: []wantErr{
				{"m.yaml", "plugins[0]", "has both builtin and command"},
				{"m.yaml", "plugins[1].colour", "unknown key"},
				{"m.yaml", "plugins[1].match.principals", "names no group"},
				{"m.yaml", "plugins[1].match.tool", "unknown key"},
				{"m.yaml", "plugins[1].mode", "must be"},
				{"m.yaml", "plugins[1].name", "also the name of plugins[0]"},
				{"m.yaml", "plugins[1].onError", "must be"},
				{"m.yaml", "plugins[1].sha256", "64 hex digits"},
				{"m.yaml", "plugins[1].timeout", "must not be negative"},
				{"m.yaml", "plugins[2].builtin", "unknown builtin"},
				{"m.yaml", "plugins[2].name", "is required"},
				{"m.yaml", "plugins[3]", "needs builtin or command"},
				{"m.yaml", "plugins[3].name", "must be 1 to 63"},
				{"m.yaml", "plugins[4].config", "must be a mapping"},
				{"m.yaml", "plugins[4].sha256", "is required with command"},
			},
		},
		{
			name: "auth shapes and values",
			doc: `auth:
  apiKeys:
    - x
    - {name: "", key: short}
    - {name: "group:ops", key: "0123456789abcdef", keyHash: "sha256:00"}
    - {name: a, keyHash: "md5:abc"}
    - {name: b, key: "0123456789abcdef", groups: [""], role: admin}
    - {name: c, keyHash: "sha256:` + HashAPIKey("0123456789abcdef")[len(KeyHashPrefix):] + `"}
  jwt: {jwksURL: "http://idp.example/keys", secret: s, algorithms: [none], leeway: 1h, oidc: {scopes: [openid], clientId: x}}
  resource: "mcp.example.com/mcp"
  authorizationServers: ["https://idp.example"]
  local: {name: "group:x"}
  operators: [alice, "group:", " "]
  oauth: {}
`,
			want: []wantErr{
				{"m.yaml", "auth.apiKeys[0]", "must be a mapping"},
				{"m.yaml", "auth.apiKeys[1].key", "too short"},
				{"m.yaml", "auth.apiKeys[1].name", "must not be empty"},
				{"m.yaml", "auth.apiKeys[2]", "set exactly one of key and keyHash"},
				{"m.yaml", "auth.apiKeys[2].name", `must not start with "group:"`},
				{"m.yaml", "auth.apiKeys[3].keyHash", "64 hex digits"},
				{"m.yaml", "auth.apiKeys[4].groups[0]", "must not be empty"},
				{"m.yaml", "auth.apiKeys[4].role", "unknown key"},
				{"m.yaml", "auth.apiKeys[5]", "the same key as auth.apiKeys[4]"},
				{"m.yaml", "auth.jwt", "exactly one key source"},
				{"m.yaml", "auth.jwt.algorithms[0]", "must be one of"},
				{"m.yaml", "auth.jwt.issuer", "is required"},
				{"m.yaml", "auth.jwt.jwksURL", "must use https"},
				{"m.yaml", "auth.jwt.leeway", "between 0s and 5m"},
				{"m.yaml", "auth.jwt.oidc.clientID", "is required"},
				{"m.yaml", "auth.jwt.oidc.clientId", `did you mean "clientID"`},
				{"m.yaml", "auth.jwt.secret", "at least 32 bytes"},
				{"m.yaml", "auth.local.name", `must not start with "group:"`},
				{"m.yaml", "auth.oauth", "unknown key"},
				{"m.yaml", "auth.operators[1]", "names no group"},
				{"m.yaml", "auth.operators[2]", "must not be empty"},
				{"m.yaml", "auth.resource", "absolute https URL"},
			},
		},
		{
			name: "policy shapes and values",
			doc: `policy:
  default: maybe
  rules:
    - {allow: {tools: ["*"]}, deny: {tools: [x]}}
    - {principals: [alice]}
    - {allow: {}, principals: ["group:", ""]}
    - {deny: {tool: [x], prompts: [""]}, principals: []}
    - "allow everything"
  extra: 1
`,
			want: []wantErr{
				{"m.yaml", "policy.default", "must be allow or deny"},
				{"m.yaml", "policy.extra", "unknown key"},
				{"m.yaml", "policy.rules[0]", "either allow or deny, not both"},
				{"m.yaml", "policy.rules[1]", "needs allow: {…} or deny: {…}"},
				{"m.yaml", "policy.rules[2].allow", "names no tools"},
				{"m.yaml", "policy.rules[2].principals[0]", "names no group"},
				{"m.yaml", "policy.rules[2].principals[1]", "must not be empty"},
				{"m.yaml", "policy.rules[3].deny", "an empty pattern matches nothing"},
				{"m.yaml", "policy.rules[3].deny.tool", `did you mean "tools"`},
				{"m.yaml", "policy.rules[3].principals", "matches no one"},
				{"m.yaml", "policy.rules[4]", "must be a mapping"},
			},
		},
		{
			name: "the console's OIDC sign-in needs https",
			doc:  "auth: {jwt: {issuer: \"http://idp.example\", audience: [m], secret: \"0123456789abcdef0123456789abcdef\", oidc: {clientID: c, redirectURL: \"http://mcp.example/ui/oidc/callback\"}}}\n",
			want: []wantErr{
				{"m.yaml", "auth.jwt.issuer", "must use https"},
				{"m.yaml", "auth.jwt.oidc.redirectURL", "must use https"},
			},
		},
		{
			name: "the OAuth start page's OIDC callback is derived from gateway.publicURL",
			doc: "gateway: {listen: \"0.0.0.0:1\"}\nauth: {jwt: {issuer: \"https://idp.example\", audience: [m], secret: \"0123456789abcdef0123456789abcdef\", oidc: {clientID: c, redirectURL: \"https://mcp.example/oauth/oidc/callback\"}}}\n" +
				"mcpServers: {u: {url: \"https://u.example/mcp\", session: per-client, auth: {type: oauth}}}\n",
			want: []wantErr{
				{"m.yaml", "auth.jwt.oidc.redirectURL", "must end in /ui/oidc/callback"},
				{"m.yaml", "gateway.publicURL", "is required with auth.jwt.oidc"},
			},
		},
		{
			name: "policy default is required",
			doc:  "policy: {rules: [{allow: {tools: [a]}}]}\n",
			want: []wantErr{{"m.yaml", "policy.default", "is required"}},
		},
		{
			name: "authentication allows a non-loopback listener",
			doc:  "gateway: {listen: \"0.0.0.0:1\"}\nauth: {apiKeys: [{name: a, key: \"0123456789abcdef\"}]}\nmcpServers: {x: {url: \"ftp://x\"}}\n",
			want: []wantErr{{"m.yaml", "mcpServers.x.url", "absolute http(s) URL"}},
		},
		{
			name: "misspelt top-level sections are errors, host settings are not",
			doc:  "mcpServer: {}\nGateway: {}\nglobalShortcut: x\n$schema: y\ninputs: []\n",
			want: []wantErr{
				{"m.yaml", "Gateway", `did you mean "gateway"`},
				{"m.yaml", "mcpServer", `did you mean "mcpServers"`},
			},
		},
		{
			name: "unknown and unsupported server keys",
			doc:  "mcpServers:\n  a: {command: x, comand: y, envFile: .env, oauth: {clientId: z}, Args: []}\n",
			want: []wantErr{
				{"m.yaml", "mcpServers.a.Args", `did you mean "args"`},
				{"m.yaml", "mcpServers.a.comand", `did you mean "command"`},
				{"m.yaml", "mcpServers.a.envFile", "not supported"},
				{"m.yaml", "mcpServers.a.oauth", "not supported yet"},
			},
		},
		{
			name: "unknown keys at any depth of gateway",
			doc:  "gateway: {tls: {cert: x}, timeouts: {read: 1s}, colour: red}\n",
			want: []wantErr{
				{"m.yaml", "gateway.colour", "unknown key"},
				{"m.yaml", "gateway.timeouts.read", "unknown key"},
				{"m.yaml", "gateway.tls.cert", "unknown key"},
			},
		},
		{
			name: "command and url",
			doc: `
mcpServers:
  both: {command: x, url: "https://h/mcp"}
  neither: {args: [a]}
  stdio-with-url: {type: stdio, url: "https://h/mcp"}
  http-with-command: {type: http, command: x}
  bad-type: {type: websocket, url: "wss://h"}
  bad-scheme: {url: "ftp://h/mcp"}
  relative: {url: /mcp}
  two-urls: {url: "https://a/mcp", httpUrl: "https://b/mcp"}
  bad-transport: {url: "https://a/mcp", transportType: grpc}
  "": {command: x}
`,
			want: []wantErr{
				{"m.yaml", `mcpServers.""`, "must not be empty"},
				{"m.yaml", "mcpServers.bad-scheme.url", "absolute http(s) URL"},
				{"m.yaml", "mcpServers.bad-transport.transportType", "must be stdio, sse, streamableHttp or http"},
				{"m.yaml", "mcpServers.bad-type.type", "must be stdio, http (also spelt streamableHttp) or sse"},
				{"m.yaml", "mcpServers.both", "not both"},
				{"m.yaml", "mcpServers.http-with-command.type", "type http needs url"},
				{"m.yaml", "mcpServers.neither", "needs command"},
				{"m.yaml", "mcpServers.relative.url", "absolute http(s) URL"},
				{"m.yaml", "mcpServers.stdio-with-url.type", "type stdio needs command"},
				{"m.yaml", "mcpServers.two-urls.url", "only one of url, httpUrl and serverUrl"},
			},
		},
		{
			name: "a failed value is reported once, not again by validation",
			doc:  "mcpServers:\n  a: {url: \"${NOPE}\"}\n  b: {httpUrl: [x]}\n  c: {command: x, prefix: \"${NOPE}\"}\n  d: {command: x}\n",
			want: []wantErr{
				{"m.yaml", "mcpServers.a.url", "environment variable NOPE is not set"},
				{"m.yaml", "mcpServers.b.httpUrl", "must be a string"},
				{"m.yaml", "mcpServers.c.prefix", "environment variable NOPE is not set"},
			},
		},
		{
			name: "keys of the wrong transport and bad server values",
			doc: `
mcpServers:
  local: {command: x, headers: {A: b}, caFile: /x}
  remote: {url: "https://h/mcp", args: [a], env: {A: b}, cwd: /tmp}
  values: {command: x, prefix: "a.b", timeout: -1s, maxConcurrency: -2, session: sometimes}
  types: {command: x, args: [1, true], env: {PORT: 8080}, timeout: 30, disabled: maybe}
`,
			want: []wantErr{
				{"m.yaml", "mcpServers.local.caFile", "only valid for http and sse"},
				{"m.yaml", "mcpServers.local.headers", "only valid for http and sse"},
				{"m.yaml", "mcpServers.remote.args", "only valid for stdio"},
				{"m.yaml", "mcpServers.remote.cwd", "only valid for stdio"},
				{"m.yaml", "mcpServers.remote.env", "only valid for stdio"},
				{"m.yaml", "mcpServers.types.args[0]", "must be a string"},
				{"m.yaml", "mcpServers.types.args[1]", "must be a string"},
				{"m.yaml", "mcpServers.types.disabled", "true or false"},
				{"m.yaml", "mcpServers.types.env.PORT", "quote numbers"},
				{"m.yaml", "mcpServers.types.timeout", `such as "30s"`},
				{"m.yaml", "mcpServers.values.maxConcurrency", "must not be negative"},
				{"m.yaml", "mcpServers.values.prefix", "only letters, digits, _ and -"},
				{"m.yaml", "mcpServers.values.session", "shared or per-client"},
				{"m.yaml", "mcpServers.values.timeout", "must not be negative"},
			},
		},
		{
			name: "relay names only what the gateway can relay",
			doc: `
mcpServers:
  a: { command: x, session: per-client, relay: [sampling, roots, tools] }
  b: { command: y, relay: [roots, none] }
`,
			want: []wantErr{
				{"m.yaml", "mcpServers.a.relay[2]", "sampling, elicitation, roots or none"},
				{"m.yaml", "mcpServers.b.relay[1]", "only entry"},
			},
		},
		{
			name: "namespace collisions among enabled servers",
			doc: `
mcpServers:
  a.b: {command: x}
  a_b: {command: x}
  c: {command: x, prefix: shared}
  d: {command: x, prefix: shared}
  e: {command: x, prefix: shared, disabled: true}
  f: {command: x, prefix: ""}
  g: {command: x, prefix: ""}
`,
			want: []wantErr{
				{"m.yaml", "mcpServers.a_b", `namespace "a_b" is also the namespace of server "a.b"`},
				{"m.yaml", "mcpServers.d", `namespace "shared" is also the namespace of server "c"`},
			},
		},
		{
			name: "explicit zeros and negatives where a default exists",
			doc: `
gateway:
  separator: ""
  maxToolNameLength: 8
  limits: {maxSessions: 0, maxSessionsPerPrincipal: -1, maxMessageBytes: -1, maxConcurrentCalls: 0, sessionIdleTimeout: 0s}
  timeouts: {connect: 0s, call: -1s, drain: 0s, requestBody: 0s, idleConnection: -1s}
  backoff: {initial: 1m, max: 1s}
  log: {format: text}
`,
			want: []wantErr{
				{"m.yaml", "gateway.backoff.initial", "must not exceed gateway.backoff.max"},
				{"m.yaml", "gateway.limits.maxConcurrentCalls", "greater than 0"},
				{"m.yaml", "gateway.limits.maxMessageBytes", "greater than 0"},
				{"m.yaml", "gateway.limits.maxSessions", "greater than 0"},
				{"m.yaml", "gateway.limits.maxSessionsPerPrincipal", "greater than 0"},
				{"m.yaml", "gateway.limits.sessionIdleTimeout", "greater than 0"},
				{"m.yaml", "gateway.log.format", "json or console"},
				{"m.yaml", "gateway.maxToolNameLength", "between 16 and 1024"},
				{"m.yaml", "gateway.separator", "non-empty"},
				{"m.yaml", "gateway.timeouts.call", "greater than 0"},
				{"m.yaml", "gateway.timeouts.connect", "greater than 0"},
				{"m.yaml", "gateway.timeouts.drain", "greater than 0"},
				{"m.yaml", "gateway.timeouts.idleConnection", "greater than 0"},
				{"m.yaml", "gateway.timeouts.requestBody", "greater than 0"},
			},
		},
		{
			name: "gateway value types",
			doc:  "gateway: {listen: 8080, insecure: yes, maxToolNameLength: 1.5, allowedHosts: x, limits: 3}\n",
			want: []wantErr{
				{"m.yaml", "gateway.allowedHosts", "list of strings"},
				{"m.yaml", "gateway.insecure", "true or false"},
				{"m.yaml", "gateway.limits", "must be a mapping"},
				{"m.yaml", "gateway.listen", "must be a string"},
				{"m.yaml", "gateway.maxToolNameLength", "must be an integer"},
			},
		},
		{
			name: "non-loopback listen without insecure",
			doc:  "gateway: {listen: \"0.0.0.0:8080\"}\n",
			want: []wantErr{{"m.yaml", "gateway.listen", "requires authentication (auth.apiKeys or auth.jwt), or gateway.insecure: true"}},
		},
		{
			name: "empty host counts as non-loopback",
			doc:  "gateway: {listen: \":8080\"}\n",
			want: []wantErr{{"m.yaml", "gateway.listen", "or gateway.insecure: true"}},
		},
		{
			name: "hostname counts as non-loopback",
			doc:  "gateway: {listen: \"myhost:8080\"}\n",
			want: []wantErr{{"m.yaml", "gateway.listen", "or gateway.insecure: true"}},
		},
		{
			name: "listen must be host:port",
			doc:  "gateway: {listen: \"localhost\"}\n",
			want: []wantErr{{"m.yaml", "gateway.listen", "must be host:port"}},
		},
		{
			name: "listen port range",
			doc:  "gateway: {listen: \"localhost:70000\"}\n",
			want: []wantErr{{"m.yaml", "gateway.listen", "0 to 65535"}},
		},
		{
			name: "hosts and origins",
			doc:  "gateway: {allowedHosts: [\"\", \"http://x\"], allowedOrigins: [\"*\", \"https://a/b\", \"https://ok.example:8443\"]}\n",
			want: []wantErr{
				{"m.yaml", "gateway.allowedHosts[0]", "host or host:port"},
				{"m.yaml", "gateway.allowedHosts[1]", "host or host:port"},
				{"m.yaml", "gateway.allowedOrigins[0]", "must be an origin"},
				{"m.yaml", "gateway.allowedOrigins[1]", "must be an origin"},
			},
		},
		{
			name: "tls needs both files, and they must exist",
			doc:  "gateway: {tls: {certFile: " + caPEM + "}}\n",
			want: []wantErr{{"m.yaml", "gateway.tls", "both certFile and keyFile"}},
		},
		{
			name: "tls files must exist",
			doc:  "gateway: {tls: {certFile: " + caPEM + ", keyFile: " + missing + "}}\n",
			want: []wantErr{{"m.yaml", "gateway.tls.keyFile", "file does not exist"}},
		},
		{
			name: "tls file must not be a directory",
			doc:  "gateway: {tls: {certFile: " + dir + ", keyFile: " + caPEM + "}}\n",
			want: []wantErr{{"m.yaml", "gateway.tls.certFile", "must be a regular file"}},
		},
		{
			name: "caFile must exist and hold a certificate; disabled servers are not checked",
			doc: "mcpServers:\n" +
				"  ok: {url: \"https://h/mcp\", caFile: " + caPEM + "}\n" +
				"  gone: {url: \"https://h/mcp\", caFile: " + missing + "}\n" +
				"  junk: {url: \"https://h/mcp\", caFile: " + notPEM + "}\n" +
				"  off: {url: \"https://h/mcp\", caFile: " + missing + ", disabled: true}\n",
			want: []wantErr{
				{"m.yaml", "mcpServers.gone.caFile", "file does not exist"},
				{"m.yaml", "mcpServers.junk.caFile", "no PEM certificate"},
			},
		},
		{
			name: "section and value shapes",
			doc:  "mcpServers: {a: [x], b: null}\ngateway: [1]\n",
			want: []wantErr{
				{"m.yaml", "gateway", "must be a mapping"},
				{"m.yaml", "mcpServers.a", "must be a mapping"},
				{"m.yaml", "mcpServers.b", "must be a mapping"},
			},
		},
		{
			name: "servers must be a mapping",
			doc:  "mcpServers: [a, b]\n",
			want: []wantErr{{"m.yaml", "mcpServers", "mapping of server names"}},
		},
		{
			name: "VS Code servers key is named in errors",
			doc:  "servers: {x: {type: http, command: c}}\n",
			want: []wantErr{{"m.yaml", "servers.x.type", "type http needs url"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), FormatYAML, "m.yaml", testOpts(nil))
			checkErrors(t, err, tt.want)
		})
	}
}

func TestValidErrorsAreSortedAndStable(t *testing.T) {
	doc := "mcpServers: {z: {}, a: {}, m: {url: x}}\ngateway: {log: {level: x, format: y}, listen: z}\n"
	var first string
	for i := range 20 {
		_, err := Parse([]byte(doc), FormatYAML, "m.yaml", testOpts(nil))
		if err == nil {
			t.Fatal("Parse succeeded")
		}
		if i == 0 {
			first = err.Error()
		} else if err.Error() != first {
			t.Fatalf("errors differ between runs:\n%s\n---\n%s", first, err)
		}
	}
	want := strings.Join([]string{
		`m.yaml: gateway.listen: must be host:port, such as "127.0.0.1:8080"`,
		"m.yaml: gateway.log.format: must be json or console",
		"m.yaml: gateway.log.level: must be debug, info, warn or error",
		"m.yaml: mcpServers.a: needs command (a stdio server) or url (an http or sse server)",
		"m.yaml: mcpServers.m.url: must be an absolute http(s) URL",
		"m.yaml: mcpServers.z: needs command (a stdio server) or url (an http or sse server)",
	}, "\n")
	if first != want {
		t.Errorf("errors:\n%s\nwant:\n%s", first, want)
	}
}

func TestLoopbackListen(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:8080", "127.1.2.3:0", "[::1]:8080", "localhost:8080", "LOCALHOST:1", "[::ffff:127.0.0.1]:80"} {
		t.Run(addr, func(t *testing.T) {
			if _, err := Parse([]byte(`gateway: {listen: "`+addr+`"}`), FormatYAML, "m.yaml", testOpts(nil)); err != nil {
				t.Fatalf("Parse: %v", err)
			}
		})
	}
	t.Run("insecure allows any address", func(t *testing.T) {
		if _, err := Parse([]byte(`gateway: {listen: ":8080", insecure: true}`), FormatYAML, "m.yaml", testOpts(nil)); err != nil {
			t.Fatalf("Parse: %v", err)
		}
	})
}

// testCA returns a freshly generated self-signed certificate in PEM form.
func testCA(t *testing.T) string {
	t.Helper()
	certFile, _, _ := testutil.SelfSigned(t, t.TempDir())
	b, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
