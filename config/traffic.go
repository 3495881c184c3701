package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Pinning modes (Pinning.Mode, ServerPinning.Mode).
const (
	PinningOff   = "off"
	PinningWarn  = "warn"
	PinningBlock = "block"
)

// What happens to a tool or prompt the pin file has never seen (Pinning.NewTools).
const (
	NewToolsAllow = "allow"
	NewToolsHold  = "hold"
)

// Scopes of a rate limit (RateLimit.Scope).
const (
	ScopePrincipal = "principal"
	ScopeGlobal    = "global"
)

// keyRateLimits is the top-level key of the rate limits.
const keyRateLimits = "rateLimits"

// Pinning is the "gateway.pinning" section: tool and prompt definitions as upstreams serve
// them are hashed and compared with the approved ones recorded in File.
type Pinning struct {
	// Mode is PinningOff (default), PinningWarn (a changed definition is logged, audited and
	// counted, and served) or PinningBlock (a changed definition is also hidden until approved).
	Mode string
	// File (key "file") is the pin file; required when any server pins, unless Store is set.
	File string
	// Store (key "store") is StoreCluster to keep the pins in the cluster's shared store
	// (gateway.cluster.store) instead of a file: what several replicas need.
	Store string
	// NewTools (key "newTools") is NewToolsAllow (default: a definition seen for the first
	// time is approved) or NewToolsHold (it waits for approval, hidden).
	NewTools string
}

// ServerPinning is a server's "pinning" key: it overrides Mode and NewTools of
// gateway.pinning for that server; empty fields inherit.
type ServerPinning struct {
	Mode     string
	NewTools string
}

// PinningOf returns the pinning mode and new-tools rule in force for server s: its own
// when set, else the gateway's, else PinningOff and NewToolsAllow.
func (c *Config) PinningOf(s Server) (mode, newTools string) {
	mode, newTools = c.Gateway.Pinning.Mode, c.Gateway.Pinning.NewTools
	if s.Pinning.Mode != "" {
		mode = s.Pinning.Mode
	}
	if s.Pinning.NewTools != "" {
		newTools = s.Pinning.NewTools
	}
	if mode == "" {
		mode = PinningOff
	}
	if newTools == "" {
		newTools = NewToolsAllow
	}
	return mode, newTools
}

// Pins reports whether any enabled server pins its definitions (mode other than off).
func (c *Config) Pins() bool {
	for _, s := range c.Servers {
		if mode, _ := c.PinningOf(s); !s.Disabled && mode != PinningOff {
			return true
		}
	}
	return false
}

// RateLimit is one entry of the top-level "rateLimits" list: calls (tools/call, prompts/get,
// resources/read) of the matching principals to the matching names share a token bucket.
type RateLimit struct {
	// Principals lists principal names and "group:<name>" entries; empty means everyone.
	Principals []string
	// Tools, Prompts and Resources are glob patterns over names and URIs as clients see
	// them; Servers over server names (every call to the server). With none of the four the
	// limit applies to every call.
	Tools     []string
	Prompts   []string
	Resources []string
	Servers   []string
	// Rate is "N/s", "N/m" or "N/h" (N a whole number of calls, at least 1); empty for a
	// limit of MaxConcurrent only.
	Rate string
	// Burst is how many calls may arrive at once on a full bucket; default N of Rate.
	Burst int
	// Scope is ScopePrincipal (default: a bucket per principal) or ScopeGlobal (one bucket
	// for everyone matching).
	Scope string
	// MaxConcurrent (key "maxConcurrent") caps the calls in flight per bucket; 0 means no cap.
	MaxConcurrent int
}

// ParseRate parses a rate limit's rate, "N/s", "N/m" or "N/h", into the number of calls and
// the period they are spread over.
func ParseRate(s string) (n int, per time.Duration, err error) {
	count, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, 0, fmt.Errorf(`must be "N/s", "N/m" or "N/h"`)
	}
	n, err = strconv.Atoi(strings.TrimSpace(count))
	if err != nil || n < 1 || n > 1_000_000_000 {
		return 0, 0, fmt.Errorf("the number of calls must be a whole number from 1 to 1000000000")
	}
	switch strings.TrimSpace(unit) {
	case "s":
		per = time.Second
	case "m":
		per = time.Minute
	case "h":
		per = time.Hour
	default:
		return 0, 0, fmt.Errorf(`the period must be s, m or h, as in "20/s" or "100/m"`)
	}
	return n, per, nil
}

