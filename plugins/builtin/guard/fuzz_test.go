package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"path"
	"strings"
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

// FuzzURLAllowList checks the allow-list against Go's URL parser, which a
// fetching tool written in Go would use: whatever host net/url reads in a
// value, the matcher blocks the value when that host is not allowed.
func FuzzURLAllowList(f *testing.F) {
	for _, s := range []string{
		"https://example.com/x", "http://example.com@evil.com/", "http://evil.com#@example.com",
		"http://example.com:80@evil.com", "HTTP://EVIL.COM", "http://%65vil.com/", "http://[::2]/",
		"https://a.example.org.", "ftp://evil.com", "http:evil.com", "http:/evil.com",
	} {
		f.Add(s)
	}
	m, err := compileAllowList([]string{"example.com", "*.example.org", "[::1]"})
	if err != nil {
		f.Fatal(err)
	}
	allow := m.(allowListMatcher)
	f.Fuzz(func(t *testing.T, v string) {
		u, err := url.Parse(v)
		if err != nil || u.Host == "" {
			return
		}
		host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
		if host == "" || strings.Trim(host, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" && net.ParseIP(host) == nil {
			return // no name a resolver would look up (net/url lets `"`, `$`, … through)
		}
		if !allow.allowed(host) && !allow.match(v) {
			t.Fatalf("%q: net/url reads host %q, which is not allowed, but the value passes", v, host)
		}
	})
}

// FuzzPathTraversal checks pathTraversal against path.Clean: a value that
// cleans to a path above its start, or to one under a sensitive root, is
// blocked.
func FuzzPathTraversal(f *testing.F) {
	for _, s := range []string{"../../etc/passwd", "a/./../..", "/etc//shadow", "/tmp/../etc/x", "a/b/..", "/./etc", "x/..../y"} {
		f.Add(s)
	}
	m, err := compileTraversal([]byte(`{"sensitiveRoots":["/etc"]}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, v string) {
		c := path.Clean(v)
		escapes := c == ".." || strings.HasPrefix(c, "../")
		sensitive := c == "/etc" || strings.HasPrefix(c, "/etc/")
		if (escapes || sensitive) && !m.match(v) {
			t.Fatalf("%q cleans to %q, but the value passes", v, c)
		}
	})
}
