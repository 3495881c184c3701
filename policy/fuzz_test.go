package policy_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/policy"
)

// FuzzPattern compares Pattern.Match with two references: a dynamic program over characters,
// and, where Go's regexp can express the pattern, an anchored regular expression.
func FuzzPattern(f *testing.F) {
	seeds := []struct{ pattern, in string }{
		{"everything__echo", "everything__echo"},
		{"everything__echo", "Everything__echo"},
		{"*", ""},
		{"**", "a"},
		{"memory__read_*", "memory__read_graph"},
		{"*_graph", "memory__read_graph"},
		{"*__delete_*", "memory__delete_entities"},
		{"gh__*_issue", "gh__issue"},
		{"ab*ba", "aba"},
		{"a*b*c", "abcbc"},
		{"*a*ab", "aaaaab"},
		{"caf?", "café"},
		{"*??", "€"},
		{"?", "\xe2\x82"},
		{"a?b", "a\xffb"},
		{"a\uFFFDb", "a\xffb"},
		{"\xc3*", "\u00c0"},
		{"*\x80", "a\x80"},
		{"*\u0435cho", "echo"},
		{`a.b+c(d)[e]\f^$|{1}`, `a.b+c(d)[e]\f^$|{1}`},
		{"file:///*.md", "file:///home/a/b.md"},
		{"*a*a*a*a*a*b", strings.Repeat("a", 40)},
	}
	for _, s := range seeds {
		f.Add(s.pattern, s.in)
	}
	f.Fuzz(func(t *testing.T, pattern, in string) {
		p := policy.CompilePattern(pattern)
		got := p.Match(in) // must not panic
		if p.String() != pattern {
			t.Fatalf("CompilePattern(%q).String() = %q", pattern, p.String())
		}
		if len(pattern)*len(in) <= 1<<16 { // keeps minimisation quick
			if want := refMatch(pattern, in); got != want {
				t.Fatalf("CompilePattern(%q).Match(%q) = %v, reference says %v", pattern, in, got, want)
			}
		}
		// Go's regexp reads an invalid byte of the input as U+FFFD, which then matches a U+FFFD
		// in the pattern; for the glob it is a different character.
		if re, ok := refRegexp(pattern); ok && !(strings.ContainsRune(pattern, utf8.RuneError) && !utf8.ValidString(in)) {
			if want := re.MatchString(in); got != want {
				t.Fatalf("CompilePattern(%q).Match(%q) = %v, regexp %s says %v", pattern, in, got, re, want)
			}
		}
		// A pattern matches its own text with '*' removed and '?' replaced by one character.
		if utf8.ValidString(pattern) {
			lit := strings.NewReplacer("*", "", "?", "é").Replace(pattern)
			if !p.Match(lit) {
				t.Fatalf("CompilePattern(%q).Match(%q) = false, want true", pattern, lit)
			}
		}
	})
}

// FuzzDecide builds a four-rule policy from fuzzed patterns and checks the deny-wins
// invariants: any matching deny rule denies, the lowest-index one is named, and neither the
// decision nor the effect of the deciding rule depends on the order of the rules.
func FuzzDecide(f *testing.F) {
	f.Add("*", "*__delete_*", "memory__*", "memory__delete_x", "memory", "alice", uint32(0x0000_1234))
	f.Add("everything__echo", "*", "memory__read_*", "everything__echo", "everything", "bob", uint32(0xdead_beef))
	f.Add("a?c", "*c", "b*", "abc", "srv", "group:dev", uint32(0xffff_ffff))
	f.Add("", "x", "\xff*", "\xff", "", "", uint32(0x5555_5555))
	f.Fuzz(func(t *testing.T, p0, p1, p2, item, server, who string, sel uint32) {
		patterns := []string{p0, p1, p2, "*"}
		cfg := &config.Policy{Default: config.Deny}
		if sel&1 != 0 {
			cfg.Default = config.Allow
		}
		sel >>= 1
		for i := range 4 {
			var r config.Rule
			r.Effect = config.Allow
			if sel&1 != 0 {
				r.Effect = config.Deny
			}
			pat := []string{patterns[(i+int(sel>>1))%len(patterns)]}
			switch (sel >> 3) % 5 {
			case 0:
				r.Match.Tools = pat
			case 1:
				r.Match.Prompts = pat
			case 2:
				r.Match.Resources = pat
			case 3:
				r.Match.Templates = pat
			case 4:
				r.Match.Servers = pat
			}
			switch (sel >> 6) & 3 {
			case 1:
				r.Principals = []string{who}
			case 2:
				r.Principals = []string{config.GroupPrefix + who}
			case 3:
				r.Principals = []string{"someone-else", config.GroupPrefix + "other"}
			}
			cfg.Rules = append(cfg.Rules, r)
			sel = sel>>5 | sel<<27 // rotate, so each rule reads other bits
		}
		kind := policy.Kind(sel % 4)
		var groups []string
		if sel&4 != 0 {
			groups = []string{who, "other"}
		}
		principals := []*policy.Principal{nil, policy.NewPrincipal(who, groups), policy.NewPrincipal(config.GroupPrefix+who, nil)}

		p := policy.Compile(cfg)
		for _, pr := range principals {
			d := p.Decide(pr, kind, item, server)
			ref := refOf(pr)
			if want := refDecide(cfg, ref, kind, item, server); d != want {
				t.Fatalf("Decide(%q, %v, %q, %q) = %+v, want %+v; policy %+v", pr.Name(), kind, item, server, d, want, cfg)
			}
			for i, r := range cfg.Rules {
				if r.Effect == config.Deny && refApplies(r, ref) && refRuleMatches(r, kind, item, server) && (d.Allowed || d.Rule > i) {
					t.Fatalf("Decide(%q, %v, %q, %q) = %+v, but rule %d denies; policy %+v", pr.Name(), kind, item, server, d, i, cfg)
				}
			}
			for _, perm := range permutations(len(cfg.Rules)) {
				shuffled := permute(cfg, perm)
				got := policy.Compile(shuffled).Decide(pr, kind, item, server)
				if got.Allowed != d.Allowed || (got.Rule < 0) != (d.Rule < 0) ||
					(got.Rule >= 0 && shuffled.Rules[got.Rule].Effect != cfg.Rules[d.Rule].Effect) {
					t.Fatalf("rules in order %v: Decide(%q, %v, %q, %q) = %+v, in the original order %+v; policy %+v", perm, pr.Name(), kind, item, server, got, d, cfg)
				}
				if want := refDecide(shuffled, ref, kind, item, server); got != want {
					t.Fatalf("rules in order %v: Decide(%q, %v, %q, %q) = %+v, want %+v; policy %+v", perm, pr.Name(), kind, item, server, got, want, cfg)
				}
			}
		}
	})
}

// permutations returns every permutation of 0…n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := make([]int, 0, n)
			q = append(q, p[:i]...)
			q = append(q, n-1)
			q = append(q, p[i:]...)
			out = append(out, q)
		}
	}
	return out
}
