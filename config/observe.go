package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Argument recording modes of the audit log (Audit.Arguments).
const (
	// ArgumentsFull records the arguments as received, after redaction.
	ArgumentsFull = "full"
	// ArgumentsHashed records "hmac-sha256:<hex>" of the RFC 8785 canonical JSON of the
	// redacted arguments: equal arguments give equal hashes, and values cannot be read back.
	ArgumentsHashed = "hashed"
	// ArgumentsNone records no arguments.
	ArgumentsNone = "none"
)

// Trace export protocols (Traces.Protocol).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Standard OpenTelemetry environment variables read when telemetry.traces leaves endpoint or
// protocol out. The loader resolves them into Traces; nothing else reads them.
const (
	EnvOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvOTLPProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvOTLPTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// OTLPTracesPath is the path of the OTLP/HTTP trace endpoint, added to an http/protobuf
// endpoint written without a path.
const OTLPTracesPath = "/v1/traces"

// MinAuditHashKeyLength is the shortest Audit.HashKey accepted, in bytes.
const MinAuditHashKeyLength = 32

// Defaults and bounds of the audit and telemetry sections.
const (
	defaultAuditMaxSizeMB  = 100
	defaultAuditMaxBackups = 5
	defaultAuditBuffer     = 4096
	maxAuditBuffer         = 1 << 20
	defaultMetricsListen   = "127.0.0.1:9464"
)

// Top-level keys of this file's sections.
const (
	keyAudit     = "audit"
	keyTelemetry = "telemetry"
)

// Audit is the "audit" section: one JSON line per tools/call, prompts/get and resources/read,
// and per denial. A nil *Audit (section absent or null) means no audit log.
type Audit struct {
	// File (key "file") is the JSON-lines file to append to, rotated by size. Its directory
	// must exist; the file is created with mode 0600. Empty: no file.
	File string
	// Stdout (key "stdout") also writes the records to standard output. At least one of File
	// and Stdout is required.
	Stdout bool
	// Arguments is ArgumentsFull, ArgumentsHashed (the default) or ArgumentsNone.
	Arguments string
	// HashKey (key "hashKey") keys the HMAC of ArgumentsHashed; at least
	// MinAuditHashKeyLength bytes, usually "${VAR}". It is a secret: never logged or shown.
	// Empty: the MANIFOLD_AUDIT_HASH_KEY environment variable, else a random key per process
	// (hashes then cannot be compared across restarts).
	HashKey string
	// HashKeyFile (key "hashKeyFile") names a file holding HashKey instead (a Kubernetes
	// Secret volume, say); the loader reads it into HashKey. Set at most one of the two.
	HashKeyFile string
	// Redact lists glob patterns ('*' any run, '?' one character) matched case-insensitively
	// against argument key names at any depth. A matching key's value is recorded as
	// "[REDACTED]" in full mode and replaced the same way before hashing in hashed mode.
	Redact []string
	// MaxSizeMB (key "maxSizeMB") rotates File when it would exceed this many MiB; default 100.
	MaxSizeMB int
	// MaxBackups (key "maxBackups") is how many rotated files are kept; default 5.
	MaxBackups int
	// Buffer is the number of records queued for the writer; default 4096. A record that
	// finds the queue full is dropped and counted, never waited for.
	Buffer int
}

// Telemetry is the "telemetry" section: OpenTelemetry traces and Prometheus metrics. The
// zero value turns both off.
type Telemetry struct {
	// Traces (key "traces") exports spans over OTLP; nil (absent or null) means no tracing.
	Traces *Traces
	// Metrics (key "metrics") serves Prometheus metrics; nil means none.
	Metrics *Metrics
}

// Traces configures span export over OTLP.
type Traces struct {
	// Endpoint is the collector's absolute http or https URL. For ProtocolHTTP a URL without a
	// path gets OTLPTracesPath (http://127.0.0.1:4318 → http://127.0.0.1:4318/v1/traces); for
	// ProtocolGRPC only the host and port count, and http means no TLS. When the key is absent
	// the loader takes OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, or else
	// OTEL_EXPORTER_OTLP_ENDPOINT as a base (with OTLPTracesPath appended for http/protobuf).
	Endpoint string
	// Protocol is ProtocolHTTP or ProtocolGRPC. When absent the loader takes
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL, else ProtocolHTTP.
	Protocol string
	// SampleRatio (key "sampleRatio") is the fraction of new traces sampled, 0 to 1; nil means
	// 1. A request that arrives with a sampled parent is always sampled (parent-based). See
	// Ratio.
	SampleRatio *float64
	// Headers are sent with every export, typically an authorization header. Values are
	// secrets: never logged or shown. When set, they replace OTEL_EXPORTER_OTLP_HEADERS.
	Headers map[string]string
}

// Ratio returns the effective sampling ratio: *SampleRatio, or 1 when it is nil.
func (t *Traces) Ratio() float64 {
	if t.SampleRatio == nil {
		return 1
	}
	return *t.SampleRatio
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// Listen is the host:port of a separate admin listener serving /metrics; default
	// "127.0.0.1:9464". A non-loopback host requires gateway.insecure: the endpoint has no
	// authentication.
	Listen string
}

func (a *Audit) applyDefaults() {
	setIfZero(&a.Arguments, ArgumentsHashed)
	setIfZero(&a.MaxSizeMB, defaultAuditMaxSizeMB)
	setIfZero(&a.MaxBackups, defaultAuditMaxBackups)
	setIfZero(&a.Buffer, defaultAuditBuffer)
}

func (t *Telemetry) applyDefaults() {
	if t.Traces != nil {
		setIfZero(&t.Traces.Protocol, ProtocolHTTP)
	}
	if t.Metrics != nil {
		setIfZero(&t.Metrics.Listen, defaultMetricsListen)
	}
}

// audit decodes the audit section; null gives nil (no audit log).
func (d *decoder) audit(key string, v any) *Audit {
	m, ok := d.mapping(key, v)
	if !ok {
		return nil
	}
	a := &Audit{}
	a.applyDefaults() // keys written explicitly overwrite the defaults, and must be valid
	var file *string
	d.section(key, auditFields(a, &file), m)
	d.secretFile(key, "hashKey", a.HashKeyFile, &a.HashKey)
	if file != nil {
		if *file == "" {
			d.fail(joinKey(key, "file"), "must not be empty: remove the key to write no file")
		}
		a.File = *file
	}
	return a
}

// auditFields describes the audit section; file receives the file key, whose null and ""
// differ from absent.
func auditFields(a *Audit, file **string) []field {
	return []field{
		{name: "file", ptr: file},
		{name: "stdout", ptr: &a.Stdout},
		{name: "arguments", ptr: &a.Arguments},
		{name: "hashKey", ptr: &a.HashKey},
		{name: "hashKeyFile", ptr: &a.HashKeyFile},
		{name: "redact", ptr: &a.Redact},
		{name: "maxSizeMB", ptr: &a.MaxSizeMB},
		{name: "maxBackups", ptr: &a.MaxBackups},
		{name: "buffer", ptr: &a.Buffer},
	}
}

func tracesFields(t *Traces) []field {
	return []field{
		{name: "endpoint", ptr: &t.Endpoint},
		{name: "protocol", ptr: &t.Protocol},
		{name: "sampleRatio", ptr: &t.SampleRatio},
		{name: "headers", ptr: &t.Headers},
	}
}

func metricsFields(m *Metrics) []field {
	return []field{{name: "listen", ptr: &m.Listen}}
}

// telemetry decodes the telemetry section into t, resolving the trace endpoint and protocol
// from the OTEL_EXPORTER_OTLP_… variables when they are absent.
func (d *decoder) telemetry(key string, v any, t *Telemetry) {
	m, ok := d.mapping(key, v)
	if !ok {
		return
	}
	rest := map[string]any{}
	for k, e := range m {
		switch {
		case k == "traces" && e != nil:
			t.Traces = &Traces{}
			d.section(joinKey(key, k), tracesFields(t.Traces), e)
			d.tracesFromEnv(joinKey(key, k), t.Traces)
		case k == "metrics" && e != nil:
			t.Metrics = &Metrics{Listen: defaultMetricsListen}
			d.section(joinKey(key, k), metricsFields(t.Metrics), e)
		case k != "traces" && k != "metrics":
			rest[k] = e
		}
	}
	d.section(key, []field{{name: "traces"}, {name: "metrics"}}, rest)
}

// tracesFromEnv fills in an absent protocol and endpoint from the standard variables,
// recording which variable set each key so that problems blame it.
func (d *decoder) tracesFromEnv(key string, t *Traces) {
	if t.Protocol == "" && !d.failed[joinKey(key, "protocol")] {
		t.Protocol = ProtocolHTTP
		for _, name := range []string{EnvOTLPTracesProtocol, EnvOTLPProtocol} {
			if val, ok := d.lookup(name); ok && val != "" {
				t.Protocol = strings.TrimSpace(val)
				d.setBy(joinKey(key, "protocol"), name)
				break
			}
		}
	}
	if t.Endpoint != "" || d.failed[joinKey(key, "endpoint")] {
		return
	}
	if val, ok := d.lookup(EnvOTLPTracesEndpoint); ok && val != "" {
		t.Endpoint = strings.TrimSpace(val)
		d.setBy(joinKey(key, "endpoint"), EnvOTLPTracesEndpoint)
		return
	}
	if val, ok := d.lookup(EnvOTLPEndpoint); ok && val != "" {
		t.Endpoint = strings.TrimSpace(val)
		if t.Protocol == ProtocolHTTP {
			// The generic variable is a base URL; the signal's path goes after its own.
			if u, err := url.Parse(t.Endpoint); err == nil {
				u.Path = strings.TrimSuffix(u.Path, "/") + OTLPTracesPath
				t.Endpoint = u.String()
			}
		}
		d.setBy(joinKey(key, "endpoint"), EnvOTLPEndpoint)
	}
}

// setBy records that the environment variable name set key.
func (d *decoder) setBy(key, name string) {
	if d.origins == nil {
		d.origins = make(map[string]string)
	}
	d.origins[key] = name
}

func (v *validator) audit(a *Audit) {
	const key = keyAudit
	if v.failed[key] {
		return
	}
	if a.File == "" && !a.Stdout && !v.failed[key+".file"] && !v.failed[key+".stdout"] {
		v.add(key, "audit needs file or stdout: set file: <path>, stdout: true, or both (remove the section for no audit log)")
	}
	if a.File != "" {
		v.auditFile(key+".file", a.File)
	}
	switch a.Arguments {
	case ArgumentsFull, ArgumentsHashed, ArgumentsNone:
	default:
		v.add(key+".arguments", "must be full, hashed or none")
	}
	if a.HashKey != "" && len(a.HashKey) < MinAuditHashKeyLength {
		v.add(key+"."+secretKey("hashKey", a.HashKeyFile), fmt.Sprintf("too short: a hash key needs at least %d bytes (such as the output of openssl rand -hex 32)", MinAuditHashKeyLength))
	}
	for i, p := range a.Redact {
		if strings.TrimSpace(p) == "" {
			v.add(fmt.Sprintf("%s.redact[%d]", key, i), "must not be empty")
		}
	}
	for k, n := range map[string]int{"maxSizeMB": a.MaxSizeMB, "maxBackups": a.MaxBackups, "buffer": a.Buffer} {
		if n <= 0 {
			v.add(key+"."+k, "must be greater than 0")
		}
	}
	if a.Buffer > maxAuditBuffer {
		v.add(key+".buffer", fmt.Sprintf("must be at most %d", maxAuditBuffer))
	}
}

// auditFile checks that the audit file can be created: its directory exists (it is not
// created) and the path is not a directory.
func (v *validator) auditFile(key, path string) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		v.add(key, "is a directory: name a file")
		return
	}
	fi, err := os.Stat(filepath.Dir(path))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		v.add(key, "its directory does not exist (Manifold does not create it)")
	case err != nil:
		v.add(key, "its directory cannot be read: "+fileProblem(err))
	case !fi.IsDir():
		v.add(key, "its directory is not a directory")
	}
}

