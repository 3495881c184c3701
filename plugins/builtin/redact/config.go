package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// The kinds of the built-in detectors, in the order in which they win when
// two findings overlap: the specific formats first, the generic assignment
// last among the secrets, then personal data.
const (
	kindPrivateKey = iota
	kindJWT
	kindAWSAccessKey
	kindAWSSecretKey
	kindGoogleAPIKey
	kindGitHubToken
	kindGitLabToken
	kindSlackToken
	kindStripeKey
	kindGenericSecret
	kindEmail
	kindPhone
	kindCardNumber
	kindIBAN
	numBuiltin
)

// builtinKinds names each built-in kind as the config and the markers
// spell it; the index is the kind's constant above.
var builtinKinds = [numBuiltin]string{
	kindPrivateKey:    "private_key",
	kindJWT:           "jwt",
	kindAWSAccessKey:  "aws_access_key",
	kindAWSSecretKey:  "aws_secret_key",
	kindGoogleAPIKey:  "google_api_key",
	kindGitHubToken:   "github_token",
	kindGitLabToken:   "gitlab_token",
	kindSlackToken:    "slack_token",
	kindStripeKey:     "stripe_key",
	kindGenericSecret: "generic_secret",
	kindEmail:         "email",
	kindPhone:         "phone",
	kindCardNumber:    "card_number",
	kindIBAN:          "iban",
}

// groups are the detector names that stand for several kinds.
var groups = map[string][]int{
	"secrets": {kindPrivateKey, kindJWT, kindAWSAccessKey, kindAWSSecretKey, kindGoogleAPIKey,
		kindGitHubToken, kindGitLabToken, kindSlackToken, kindStripeKey, kindGenericSecret},
	"pii": {kindEmail, kindPhone, kindCardNumber, kindIBAN},
}

// config is the plugin's `config:` section.
type config struct {
	Detectors *[]string `json:"detectors"`
	Custom    []custom  `json:"custom"`
	Arguments bool      `json:"arguments"`
}

// custom is one entry of `custom:`.
type custom struct {
	Name    string `json:"name"`
	Pattern string `json:"pattern"`
}

var (
	configKeys = []string{"detectors", "custom", "arguments"}
	customKeys = []string{"name", "pattern"}
	// customName is what a custom kind may be called: it appears in
	// markers, which must not look like anything a detector finds.
	customName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
)

// New returns a Redactor for config, the plugin's `config:` section as
// JSON; nil, empty or `null` config means every built-in detector, no
// custom pattern and results only. Every problem in config is reported at
// once, each naming its key.
func New(config []byte) (*Redactor, error) {
	cfg, errs := parseConfig(config)
	r := &Redactor{arguments: cfg.Arguments, kinds: builtinKinds[:]}
	if cfg.Detectors == nil {
		for k := range numBuiltin {
			r.enabled[k] = true
		}
	}
	for i, name := range derefList(cfg.Detectors) {
		if g, ok := groups[name]; ok {
			for _, k := range g {
				r.enabled[k] = true
			}
			continue
		}
		k := builtinKind(name)
		if k < 0 {
			errs = append(errs, fmt.Errorf("redact: detectors[%d]: unknown detector %q (want secrets, pii or one of %s)",
				i, name, strings.Join(builtinKinds[:], ", ")))
			continue
		}
		r.enabled[k] = true
	}
	seen := map[string]bool{}
	for i, c := range cfg.Custom {
		key := fmt.Sprintf("custom[%d]", i)
		switch {
		case c.Name == "":
			errs = append(errs, fmt.Errorf("redact: %s.name: missing", key))
		case !customName.MatchString(c.Name):
			errs = append(errs, fmt.Errorf("redact: %s.name: %q is not lower-case letters, digits and _ starting with a letter", key, c.Name))
		case builtinKind(c.Name) >= 0 || groups[c.Name] != nil:
			errs = append(errs, fmt.Errorf("redact: %s.name: %q is a built-in detector", key, c.Name))
		case seen[c.Name]:
			errs = append(errs, fmt.Errorf("redact: %s.name: %q given twice", key, c.Name))
		}
		seen[c.Name] = true
		if c.Pattern == "" {
			errs = append(errs, fmt.Errorf("redact: %s.pattern: missing", key))
			continue
		}
		re, err := regexp.Compile(c.Pattern)
		if err != nil {
			errs = append(errs, fmt.Errorf("redact: %s.pattern: %w", key, err))
			continue
		}
		if re.Match(nil) {
			errs = append(errs, fmt.Errorf("redact: %s.pattern: %q matches the empty string", key, c.Pattern))
			continue
		}
		prefix, _ := re.LiteralPrefix()
		r.custom = append(r.custom, customDetector{re: re, prefix: []byte(prefix), kind: numBuiltin + len(r.custom)})
		r.kinds = append(r.kinds[:len(r.kinds):len(r.kinds)], c.Name)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r.markers = make([][]byte, len(r.kinds))
	for k, name := range r.kinds {
		r.markers[k] = []byte(markerOpen + name + "]")
	}
	r.prepare()
	return r, nil
}

// parseConfig decodes config, naming every unknown key and badly typed
// value; what decoded is in the config either way.
func parseConfig(raw []byte) (config, []error) {
	var cfg config
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return cfg, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return cfg, []error{fmt.Errorf("redact: config is not a JSON object: %w", err)}
	}
	errs := unknownKeys("", members, configKeys)
	if c, ok := members["custom"]; ok {
		var entries []map[string]json.RawMessage
		if err := json.Unmarshal(c, &entries); err == nil {
			for i, e := range entries {
				errs = append(errs, unknownKeys(fmt.Sprintf("custom[%d].", i), e, customKeys)...)
			}
		}
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			err = fmt.Errorf("%s: want %s, got %s", te.Field, te.Type, te.Value)
		}
		errs = append(errs, fmt.Errorf("redact: %w", err))
	}
	return cfg, errs
}

// unknownKeys returns one error naming, in order, the keys of members
// (those of the object at path) that are not in known, or none.
func unknownKeys(path string, members map[string]json.RawMessage, known []string) []error {
	var unknown []string
	for _, key := range slices.Sorted(maps.Keys(members)) {
		if !slices.Contains(known, key) {
			unknown = append(unknown, path+key)
		}
	}
	if unknown == nil {
		return nil
	}
	return []error{fmt.Errorf("redact: unknown key %s (want %s)", strings.Join(unknown, ", "), strings.Join(known, ", "))}
}

func derefList(p *[]string) []string {
	if p == nil {
		return nil
	}
	return *p
}

// builtinKind is the index of the built-in kind called name, or -1.
func builtinKind(name string) int {
	for k, n := range builtinKinds {
		if n == name {
			return k
		}
	}
	return -1
}
