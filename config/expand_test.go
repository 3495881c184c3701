package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"TOKEN": "t0k", "EMPTY": "", "HOST": "h.example.com"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	tests := []struct {
		name    string
		in      string
		want    string
		wantMsg string // substring; "" means success
	}{
		{name: "no references", in: "plain", want: "plain"},
		{name: "one reference", in: "Bearer ${TOKEN}", want: "Bearer t0k"},
		{name: "several references", in: "https://${HOST}/${TOKEN}", want: "https://h.example.com/t0k"},
		{name: "env: spelling", in: "${env:TOKEN}", want: "t0k"},
		{name: "default when unset", in: "${MISSING:-fallback}", want: "fallback"},
		{name: "default when empty", in: "${EMPTY:-fallback}", want: "fallback"},
		{name: "default ignored when set", in: "${TOKEN:-fallback}", want: "t0k"},
		{name: "empty default", in: "a${MISSING:-}b", want: "ab"},
		{name: "default is literal", in: "${MISSING:-$HOME:-x}", want: "$HOME:-x"},
		{name: "set but empty is fine", in: "[${EMPTY}]", want: "[]"},
		{name: "double dollar is a literal dollar", in: "cost: $$5 and $${TOKEN}", want: "cost: $5 and ${TOKEN}"},
		{name: "lone dollars are literal", in: "$HOME $ $", want: "$HOME $ $"},
		{name: "unset is an error", in: "${WEATHER_TOKEN}", wantMsg: "environment variable WEATHER_TOKEN is not set"},
		{name: "unterminated", in: "${TOKEN", wantMsg: "unterminated ${"},
		{name: "bad name", in: "${1X}", wantMsg: "invalid variable reference"},
		{name: "empty name", in: "${}", wantMsg: "invalid variable reference"},
		{name: "VS Code input", in: "${input:api-key}", wantMsg: "${input:…} variables"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, msg := expand(tt.in, lookup)
			if tt.wantMsg != "" {
				if !strings.Contains(msg, tt.wantMsg) {
					t.Fatalf("expand(%q) message = %q, want it to contain %q", tt.in, msg, tt.wantMsg)
				}
				return
			}
			if msg != "" || got != tt.want {
				t.Fatalf("expand(%q) = %q, %q; want %q", tt.in, got, msg, tt.want)
			}
		})
	}
}

func TestExpansionInDocument(t *testing.T) {
	vars := map[string]string{
		"TOKEN":    "t0k",
		"BIN":      "/opt/bin/srv",
		"INSECURE": "true",
		"SESSIONS": "12",
		"HOST":     "0.0.0.0",
	}
	doc := `
mcpServers:
  local:
    command: ${BIN}
    args: ["--token=${TOKEN}", "$$literal", "${MISSING:-dflt}"]
    env: {TOKEN: "${TOKEN}"}
  remote:
    url: https://${MISSING_HOST:-api.example.com}/mcp
    headers: {Authorization: "Bearer ${TOKEN}"}
    description: "${input:not-expanded-because-ignored}"
gateway:
  listen: ${HOST}:9000
  insecure: ${INSECURE}
  limits: {maxSessions: "${SESSIONS}"}
  timeouts: {call: "${CALL:-45s}"}
`
	cfg, err := Parse([]byte(doc), FormatYAML, "m.yaml", testOpts(vars))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	wantServers := map[string]Server{
		"local": {Name: "local", Type: "stdio", Command: "/opt/bin/srv",
			Args: []string{"--token=t0k", "$literal", "dflt"}, Env: map[string]string{"TOKEN": "t0k"}},
		"remote": {Name: "remote", Type: "http", URL: "https://api.example.com/mcp",
			Headers: map[string]string{"Authorization": "Bearer t0k"}},
	}
	if diff := cmp.Diff(wantServers, cfg.Servers); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}
	g := cfg.Gateway
	if g.Listen != "0.0.0.0:9000" || !g.Insecure || g.Limits.MaxSessions != 12 || g.Timeouts.Call.String() != "45s" {
		t.Errorf("gateway = %+v", g)
	}
}

