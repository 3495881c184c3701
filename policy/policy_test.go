package policy_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/policy"
)

// issuePolicy is the example of the product issue.
func issuePolicy() *config.Policy {
	return &config.Policy{
		Default: config.Deny,
		Rules: []config.Rule{
			{Effect: config.Allow, Match: config.Match{Tools: []string{"*"}}, Principals: []string{"group:dev"}},
			{Effect: config.Allow, Match: config.Match{Tools: []string{"everything__echo", "memory__read_*"}}, Principals: []string{"group:contractor"}},
			{Effect: config.Deny, Match: config.Match{Tools: []string{"*__delete_*"}}, Name: "no-deletes"},
		},
	}
}

var (
	alice = policy.NewPrincipal("alice", []string{"dev"})
	bob   = policy.NewPrincipal("bob", []string{"contractor"})
)

func TestDecide(t *testing.T) {
	mixed := &config.Policy{
		Default: config.Deny,
		Rules: []config.Rule{
			{Effect: config.Allow, Match: config.Match{Servers: []string{"memory"}}, Principals: []string{"carol"}},
			{Effect: config.Allow, Match: config.Match{Prompts: []string{"everything__*"}}},
			{Effect: config.Allow, Match: config.Match{Resources: []string{"manifold://fs/file:///public/*"}}, Principals: []string{"group:dev"}},
			{Effect: config.Allow, Match: config.Match{Templates: []string{"manifold://fs/file:///{path}"}}, Principals: []string{"group:dev"}},
			{Effect: config.Deny, Match: config.Match{Servers: []string{"secret*"}}, Principals: []string{"group:dev", "carol"}},
			{Effect: config.Deny, Match: config.Match{Prompts: []string{"*__admin"}, Resources: []string{"*/.env"}}},
		},
	}
	defaultAllow := &config.Policy{
		Default: config.Allow,
		Rules: []config.Rule{
			{Effect: config.Deny, Match: config.Match{Tools: []string{"*__delete_*"}}},
			{Effect: config.Allow, Match: config.Match{Tools: []string{"everything__*"}}, Principals: []string{"alice"}},
		},
	}
	carol := policy.NewPrincipal("carol", nil)
	impostor := policy.NewPrincipal("group:dev", nil) // a name, not the group
	tests := []struct {
		name   string
		policy *config.Policy
		who    *policy.Principal
		kind   policy.Kind
		item   string
		server string
		want   policy.Decision
	}{
		// The issue's example.
		{name: "dev allowed by rule 0", policy: issuePolicy(), who: alice, kind: policy.Tool, item: "everything__get-env", server: "everything", want: policy.Decision{Allowed: true, Rule: 0}},
		{name: "dev denied deletes by rule 2", policy: issuePolicy(), who: alice, kind: policy.Tool, item: "memory__delete_entities", server: "memory", want: policy.Decision{Allowed: false, Rule: 2}},
		{name: "contractor allowed echo", policy: issuePolicy(), who: bob, kind: policy.Tool, item: "everything__echo", server: "everything", want: policy.Decision{Allowed: true, Rule: 1}},
		{name: "contractor allowed read prefix", policy: issuePolicy(), who: bob, kind: policy.Tool, item: "memory__read_graph", server: "memory", want: policy.Decision{Allowed: true, Rule: 1}},
		{name: "contractor denied by default", policy: issuePolicy(), who: bob, kind: policy.Tool, item: "everything__get-env", server: "everything", want: policy.Decision{Allowed: false, Rule: -1}},
		{name: "contractor denied deletes", policy: issuePolicy(), who: bob, kind: policy.Tool, item: "memory__delete_x", server: "memory", want: policy.Decision{Allowed: false, Rule: 2}},
		{name: "case matters", policy: issuePolicy(), who: bob, kind: policy.Tool, item: "Everything__echo", server: "everything", want: policy.Decision{Allowed: false, Rule: -1}},
		{name: "look-alike does not match", policy: issuePolicy(), who: bob, kind: policy.Tool, item: "\u0435verything__echo", server: "everything", want: policy.Decision{Allowed: false, Rule: -1}},
		{name: "a principal named group:dev is not in group dev", policy: issuePolicy(), who: impostor, kind: policy.Tool, item: "everything__get-env", server: "everything", want: policy.Decision{Allowed: false, Rule: -1}},
		{name: "no groups", policy: issuePolicy(), who: policy.NewPrincipal("dev", nil), kind: policy.Tool, item: "everything__echo", server: "everything", want: policy.Decision{Allowed: false, Rule: -1}},
		{name: "nil principal gets rules for everyone only", policy: issuePolicy(), who: nil, kind: policy.Tool, item: "everything__echo", server: "everything", want: policy.Decision{Allowed: false, Rule: -1}},
		{name: "nil principal denied by rule for everyone", policy: issuePolicy(), who: nil, kind: policy.Tool, item: "x__delete_y", server: "x", want: policy.Decision{Allowed: false, Rule: 2}},
		{name: "tools patterns never match a prompt", policy: issuePolicy(), who: alice, kind: policy.Prompt, item: "everything__get-env", server: "everything", want: policy.Decision{Allowed: false, Rule: -1}},
		{name: "tools patterns never match a resource", policy: issuePolicy(), who: alice, kind: policy.Resource, item: "test://x", server: "everything", want: policy.Decision{Allowed: false, Rule: -1}},
		{name: "deny tools pattern never denies a prompt", policy: issuePolicy(), who: alice, kind: policy.Prompt, item: "memory__delete_x", server: "memory", want: policy.Decision{Allowed: false, Rule: -1}},

		// Servers and the other kinds.
		{name: "server pattern matches a tool", policy: mixed, who: carol, kind: policy.Tool, item: "memory__read_graph", server: "memory", want: policy.Decision{Allowed: true, Rule: 0}},
		{name: "server pattern matches a template", policy: mixed, who: carol, kind: policy.Template, item: "manifold://memory/x/{id}", server: "memory", want: policy.Decision{Allowed: true, Rule: 0}},
		{name: "server pattern over the server, not the name", policy: mixed, who: carol, kind: policy.Tool, item: "memory__read_graph", server: "other", want: policy.Decision{Allowed: false, Rule: -1}},
		{name: "server deny wins over allow", policy: mixed, who: carol, kind: policy.Prompt, item: "everything__hello", server: "secrets", want: policy.Decision{Allowed: false, Rule: 4}},
		{name: "server deny for a group", policy: mixed, who: alice, kind: policy.Resource, item: "manifold://fs/file:///public/a", server: "secret-fs", want: policy.Decision{Allowed: false, Rule: 4}},
		{name: "server deny not for others", policy: mixed, who: bob, kind: policy.Prompt, item: "everything__hello", server: "secrets", want: policy.Decision{Allowed: true, Rule: 1}},
		{name: "prompt allowed for everyone", policy: mixed, who: nil, kind: policy.Prompt, item: "everything__hello", server: "everything", want: policy.Decision{Allowed: true, Rule: 1}},
		{name: "prompt deny", policy: mixed, who: bob, kind: policy.Prompt, item: "everything__admin", server: "everything", want: policy.Decision{Allowed: false, Rule: 5}},
		{name: "prompts pattern never matches a tool", policy: mixed, who: bob, kind: policy.Tool, item: "everything__hello", server: "everything", want: policy.Decision{Allowed: false, Rule: -1}},
		{name: "resource allowed", policy: mixed, who: alice, kind: policy.Resource, item: "manifold://fs/file:///public/docs/a.md", server: "fs", want: policy.Decision{Allowed: true, Rule: 2}},
		{name: "resource deny in the same rule as a prompt deny", policy: mixed, who: alice, kind: policy.Resource, item: "manifold://fs/file:///public/.env", server: "fs", want: policy.Decision{Allowed: false, Rule: 5}},
		{name: "resource pattern never matches a template", policy: mixed, who: alice, kind: policy.Template, item: "manifold://fs/file:///public/*", server: "fs", want: policy.Decision{Allowed: false, Rule: -1}},
		{name: "template allowed literally", policy: mixed, who: alice, kind: policy.Template, item: "manifold://fs/file:///{path}", server: "fs", want: policy.Decision{Allowed: true, Rule: 3}},
		{name: "template pattern never matches a resource", policy: mixed, who: alice, kind: policy.Resource, item: "manifold://fs/file:///{path}", server: "fs", want: policy.Decision{Allowed: false, Rule: -1}},
		{name: "unknown kind matches servers only", policy: mixed, who: carol, kind: policy.Kind(9), item: "memory__x", server: "memory", want: policy.Decision{Allowed: true, Rule: 0}},
		{name: "unknown kind no server rule", policy: mixed, who: bob, kind: policy.Kind(9), item: "everything__hello", server: "everything", want: policy.Decision{Allowed: false, Rule: -1}},

		// Default allow.
		{name: "default allow", policy: defaultAllow, who: bob, kind: policy.Tool, item: "everything__echo", server: "everything", want: policy.Decision{Allowed: true, Rule: -1}},
		{name: "default allow names the allow rule", policy: defaultAllow, who: alice, kind: policy.Tool, item: "everything__echo", server: "everything", want: policy.Decision{Allowed: true, Rule: 1}},
		{name: "default allow with deny", policy: defaultAllow, who: alice, kind: policy.Tool, item: "everything__delete_all", server: "everything", want: policy.Decision{Allowed: false, Rule: 0}},
		{name: "default allow other kinds", policy: defaultAllow, who: nil, kind: policy.Prompt, item: "x__delete_y", server: "x", want: policy.Decision{Allowed: true, Rule: -1}},

		// No policy.
		{name: "unrestricted", policy: nil, who: nil, kind: policy.Tool, item: "x__delete_y", server: "x", want: policy.Decision{Allowed: true, Rule: -1}},
		{name: "unrestricted with principal", policy: nil, who: bob, kind: policy.Resource, item: "file:///etc/passwd", server: "fs", want: policy.Decision{Allowed: true, Rule: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy.Compile(tt.policy)
			got := p.Decide(tt.who, tt.kind, tt.item, tt.server)
			if got != tt.want {
				t.Errorf("Decide(%q, %v, %q, %q) = %+v (%s), want %+v (%s)", tt.who.Name(), tt.kind, tt.item, tt.server, got, p.Describe(got), tt.want, p.Describe(tt.want))
			}
			if ref := refDecide(tt.policy, refOf(tt.who), tt.kind, tt.item, tt.server); ref != tt.want {
				t.Errorf("reference decision %+v, want %+v: the table or the reference is wrong", ref, tt.want)
			}
		})
	}
}

