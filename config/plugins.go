package config

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Plugin modes and error behaviours (keys mode and onError of a plugin).
const (
	PluginEnforce    = "enforce"
	PluginObserve    = "observe"
	PluginFailClosed = "fail-closed"
	PluginFailOpen   = "fail-open"
)

// Plugin defaults.
const (
	DefaultPluginTimeout = 200 * time.Millisecond
)

// Plugin is one entry of the plugins list: an out-of-process hook the gateway runs on the calls
// and lists it matches (package plugins).
type Plugin struct {
	// Name identifies the plugin in logs, metrics, the audit record and /status. Unique.
	Name string
	// Builtin names a plugin shipped in the manifold binary (run as `manifold plugin NAME`);
	// exactly one of Builtin and Command is set.
	Builtin string
	// Command is the plugin's executable and its arguments.
	Command []string
	// SHA256 is the hex SHA-256 of Command[0]'s file, required with Command: a file that does
	// not match is not started.
	SHA256 string
	// Match says which calls and lists the plugin sees; empty matches everything.
	Match PluginMatch
	// Mode is PluginEnforce (default) or PluginObserve: an observing plugin runs, and what it
	// would do is logged and audited, but nothing is changed or blocked.
	Mode string
	// OnError is PluginFailClosed (default) or PluginFailOpen: what a call the plugin covers
	// gets while the plugin errs, times out or is down.
	OnError string
	// Timeout bounds one hook call. Default DefaultPluginTimeout.
	Timeout time.Duration
	// Priority orders the plugins: lower runs first; equal priorities run in list order.
	Priority int
	// Env is the plugin's whole environment: it inherits nothing of the gateway's.
	Env map[string]string
	// Config is the plugin's own configuration, as JSON; sent to it at start and on reload.
	Config json.RawMessage
}

// PluginMatch selects what a plugin sees: every non-empty list must match (globs as in policy
// rules, on the namespaced names; principals as in policy rules).
type PluginMatch struct {
	Servers    []string
	Tools      []string
	Prompts    []string
	Resources  []string
	Principals []string
}

// pluginName is the form of a plugin's name: it appears in metrics and logs.
var pluginName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// plugins decodes the plugins list.
func (d *decoder) plugins(key string, v any) []Plugin {
	var out []Plugin
	d.list(key, v, func(pk string, e any) {
		m, ok := d.mapping(pk, e)
		if !ok {
			return
		}
		p := Plugin{}
		rest := map[string]any{}
		for k, e := range m {
			switch k {
			case "command":
				if s, ok := e.(string); ok { // one string: the executable alone
					e = []any{s}
				}
				rest[k] = e
			case "config":
				if e == nil {
					continue
				}
				if _, ok := asMap(e); !ok {
					d.fail(joinKey(pk, k), "must be a mapping of keys to values")
					continue
				}
				x, ok := d.expandTree(joinKey(pk, k), e)
				if !ok {
					continue
				}
				b, err := json.Marshal(x)
				if err != nil {
					d.fail(joinKey(pk, k), "cannot be encoded as JSON: "+err.Error())
					continue
				}
				p.Config = b
			default:
				rest[k] = e
			}
		}
		d.section(pk, pluginFields(&p), rest)
		p.applyDefaults()
		out = append(out, p)
	})
	return out
}

// expandTree expands the ${VAR} references in every string of v, at any depth.
func (d *decoder) expandTree(key string, v any) (any, bool) {
	if m, ok := asMap(v); ok {
		out, ok := make(map[string]any, len(m)), true
		for _, k := range sortedKeys(m) {
			e, eok := d.expandTree(joinKey(key, k), m[k])
			out[k], ok = e, ok && eok
		}
		return out, ok
	}
	if l, isList := v.([]any); isList {
		out, ok := make([]any, len(l)), true
		for i, e := range l {
			x, eok := d.expandTree(fmt.Sprintf("%s[%d]", key, i), e)
			out[i], ok = x, ok && eok
		}
		return out, ok
	}
	return d.expand(key, v)
}

