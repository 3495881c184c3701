package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ruleConfig is one entry of `rules:`.
type ruleConfig struct {
	Name                string          `json:"name"`
	Tools               []string        `json:"tools"`
	Arguments           []string        `json:"arguments"`
	Message             string          `json:"message"`
	Regex               *string         `json:"regex"`
	Glob                *string         `json:"glob"`
	PathTraversal       json.RawMessage `json:"pathTraversal"`
	ShellMetacharacters *bool           `json:"shellMetacharacters"`
	URLAllowList        *[]string       `json:"urlAllowList"`
}

var (
	configKeys    = []string{"rules"}
	ruleKeys      = []string{"name", "tools", "arguments", "message", "regex", "glob", "pathTraversal", "shellMetacharacters", "urlAllowList"}
	traversalKeys = []string{"sensitiveRoots"}
	matcherKeys   = []string{"regex", "glob", "pathTraversal", "shellMetacharacters", "urlAllowList"}
)

// New returns a Guard for config, the plugin's `config:` section as JSON.
// Nil, empty or `null` config is a guard without rules, which blocks
// nothing. Every problem in config is reported at once, each naming the
// rule (by index and name) and the key.
func New(config []byte) (*Guard, error) {
	config = bytes.TrimSpace(config)
	if len(config) == 0 || bytes.Equal(config, []byte("null")) {
		return &Guard{}, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(config, &top); err != nil {
		return nil, fmt.Errorf("guard: config is not a JSON object: %w", err)
	}
	errs := unknownKeys("guard: ", top, configKeys)
	var raws []json.RawMessage
	if r, ok := top["rules"]; ok {
		if err := json.Unmarshal(r, &raws); err != nil {
			errs = append(errs, fmt.Errorf("guard: rules: want a list of rules: %w", err))
		}
	}
	g := &Guard{}
	names := map[string]int{}
	for i, raw := range raws {
		where := fmt.Sprintf("guard: rules[%d]", i)
		var named struct{ Name string }
		_ = json.Unmarshal(raw, &named)
		if named.Name != "" {
			where += " (" + named.Name + ")"
		}
		r, rerrs := compileRule(where, raw)
		errs = append(errs, rerrs...)
		if r == nil {
			continue
		}
		if j, dup := names[r.name]; dup {
			errs = append(errs, fmt.Errorf("%s: name: %q is also the name of rules[%d]", where, r.name, j))
		}
		names[r.name] = i
		g.rules = append(g.rules, *r)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return g, nil
}

// compileRule checks and compiles one rule; where names it in errors.
func compileRule(where string, raw json.RawMessage) (*rule, []error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, []error{fmt.Errorf("%s: want a rule (an object): %w", where, err)}
	}
	errs := unknownKeys(where+": ", members, ruleKeys)
	var c ruleConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			err = fmt.Errorf("%s: want %s, got %s", te.Field, te.Type, te.Value)
		}
		errs = append(errs, fmt.Errorf("%s: %w", where, err))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	r := &rule{name: c.Name, message: c.Message}
	if c.Name == "" {
		errs = append(errs, fmt.Errorf("%s: name: missing", where))
	}
	if r.message == "" {
		r.message = fmt.Sprintf("blocked by guard rule %q", c.Name)
	}
	for i, t := range c.Tools {
		if _, err := path.Match(t, ""); err != nil || t == "" {
			errs = append(errs, fmt.Errorf("%s: tools[%d]: %q is not a glob", where, i, t))
		}
	}
	r.tools = c.Tools
	for i, a := range c.Arguments {
		p, err := parsePath(a)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: arguments[%d]: %w", where, i, err))
		}
		r.paths = append(r.paths, p)
	}
	var set []string
	for _, k := range matcherKeys {
		if _, ok := members[k]; ok {
			set = append(set, k)
		}
	}
	switch len(set) {
	case 0:
		errs = append(errs, fmt.Errorf("%s: no matcher (want one of %s)", where, strings.Join(matcherKeys, ", ")))
	case 1:
		m, err := compileMatcher(&c, set[0])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", where, set[0], err))
		}
		r.match = m
	default:
		errs = append(errs, fmt.Errorf("%s: %s: a rule has one matcher; write one rule for each", where, strings.Join(set, ", ")))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return r, nil
}