// refOf converts a principal for refDecide.
func refOf(p *policy.Principal) *refPrincipal {
	if p == nil {
		return nil
	}
	return &refPrincipal{name: p.Name(), groups: p.Groups()}
}

// TestDecideOrderIndependent shuffles the rules of a policy and checks that every decision over
// a grid of principals and items stays the same, and names a rule with the same effect, the
// lowest-index matching one in the new order.
func TestDecideOrderIndependent(t *testing.T) {
	cfg := issuePolicy()
	cfg.Rules = append(cfg.Rules,
		config.Rule{Effect: config.Deny, Match: config.Match{Servers: []string{"secret*"}}, Principals: []string{"group:contractor"}},
		config.Rule{Effect: config.Allow, Match: config.Match{Tools: []string{"*__delete_*"}, Prompts: []string{"*"}}, Principals: []string{"alice"}},
		config.Rule{Effect: config.Allow, Match: config.Match{Resources: []string{"manifold://*"}, Templates: []string{"*{*}*"}}},
		config.Rule{Effect: config.Deny, Match: config.Match{Resources: []string{"*/.env"}, Tools: []string{"*__echo"}}, Principals: []string{"bob", "group:ops"}},
		config.Rule{Effect: config.Allow, Match: config.Match{Servers: []string{"secrets"}}, Principals: []string{"group:ops"}},
	)
	principals := []*policy.Principal{
		nil, alice, bob,
		policy.NewPrincipal("carol", []string{"ops", "dev"}),
		policy.NewPrincipal("group:dev", nil),
		policy.NewPrincipal("", nil),
	}
	items := []string{
		"", "everything__echo", "everything__get-env", "memory__read_graph", "memory__delete_entities",
		"secrets__get", "manifold://fs/file:///.env", "manifold://fs/file:///{path}", "prompt", "x__delete_",
	}
	servers := []string{"", "everything", "memory", "secrets", "fs"}
	kinds := []policy.Kind{policy.Tool, policy.Prompt, policy.Resource, policy.Template}

	orig := policy.Compile(cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		perm := rng.Perm(len(cfg.Rules))
		shuffled := permute(cfg, perm)
		sp := policy.Compile(shuffled)
		for _, who := range principals {
			for _, kind := range kinds {
				for _, item := range items {
					for _, server := range servers {
						want := orig.Decide(who, kind, item, server)
						got := sp.Decide(who, kind, item, server)
						if got.Allowed != want.Allowed || (got.Rule < 0) != (want.Rule < 0) ||
							(got.Rule >= 0 && shuffled.Rules[got.Rule].Effect != cfg.Rules[want.Rule].Effect) {
							t.Fatalf("round %d, order %v: Decide(%q, %v, %q, %q) = %+v (%s), in the original order %+v (%s)",
								round, perm, who.Name(), kind, item, server, got, sp.Describe(got), want, orig.Describe(want))
						}
						if ref := refDecide(shuffled, refOf(who), kind, item, server); got != ref {
							t.Fatalf("round %d, order %v: Decide(%q, %v, %q, %q) = %+v, want %+v", round, perm, who.Name(), kind, item, server, got, ref)
						}
					}
				}
			}
		}
	}
}

