// Package policy decides which principals may see and use which tools, prompts, resources and
// resource templates, from the "policy" section of the configuration. It is pure and evaluated
// on the request path: [Compile] turns a validated [config.Policy] into an immutable [Policy]
// once per configuration, and [Policy.Decide] allocates nothing.
//
// A policy has a default (allow or deny) and rules. Each rule allows or denies glob patterns
// (see [Pattern]) over the names and URIs as clients see them, or over whole servers, for some
// principals ("alice"), groups ("group:dev") or everyone (a rule without principals). A request
// is allowed when no matching rule denies it and either a matching rule allows it or the
// default is allow: deny always wins, and the order of the rules does not matter.
package policy

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/manifold-mcp/manifold/config"
)

// Kind is the kind of a name or URI a decision is about.
type Kind uint8

// The kinds of items, each matched by its own list of patterns in a rule.
const (
	Tool     Kind = iota // a namespaced tool name, matched by Match.Tools
	Prompt               // a namespaced prompt name, matched by Match.Prompts
	Resource             // a resource URI, matched by Match.Resources
	Template             // a resource template's uriTemplate, matched by Match.Templates
)

// numKinds is the number of kinds.
const numKinds = int(Template) + 1

// CallIndex returns k's index among the kinds a call names (tool 0, prompt 1,
// resource 2), for tables indexed by them; -1 for a template, which no call
// names.
func (k Kind) CallIndex() int {
	if k <= Resource {
		return int(k)
	}
	return -1
}