// compileMatcher builds the matcher the key names.
func compileMatcher(c *ruleConfig, key string) (matcher, error) {
	switch key {
	case "regex":
		if c.Regex == nil || *c.Regex == "" {
			return nil, errors.New("empty pattern")
		}
		re, err := regexp.Compile(*c.Regex)
		if err != nil {
			return nil, err
		}
		return regexMatcher{re}, nil
	case "glob":
		if c.Glob == nil || *c.Glob == "" {
			return nil, errors.New("empty pattern")
		}
		if _, err := path.Match(*c.Glob, ""); err != nil {
			return nil, fmt.Errorf("%q: %w", *c.Glob, err)
		}
		return globMatcher(*c.Glob), nil
	case "pathTraversal":
		return compileTraversal(c.PathTraversal)
	case "shellMetacharacters":
		if c.ShellMetacharacters == nil || !*c.ShellMetacharacters {
			return nil, errors.New("want true (a rule without a matcher blocks nothing; remove it)")
		}
		return shellMatcher{}, nil
	default: // urlAllowList
		if c.URLAllowList == nil {
			return nil, errors.New("want a list of hosts")
		}
		return compileAllowList(*c.URLAllowList)
	}
}

// compileTraversal reads `pathTraversal: true` or
// `pathTraversal: {sensitiveRoots: [...]}`.
func compileTraversal(raw json.RawMessage) (matcher, error) {
	var on bool
	if err := json.Unmarshal(raw, &on); err == nil {
		if !on {
			return nil, errors.New("want true or {sensitiveRoots: [...]} (a rule without a matcher blocks nothing; remove it)")
		}
		return traversalMatcher{}, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, errors.New("want true or {sensitiveRoots: [...]}")
	}
	if errs := unknownKeys("", obj, traversalKeys); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var roots []string
	if r, ok := obj["sensitiveRoots"]; ok {
		if err := json.Unmarshal(r, &roots); err != nil {
			return nil, errors.New("sensitiveRoots: want a list of absolute paths")
		}
	}
	var m traversalMatcher
	for i, root := range roots {
		norm := normalizePath(root)
		if !absolute(norm) {
			return nil, fmt.Errorf("sensitiveRoots[%d]: %q is not an absolute path (/…, ~/…, or C:\\…)", i, root)
		}
		norm = strings.TrimRight(norm, "/")
		if norm == "" {
			return nil, fmt.Errorf("sensitiveRoots[%d]: %q is the whole file system", i, root)
		}
		m.roots = append(m.roots, norm)
	}
	return m, nil
}

// unknownKeys names each key of members not in known, sorted.
func unknownKeys(prefix string, members map[string]json.RawMessage, known []string) []error {
	var errs []error
	for key := range members {
		if !slices.Contains(known, key) {
			errs = append(errs, fmt.Errorf("%s%s: unknown key (want one of %s)", prefix, key, strings.Join(known, ", ")))
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

// parsePath reads an argument path: keys joined by dots, `*` for any key
// or array element, a number for that array element (or that key).
func parsePath(p string) ([]segment, error) {
	if p == "" {
		return nil, errors.New("empty path")
	}
	var segs []segment
	for _, part := range strings.Split(p, ".") {
		if part == "" {
			return nil, fmt.Errorf("%q has an empty segment", p)
		}
		s := segment{key: part, index: -1}
		if n, err := strconv.Atoi(part); err == nil && n >= 0 {
			s.index = n
		}
		segs = append(segs, s)
	}
	return segs, nil
}
