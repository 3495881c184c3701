package namespacing_test

import (
	"testing"

	"github.com/manifold-mcp/manifold/namespacing"
)

func TestWrapURIRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
		uri    string
		want   string
	}{
		{name: "scheme with ://", prefix: "everything", uri: "test://static/resource/1", want: "manifold://everything/test://static/resource/1"},
		{name: "file URI", prefix: "fs", uri: "file:///home/me/notes.txt", want: "manifold://fs/file:///home/me/notes.txt"},
		{name: "query string", prefix: "w", uri: "https://api.example.com/v1?city=Oslo&units=metric", want: "manifold://w/https://api.example.com/v1?city=Oslo&units=metric"},
		{name: "fragment", prefix: "docs", uri: "https://example.com/page#section-2", want: "manifold://docs/https://example.com/page#section-2"},
		{name: "percent escapes", prefix: "fs", uri: "file:///tmp/a%20b%2Fc.txt", want: "manifold://fs/file:///tmp/a%20b%2Fc.txt"},
		{name: "template", prefix: "everything", uri: "test://static/resource/{id}", want: "manifold://everything/test://static/resource/{id}"},
		{name: "level 4 template", prefix: "gh", uri: "repo://{owner}/{repo}{/path*}{?ref,depth}", want: "manifold://gh/repo://{owner}/{repo}{/path*}{?ref,depth}"},
		{name: "unicode", prefix: "x", uri: "notes://café/日本語", want: "manifold://x/notes://café/日本語"},
		{name: "empty uri", prefix: "p", uri: "", want: "manifold://p/"},
		{name: "no scheme", prefix: "p", uri: "relative/path", want: "manifold://p/relative/path"},
		{name: "already wrapped nests", prefix: "outer", uri: "manifold://inner/test://x", want: "manifold://outer/manifold://inner/test://x"},
		{name: "prefix with hyphen and underscore", prefix: "my-server_2", uri: "a:b", want: "manifold://my-server_2/a:b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := namespacing.WrapURI(tt.prefix, tt.uri)
			if got != tt.want {
				t.Errorf("WrapURI(%q, %q) = %q, want %q", tt.prefix, tt.uri, got, tt.want)
			}
			prefix, original, ok := namespacing.UnwrapURI(got)
			if prefix != tt.prefix || original != tt.uri || !ok {
				t.Errorf("UnwrapURI(%q) = (%q, %q, %v), want (%q, %q, true)", got, prefix, original, ok, tt.prefix, tt.uri)
			}
		})
	}
}

func TestWrapURIEmptyPrefix(t *testing.T) {
	for _, uri := range []string{"", "test://static/resource/1", "manifold://p/x", "x{y}"} {
		if got := namespacing.WrapURI("", uri); got != uri {
			t.Errorf("WrapURI(\"\", %q) = %q, want it unchanged", uri, got)
		}
	}
}

func TestUnwrapURI(t *testing.T) {
	tests := []struct {
		name         string
		uri          string
		wantPrefix   string
		wantOriginal string
		wantOK       bool
	}{
		{name: "wrapped", uri: "manifold://everything/test://static/resource/1", wantPrefix: "everything", wantOriginal: "test://static/resource/1", wantOK: true},
		{name: "empty original", uri: "manifold://p/", wantPrefix: "p", wantOriginal: "", wantOK: true},
		{name: "scheme case-insensitive", uri: "MANIFOLD://p/x", wantPrefix: "p", wantOriginal: "x", wantOK: true},
		{name: "only first slash splits", uri: "manifold://p//a/b", wantPrefix: "p", wantOriginal: "/a/b", wantOK: true},
		{name: "empty", uri: ""},
		{name: "other scheme", uri: "test://static/resource/1"},
		{name: "scheme only", uri: "manifold://"},
		{name: "no slash after prefix", uri: "manifold://everything"},
		{name: "empty prefix", uri: "manifold:///x"},
		{name: "dot in prefix", uri: "manifold://bad.prefix/x"},
		{name: "space in prefix", uri: "manifold://bad prefix/x"},
		{name: "colon in prefix", uri: "manifold://host:80/x"},
		{name: "unicode in prefix", uri: "manifold://café/x"},
		{name: "one slash", uri: "manifold:/p/x"},
		{name: "scheme without colon", uri: "manifold//p/x"},
		{name: "scheme as suffix", uri: "xmanifold://p/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantOriginal := tt.wantOriginal
			if !tt.wantOK {
				wantOriginal = tt.uri
			}
			prefix, original, ok := namespacing.UnwrapURI(tt.uri)
			if prefix != tt.wantPrefix || original != wantOriginal || ok != tt.wantOK {
				t.Errorf("UnwrapURI(%q) = (%q, %q, %v), want (%q, %q, %v)",
					tt.uri, prefix, original, ok, tt.wantPrefix, wantOriginal, tt.wantOK)
			}
		})
	}
}