func TestUnrestricted(t *testing.T) {
	if p := policy.Compile(nil); !p.Unrestricted() {
		t.Error("Compile(nil).Unrestricted() = false, want true")
	}
	for _, cfg := range []*config.Policy{issuePolicy(), {Default: config.Allow}} {
		if p := policy.Compile(cfg); p.Unrestricted() {
			t.Errorf("Compile(%+v).Unrestricted() = true, want false", cfg)
		}
	}
}

func TestCompileKeepsNoReference(t *testing.T) {
	cfg := issuePolicy()
	p := policy.Compile(cfg)
	cfg.Rules[2].Match.Tools[0] = "nothing"
	cfg.Rules[2].Principals = []string{"nobody"}
	cfg.Default = config.Allow
	if got := p.Decide(bob, policy.Tool, "memory__delete_x", "memory"); got != (policy.Decision{Allowed: false, Rule: 2}) {
		t.Errorf("after changing the config, Decide = %+v, want the compiled decision", got)
	}
}

func TestDescribe(t *testing.T) {
	cfg := issuePolicy()
	cfg.Rules = append(cfg.Rules,
		config.Rule{Effect: config.Allow, Match: config.Match{Prompts: []string{"a", `q"uote`}, Servers: []string{"memory"}}, Principals: []string{"alice", "group:ops"}},
		config.Rule{Effect: config.Deny, Match: config.Match{Tools: []string{"t"}, Prompts: []string{"p"}, Resources: []string{"r://*"}, Templates: []string{"r://{x}"}, Servers: []string{"s"}}, Name: "all kinds"},
	)
	p := policy.Compile(cfg)
	tests := []struct {
		name   string
		policy *policy.Policy
		d      policy.Decision
		want   string
	}{
		{name: "group rule", policy: p, d: policy.Decision{Allowed: true, Rule: 0}, want: `policy.rules[0]: allow tools ["*"] for group:dev`},
		{name: "several patterns", policy: p, d: policy.Decision{Allowed: true, Rule: 1}, want: `policy.rules[1]: allow tools ["everything__echo", "memory__read_*"] for group:contractor`},
		{name: "named rule for everyone", policy: p, d: policy.Decision{Allowed: false, Rule: 2}, want: `policy.rules[2] "no-deletes": deny tools ["*__delete_*"] for everyone`},
		{name: "several kinds and principals", policy: p, d: policy.Decision{Allowed: true, Rule: 3}, want: `policy.rules[3]: allow prompts ["a", "q\"uote"], servers ["memory"] for alice, group:ops`},
		{name: "every kind", policy: p, d: policy.Decision{Allowed: false, Rule: 4}, want: `policy.rules[4] "all kinds": deny tools ["t"], prompts ["p"], resources ["r://*"], templates ["r://{x}"], servers ["s"] for everyone`},
		{name: "default deny", policy: p, d: policy.Decision{Allowed: false, Rule: -1}, want: "default deny"},
		{name: "default allow", policy: policy.Compile(&config.Policy{Default: config.Allow}), d: policy.Decision{Allowed: true, Rule: -1}, want: "default allow"},
		{name: "unrestricted", policy: policy.Compile(nil), d: policy.Decision{Allowed: true, Rule: -1}, want: "unrestricted (no policy)"},
		{name: "out of range", policy: p, d: policy.Decision{Rule: 7}, want: "policy.rules[7]: no such rule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.policy.Describe(tt.d); got != tt.want {
				t.Errorf("Describe(%+v) =\n\t%s\nwant\n\t%s", tt.d, got, tt.want)
			}
		})
	}
}