func pluginFields(p *Plugin) []field {
	return []field{
		{name: "name", ptr: &p.Name},
		{name: "builtin", ptr: &p.Builtin},
		{name: "command", ptr: &p.Command},
		{name: "sha256", ptr: &p.SHA256},
		{name: "match", sub: []field{
			{name: "servers", ptr: &p.Match.Servers},
			{name: "tools", ptr: &p.Match.Tools},
			{name: "prompts", ptr: &p.Match.Prompts},
			{name: "resources", ptr: &p.Match.Resources},
			{name: "principals", ptr: &p.Match.Principals},
		}},
		{name: "mode", ptr: &p.Mode},
		{name: "onError", ptr: &p.OnError},
		{name: "timeout", ptr: &p.Timeout},
		{name: "priority", ptr: &p.Priority},
		{name: "env", ptr: &p.Env},
		{name: "config"},
	}
}

// applyDefaults fills in a plugin's mode, onError and timeout.
func (p *Plugin) applyDefaults() {
	if p.Mode == "" {
		p.Mode = PluginEnforce
	}
	if p.OnError == "" {
		p.OnError = PluginFailClosed
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultPluginTimeout
	}
	p.SHA256 = strings.ToLower(p.SHA256)
}

// BuiltinPlugins are the names `builtin:` accepts; package plugins/builtin implements them.
var BuiltinPlugins = []string{"redact", "guard"}

// plugins validates the plugins list.
func (v *validator) plugins(list []Plugin) {
	seen := map[string]int{}
	for i, p := range list {
		key := fmt.Sprintf("plugins[%d]", i)
		switch {
		case p.Name == "":
			v.add(joinKey(key, "name"), "is required")
		case !pluginName.MatchString(p.Name):
			v.add(joinKey(key, "name"), "must be 1 to 63 letters, digits, '_', '.' or '-', starting with a letter or digit")
		default:
			if first, ok := seen[p.Name]; ok {
				v.add(joinKey(key, "name"), fmt.Sprintf("%q is also the name of plugins[%d]", p.Name, first))
			} else {
				seen[p.Name] = i
			}
		}
		switch {
		case p.Builtin != "" && len(p.Command) > 0:
			v.add(key, "has both builtin and command: set one")
		case p.Builtin != "":
			if !slices.Contains(BuiltinPlugins, p.Builtin) {
				v.add(joinKey(key, "builtin"), fmt.Sprintf("unknown builtin %q (known: %s)", p.Builtin, strings.Join(BuiltinPlugins, ", ")))
			}
			if p.SHA256 != "" {
				v.add(joinKey(key, "sha256"), "is for command: a builtin runs the manifold binary itself")
			}
		case len(p.Command) > 0:
			if p.Command[0] == "" {
				v.add(joinKey(key, "command"), "the executable must not be empty")
			}
			if p.SHA256 == "" {
				v.add(joinKey(key, "sha256"), "is required with command: the hex SHA-256 of the executable (sha256sum FILE)")
			} else if b, err := hex.DecodeString(p.SHA256); err != nil || len(b) != 32 {
				v.add(joinKey(key, "sha256"), "must be 64 hex digits")
			}
		default:
			v.add(key, "needs builtin or command")
		}
		if p.Mode != PluginEnforce && p.Mode != PluginObserve {
			v.add(joinKey(key, "mode"), fmt.Sprintf("must be %q or %q", PluginEnforce, PluginObserve))
		}
		if p.OnError != PluginFailClosed && p.OnError != PluginFailOpen {
			v.add(joinKey(key, "onError"), fmt.Sprintf("must be %q or %q", PluginFailClosed, PluginFailOpen))
		}
		if p.Timeout < 0 {
			v.add(joinKey(key, "timeout"), "must not be negative")
		}
		for _, pr := range p.Match.Principals {
			v.principalEntry(joinKey(joinKey(key, "match"), "principals"), pr)
		}
	}
}
