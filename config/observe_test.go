package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseObserve(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(dir, "audit.jsonl")
	key := strings.Repeat("k", 32)
	tests := []struct {
		name      string
		doc       string
		vars      map[string]string
		wantAudit *Audit
		wantTel   Telemetry
	}{
		{
			name: "absent and null sections are off",
			doc:  "audit: null\ntelemetry: {traces: null, metrics: null}\n",
		},
		{
			name:      "audit defaults",
			doc:       "audit: {stdout: true}\n",
			wantAudit: &Audit{Stdout: true, Arguments: "hashed", MaxSizeMB: 100, MaxBackups: 5, Buffer: 4096},
		},
		{
			name: "every audit and telemetry key",
			doc: `
audit:
  file: ` + logFile + `
  stdout: false
  arguments: full
  hashKey: "${AUDIT_KEY}"
  redact: ["*password*", "API?KEY", token]
  maxSizeMB: 10
  maxBackups: 2
  buffer: 64
telemetry:
  traces:
    endpoint: "https://otel.example.com:4318/custom"
    protocol: http/protobuf
    sampleRatio: 0.25
    headers: {Authorization: "Bearer ${OTLP_TOKEN}"}
  metrics: {listen: "[::1]:9000"}
`,
			vars: map[string]string{"AUDIT_KEY": key, "OTLP_TOKEN": "tok"},
			wantAudit: &Audit{File: logFile, Arguments: "full", HashKey: key,
				Redact: []string{"*password*", "API?KEY", "token"}, MaxSizeMB: 10, MaxBackups: 2, Buffer: 64},
			wantTel: Telemetry{
				Traces: &Traces{Endpoint: "https://otel.example.com:4318/custom", Protocol: "http/protobuf",
					SampleRatio: ptr(0.25), Headers: map[string]string{"Authorization": "Bearer tok"}},
				Metrics: &Metrics{Listen: "[::1]:9000"},
			},
		},
		{
			name: "empty traces and metrics take the OTLP variables and the default listener",
			doc:  "telemetry: {traces: {}, metrics: {}}\n",
			vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
			wantTel: Telemetry{
				Traces:  &Traces{Endpoint: "http://collector:4318/v1/traces", Protocol: "http/protobuf"},
				Metrics: &Metrics{Listen: "127.0.0.1:9464"},
			},
		},
		{
			name: "the traces variables win over the generic ones and are used as they are",
			doc:  "telemetry: {traces: {sampleRatio: 0}}\n",
			vars: map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://generic:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:4318/x",
				"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
			},
			wantTel: Telemetry{Traces: &Traces{Endpoint: "http://traces:4318/x", Protocol: "http/protobuf", SampleRatio: ptr(0.0)}},
		},
		{
			name:    "a grpc base endpoint gets no path",
			doc:     "telemetry: {traces: {sampleRatio: \"${RATIO}\"}}\n",
			vars:    map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "RATIO": "1"},
			wantTel: Telemetry{Traces: &Traces{Endpoint: "http://collector:4317", Protocol: "grpc", SampleRatio: ptr(1.0)}},
		},
		{
			name:    "the file wins over the variables",
			doc:     "telemetry: {traces: {endpoint: \"http://127.0.0.1:4317\", protocol: grpc, sampleRatio: 1}}\n",
			vars:    map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://generic:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
			wantTel: Telemetry{Traces: &Traces{Endpoint: "http://127.0.0.1:4317", Protocol: "grpc", SampleRatio: ptr(1.0)}},
		},
		{
			name:    "a non-loopback metrics listener with gateway.insecure",
			doc:     "gateway: {insecure: true}\ntelemetry: {metrics: {listen: \":9464\"}}\n",
			wantTel: Telemetry{Metrics: &Metrics{Listen: ":9464"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.doc), FormatYAML, "m.yaml", testOpts(tt.vars))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.wantAudit, cfg.Audit); diff != "" {
				t.Errorf("audit (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantTel, cfg.Telemetry); diff != "" {
				t.Errorf("telemetry (-want +got):\n%s", diff)
			}
		})
	}
}