func TestRuleName(t *testing.T) {
	p := policy.Compile(issuePolicy())
	tests := []struct {
		name   string
		policy *policy.Policy
		d      policy.Decision
		want   string
	}{
		{name: "unnamed rule", policy: p, d: policy.Decision{Allowed: true, Rule: 1}, want: "policy.rules[1]"},
		{name: "named rule", policy: p, d: policy.Decision{Rule: 2}, want: "no-deletes"},
		{name: "default", policy: p, d: policy.Decision{Rule: -1}, want: ""},
		{name: "unrestricted", policy: policy.Compile(nil), d: policy.Decision{Allowed: true, Rule: -1}, want: ""},
		{name: "out of range", policy: p, d: policy.Decision{Rule: 7}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.policy.RuleName(tt.d); got != tt.want {
				t.Errorf("RuleName(%+v) = %q, want %q", tt.d, got, tt.want)
			}
		})
	}
	if n := testing.AllocsPerRun(100, func() { p.RuleName(policy.Decision{Rule: 0}) }); n != 0 {
		t.Errorf("RuleName allocates %v times", n)
	}
}

func TestKindString(t *testing.T) {
	tests := []struct {
		kind policy.Kind
		want string
	}{
		{kind: policy.Tool, want: "tool"},
		{kind: policy.Prompt, want: "prompt"},
		{kind: policy.Resource, want: "resource"},
		{kind: policy.Template, want: "resource template"},
		{kind: policy.Kind(9), want: "Kind(9)"},
	}
	for _, tt := range tests {
		if got := tt.kind.String(); got != tt.want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(tt.kind), got, tt.want)
		}
	}
}

