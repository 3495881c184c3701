package policy_test

import (
	"fmt"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/policy"
)

func ExamplePolicy_Decide() {
	p := policy.Compile(&config.Policy{
		Default: config.Deny,
		Rules: []config.Rule{
			{Effect: config.Allow, Match: config.Match{Tools: []string{"*"}}, Principals: []string{"group:dev"}},
			{Effect: config.Allow, Match: config.Match{Tools: []string{"everything__echo", "memory__read_*"}}, Principals: []string{"group:contractor"}},
			{Effect: config.Deny, Match: config.Match{Tools: []string{"*__delete_*"}}, Name: "no-deletes"},
		},
	})
	alice := policy.NewPrincipal("alice", []string{"dev"})
	bob := policy.NewPrincipal("bob", []string{"contractor"})
	for _, c := range []struct {
		who  *policy.Principal
		tool string
	}{
		{alice, "everything__get-env"},
		{alice, "memory__delete_entities"},
		{bob, "memory__read_graph"},
		{bob, "everything__get-env"},
	} {
		d := p.Decide(c.who, policy.Tool, c.tool, "")
		fmt.Printf("%s %s: %v by %s\n", c.who.Name(), c.tool, d.Allowed, p.Describe(d))
	}
	// Output:
	// alice everything__get-env: true by policy.rules[0]: allow tools ["*"] for group:dev
	// alice memory__delete_entities: false by policy.rules[2] "no-deletes": deny tools ["*__delete_*"] for everyone
	// bob memory__read_graph: true by policy.rules[1]: allow tools ["everything__echo", "memory__read_*"] for group:contractor
	// bob everything__get-env: false by default deny
}

func ExamplePattern() {
	p := policy.CompilePattern("manifold://fs/*.md")
	fmt.Println(p.Match("manifold://fs/file:///home/alice/notes.md"))
	fmt.Println(p.Match("manifold://fs/file:///home/alice/notes.MD"))
	fmt.Println(policy.CompilePattern("caf?").Match("café"))
	// Output:
	// true
	// false
	// true
}
