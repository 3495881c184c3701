package namespacing_test

import (
	"fmt"
	"testing"

	"github.com/manifold-mcp/manifold/namespacing"
)

func TestOwnersLookup(t *testing.T) {
	exact := map[string]string{
		"test://static/resource/1": "everything",
		"file:///etc/hosts":        "fs",
		"notes://a/{literal}":      "notes", // listed resource whose URI contains braces
	}
	templates := map[string]string{
		"test://static/resource/{id}": "everything",
		"test://{path}":               "other",
		"file:///{+path}":             "fs",
		"file:///srv/{+path}":         "srv",
		"dup://x/{a}":                 "first",
		"dup://x/{b}":                 "second",
		"plain://no/expressions":      "plain",
		"test://static/resource/1":    "shadowed", // exact URIs win over templates
	}
	tests := []struct {
		name       string
		fallback   string
		uri        string
		wantServer string
		wantOK     bool
	}{
		{name: "exact", uri: "test://static/resource/1", wantServer: "everything", wantOK: true},
		{name: "exact with braces", uri: "notes://a/{literal}", wantServer: "notes", wantOK: true},
		{name: "template", uri: "test://static/resource/42", wantServer: "everything", wantOK: true},
		{name: "longest literal wins", uri: "file:///srv/www/index.html", wantServer: "srv", wantOK: true},
		{name: "shorter literal", uri: "file:///home/me", wantServer: "fs", wantOK: true},
		{name: "broader template", uri: "test://dynamic/7", wantServer: "other", wantOK: true},
		{name: "same literal: first template wins", uri: "dup://x/1", wantServer: "first", wantOK: true},
		{name: "template without expressions is exact", uri: "plain://no/expressions", wantServer: "plain", wantOK: true},
		{name: "template without expressions is not a prefix", uri: "plain://no/expressions/more"},
		{name: "uri equal to a literal", uri: "test://", wantServer: "other", wantOK: true},
		{name: "unknown without fallback", uri: "unknown://x"},
		{name: "empty without fallback", uri: ""},
		{name: "unknown with fallback", fallback: "solo", uri: "unknown://x", wantServer: "solo", wantOK: true},
		{name: "known with fallback", fallback: "solo", uri: "file:///x", wantServer: "fs", wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := namespacing.NewOwners(exact, templates, tt.fallback)
			server, ok := o.Lookup(tt.uri)
			if server != tt.wantServer || ok != tt.wantOK {
				t.Errorf("Lookup(%q) = (%q, %v), want (%q, %v)", tt.uri, server, ok, tt.wantServer, tt.wantOK)
			}
		})
	}
}

func TestOwnersCatchAllTemplate(t *testing.T) {
	o := namespacing.NewOwners(nil, map[string]string{"{+uri}": "any", "x://{id}": "x"}, "fallback")
	for uri, want := range map[string]string{"x://1": "x", "y://1": "any", "": "any"} {
		if got, ok := o.Lookup(uri); got != want || !ok {
			t.Errorf("Lookup(%q) = (%q, %v), want (%q, true)", uri, got, ok, want)
		}
	}
}

func TestOwnersCopiesInput(t *testing.T) {
	exact := map[string]string{"a://1": "a"}
	templates := map[string]string{"b://{id}": "b"}
	o := namespacing.NewOwners(exact, templates, "")
	exact["a://1"], templates["b://{id}"] = "changed", "changed"
	exact["c://1"] = "c"
	for uri, want := range map[string]string{"a://1": "a", "b://2": "b", "c://1": ""} {
		if got, _ := o.Lookup(uri); got != want {
			t.Errorf("Lookup(%q) = %q, want %q", uri, got, want)
		}
	}
}

func TestOwnersNil(t *testing.T) {
	var o *namespacing.Owners
	if server, ok := o.Lookup("x://y"); server != "" || ok {
		t.Errorf("nil Lookup = (%q, %v), want (\"\", false)", server, ok)
	}
	empty := namespacing.NewOwners(nil, nil, "")
	if server, ok := empty.Lookup("x://y"); server != "" || ok {
		t.Errorf("empty Lookup = (%q, %v), want (\"\", false)", server, ok)
	}
}

func TestOwnersLookupAllocs(t *testing.T) {
	o := benchOwners()
	for _, uri := range []string{"res-0042://item/7", "res-0999://exact/3", "nowhere://x"} {
		if got := testing.AllocsPerRun(100, func() { o.Lookup(uri) }); got != 0 {
			t.Errorf("Lookup(%q) allocs = %v, want 0", uri, got)
		}
	}
}

// benchOwners returns Owners of 1,000 exact URIs and 1,000 templates of a few lengths.
func benchOwners() *namespacing.Owners {
	exact := map[string]string{}
	templates := map[string]string{}
	for i := range 1000 {
		server := fmt.Sprintf("server-%d", i%10)
		exact[fmt.Sprintf("res-%04d://exact/%d", i, i)] = server
		templates[fmt.Sprintf("res-%04d://item/{id}", i)] = server
		if i%100 == 0 {
			templates[fmt.Sprintf("res-%04d://item/deeper/{id}", i)] = server
		}
	}
	return namespacing.NewOwners(exact, templates, "")
}

func BenchmarkOwnersLookup(b *testing.B) {
	o := benchOwners()
	benchmarks := []struct {
		name string
		uri  string
	}{
		{name: "exact", uri: "res-0999://exact/999"},
		{name: "template", uri: "res-0042://item/7"},
		{name: "miss", uri: "nowhere://x/y/z"},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := o.Lookup(bm.uri); ok == (bm.name == "miss") {
					b.Fatal("unexpected result")
				}
			}
		})
	}
}
