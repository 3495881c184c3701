package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Keys of the console test: alice operates the gateway; bob is a contractor.
const (
	consoleAliceKey = "alice-console-key-0123456789"
	consoleBobKey   = "bob-console-key-0123456789ab"
)

// consoleConfig fronts two upstreams, alpha (the demo server) and broken
// (a command that fails at once), under a policy that hides alpha__fail
// from contractors by the rule "no-fail", with the audit log on.
func consoleConfig(t *testing.T) string {
	return writeConfig(t, fmt.Sprintf(`mcpServers:
  alpha:
    command: %q
    args: [demo-server, --name, alpha]
  broken:
    command: sh
    args: ["-c", "echo 'cannot reach the database' >&2; exit 3"]
auth:
  apiKeys:
    - { name: alice, key: %q, groups: [dev] }
    - { name: bob,   key: %q, groups: [contractor] }
  operators: [alice]
policy:
  default: deny
  rules:
    - { allow: { tools: ["*"], prompts: ["*"], resources: ["*"], templates: ["*"] }, principals: ["group:dev"] }
    - { name: contractors, allow: { tools: ["alpha__*"] }, principals: ["group:contractor"] }
    - { name: no-fail, deny: { tools: ["*__fail"] }, principals: ["group:contractor"] }
audit:
  file: %q
  arguments: none
`, binary, consoleAliceKey, consoleBobKey, filepath.Join(t.TempDir(), "audit.jsonl")))
}

// chromium returns the Chromium executable (CHROMIUM, else the Debian
// package's chromium on PATH). Without one the test skips, except in CI
// (CI=true), where .ci/run installs it and a skip would hide a failure.
func chromium(t *testing.T) string {
	t.Helper()
	name := os.Getenv("CHROMIUM")
	if name == "" {
		name = "chromium"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium missing in CI (scripts/test.sh installs the Debian package): %v", err)
		}
		t.Skipf("no Chromium (apt-get install chromium, or set CHROMIUM): %v", err)
	}
	return path
}

// consoleNodeDir holds the browser driver and its pinned playwright-core,
// installed here from the lock file when missing.
func consoleNodeDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(repo, "test", "console")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		cmd := exec.Command("npm", "ci", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci --prefix test/console: %v\n%s", err, out)
		}
	}
	return dir
}

// TestConsoleInBrowser drives the operator console in headless Chromium
// against a real gateway with two upstreams, one failing, and a policy
// (test/console/console.mjs): sign-in by the form, the failing upstream
// marked on the Overview, bob's Catalog view lacking the denied tool with
// the rule that hid it, and a denied call in the Audit view within 2 s.
// It saves a screenshot of each page; with MANIFOLD_UPDATE_SCREENSHOTS=1
// they replace those under docs/.
func TestConsoleInBrowser(t *testing.T) {
	browser := chromium(t)
	dir := consoleNodeDir(t)
	g := startGateway(t, "--config", consoleConfig(t))
	shots := t.TempDir()
	if os.Getenv("MANIFOLD_UPDATE_SCREENSHOTS") == "1" {
		shots = filepath.Join(repo, "docs")
	}
	secrets, _ := json.Marshal([]string{consoleAliceKey, consoleBobKey})
	cmd := exec.Command("node", "console.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GATEWAY_URL="+g.url(""), "OPERATOR_KEY="+consoleAliceKey, "BOB_KEY="+consoleBobKey,
		"SCREENSHOT_DIR="+shots, "CHROMIUM="+browser, "SECRETS="+string(secrets))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("console.mjs did not finish in 3 minutes; stderr:\n%s", stderr.String())
	}
	var report struct {
		OK                 bool     `json:"ok"`
		Checks             []string `json:"checks"`
		DeniedShownAfterMs int      `json:"deniedShownAfterMs"`
	}
	jerr := json.Unmarshal(stdout.Bytes(), &report)
	if err != nil || jerr != nil || !report.OK {
		t.Fatalf("console.mjs: %v %v\nchecks passed: %s\nstderr:\n%s\ngateway log:\n%s", err, jerr,
			strings.Join(report.Checks, "; "), stderr.String(), g.logs.String())
	}
	t.Logf("%d checks passed; the denied call showed in the audit view after %d ms", len(report.Checks), report.DeniedShownAfterMs)
	for _, name := range []string{"console-signin.png", "console-overview.png", "console-catalog.png", "console-audit.png"} {
		if fi, err := os.Stat(filepath.Join(shots, name)); err != nil || fi.Size() == 0 {
			t.Errorf("screenshot %s: %v", name, err)
		}
	}
}