func (v *validator) telemetry(t *Telemetry, g *Gateway) {
	if t.Traces != nil && !v.failed["telemetry.traces"] {
		v.traces("telemetry.traces", t.Traces)
	}
	if m := t.Metrics; m != nil && !v.failed["telemetry.metrics"] && !v.failed["telemetry.metrics.listen"] {
		const key = "telemetry.metrics.listen"
		host, ok := v.hostPort(key, m.Listen, "127.0.0.1:9464")
		switch {
		case !ok:
		case !g.Insecure && !isLoopback(host):
			v.add(key, "a non-loopback address requires gateway.insecure: true: /metrics has no "+
				"authentication and shows server names and traffic to anyone who can reach it")
		case m.Listen == g.Listen && !strings.HasSuffix(m.Listen, ":0"):
			v.add(key, "must differ from gateway.listen: metrics have a listener of their own")
		}
	}
}

func (v *validator) traces(key string, t *Traces) {
	switch t.Protocol {
	case ProtocolHTTP, ProtocolGRPC:
	default:
		if !v.failed[key+".protocol"] {
			v.add(key+".protocol", "must be http/protobuf or grpc")
		}
	}
	if r := t.SampleRatio; r != nil && (*r < 0 || *r > 1) {
		v.add(key+".sampleRatio", "must be between 0 and 1")
	}
	switch {
	case v.failed[key+".endpoint"]:
	case t.Endpoint == "":
		v.add(key+".endpoint", "is required: set it, or the environment variable "+EnvOTLPEndpoint+" (or "+EnvOTLPTracesEndpoint+")")
	default:
		u, err := url.Parse(t.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			v.add(key+".endpoint", "must be an absolute http or https URL without user info, such as http://127.0.0.1:4318")
		}
	}
	for name, val := range t.Headers {
		hk := joinKey(key+".headers", name)
		if name == "" || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == ':' }) {
			v.add(hk, "is not a valid header name")
		}
		if strings.ContainsAny(val, "\r\n\x00") {
			v.add(hk, "the value must not contain line breaks or NUL") // the value itself is never shown
		}
	}
}

// hostPort checks that addr is host:port with a port from 0 to 65535 and returns the host.
func (v *validator) hostPort(key, addr, example string) (string, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.add(key, fmt.Sprintf("must be host:port, such as %q", example))
		return "", false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.add(key, "port must be a number from 0 to 65535")
		return "", false
	}
	return host, true
}
