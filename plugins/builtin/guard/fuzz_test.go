package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzCheck feeds Check arbitrary tool names and arguments (both come from
// the client): it never panics, fails exactly the arguments that are not a
// JSON object, and names the rule of every block.
func FuzzCheck(f *testing.F) {
	for _, s := range []struct{ tool, args string }{
		{"files__read", `{"path":"../../etc/passwd"}`},
		{"files__read", `{"paths":["a","%2e%2e/b"],"n":[1,{"x":null}]}`},
		{"shell__run", `{"command":"ls; id"}`},
		{"web__fetch", `{"url":"http://example.com@evil.com","headers":{"a":"https:\\\\x"}}`},
		{"net__connect", `{"port":22,"h":"\ud800"}`},
		{"x", `[]`},
	} {
		f.Add(s.tool, []byte(s.args))
	}
	g, err := New([]byte(testConfig))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tool string, args []byte) {
		v, err := g.Check(tool, args)
		trimmed := bytes.TrimSpace(args)
		object := len(trimmed) == 0 || string(trimmed) == "null" || trimmed[0] == '{' && json.Valid(trimmed)
		if object != (err == nil) {
			t.Fatalf("Check(%q, %q) error %v; a JSON object: %v", tool, args, err, object)
		}
		if err != nil && !errors.Is(err, ErrArguments) {
			t.Fatalf("Check error %v is not ErrArguments", err)
		}
		if v.Blocked != (v.Rule != "") || v.Blocked && v.Message == "" {
			t.Fatalf("Check(%q, %q) = %+v", tool, args, v)
		}
	})
}

// FuzzConfig feeds New arbitrary configs: it never panics, and a config it
// accepts gives a Guard whose Check does not panic either.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(testConfig))
	f.Add([]byte(`{"rules":[{"name":"a","pathTraversal":{"sensitiveRoots":["/"]}}]}`))
	f.Add([]byte(`{"rules":[{"name":"a","urlAllowList":["*.","[::1]"]}]}`))
	f.Fuzz(func(t *testing.T, config []byte) {
		g, err := New(config)
		if err != nil {
			return
		}
		_, _ = g.Check("files__read", []byte(`{"path":"../x","url":"http://a@b/","n":22}`))
	})
}
