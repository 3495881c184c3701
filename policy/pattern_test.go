package policy_test

import (
	"strings"
	"testing"

	"github.com/manifold-mcp/manifold/policy"
)

func TestPatternMatch(t *testing.T) {
	long := strings.Repeat("a", 200)
	tests := []struct {
		name    string
		pattern string
		in      string
		want    bool
	}{
		// Literals.
		{name: "literal equal", pattern: "everything__echo", in: "everything__echo", want: true},
		{name: "literal longer input", pattern: "everything__echo", in: "everything__echo2", want: false},
		{name: "literal shorter input", pattern: "everything__echo", in: "everything__ech", want: false},
		{name: "literal empty input", pattern: "echo", in: "", want: false},
		{name: "empty pattern empty input", pattern: "", in: "", want: true},
		{name: "empty pattern", pattern: "", in: "a", want: false},

		// '*' and its runs.
		{name: "star alone", pattern: "*", in: "anything at all", want: true},
		{name: "star alone empty", pattern: "*", in: "", want: true},
		{name: "stars collapse", pattern: "***", in: "x", want: true},
		{name: "prefix", pattern: "memory__read_*", in: "memory__read_graph", want: true},
		{name: "prefix empty run", pattern: "memory__read_*", in: "memory__read_", want: true},
		{name: "prefix mismatch", pattern: "memory__read_*", in: "memory__write_graph", want: false},
		{name: "suffix", pattern: "*_graph", in: "memory__read_graph", want: true},
		{name: "suffix empty run", pattern: "*_graph", in: "_graph", want: true},
		{name: "suffix mismatch", pattern: "*_graph", in: "memory__read_graphs", want: false},
		{name: "infix", pattern: "*__delete_*", in: "memory__delete_entities", want: true},
		{name: "infix at both ends", pattern: "*__delete_*", in: "__delete_", want: true},
		{name: "infix mismatch", pattern: "*__delete_*", in: "memory_delete_entities", want: false},
		{name: "prefix and suffix", pattern: "github__*_issue", in: "github__create_issue", want: true},
		{name: "prefix and suffix empty run", pattern: "github__*_issue", in: "github___issue", want: true},
		{name: "prefix and suffix overlap", pattern: "ab*ba", in: "aba", want: false},
		{name: "prefix and suffix exact", pattern: "ab*ba", in: "abba", want: true},
		{name: "two stars in the middle", pattern: "a*b*c", in: "axxbyyc", want: true},
		{name: "two stars backtrack", pattern: "a*b*c", in: "abcbc", want: true},
		{name: "two stars miss", pattern: "a*b*c", in: "acb", want: false},
		{name: "star spans separator", pattern: "everything*env", in: "everything__get-env", want: true},
		{name: "star spans slashes", pattern: "file:///*.md", in: "file:///home/alice/notes/todo.md", want: true},
		{name: "star spans wrapped URI", pattern: "manifold://fs/*", in: "manifold://fs/file:///etc/passwd", want: true},
		{name: "star needs the last occurrence", pattern: "*ab", in: "abab", want: true},
		{name: "general greedy backtrack", pattern: "*a*ab", in: "aaaaab", want: true},
		{name: "general greedy miss", pattern: "*a*ab", in: "aaaaa", want: false},
		{name: "pathological stars", pattern: strings.Repeat("a*", 30) + "b", in: long, want: false},

		// '?' is one character.
		{name: "question one ASCII", pattern: "echo?", in: "echo1", want: true},
		{name: "question none", pattern: "echo?", in: "echo", want: false},
		{name: "question two", pattern: "echo?", in: "echo12", want: false},
		{name: "question two-byte rune", pattern: "caf?", in: "café", want: true},
		{name: "question three-byte rune", pattern: "?", in: "日", want: true},
		{name: "question four-byte rune", pattern: "ok?", in: "ok🙂", want: true},
		{name: "two questions one rune", pattern: "caf??", in: "café", want: false},
		{name: "question after star multibyte", pattern: "*??", in: "€", want: false},
		{name: "question matches separator", pattern: "a?b", in: "a/b", want: true},

		// Case and Unicode: no folding, no normalisation.
		{name: "case sensitive literal", pattern: "everything__echo", in: "Everything__echo", want: false},
		{name: "case sensitive pattern", pattern: "Everything__echo", in: "everything__echo", want: false},
		{name: "case sensitive prefix", pattern: "Memory__*", in: "memory__read", want: false},
		{name: "Cyrillic e is not Latin e", pattern: "everything__echo", in: "\u0435verything__echo", want: false},
		{name: "Cyrillic e in pattern", pattern: "*\u0435cho", in: "everything__echo", want: false},
		{name: "Cyrillic e matches itself", pattern: "*\u0435cho", in: "everything__\u0435cho", want: true},
		{name: "no NFC normalisation", pattern: "caf\u00e9", in: "cafe\u0301", want: false},
		{name: "combining mark is its own character", pattern: "cafe?", in: "cafe\u0301", want: true},

		// Regexp metacharacters are literal.
		{name: "dot is literal", pattern: "fs__read.file", in: "fs__read_file", want: false},
		{name: "dot matches dot", pattern: "fs__read.file", in: "fs__read.file", want: true},
		{name: "plus is literal", pattern: "a+", in: "aa", want: false},
		{name: "plus matches plus", pattern: "a+*", in: "a+b", want: true},
		{name: "parenthesis", pattern: "f(x)*", in: "f(x)y", want: true},
		{name: "parenthesis group", pattern: "(ab)", in: "ab", want: false},
		{name: "bracket is no class", pattern: "[ab]", in: "a", want: false},
		{name: "bracket matches itself", pattern: "*[ab]", in: "x[ab]", want: true},
		{name: "backslash is no escape", pattern: `a\*`, in: "a*", want: false},
		{name: "backslash matches itself", pattern: `a\*`, in: `a\bc`, want: true},
		{name: "caret and dollar", pattern: "^a$", in: "^a$", want: true},
		{name: "pipe", pattern: "a|b", in: "a", want: false},
		{name: "braces of URI templates", pattern: "repo://{owner}/*", in: "repo://{owner}/{repo}", want: true},

		// Invalid UTF-8: one byte is one character.
		{name: "invalid byte literal", pattern: "a\xffb", in: "a\xffb", want: true},
		{name: "question matches invalid byte", pattern: "a?b", in: "a\xffb", want: true},
		{name: "question one invalid byte only", pattern: "a?b", in: "a\xff\xfeb", want: false},
		{name: "invalid bytes in star", pattern: "a*b", in: "a\xff\xfe\xc3b", want: true},
		{name: "truncated rune is one character each byte", pattern: "??", in: "\xe2\x82", want: true},
		{name: "U+FFFD does not match invalid byte", pattern: "a\uFFFDb", in: "a\xffb", want: false},
		{name: "invalid byte does not match U+FFFD", pattern: "a\xffb", in: "a\uFFFDb", want: false},
		{name: "invalid pattern byte is not a rune's first byte", pattern: "\xc3*", in: "\u00c0", want: false},
		{name: "invalid pattern byte prefix", pattern: "\xc3*", in: "\xc3x", want: true},
		{name: "invalid pattern byte suffix", pattern: "*\x80", in: "\u00c0", want: false},
		{name: "invalid pattern byte suffix invalid input", pattern: "*\x80", in: "a\x80", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy.CompilePattern(tt.pattern).Match(tt.in); got != tt.want {
				t.Errorf("CompilePattern(%q).Match(%q) = %v, want %v", tt.pattern, tt.in, got, tt.want)
			}
			if ref := refMatch(tt.pattern, tt.in); ref != tt.want {
				t.Errorf("reference refMatch(%q, %q) = %v, want %v: the table or the reference is wrong", tt.pattern, tt.in, ref, tt.want)
			}
		})
	}
}

func TestPatternString(t *testing.T) {
	for _, s := range []string{"", "*", "**", "a**b", "memory__read_*", "a?b", "\xff"} {
		if got := policy.CompilePattern(s).String(); got != s {
			t.Errorf("CompilePattern(%q).String() = %q, want it as written", s, got)
		}
	}
}

func TestZeroPattern(t *testing.T) {
	var p policy.Pattern
	if !p.Match("") || p.Match("a") {
		t.Errorf("zero Pattern: Match(\"\") = %v, Match(\"a\") = %v; want true, false", p.Match(""), p.Match("a"))
	}
}

func TestPatternMatchAllocs(t *testing.T) {
	patterns := []string{"everything__echo", "*", "memory__read_*", "*_graph", "*__delete_*", "gh__*_issue", "a*b?c*d", "caf?\xff*"}
	for _, s := range patterns {
		p := policy.CompilePattern(s)
		if n := testing.AllocsPerRun(100, func() { p.Match("memory__delete_entities_caf\u00e9") }); n != 0 {
			t.Errorf("CompilePattern(%q).Match allocates %v times, want 0", s, n)
		}
	}
}
