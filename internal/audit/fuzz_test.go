package audit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/manifold-mcp/manifold/config"
)

// FuzzArguments feeds arbitrary client arguments to every recording mode:
// no panic; a recorded form is valid JSON; hashed mode yields only the
// HMAC; a redacted key's value never survives in full mode.
func FuzzArguments(f *testing.F) {
	for _, seed := range []string{
		`{"a":1}`, `{"token":"s3cret","nested":{"Token":["x"]}}`, `[1,2,{"token":null}]`,
		`{"a":1,"a":2}`, `"\ud800"`, `1e999`, `{"x":"\u0000"}`, `null`, ``, `{`,
	} {
		f.Add([]byte(seed))
	}
	modes := []string{config.ArgumentsFull, config.ArgumentsHashed, config.ArgumentsNone}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, mode := range modes {
			a := newArguments(mode, []byte("0123456789abcdef0123456789abcdef"), []string{"token"})
			out, err := a.encode(json.RawMessage(raw))
			if err != nil || out == nil {
				continue
			}
			if !json.Valid(out) {
				t.Fatalf("%s: recorded %q is not JSON (input %q)", mode, out, raw)
			}
			switch mode {
			case config.ArgumentsHashed:
				var s string
				if json.Unmarshal(out, &s) != nil || !strings.HasPrefix(s, HashPrefix) || len(s) != len(HashPrefix)+64 {
					t.Fatalf("hashed: recorded %q", out)
				}
			case config.ArgumentsFull:
				assertRedacted(t, out)
			}
		}
	})
}

// assertRedacted fails if a "token" key (any case) of out has a value other
// than Redacted.
func assertRedacted(t *testing.T, out []byte) {
	t.Helper()
	var tree any
	if err := json.Unmarshal(out, &tree); err != nil {
		return
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if strings.EqualFold(k, "token") && e != Redacted {
					t.Fatalf("full: key %q kept its value %v in %s", k, e, out)
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(tree)
}