func TestPrincipal(t *testing.T) {
	groups := []string{"ops", "dev", "ops", "admin"}
	p := policy.NewPrincipal("alice", groups)
	groups[0] = "changed"
	if got, want := p.Groups(), []string{"admin", "dev", "ops"}; !slices.Equal(got, want) {
		t.Errorf("Groups() = %q, want %q (copied, sorted, de-duplicated)", got, want)
	}
	if p.Name() != "alice" {
		t.Errorf("Name() = %q, want alice", p.Name())
	}
	for g, want := range map[string]bool{"admin": true, "dev": true, "ops": true, "changed": false, "Dev": false, "": false, "group:dev": false} {
		if got := p.InGroup(g); got != want {
			t.Errorf("InGroup(%q) = %v, want %v", g, got, want)
		}
	}
	var anon *policy.Principal
	if anon.Name() != "" || anon.Groups() != nil || anon.InGroup("dev") || anon.Key() != "" {
		t.Error("nil principal: want no name, no groups, key \"\"")
	}
	if g := policy.NewPrincipal("x", []string{}).Groups(); len(g) != 0 {
		t.Errorf("empty groups: Groups() = %q", g)
	}
}

func TestPrincipalKey(t *testing.T) {
	tests := []struct {
		name string
		a, b *policy.Principal
		same bool
	}{
		{name: "equal", a: policy.NewPrincipal("alice", []string{"dev"}), b: policy.NewPrincipal("alice", []string{"dev"}), same: true},
		{name: "group order and duplicates", a: policy.NewPrincipal("alice", []string{"ops", "dev"}), b: policy.NewPrincipal("alice", []string{"dev", "ops", "dev"}), same: true},
		{name: "nil and empty groups", a: policy.NewPrincipal("alice", nil), b: policy.NewPrincipal("alice", []string{}), same: true},
		{name: "other name", a: policy.NewPrincipal("alice", nil), b: policy.NewPrincipal("bob", nil)},
		{name: "other groups", a: policy.NewPrincipal("alice", []string{"dev"}), b: policy.NewPrincipal("alice", []string{"ops"})},
		{name: "group or not", a: policy.NewPrincipal("alice", []string{"dev"}), b: policy.NewPrincipal("alice", nil)},
		{name: "separator in the name", a: policy.NewPrincipal("a\x00b", nil), b: policy.NewPrincipal("a", []string{"b"})},
		{name: "separator in a group", a: policy.NewPrincipal("a", []string{"b\x00c"}), b: policy.NewPrincipal("a", []string{"b", "c"})},
		{name: "digits and colons", a: policy.NewPrincipal("1:a", nil), b: policy.NewPrincipal("", []string{"a"})},
		{name: "empty name vs nil", a: policy.NewPrincipal("", nil), b: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if same := tt.a.Key() == tt.b.Key(); same != tt.same {
				t.Errorf("keys %q and %q: equal = %v, want %v", tt.a.Key(), tt.b.Key(), same, tt.same)
			}
		})
	}
}

