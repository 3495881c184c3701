package redact_test

import (
	"fmt"

	"github.com/manifold-mcp/manifold/plugins/builtin/redact"
)

func ExampleRedactor_JSON() {
	r, err := redact.New([]byte(`{"detectors":["secrets","pii"]}`))
	if err != nil {
		panic(err)
	}
	result := []byte(`{"content":[{"type":"text","text":"Echo: AKIAIOSFODNN7EXAMPLE, mail alice@example.com"}]}`)
	out, counts, err := r.JSON(result)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	fmt.Println(counts)
	// Output:
	// {"content":[{"type":"text","text":"Echo: [REDACTED:aws_access_key], mail [REDACTED:email]"}]}
	// map[aws_access_key:1 email:1]
}
