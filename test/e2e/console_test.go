package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Keys of the console test: alice operates the gateway; bob is a contractor.
// carol, an operator by her group sre, signs in at the OIDC issuer.
const (
	consoleAliceKey   = "alice-console-key-0123456789"
	consoleBobKey     = "bob-console-key-0123456789ab"
	consoleJWTSecret  = "console-e2e-hmac-secret-0123456789abcdef"
	consoleOIDCClient = "manifold-console"
)

// fakeIssuer is an OpenID provider that signs carol in at once: its
// authorization endpoint redirects back with a code, and its token endpoint
// trades the code, with the PKCE verifier matching its challenge, for an
// access token the gateway accepts (HS256 with consoleJWTSecret). Browsers
// reach it as localhost, another site than the gateway's 127.0.0.1.
func fakeIssuer(t *testing.T) string {
	var (
		mu    sync.Mutex
		codes = map[string]string{} // code → code_challenge
	)
	srv := httptest.NewServer(nil)
	issuer := "http://localhost:" + srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": issuer, "authorization_endpoint": issuer + "/authorize", "token_endpoint": issuer + "/token"})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != consoleOIDCClient || q.Get("code_challenge_method") != "S256" || q.Get("response_type") != "code" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		code := fmt.Sprint("code-", len(codes))
		codes[code] = q.Get("code_challenge")
		mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		challenge, ok := codes[r.PostFormValue("code")]
		delete(codes, r.PostFormValue("code"))
		mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != challenge {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
			return
		}
		token, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"iss": issuer, "aud": "manifold", "sub": "carol", "groups": []string{"sre"},
			"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
		}).SignedString([]byte(consoleJWTSecret))
		json.NewEncoder(w).Encode(map[string]string{"access_token": token, "token_type": "Bearer"})
	})
	srv.Config.Handler = mux
	t.Cleanup(srv.Close)
	return issuer
}

// consoleConfig fronts two upstreams, alpha (the demo server) and broken
// (a command that fails at once), under a policy that hides alpha__fail
// from contractors by the rule "no-fail", with the audit log on; operators
// sign in with a key or at issuer.
func consoleConfig(t *testing.T, issuer string) string {
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
  jwt: { issuer: %q, audience: [manifold], secret: %q, oidc: { clientID: %q } }
  operators: [alice, "group:sre"]
policy:
  default: deny
  rules:
    - { allow: { tools: ["*"], prompts: ["*"], resources: ["*"], templates: ["*"] }, principals: ["group:dev"] }
    - { name: contractors, allow: { tools: ["alpha__*"] }, principals: ["group:contractor"] }
    - { name: no-fail, deny: { tools: ["*__fail"] }, principals: ["group:contractor"] }
audit:
  file: %q
  arguments: none
`, binary, consoleAliceKey, consoleBobKey, issuer, consoleJWTSecret, consoleOIDCClient, filepath.Join(t.TempDir(), "audit.jsonl")))
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
// the rule that hid it, a denied call in the Audit view within 2 s, and
// last a sign-in at the OIDC issuer, across sites.
// It saves a screenshot of each page; with MANIFOLD_UPDATE_SCREENSHOTS=1
// they replace those under docs/.
func TestConsoleInBrowser(t *testing.T) {
	browser := chromium(t)
	dir := consoleNodeDir(t)
	g := startGateway(t, "--config", consoleConfig(t, fakeIssuer(t)))
	shots := t.TempDir()
	if os.Getenv("MANIFOLD_UPDATE_SCREENSHOTS") == "1" {
		shots = filepath.Join(repo, "docs")
	}
	secrets, _ := json.Marshal([]string{consoleAliceKey, consoleBobKey, consoleJWTSecret})
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