func TestObserveValidationErrors(t *testing.T) {
	dir := t.TempDir()
	missingDir := filepath.Join(dir, "nope", "audit.jsonl")
	notDir := filepath.Join(dir, "plain")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		doc  string
		vars map[string]string
		want []wantErr
	}{
		{
			name: "audit needs a sink",
			doc:  "audit: {}\n",
			want: []wantErr{{"m.yaml", "audit", "audit needs file or stdout"}},
		},
		{
			name: "audit shapes and values",
			doc: `audit:
  file: ""
  stdout: maybe
  arguments: plain
  hashKey: short
  redact: ["", "ok", 3]
  maxSizeMB: 0
  maxBackups: -1
  buffer: 2000000
  rotate: daily
`,
			want: []wantErr{
				{"m.yaml", "audit.arguments", "must be full, hashed or none"},
				{"m.yaml", "audit.buffer", "at most 1048576"},
				{"m.yaml", "audit.file", "must not be empty"},
				{"m.yaml", "audit.hashKey", "too short"},
				{"m.yaml", "audit.maxBackups", "greater than 0"},
				{"m.yaml", "audit.maxSizeMB", "greater than 0"},
				{"m.yaml", "audit.redact[0]", "must not be empty"},
				{"m.yaml", "audit.redact[2]", "must be a string"},
				{"m.yaml", "audit.rotate", "unknown key"},
				{"m.yaml", "audit.stdout", "true or false"},
			},
		},
		{
			name: "audit file directory must exist",
			doc:  "audit: {file: " + missingDir + "}\n",
			want: []wantErr{{"m.yaml", "audit.file", "its directory does not exist"}},
		},
		{
			name: "audit file must not be a directory",
			doc:  "audit: {file: " + dir + "}\n",
			want: []wantErr{{"m.yaml", "audit.file", "is a directory"}},
		},
		{
			name: "audit file under a plain file",
			doc:  "audit: {file: " + filepath.Join(notDir, "x.jsonl") + "}\n",
			want: []wantErr{{"m.yaml", "audit.file", "its directory is not a directory"}},
		},
		{
			name: "audit and telemetry must be mappings",
			doc:  "audit: [x]\ntelemetry: 3\n",
			want: []wantErr{
				{"m.yaml", "audit", "must be a mapping"},
				{"m.yaml", "telemetry", "must be a mapping"},
			},
		},
		{
			name: "telemetry shapes and values",
			doc: `telemetry:
  traces:
    endpoint: "ftp://collector"
    protocol: http/json
    sampleRatio: 1.5
    headers: {"": x, "Bad Name": y}
    insecure: true
  metrics: {listen: "0.0.0.0:9464", path: /m}
  logs: {}
`,
			want: []wantErr{
				{"m.yaml", "telemetry.logs", "unknown key"},
				{"m.yaml", "telemetry.metrics.listen", "requires gateway.insecure"},
				{"m.yaml", "telemetry.metrics.path", "unknown key"},
				{"m.yaml", "telemetry.traces.endpoint", "absolute http or https URL"},
				{"m.yaml", `telemetry.traces.headers.""`, "not a valid header name"},
				{"m.yaml", `telemetry.traces.headers."Bad Name"`, "not a valid header name"},
				{"m.yaml", "telemetry.traces.insecure", "unknown key"},
				{"m.yaml", "telemetry.traces.protocol", "http/protobuf or grpc"},
				{"m.yaml", "telemetry.traces.sampleRatio", "between 0 and 1"},
			},
		},
		{
			name: "value types",
			doc:  "telemetry: {traces: {endpoint: 1, sampleRatio: half, headers: [x]}, metrics: {listen: 9464}}\n",
			want: []wantErr{
				{"m.yaml", "telemetry.metrics.listen", "must be a string"},
				{"m.yaml", "telemetry.traces.endpoint", "must be a string"},
				{"m.yaml", "telemetry.traces.headers", "mapping of names to strings"},
				{"m.yaml", "telemetry.traces.sampleRatio", "must be a number"},
			},
		},
		{
			name: "traces need an endpoint from the file or the environment",
			doc:  "telemetry: {traces: {}}\n",
			want: []wantErr{{"m.yaml", "telemetry.traces.endpoint", "is required: set it, or the environment variable OTEL_EXPORTER_OTLP_ENDPOINT"}},
		},
		{
			name: "bad values from the OTLP variables blame the variable",
			doc:  "telemetry: {traces: {}}\n",
			vars: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			want: []wantErr{
				{"environment", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf or grpc"},
				{"environment", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "absolute http or https URL"},
			},
		},
		{
			name: "metrics listener shape and clash with the gateway",
			doc:  "gateway: {listen: \"127.0.0.1:8080\"}\ntelemetry: {metrics: {listen: \"127.0.0.1:8080\"}}\n",
			want: []wantErr{{"m.yaml", "telemetry.metrics.listen", "must differ from gateway.listen"}},
		},
		{
			name: "metrics listener must be host:port",
			doc:  "telemetry: {metrics: {listen: \"9464\"}}\n",
			want: []wantErr{{"m.yaml", "telemetry.metrics.listen", `must be host:port, such as "127.0.0.1:9464"`}},
		},
		{
			name: "an unset variable is reported once",
			doc:  "audit: {stdout: true, hashKey: \"${NOPE}\"}\ntelemetry: {traces: {endpoint: \"${NOPE}\"}}\n",
			want: []wantErr{
				{"m.yaml", "audit.hashKey", "environment variable NOPE is not set"},
				{"m.yaml", "telemetry.traces.endpoint", "environment variable NOPE is not set"},
			},
		},
		{
			name: "misspelt sections are errors",
			doc:  "Audit: {}\ntelemetri: {}\n",
			want: []wantErr{
				{"m.yaml", "Audit", `did you mean "audit"`},
				{"m.yaml", "telemetri", `did you mean "telemetry"`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), FormatYAML, "m.yaml", testOpts(tt.vars))
			checkErrors(t, err, tt.want)
		})
	}
}