// String returns "tool", "prompt", "resource" or "resource template".
func (k Kind) String() string {
	switch k {
	case Tool:
		return "tool"
	case Prompt:
		return "prompt"
	case Resource:
		return "resource"
	case Template:
		return "resource template"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Decision is the outcome for one principal and one item.
type Decision struct {
	// Allowed reports whether the principal may see and use the item.
	Allowed bool
	// Rule is the index in the policy's rules of the rule that decided; -1 when the default
	// decided (or the policy is unrestricted).
	Rule int
}

// Policy is a compiled, immutable policy, safe for concurrent use. Build it with [Compile]; a
// nil *Policy is not valid.
type Policy struct {
	unrestricted bool
	defaultAllow bool
	rules        []rule
	// byKind lists, per kind, the indexes of the rules that can match an item of that kind (they
	// have patterns for the kind or for servers), deny and allow rules apart, in rule order. The
	// last entry is for unknown kinds: rules with server patterns.
	byKind [numKinds + 1]struct{ deny, allow []int }
}

// rule is a compiled config.Rule.
type rule struct {
	allow    bool
	everyone bool       // no principals listed
	who      Principals // else: the principals listed
	patterns [numKinds][]Pattern
	servers  []Pattern
	desc     string // for Describe
	label    string // for RuleName
}

// Compile compiles a validated policy. A nil cfg means no policy section: the result is
// unrestricted and allows everything. Compile keeps no reference to cfg.
func Compile(cfg *config.Policy) *Policy {
	if cfg == nil {
		return &Policy{unrestricted: true, defaultAllow: true}
	}
	p := &Policy{defaultAllow: cfg.Default == config.Allow, rules: make([]rule, len(cfg.Rules))}
	for i, cr := range cfg.Rules {
		r := &p.rules[i]
		r.allow = cr.Effect == config.Allow
		r.everyone = len(cr.Principals) == 0
		r.who = CompilePrincipals(cr.Principals)
		for k, list := range kindPatterns(cr.Match) {
			r.patterns[k] = compileAll(list)
		}
		r.servers = compileAll(cr.Match.Servers)
		r.desc = describeRule(i, cr)
		r.label = cr.Name
		if r.label == "" {
			r.label = fmt.Sprintf("policy.rules[%d]", i)
		}
		for k := range p.byKind {
			if len(r.servers) == 0 && (k == numKinds || len(r.patterns[k]) == 0) {
				continue
			}
			l := &p.byKind[k]
			if r.allow {
				l.allow = append(l.allow, i)
			} else {
				l.deny = append(l.deny, i)
			}
		}
	}
	return p
}

// kindPatterns returns m's pattern lists indexed by Kind.
func kindPatterns(m config.Match) [numKinds][]string {
	return [numKinds][]string{Tool: m.Tools, Prompt: m.Prompts, Resource: m.Resources, Template: m.Templates}
}

func compileAll(list []string) []Pattern {
	if len(list) == 0 {
		return nil
	}
	ps := make([]Pattern, len(list))
	for i, s := range list {
		ps[i] = CompilePattern(s)
	}
	return ps
}

// Unrestricted reports whether the policy was compiled from a nil config: it allows
// everything, so callers may skip evaluation and filtering.
func (p *Policy) Unrestricted() bool { return p.unrestricted }

// Decide decides whether principal pr may see and use the item of the given kind called name
// (the name or URI as clients see it) and exposed by server ("" if none). A nil pr is matched
// only by rules for everyone. A matching deny rule wins over any allow; Decision.Rule is then
// the lowest-index matching deny rule, else the lowest-index matching allow rule, else -1 for
// the default. An unknown kind is matched only by server patterns.
//
// Decide allocates nothing and takes no locks.
func (p *Policy) Decide(pr *Principal, kind Kind, name, server string) Decision {
	if p.unrestricted {
		return Decision{Allowed: true, Rule: -1}
	}
	k := min(int(kind), numKinds)
	l := &p.byKind[k]
	for _, i := range l.deny {
		if p.rules[i].matches(pr, k, name, server) {
			return Decision{Allowed: false, Rule: i}
		}
	}
	for _, i := range l.allow {
		if p.rules[i].matches(pr, k, name, server) {
			return Decision{Allowed: true, Rule: i}
		}
	}
	return Decision{Allowed: p.defaultAllow, Rule: -1}
}

// matches reports whether r applies to pr and one of its patterns for kind k matches name or
// one of its server patterns matches server.
func (r *rule) matches(pr *Principal, k int, name, server string) bool {
	if !r.appliesTo(pr) {
		return false
	}
	if k < numKinds {
		ps := r.patterns[k]
		for i := range ps {
			if ps[i].Match(name) {
				return true
			}
		}
	}
	for i := range r.servers {
		if r.servers[i].Match(server) {
			return true
		}
	}
	return false
}

// appliesTo reports whether r is for everyone, names pr, or names one of pr's groups.
func (r *rule) appliesTo(pr *Principal) bool {
	return r.everyone || r.who.Contains(pr)
}

// Describe explains d, a decision of p, for logs and `manifold policy explain`:
//
//	policy.rules[2] "no-deletes": deny tools ["*__delete_*"] for everyone
//	policy.rules[0]: allow tools ["*"] for group:dev
//	default deny
//	unrestricted (no policy)
//
// Rules are named by their configuration key, as in configuration errors.
func (p *Policy) Describe(d Decision) string {
	switch {
	case p.unrestricted:
		return "unrestricted (no policy)"
	case d.Rule < 0 && p.defaultAllow:
		return "default allow"
	case d.Rule < 0:
		return "default deny"
	case d.Rule >= len(p.rules):
		return fmt.Sprintf("policy.rules[%d]: no such rule", d.Rule)
	}
	return p.rules[d.Rule].desc
}

// RuleName returns a short name for the rule that made d, for audit records: the rule's
// name when it has one, else its key such as "policy.rules[2]"; "" when the default decided
// or the policy is unrestricted. It allocates nothing.
func (p *Policy) RuleName(d Decision) string {
	if p.unrestricted || d.Rule < 0 || d.Rule >= len(p.rules) {
		return ""
	}
	return p.rules[d.Rule].label
}

// describeRule renders rule i for Describe.
func describeRule(i int, r config.Rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy.rules[%d]", i)
	if r.Name != "" {
		b.WriteString(" " + strconv.Quote(r.Name))
	}
	b.WriteString(": " + r.Effect)
	lists := []struct {
		key      string
		patterns []string
	}{
		{"tools", r.Match.Tools},
		{"prompts", r.Match.Prompts},
		{"resources", r.Match.Resources},
		{"templates", r.Match.Templates},
		{"servers", r.Match.Servers},
	}
	sep := " "
	for _, l := range lists {
		if len(l.patterns) == 0 {
			continue
		}
		b.WriteString(sep + l.key + " [")
		for j, s := range l.patterns {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(s))
		}
		b.WriteString("]")
		sep = ", "
	}
	if len(r.Principals) == 0 {
		b.WriteString(" for everyone")
	} else {
		b.WriteString(" for " + strings.Join(r.Principals, ", "))
	}
	return b.String()
}
