package config

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	koanfjson "github.com/knadh/koanf/parsers/json"
	koanfyaml "github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/rawbytes"
	"go.uber.org/zap"
)

// Formats accepted by Parse.
const (
	FormatYAML = "yaml"
	FormatJSON = "json"
)

// Log field keys.
const (
	logKeySource = "source"
	logKeyKey    = "key"
	logKeyReason = "reason"
)

// Top-level keys.
const (
	keyServers       = "mcpServers"
	keyVSCodeServers = "servers"
	keyGateway       = "gateway"
	keyAuth          = "auth"
	keyPolicy        = "policy"
	keyPlugins       = "plugins"
)

//go:embed default.yaml
var defaultYAML []byte

// LoadOptions tunes loading. A nil *LoadOptions, like zero fields, means the defaults.
type LoadOptions struct {
	// LookupEnv resolves ${VAR} references; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Environ lists the "NAME=value" variables scanned for MANIFOLD_<SECTION>__… overrides;
	// nil means os.Environ(). Pass an empty non-nil slice for no overrides.
	Environ []string
	// Logger receives debug records of ignored keys (never values); nil means no logging.
	Logger *zap.Logger
}

// Load reads and parses the config file at path, choosing the format by extension (.yaml,
// .yml or .json, any case). See Parse.
func Load(path string, opts *LoadOptions) (*Config, error) {
	var format string
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		format = FormatYAML
	case ".json":
		format = FormatJSON
	default:
		return nil, fmt.Errorf("config: %s: unknown file extension: want .yaml, .yml or .json", path)
	}
	return load(file.Provider(path), format, path, opts)
}

// Default returns the embedded default config (YAML): two demo upstreams served by the
// manifold binary itself, found through ${MANIFOLD_BINARY}. The caller gets its own copy.
func Default() []byte {
	return append([]byte(nil), defaultYAML...)
}

// LoadDefault parses the embedded default config with Source DefaultSource. MANIFOLD_BINARY
// must resolve, through opts.LookupEnv or else the process environment, to the manifold
// executable; environment overrides apply as for any file.
func LoadDefault(opts *LoadOptions) (*Config, error) {
	return Parse(defaultYAML, FormatYAML, DefaultSource, opts)
}

// Parse decodes a config document in format (FormatYAML or FormatJSON; JSON may carry // and
// /* */ comments and trailing commas, as VS Code's files do), applies defaults, ${VAR}
// expansion, secret files and MANIFOLD_<SECTION>__… overrides, and validates the result.
// source names the document in errors, usually its path. On failure the error joins one
// *FieldError per problem, sorted (see FieldErrors); the config is returned only when it is
// valid.
func Parse(data []byte, format, source string, opts *LoadOptions) (*Config, error) {
	return load(rawbytes.Provider(data), format, source, opts)
}

// ErrUnknownFormat is returned by Parse for a format other than FormatYAML and FormatJSON (a
// caller's mistake rather than a problem in the document).
var ErrUnknownFormat = errors.New("config: unknown format: want yaml or json")

// docParser is the koanf.Parser of config documents: koanf's YAML and JSON parsers, plus JSONC
// and a byte order mark in JSON, messages that say where the problem is, and the document's
// hash for Config.Hash. One docParser serves one load.
type docParser struct {
	format, source string
	sum            [sha256.Size]byte
}

// Unmarshal parses data into its top-level mapping; nil for an empty YAML document. Errors
// are *FieldError naming the source.
func (p *docParser) Unmarshal(data []byte) (doc map[string]any, err error) {
	p.sum = sha256.Sum256(data)
	// The parsers are third-party code fed untrusted input: never let a bug in them take the
	// gateway down during a reload.
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, fmt.Errorf("invalid %s: the parser failed on this document", strings.ToUpper(p.format))
		}
		if err != nil {
			err = &FieldError{Source: p.source, Msg: err.Error()}
		}
	}()
	switch p.format {
	case FormatYAML:
		doc, err = koanfyaml.Parser().Unmarshal(data)
		if err != nil {
			return nil, yamlError(err)
		}
	case FormatJSON:
		data = stripJSONC(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))) // Windows editors may add a BOM
		doc, err = koanfjson.Parser().Unmarshal(data)
		if err != nil {
			return nil, jsonError(data, err)
		}
	}
	return doc, nil
}

// Marshal is not supported: configs are only read.
func (p *docParser) Marshal(map[string]any) ([]byte, error) {
	return nil, errors.New("config: writing a config is not supported")
}

const notMapping = "the document must be a mapping (object) of keys at the top level"

func yamlError(err error) error {
	msg := err.Error()
	if strings.Contains(msg, "cannot unmarshal") && strings.Contains(msg, "into map[string]") {
		return errors.New("invalid YAML: " + notMapping)
	}
	return errors.New("invalid YAML: " + strings.Join(strings.Fields(strings.TrimPrefix(msg, "yaml: ")), " "))
}

func jsonError(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := position(data, syn.Offset-1) // Offset counts the offending byte
		return fmt.Errorf("invalid JSON: line %d column %d: %s", line, col, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		return errors.New("invalid JSON: " + notMapping)
	}
	return fmt.Errorf("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// position converts a byte offset into a 1-based line and column.
func position(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	line, col = 1, 1
	for _, c := range data[:offset] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// document decodes the top level: the servers, the gateway's own sections and host settings
// (ignored).
func (d *decoder) document(doc map[string]any, cfg *Config) {
	cfg.ServersKey = keyServers
	if _, ok := doc[keyServers]; !ok {
		if _, ok := doc[keyVSCodeServers]; ok {
			cfg.ServersKey = keyVSCodeServers
		}
	}
	for _, k := range sortedKeys(doc) {
		switch k {
		case cfg.ServersKey:
			cfg.Servers = d.servers(k, doc[k])
		case keyGateway:
			d.section(keyGateway, gatewayFields(&cfg.Gateway), doc[k])
		case keyAuth:
			d.auth(k, doc[k], &cfg.Auth)
		case keyPolicy:
			cfg.Policy = d.policy(k, doc[k])
		case keyAudit:
			cfg.Audit = d.audit(k, doc[k])
		case keyTelemetry:
			d.telemetry(k, doc[k], &cfg.Telemetry)
		case keyToolsets:
			cfg.Toolsets = d.toolsets(k, doc[k])
		case keyRateLimits:
			cfg.RateLimits = d.rateLimits(k, doc[k])
		case keyPlugins:
			cfg.Plugins = d.plugins(k, doc[k])
		default:
			if msg := topLevelTypo(k); msg != "" {
				d.fail(joinKey("", k), msg)
				continue
			}
			d.ignore(joinKey("", k), "not a gateway key (host settings are ignored)")
		}
	}
}

// topLevelTypo returns an error message when the unknown top-level key k looks like a
// misspelling of one of ours (which would otherwise drop a whole section silently), else "".
func topLevelTypo(k string) string {
	lower := strings.ToLower(k)
	for _, name := range []string{keyServers, keyGateway, keyAuth, keyPolicy, keyAudit, keyTelemetry, keyPlugins, keyToolsets, keyRateLimits} {
		near := len(name) >= 7 && editDistance(lower, strings.ToLower(name)) <= 2
		if strings.EqualFold(k, name) || near {
			return fmt.Sprintf("unknown key (did you mean %q?)", name)
		}
	}
	return ""
}