// TestSecretsNeverInErrors checks that no message or log record carries the value of a
// variable, whatever goes wrong with it.
func TestSecretsNeverInErrors(t *testing.T) {
	const secret = "hunter2.s3cret"
	vars := map[string]string{
		"SECRET":     secret,
		"SECRET_URL": "ftp://user:" + secret + "@example.com/mcp",
		"SECRET_NUM": secret,
	}
	doc := `
mcpServers:
  weather:
    url: ${SECRET_URL}
    headers: {Authorization: "Bearer ${WEATHER_TOKEN}", X-Key: "${SECRET}"}
    prefix: "${SECRET}"
  local:
    command: x
    args: ["${SECRET}"]
    headers: {A: "${SECRET}"}
    autoApprove: ["${SECRET}"]
gateway:
  listen: ${SECRET}
  limits: {maxSessions: "${SECRET_NUM}"}
  log: {level: "${SECRET}"}
`
	core, logs := observer.New(zapcore.DebugLevel)
	opts := testOpts(vars,
		"MANIFOLD_GATEWAY__INSECURE="+secret,
		"MANIFOLD_GATEWAY__SEPARATOR="+secret+"!",
		"MANIFOLD_GATEWAY__NOPE="+secret,
	)
	opts.Logger = zap.New(core)
	_, err := Parse([]byte(doc), FormatYAML, "m.yaml", opts)
	checkErrors(t, err, []wantErr{
		{"environment", "MANIFOLD_GATEWAY__INSECURE", "true or false"},
		{"environment", "MANIFOLD_GATEWAY__NOPE", "unknown key"},
		{"environment", "MANIFOLD_GATEWAY__SEPARATOR", "non-empty and contain only"},
		{"m.yaml", "gateway.limits.maxSessions", "must be an integer"},
		{"m.yaml", "gateway.listen", "must be host:port"},
		{"m.yaml", "gateway.log.level", "must be debug"},
		{"m.yaml", "mcpServers.local.headers", "only valid for http and sse"},
		{"m.yaml", "mcpServers.weather.headers.Authorization", "environment variable WEATHER_TOKEN is not set"},
		{"m.yaml", "mcpServers.weather.prefix", "only letters"},
		{"m.yaml", "mcpServers.weather.url", "must be an absolute http(s) URL"},
	})
	if strings.Contains(err.Error(), secret) {
		t.Errorf("error reveals a secret:\n%v", err)
	}
	if logs.Len() == 0 {
		t.Error("no debug records of ignored keys")
	}
	for _, e := range logs.All() {
		if strings.Contains(e.Message, secret) || strings.Contains(fmt.Sprint(e.ContextMap()), secret) {
			t.Errorf("log record reveals a secret: %v %v", e.Message, e.ContextMap())
		}
	}
}

func TestIgnoredKeysAreLogged(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	opts := testOpts(nil)
	opts.Logger = zap.New(core)
	doc := `{"$schema": "x", "globalShortcut": "Ctrl+Space",
  "mcpServers": {"a": {"command": "x", "autoApprove": [], "trust": true, "transportType": "sse", "type": "stdio"}}}`
	if _, err := Parse([]byte(doc), FormatJSON, "c.json", opts); err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var keys []string
	for _, e := range logs.FilterLoggerName("config").All() {
		if e.Level != zapcore.DebugLevel {
			t.Errorf("level = %v, want debug", e.Level)
		}
		keys = append(keys, e.ContextMap()["key"].(string))
	}
	want := []string{`"$schema"`, "globalShortcut", "mcpServers.a.autoApprove", "mcpServers.a.trust", "mcpServers.a.transportType"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("logged keys (-want +got):\n%s", diff)
	}
}
