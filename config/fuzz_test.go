package config

import (
	"errors"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse as YAML and as JSON. Parse must never panic; every
// failure must be reported as field errors; and a config Parse accepts must validate again.
func FuzzParse(f *testing.F) {
	seeds := []string{
		"",
		"mcpServers: {a: {command: x, args: [y]}}",
		"mcpServers: {w: {url: \"https://h/sse\", headers: {A: \"Bearer ${T}\"}, prefix: \"\"}}\ngateway: {listen: \":1\", insecure: true}",
		"gateway: {limits: {maxSessions: 0}, timeouts: {call: 1s}, log: {level: debug}}",
		"servers: {x: {type: sse, url: \"http://h\"}}\nauth: {}",
		"auth: {apiKeys: [{name: a, key: \"0123456789abcdef\"}], operators: [a, \"group:ops\", \"group:\", \"\"]}",
		"a: &x [*x]",
		"mcpServers: {\"\": {command: $$, env: {A: \"${A:-b}\"}}, b.c: {transportType: sse, serverUrl: \"https://x\"}}",
		`{"mcpServers": {"a": {"command": "x", "autoApprove": [], "timeout": "5s"}}} // c`,
		`{"servers": {"a": {"type": "http", "url": "http://h",},}, /* x */ "inputs": []}`,
		`{"gateway": {"tls": {"certFile": "/", "keyFile": "/nope"}, "allowedOrigins": ["*"]}}`,
		`[1, 2]`,
		`{"mcpServers": {"a": {"command": 1e400}}}`,
		"audit: {stdout: true, arguments: full, redact: [\"*key*\"], hashKey: \"${T}\", buffer: 8}",
		"audit: {file: /nonexistent/dir/a.jsonl, maxSizeMB: 0}\ntelemetry: {metrics: {listen: \":9464\"}}",
		"telemetry: {traces: {endpoint: \"http://127.0.0.1:4318\", protocol: grpc, sampleRatio: .nan, headers: {A: \"${T}\"}}}",
		`{"telemetry": {"traces": {"sampleRatio": "0.5"}, "metrics": null}, "audit": null, "plugins": {}}`,
		"mcpServers: {a: {command: x, tools: {echo: {rename: say, description: d, appendDescription: e, annotations: {readOnlyHint: true, title: t}}, b: {hide: true}}, prompts: {p: {rename: ''}}}}",
		"mcpServers: {a: {command: x, tools: {x: {rename: y}, y: {rename: y}, z: null}}}\ntoolsets: {dev: {servers: [a, b], tools: ['!*__d*', a__d1], prompts: [], resources: null}, 'x/y': [], '': {}}",
		"gateway: {pinning: {mode: block, file: p.json, newTools: hold}}\nrateLimits: [{principals: [\"group:a\"], tools: [\"*\"], rate: 5/s, burst: 5}, {servers: [x], scope: global, maxConcurrent: 8}]",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	vars := map[string]string{"T": "tok", "A": "", "MANIFOLD_BINARY": "/bin/manifold"}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, format := range []string{FormatYAML, FormatJSON} {
			opts := testOpts(vars, "MANIFOLD_GATEWAY__LIMITS__MAXSESSIONS=5")
			cfg, err := Parse(data, format, "fuzz", opts)
			if err != nil {
				if errors.Is(err, ErrUnknownFormat) || len(FieldErrors(err)) == 0 {
					t.Fatalf("%s: error is not a field error: %v", format, err)
				}
				continue
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("%s: accepted config fails Validate: %v", format, err)
			}
			for _, s := range cfg.Enabled() {
				_ = s.Namespace()
			}
		}
	})
}

// FuzzEnvOverride feeds arbitrary variable names and values to the override resolver over a
// file with dotted and mixed-case server names. Parse must never panic, and every failure must
// be reported as field errors.
func FuzzEnvOverride(f *testing.F) {
	for _, s := range [][2]string{
		{"MANIFOLD_GATEWAY__LISTEN", "127.0.0.1:1"},
		{"MANIFOLD_GATEWAY__LISTNE", "x"},
		{"MANIFOLD_MCPSERVERS__ACME.SEARCH__HEADERS__X", "${Y}"},
		{"MANIFOLD_MCPSERVERS__everything__ARGS", "a,,b"},
		{"MANIFOLD_AUTH__APIKEYS__0__KEY", "k"},
		{"MANIFOLD_AUDIT__STDOUT", "true"},
		{"MANIFOLD___", ""},
		{"MANIFOLD_TELEMETRY__TRACES__SAMPLERATIO", "NaN"},
	} {
		f.Add(s[0], s[1])
	}
	doc := []byte("mcpServers: {Everything: {command: x}, acme.search: {url: \"https://a.test\", headers: {X: y}}}\naudit: {stdout: true}\n")
	f.Fuzz(func(t *testing.T, name, value string) {
		_, err := Parse(doc, FormatYAML, "fuzz", testOpts(nil, name+"="+value))
		if err != nil && len(FieldErrors(err)) == 0 {
			t.Fatalf("error is not a field error: %v", err)
		}
	})
}
