package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFixtureServerScenarios runs every server scenario of the suite
// (active and pending) directly against the fixture over streamable HTTP:
// the fixture must pass them all.
func TestFixtureServerScenarios(t *testing.T) {
	Require(t)
	if testing.Short() {
		t.Skip("short mode")
	}
	url, _ := StartHTTP(t, Build(t, "cmd/manifold-fixture"), "--http", "127.0.0.1:0")
	results := RunServerScenarios(t, url, &ServerOptions{Suite: "all"})
	t.Logf("fixture over HTTP:\n%s", Summary(results))
	if len(results) < 30 {
		t.Errorf("only %d scenarios ran, want the suite's 32", len(results))
	}
	for _, name := range sortedNames(results) {
		if r := results[name]; !r.Passed() {
			t.Errorf("%s\n%s", r, diffChecks(Result{}, r))
		}
	}
}

func TestParseResults(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if data != "" {
			if err := os.WriteFile(filepath.Join(dir, name, "checks.json"), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("server-tools-call-simple-text-2026-11-21T10-14-29-694Z", `[{"id":"tools-call-simple-text","name":"N","status":"SUCCESS"}]`)
	write("server-ping-2026-11-21T10-14-29-700Z", `[{"id":"ping","status":"FAILURE","errorMessage":"boom"},{"id":"x","status":"WARNING"}]`)
	write("server-broken-2026-11-21T10-14-29-700Z", `not json`)
	write("server-missing-2026-11-21T10-14-29-700Z", "")
	write("unrelated", `[]`)
	got, err := parseResults(dir, "server-")
	if err != nil {
		t.Fatal(err)
	}
	summary := map[string]string{}
	for name, r := range got {
		summary[name] = r.String()
	}
	want := map[string]string{
		"tools-call-simple-text": "tools-call-simple-text: 1 passed, 0 failed, 0 warnings",
		"ping":                   "ping: 0 passed, 1 failed, 1 warnings",
	}
	for name, s := range want {
		if summary[name] != s {
			t.Errorf("%s: %q, want %q", name, summary[name], s)
		}
	}
	for _, name := range []string{"broken", "missing"} {
		if got[name].Err == nil {
			t.Errorf("%s: no error for a bad checks.json", name)
		}
	}
	if _, ok := got["unrelated"]; ok {
		t.Errorf("a folder without a timestamp was parsed")
	}
}

func TestRegressions(t *testing.T) {
	pass := func(name string) Result {
		return Result{Scenario: name, Checks: []Check{{ID: name, Status: StatusSuccess}}}
	}
	fail := func(name, msg string) Result {
		return Result{Scenario: name, Checks: []Check{{ID: name, Status: StatusFailure, ErrorMessage: msg}}}
	}
	direct := map[string]Result{"a": pass("a"), "b": pass("b"), "c": fail("c", "x"), "d": pass("d")}
	via := map[string]Result{"a": pass("a"), "b": fail("b", "no sampling"), "c": fail("c", "x")}
	got := Regressions(direct, via)
	want := []Regression{
		{Scenario: "b", Diff: "- b: SUCCESS -> FAILURE: no sampling"},
		{Scenario: "d", Diff: "scenario did not run"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("regressions (-want +got):\n%s", diff)
	}
	if s := Summary(via); !strings.Contains(s, "2 scenarios passed, 1 failed") && !strings.Contains(s, "1 scenarios passed, 2 failed") {
		t.Errorf("summary:\n%s", s)
	}
}

func TestGatewayConfig(t *testing.T) {
	tests := []struct{ upstream, want string }{
		{"/bin/fixture", "mcpServers:\n  conf:\n    command: \"/bin/fixture\"\n    args: [\"--stdio\"]\n    prefix: \"\"\n"},
		{"http://127.0.0.1:1/mcp", "mcpServers:\n  conf:\n    type: http\n    url: \"http://127.0.0.1:1/mcp\"\n    prefix: \"\"\n"},
	}
	for _, tt := range tests {
		if got := GatewayConfig(tt.upstream); got != tt.want {
			t.Errorf("GatewayConfig(%q) =\n%s\nwant\n%s", tt.upstream, got, tt.want)
		}
	}
}
