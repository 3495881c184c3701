package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/v2"
	"go.uber.org/zap"
)

// keyDelim joins the segments of the keys that koanf's environment provider produces. It must
// be a character no key can contain: "." splits server and tool names such as "acme.search",
// and "_" splits MAX_SESSIONS-style names. NUL cannot occur in an environment variable's name,
// so no segment of an override ever contains it; keys read from files are nested maps that
// koanf merges without splitting.
const keyDelim = "\x00"

// load is the one loading path: koanf reads the document from p through docParser (layer 1),
// MANIFOLD_<SECTION>__… variables are resolved against the document and the field tables and
// merged over it (layer 2), and the strict decoder walks the merged tree into a Config whose
// gateway section starts from its defaults. Validation runs last.
func load(p koanf.Provider, format, source string, opts *LoadOptions) (*Config, error) {
	if format != FormatYAML && format != FormatJSON {
		return nil, fmt.Errorf("%w (got %q)", ErrUnknownFormat, format)
	}
	var o LoadOptions
	if opts != nil {
		o = *opts
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}

	k := koanf.New(keyDelim)
	parser := &docParser{format: format, source: source}
	if err := k.Load(p, parser); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return nil, fe
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	r := &envResolver{doc: k.Raw()}
	if err := k.Load(env.Provider(keyDelim, env.Opt{
		Prefix:        envPrefix,
		TransformFunc: r.resolve,
		EnvironFunc:   func() []string { return o.Environ },
	}), nil); err != nil {
		return nil, fmt.Errorf("config: environment overrides: %w", err) // the provider cannot fail
	}

	d := &decoder{source: source, lookup: o.LookupEnv, log: o.Logger.Named("config")}
	cfg := &Config{Source: source, Gateway: DefaultGateway(), Hash: "sha256:" + hex.EncodeToString(parser.sum[:])}
	d.document(k.Raw(), cfg)
	cfg.Auth.applyDefaults()
	errs := append(r.errs, d.errs...)
	errs = append(errs, cfg.validate(d.origins, d.failed)...)
	if err := joinErrors(errs); err != nil {
		return nil, err
	}
	return cfg, nil
}