// TestDecideAllocs checks that the hot path allocates nothing, whatever decides.
func TestDecideAllocs(t *testing.T) {
	p := policy.Compile(benchPolicy())
	for _, c := range benchCases {
		if n := testing.AllocsPerRun(100, func() { p.Decide(c.who, c.kind, c.item, c.server) }); n != 0 {
			t.Errorf("%s: Decide allocates %v times per call, want 0", c.name, n)
		}
	}
	u := policy.Compile(nil)
	if n := testing.AllocsPerRun(100, func() { u.Decide(alice, policy.Tool, "x", "y") }); n != 0 {
		t.Errorf("unrestricted: Decide allocates %v times per call, want 0", n)
	}
}

func TestPrincipalsContains(t *testing.T) {
	ops := policy.CompilePrincipals([]string{"carol", "group:sre"})
	tests := []struct {
		name string
		pr   *policy.Principal
		want bool
	}{
		{name: "a listed name", pr: policy.NewPrincipal("carol", nil), want: true},
		{name: "a member of a listed group", pr: policy.NewPrincipal("dave", []string{"x", "sre"}), want: true},
		{name: "neither", pr: alice, want: false},
		{name: "a group name is not a principal name", pr: policy.NewPrincipal("sre", nil), want: false},
		{name: "a principal name is not a group", pr: policy.NewPrincipal("erin", []string{"carol"}), want: false},
		{name: "nil", pr: nil, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ops.Contains(tc.pr); got != tc.want {
				t.Errorf("Contains = %v, want %v", got, tc.want)
			}
		})
	}
	if (policy.Principals{}).Contains(alice) {
		t.Error("the zero Principals contains alice")
	}
	if n := testing.AllocsPerRun(100, func() { ops.Contains(bob) }); n != 0 {
		t.Errorf("Contains allocates %v times", n)
	}
}

func TestKindCallIndex(t *testing.T) {
	for k, want := range map[policy.Kind]int{policy.Tool: 0, policy.Prompt: 1, policy.Resource: 2, policy.Template: -1} {
		if got := k.CallIndex(); got != want {
			t.Errorf("%v.CallIndex() = %d, want %d", k, got, want)
		}
	}
}
