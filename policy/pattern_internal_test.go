package policy

import "testing"

// TestCompilePatternFastPaths checks that each shape of pattern gets its fast path.
func TestCompilePatternFastPaths(t *testing.T) {
	tests := []struct {
		pattern string
		op      matchOp
		a, b    string
	}{
		{pattern: "", op: opExact, a: ""},
		{pattern: "everything__echo", op: opExact, a: "everything__echo"},
		{pattern: "*", op: opAny},
		{pattern: "***", op: opAny},
		{pattern: "memory__read_*", op: opPrefix, a: "memory__read_"},
		{pattern: "memory__read_**", op: opPrefix, a: "memory__read_"},
		{pattern: "*_graph", op: opSuffix, a: "_graph"},
		{pattern: "*__delete_*", op: opInfix, a: "__delete_"},
		{pattern: "**__delete_**", op: opInfix, a: "__delete_"},
		{pattern: "gh__*_issue", op: opPrefixSuffix, a: "gh__", b: "_issue"},
		{pattern: "a*b*c", op: opGeneral, a: "a*b*c"},
		{pattern: "a**b*c", op: opGeneral, a: "a*b*c"},
		{pattern: "echo?", op: opGeneral, a: "echo?"},
		{pattern: "?*", op: opGeneral, a: "?*"},
		{pattern: "caf\xe9", op: opGeneral, a: "caf\xe9"}, // Latin-1, invalid UTF-8
		{pattern: "caf\u00e9*", op: opPrefix, a: "caf\u00e9"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			p := CompilePattern(tt.pattern)
			if p.op != tt.op || p.a != tt.a || p.b != tt.b {
				t.Errorf("CompilePattern(%q) = {op %d, a %q, b %q}, want {op %d, a %q, b %q}", tt.pattern, p.op, p.a, p.b, tt.op, tt.a, tt.b)
			}
		})
	}
}