func TestUnwrapURIAllocs(t *testing.T) {
	uri := namespacing.WrapURI("everything", "test://static/resource/1")
	if got := testing.AllocsPerRun(100, func() { namespacing.UnwrapURI(uri) }); got != 0 {
		t.Errorf("allocs = %v, want 0", got)
	}
}

func FuzzURI(f *testing.F) {
	f.Add("everything", "test://static/resource/1")
	f.Add("p", "")
	f.Add("", "manifold://x/y")
	f.Add("bad.prefix", "https://example.com/a?b=c#d")
	f.Add("gh", "repo://{owner}/{repo}{/path*}{?ref}")
	f.Add("x", "notes://café/%E6%97%A5")
	f.Fuzz(func(t *testing.T, prefix, uri string) {
		// UnwrapURI never panics, and what it accepts wraps back to the same text.
		if p, o, ok := namespacing.UnwrapURI(uri); ok {
			if !namespacing.ValidPrefix(p) {
				t.Fatalf("UnwrapURI(%q) accepted invalid prefix %q", uri, p)
			}
			if w := namespacing.WrapURI(p, o); w[len("manifold"):] != uri[len("manifold"):] {
				t.Fatalf("UnwrapURI(%q) = (%q, %q), which wraps to %q", uri, p, o, w)
			}
		} else if p != "" || o != uri {
			t.Fatalf("UnwrapURI(%q) = (%q, %q, false), want (\"\", uri, false)", uri, p, o)
		}
		if prefix == "" {
			if got := namespacing.WrapURI("", uri); got != uri {
				t.Fatalf("WrapURI(\"\", %q) = %q, want it unchanged", uri, got)
			}
			return
		}
		if !namespacing.ValidPrefix(prefix) {
			return
		}
		w := namespacing.WrapURI(prefix, uri)
		if p, o, ok := namespacing.UnwrapURI(w); p != prefix || o != uri || !ok {
			t.Fatalf("UnwrapURI(WrapURI(%q, %q)) = (%q, %q, %v)", prefix, uri, p, o, ok)
		}
	})
}

func TestCleanURI(t *testing.T) {
	tests := []struct{ uri, want string }{
		{"file:///data/secret.txt", "file:///data/secret.txt"},
		{"file:///data//secret.txt", "file:///data/secret.txt"},
		{"file:////data/secret.txt", "file:///data/secret.txt"},
		{"file:///data/secret.txt?x", "file:///data/secret.txt"},
		{"file:///data/secret.txt#x", "file:///data/secret.txt"},
		{"file:///data/secret.txt/", "file:///data/secret.txt"},
		{"demo://alpha/items/{id}", "demo://alpha/items/{id}"},
		{"demo://alpha/readme", "demo://alpha/readme"},
		{"urn:isbn:0451450523?x", "urn:isbn:0451450523"},
		{"%zz?q", "%zz"},
		{"demo://x/search{?q}", "demo://x/search{?q}"},
		{"demo://x/a/./b/../c", "demo://x/a/c"},
		{"manifold://alpha/demo://alpha/readme?x", "manifold://alpha/demo:/alpha/readme"},
		{"https://example.com/", "https://example.com"},
		{"https://example.com//?x", "https://example.com"},
		{"https://example.com", "https://example.com"},
	}
	for _, tt := range tests {
		if got := namespacing.CleanURI(tt.uri); got != tt.want {
			t.Errorf("CleanURI(%q) = %q, want %q", tt.uri, got, tt.want)
		}
	}
}