// TestObserveSecretsNeverShown checks that neither the audit hash key nor trace header values
// appear in any problem, whatever is wrong with them.
func TestObserveSecretsNeverShown(t *testing.T) {
	const secret = "s3cr3t-marker"
	doc := `audit: {stdout: true, hashKey: "${KEY}", arguments: bogus}
telemetry:
  traces:
    endpoint: "${ENDPOINT}"
    headers: {Authorization: "${AUTH}", "x y": "${KEY}", Ok: 3}
`
	vars := map[string]string{
		"KEY":      secret,
		"AUTH":     "Bearer " + secret + "\r\nX-Injected: 1",
		"ENDPOINT": "gopher://" + secret,
	}
	_, err := Parse([]byte(doc), FormatYAML, "m.yaml", testOpts(vars))
	if err == nil {
		t.Fatal("Parse succeeded")
	}
	if len(FieldErrors(err)) < 4 {
		t.Fatalf("want at least 4 problems, got:\n%v", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("a problem shows a secret:\n%v", err)
	}
}

func TestApplyDefaultsObserve(t *testing.T) {
	cfg := &Config{
		Audit:     &Audit{File: filepath.Join(t.TempDir(), "a.jsonl")},
		Telemetry: Telemetry{Traces: &Traces{Endpoint: "http://127.0.0.1:4318"}, Metrics: &Metrics{}},
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate after ApplyDefaults: %v", err)
	}
	want := &Audit{File: cfg.Audit.File, Arguments: ArgumentsHashed, MaxSizeMB: 100, MaxBackups: 5, Buffer: 4096}
	if diff := cmp.Diff(want, cfg.Audit); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	wantTel := Telemetry{Traces: &Traces{Endpoint: "http://127.0.0.1:4318", Protocol: ProtocolHTTP}, Metrics: &Metrics{Listen: "127.0.0.1:9464"}}
	if diff := cmp.Diff(wantTel, cfg.Telemetry); diff != "" {
		t.Errorf("telemetry (-want +got):\n%s", diff)
	}
	if got := cfg.Telemetry.Traces.Ratio(); got != 1 {
		t.Errorf("Ratio() = %v, want 1 when unset", got)
	}
}
