package policy_test

import (
	"testing"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/policy"
)

// benchPolicy is the issue's example policy plus 20 rules of every pattern shape, some for
// named principals, some for groups, some for everyone.
func benchPolicy() *config.Policy {
	cfg := issuePolicy()
	allow := func(m config.Match, principals ...string) config.Rule {
		return config.Rule{Effect: config.Allow, Match: m, Principals: principals}
	}
	deny := func(m config.Match, principals ...string) config.Rule {
		return config.Rule{Effect: config.Deny, Match: m, Principals: principals}
	}
	cfg.Rules = append(cfg.Rules,
		allow(config.Match{Tools: []string{"github__get_issue", "github__list_issues"}}, "group:triage"),
		allow(config.Match{Tools: []string{"github__*"}}, "carol", "dave"),
		deny(config.Match{Tools: []string{"*_force_push"}}),
		deny(config.Match{Tools: []string{"*__drop_*"}}, "group:contractor", "group:intern"),
		allow(config.Match{Tools: []string{"slack__post_?_message"}}, "group:comms"),
		deny(config.Match{Tools: []string{"shell__*rm*-rf*"}}),
		allow(config.Match{Tools: []string{"jira__*_ticket"}}, "group:pm"),
		allow(config.Match{Prompts: []string{"*"}}),
		deny(config.Match{Prompts: []string{"*__admin_*"}}, "group:contractor"),
		allow(config.Match{Resources: []string{"manifold://fs/file:///srv/public/*"}}),
		deny(config.Match{Resources: []string{"*/.env", "*/.ssh/*", "*.pem"}}),
		allow(config.Match{Templates: []string{"manifold://fs/*{path}"}}, "group:dev"),
		allow(config.Match{Servers: []string{"weather"}}),
		deny(config.Match{Servers: []string{"prod-*"}}, "group:contractor", "group:intern", "erin"),
		allow(config.Match{Servers: []string{"staging-*"}}, "group:qa"),
		allow(config.Match{Tools: []string{"memory__search_nodes", "memory__open_nodes"}}, "frank"),
		deny(config.Match{Tools: []string{"*__exec", "*__eval"}}, "group:intern"),
		allow(config.Match{Tools: []string{"k8s__get_*", "k8s__describe_*"}}, "group:sre", "group:oncall"),
		deny(config.Match{Tools: []string{"k8s__*_secret*"}}, "group:sre"),
		allow(config.Match{Tools: []string{"*__ping"}}),
	)
	return cfg
}

// benchCases are the decisions benchmarked and checked for allocations.
var benchCases = []struct {
	name   string
	who    *policy.Principal
	kind   policy.Kind
	item   string
	server string
}{
	{name: "allowed by rule", who: bob, kind: policy.Tool, item: "memory__read_graph", server: "memory"},
	{name: "allowed by late rule", who: policy.NewPrincipal("gina", []string{"intern", "oncall", "sre"}), kind: policy.Tool, item: "k8s__get_pods", server: "k8s"},
	{name: "denied by rule", who: alice, kind: policy.Tool, item: "memory__delete_entities", server: "memory"},
	{name: "default", who: bob, kind: policy.Tool, item: "everything__get-env", server: "everything"},
	{name: "anonymous default", who: nil, kind: policy.Tool, item: "everything__get-env", server: "everything"},
	{name: "resource denied", who: alice, kind: policy.Resource, item: "manifold://fs/file:///srv/public/.env", server: "fs"},
}

func BenchmarkDecide(b *testing.B) {
	p := policy.Compile(benchPolicy())
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Decide(c.who, c.kind, c.item, c.server)
			}
		})
	}
	b.Run("unrestricted", func(b *testing.B) {
		u := policy.Compile(nil)
		b.ReportAllocs()
		for b.Loop() {
			u.Decide(alice, policy.Tool, "everything__echo", "everything")
		}
	})
}

func BenchmarkPatternMatch(b *testing.B) {
	benchmarks := []struct {
		name    string
		pattern string
		in      string
	}{
		{name: "exact", pattern: "everything__echo", in: "everything__echo"},
		{name: "any", pattern: "*", in: "everything__echo"},
		{name: "prefix", pattern: "memory__read_*", in: "memory__read_graph"},
		{name: "suffix", pattern: "*_graph", in: "memory__read_graph"},
		{name: "infix", pattern: "*__delete_*", in: "memory__delete_entities"},
		{name: "prefix-suffix", pattern: "github__*_issue", in: "github__create_issue"},
		{name: "general", pattern: "shell__*rm*-rf*", in: "shell__run_rm_-rf_tmp"},
		{name: "general question", pattern: "slack__post_?_message", in: "slack__post_a_message"},
		{name: "general miss", pattern: "*a*a*a*b", in: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
		{name: "general URI", pattern: "manifold://fs/file:///*/.ssh/*", in: "manifold://fs/file:///home/alice/.ssh/id_ed25519"},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			p := policy.CompilePattern(bm.pattern)
			b.ReportAllocs()
			for b.Loop() {
				p.Match(bm.in)
			}
		})
	}
}
