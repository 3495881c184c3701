package policy_test

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/policy"
)

// This file holds slow, obviously correct reference implementations the tests compare against.

// chars splits s into characters: runes, and single bytes of invalid UTF-8.
func chars(s string) []string {
	var cs []string
	for len(s) > 0 {
		_, n := utf8.DecodeRuneInString(s)
		cs = append(cs, s[:n])
		s = s[n:]
	}
	return cs
}

// refMatch matches s against the glob pattern by dynamic programming over characters.
func refMatch(pattern, s string) bool {
	p, c := chars(pattern), chars(s)
	// m[j] reports whether p[i:] matches c[j:], computed from i = len(p) down to 0.
	m, next := make([]bool, len(c)+1), make([]bool, len(c)+1)
	m[len(c)] = true
	for i := len(p) - 1; i >= 0; i-- {
		for j := len(c); j >= 0; j-- {
			switch {
			case p[i] == "*":
				next[j] = m[j] || (j < len(c) && next[j+1])
			case j == len(c):
				next[j] = false
			case p[i] == "?":
				next[j] = m[j+1]
			default:
				next[j] = p[i] == c[j] && m[j+1]
			}
		}
		m, next = next, m
	}
	return m[0]
}

// refRegexp translates a glob pattern into an anchored regular expression. Go's regexp rejects
// patterns that are not valid UTF-8; ok is false for those.
func refRegexp(pattern string) (re *regexp.Regexp, ok bool) {
	if !utf8.ValidString(pattern) {
		return nil, false
	}
	var b strings.Builder
	b.WriteString("^")
	lit := 0
	for i := 0; i < len(pattern); i++ {
		var wild string
		switch pattern[i] {
		case '*':
			wild = "(?s:.*)"
		case '?':
			wild = "(?s:.)"
		default:
			continue
		}
		b.WriteString(regexp.QuoteMeta(pattern[lit:i]))
		b.WriteString(wild)
		lit = i + 1
	}
	b.WriteString(regexp.QuoteMeta(pattern[lit:]))
	b.WriteString("$")
	return regexp.MustCompile(b.String()), true
}

// refPrincipal is a principal for refDecide.
type refPrincipal struct {
	name   string
	groups []string
}

// refDecide decides like Policy.Decide, straight from the configuration: the set of matching
// deny rules, else the set of matching allow rules, else the default. who nil is anonymous.
func refDecide(cfg *config.Policy, who *refPrincipal, kind policy.Kind, name, server string) policy.Decision {
	if cfg == nil {
		return policy.Decision{Allowed: true, Rule: -1}
	}
	firstDeny, firstAllow := -1, -1
	for i, r := range cfg.Rules {
		if !refApplies(r, who) || !refRuleMatches(r, kind, name, server) {
			continue
		}
		if r.Effect == config.Deny && firstDeny < 0 {
			firstDeny = i
		}
		if r.Effect == config.Allow && firstAllow < 0 {
			firstAllow = i
		}
	}
	switch {
	case firstDeny >= 0:
		return policy.Decision{Allowed: false, Rule: firstDeny}
	case firstAllow >= 0:
		return policy.Decision{Allowed: true, Rule: firstAllow}
	}
	return policy.Decision{Allowed: cfg.Default == config.Allow, Rule: -1}
}

func refApplies(r config.Rule, who *refPrincipal) bool {
	if len(r.Principals) == 0 {
		return true
	}
	if who == nil {
		return false
	}
	for _, e := range r.Principals {
		if g, ok := strings.CutPrefix(e, config.GroupPrefix); ok {
			for _, have := range who.groups {
				if have == g {
					return true
				}
			}
		} else if e == who.name {
			return true
		}
	}
	return false
}

func refRuleMatches(r config.Rule, kind policy.Kind, name, server string) bool {
	var list []string
	switch kind {
	case policy.Tool:
		list = r.Match.Tools
	case policy.Prompt:
		list = r.Match.Prompts
	case policy.Resource:
		list = r.Match.Resources
	case policy.Template:
		list = r.Match.Templates
	}
	for _, p := range list {
		if refMatch(p, name) {
			return true
		}
	}
	for _, p := range r.Match.Servers {
		if refMatch(p, server) {
			return true
		}
	}
	return false
}

// permute returns a copy of cfg with its rules reordered: rule i of the result is rule perm[i]
// of cfg.
func permute(cfg *config.Policy, perm []int) *config.Policy {
	out := &config.Policy{Default: cfg.Default, Rules: make([]config.Rule, len(perm))}
	for i, j := range perm {
		out.Rules[i] = cfg.Rules[j]
	}
	return out
}