// EffectiveBurst returns Burst, or the N of Rate when Burst is 0 (1 for a rate that does not
// parse).
func (r RateLimit) EffectiveBurst() int {
	if r.Burst > 0 {
		return r.Burst
	}
	n, _, err := ParseRate(r.Rate)
	if err != nil {
		return 1
	}
	return n
}

func pinningFields(p *Pinning) []field {
	return []field{
		{name: "mode", ptr: &p.Mode},
		{name: "file", ptr: &p.File},
		{name: "store", ptr: &p.Store},
		{name: "newTools", ptr: &p.NewTools},
	}
}

func serverPinningFields(p *ServerPinning) []field {
	return []field{
		{name: "mode", ptr: &p.Mode},
		{name: "newTools", ptr: &p.NewTools},
	}
}

// rateLimits decodes the top-level rateLimits list.
func (d *decoder) rateLimits(key string, v any) []RateLimit {
	var out []RateLimit
	d.list(key, v, func(ik string, e any) {
		var r RateLimit
		if m, ok := asMap(e); ok {
			if l, ok := m["principals"].([]any); ok && len(l) == 0 {
				d.fail(joinKey(ik, "principals"), "an empty list matches no one: remove the key to mean everyone")
				delete(m, "principals")
			}
		}
		d.section(ik, []field{
			{name: "principals", ptr: &r.Principals},
			{name: "tools", ptr: &r.Tools},
			{name: "prompts", ptr: &r.Prompts},
			{name: "resources", ptr: &r.Resources},
			{name: "servers", ptr: &r.Servers},
			{name: "rate", ptr: &r.Rate},
			{name: "burst", ptr: &r.Burst},
			{name: "scope", ptr: &r.Scope},
			{name: "maxConcurrent", ptr: &r.MaxConcurrent},
		}, e)
		out = append(out, r)
	})
	return out
}

// traffic checks gateway.pinning, each server's pinning and the rate limits.
func (v *validator) traffic(c *Config, section string) {
	v.pinningMode("gateway.pinning.mode", c.Gateway.Pinning.Mode)
	v.newTools("gateway.pinning.newTools", c.Gateway.Pinning.NewTools)
	for name, s := range c.Servers {
		key := joinKey(joinKey(section, name), "pinning")
		v.pinningMode(key+".mode", s.Pinning.Mode)
		v.newTools(key+".newTools", s.Pinning.NewTools)
	}
	if c.Pins() && strings.TrimSpace(c.Gateway.Pinning.File) == "" && c.Gateway.Pinning.Store == "" {
		v.add("gateway.pinning.file", "is required while a server pins its definitions (mode warn or block), or store: cluster with several replicas")
	}
	for i, r := range c.RateLimits {
		key := fmt.Sprintf("%s[%d]", keyRateLimits, i)
		if v.failed[key] {
			continue
		}
		if r.Rate == "" && r.MaxConcurrent == 0 {
			v.add(key, "set rate, maxConcurrent or both: this limit limits nothing")
		}
		if r.Rate != "" {
			if _, _, err := ParseRate(r.Rate); err != nil {
				v.add(key+".rate", err.Error())
			}
		} else if r.Burst != 0 {
			v.add(key+".burst", "needs a rate")
		}
		if r.Burst < 0 {
			v.add(key+".burst", "must not be negative (0 means the N of rate)")
		}
		if r.MaxConcurrent < 0 {
			v.add(key+".maxConcurrent", "must not be negative (0 means no cap)")
		}
		switch r.Scope {
		case "", ScopePrincipal, ScopeGlobal:
		default:
			v.add(key+".scope", "must be principal or global")
		}
		for j, pr := range r.Principals {
			v.principalEntry(fmt.Sprintf("%s.principals[%d]", key, j), pr)
		}
		for _, list := range [][]string{r.Tools, r.Prompts, r.Resources, r.Servers} {
			for _, p := range list {
				if p == "" {
					v.add(key, "an empty pattern matches nothing; remove it")
				}
			}
		}
	}
}

func (v *validator) pinningMode(key, mode string) {
	switch mode {
	case "", PinningOff, PinningWarn, PinningBlock:
	default:
		v.add(key, "must be off, warn or block")
	}
}

func (v *validator) newTools(key, s string) {
	switch s {
	case "", NewToolsAllow, NewToolsHold:
	default:
		v.add(key, "must be allow or hold")
	}
}
