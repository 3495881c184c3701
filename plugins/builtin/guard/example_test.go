package guard_test

import (
	"fmt"

	"github.com/manifold-mcp/manifold/plugins/builtin/guard"
)

func ExampleGuard_Check() {
	g, err := guard.New([]byte(`{"rules":[{
		"name": "no-traversal", "tools": ["files__*"], "arguments": ["path"],
		"pathTraversal": true, "message": "path traversal is not allowed"}]}`))
	if err != nil {
		panic(err)
	}
	v, err := g.Check("files__read_file", []byte(`{"path":"../../etc/passwd"}`))
	fmt.Printf("%+v %v\n", v, err)
	v, err = g.Check("files__read_file", []byte(`{"path":"docs/README.md"}`))
	fmt.Printf("%+v %v\n", v, err)
	// Output:
	// {Blocked:true Rule:no-traversal Message:path traversal is not allowed} <nil>
	// {Blocked:false Rule: Message:} <nil>
}
