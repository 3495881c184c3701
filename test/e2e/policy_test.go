package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	aliceKey = "alice-e2e-key-0123456789"
	bobKey   = "bob-e2e-key-0123456789ab"
	// opsKey is an operator's (auth.operators), for /status.
	opsKey    = "ops-e2e-key-0123456789ab"
	jwtSecret = "e2e-hmac-secret-0123456789abcdef0123"
)

// policyConfig is the example config, plus JWT, in front of
// server-everything and server-memory.
func policyConfig(t *testing.T, memoryFile string) string {
	return writeConfig(t, npmServers(memoryFile)+`
auth:
  apiKeys:
    - { name: alice, key: "${ALICE_KEY}", groups: [dev] }
    - { name: bob,   key: "${BOB_KEY}",   groups: [contractor] }
  jwt: { issuer: "https://idp.test", audience: [manifold], secret: "${JWT_SECRET}" }
policy:
  default: deny
  rules:
    - { allow: { tools: ["*"] }, principals: ["group:dev"] }
    - { allow: { tools: ["everything__echo", "memory__read_*"] }, principals: ["group:contractor"] }
    - { deny:  { tools: ["*__delete_*"] } }
`)
}

type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func connectWithToken(ctx context.Context, g *gatewayProc, token, version string) (*mcp.ClientSession, error) {
	return mcp.NewClient(&mcp.Implementation{Name: "e2e-policy"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: g.url("/mcp"), HTTPClient: &http.Client{Transport: bearerRT{token}}},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
}

func listToolNames(ctx context.Context, t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var out []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tool.Name)
	}
	return out
}

func mintJWT(t *testing.T, secret string, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPolicyAcceptance is acceptance 1 of the policy issue.
func TestPolicyAcceptance(t *testing.T) {
	requireNode(t)
	t.Setenv("ALICE_KEY", aliceKey)
	t.Setenv("BOB_KEY", bobKey)
	t.Setenv("JWT_SECRET", jwtSecret)
	memoryFile := filepath.Join(t.TempDir(), "memory.jsonl")
	g := startGateway(t, "--config", policyConfig(t, memoryFile))
	ctx := ctxT(t, 120*time.Second)

	alice, err := connectWithToken(ctx, g, aliceKey, "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	// server-everything registers its tools after initialize: wait for them.
	var aliceTools []string
	for deadline := time.Now().Add(60 * time.Second); ; {
		aliceTools = listToolNames(ctx, t, alice)
		if slices.Contains(aliceTools, "everything__echo") && slices.Contains(aliceTools, "memory__read_graph") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	// alice: every tool but the deletes.
	if len(aliceTools) < 15 {
		t.Fatalf("alice lists only %v", aliceTools)
	}
	for _, name := range aliceTools {
		if strings.Contains(name, "__delete_") {
			t.Errorf("alice lists the denied %s", name)
		}
	}
	for _, want := range []string{"everything__echo", "everything__get-env", "memory__create_entities", "memory__read_graph", "memory__search_nodes"} {
		if !slices.Contains(aliceTools, want) {
			t.Errorf("alice's tools lack %s: %v", want, aliceTools)
		}
	}

	// bob, over both protocol generations and through the TypeScript SDK.
	wantBob := []string{"everything__echo", "memory__read_graph"}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		bob, err := connectWithToken(ctx, g, bobKey, version)
		if err != nil {
			t.Fatal(err)
		}
		if got := listToolNames(ctx, t, bob); !slices.Equal(got, wantBob) {
			t.Errorf("bob (%s) lists %v, want %v", version, got, wantBob)
		}
		bob.Close()
	}
	out := runNodeClient(t, []string{"--transport", "http", "--url", g.url("/mcp"), "--header", "Authorization: Bearer " + bobKey}, []nodeStep{
		{"op": "listTools"},
		{"op": "callTool", "name": "everything__get-env"},
		{"op": "callTool", "name": "memory__delete_entities", "arguments": map[string]any{"entityNames": []string{"kept"}}},
		{"op": "callTool", "name": "everything__echo", "arguments": map[string]any{"message": "hi bob"}},
	})
	if got := names(out.Steps[0].items(t), "name"); !slices.Equal(got, wantBob) {
		t.Errorf("bob via the TypeScript SDK lists %v, want %v", got, wantBob)
	}
	for _, i := range []int{1, 2} {
		s := out.Steps[i]
		if s.OK || s.Error == nil || !strings.Contains(s.Error.Message, "unknown tool") {
			t.Errorf("bob's denied call %d: ok=%v error=%+v; want an unknown-tool error", i, s.OK, s.Error)
		}
	}
	if !out.Steps[3].OK || !strings.Contains(string(out.Steps[3].Result), "hi bob") {
		t.Errorf("bob's echo: %s", out.Steps[3].Result)
	}

	// The upstream receives nothing of a denied call: an entity survives
	// bob's (and alice's) delete, and the memory file is not touched.
	if _, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "memory__create_entities", Arguments: map[string]any{
		"entities": []map[string]any{{"name": "kept", "entityType": "test", "observations": []string{"x"}}},
	}}); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(memoryFile)
	if err != nil {
		t.Fatal(err)
	}
	out = runNodeClient(t, []string{"--transport", "http", "--url", g.url("/mcp"), "--header", "Authorization: Bearer " + bobKey}, []nodeStep{
		{"op": "callTool", "name": "memory__delete_entities", "arguments": map[string]any{"entityNames": []string{"kept"}}},
	})
	if out.Steps[0].OK {
		t.Error("bob deleted an entity")
	}
	if _, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "memory__delete_entities", Arguments: map[string]any{"entityNames": []string{"kept"}}}); err == nil {
		t.Error("alice called a delete_* tool, denied to everyone")
	}
	after, err := os.Stat(memoryFile)
	if err != nil || !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Errorf("the memory file changed after denied calls: %v → %v (%v)", before.ModTime(), after.ModTime(), err)
	}
	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "memory__read_graph", Arguments: map[string]any{}})
	if err != nil || !strings.Contains(fmt.Sprint(res.Content[0]), "kept") {
		t.Errorf("the entity is gone after denied deletes: %v %v", res, err)
	}
	g.logs.waitFor(t, `"principal":"bob"`, 5*time.Second)
	denial := g.logs.waitFor(t, `"name":"memory__delete_entities"`, 5*time.Second)
	if !strings.Contains(denial, "policy denied") || !strings.Contains(denial, `policy.rules[2]`) {
		t.Errorf("the denial log does not name the rule: %s", denial)
	}

	// No key, a wrong key, an expired or wrongly signed JWT: 401 with a
	// challenge. A valid JWT of the dev group sees what alice sees.
	now := time.Now()
	valid := jwt.MapClaims{"iss": "https://idp.test", "aud": "manifold", "sub": "carol", "groups": []string{"dev"}, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	expired := jwt.MapClaims{"iss": "https://idp.test", "aud": "manifold", "sub": "carol", "groups": []string{"dev"}, "exp": now.Add(-time.Hour).Unix(), "iat": now.Add(-2 * time.Hour).Unix()}
	for name, auth := range map[string]string{
		"no key":        "",
		"wrong key":     "Bearer not-a-key-0123456789",
		"expired JWT":   "Bearer " + mintJWT(t, jwtSecret, expired),
		"wrong signer":  "Bearer " + mintJWT(t, "another-secret-0123456789abcdef0123", valid),
		"wrong issuer":  "Bearer " + mintJWT(t, jwtSecret, jwt.MapClaims{"iss": "https://evil.test", "aud": "manifold", "sub": "carol", "exp": now.Add(time.Hour).Unix()}),
		"bob's key raw": bobKey,
	} {
		req, _ := http.NewRequest(http.MethodPost, g.url("/mcp"), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("%s: status %d, WWW-Authenticate %q; want 401 with a Bearer challenge", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	carol, err := connectWithToken(ctx, g, mintJWT(t, jwtSecret, valid), "2026-07-28")
	if err != nil {
		t.Fatal(err)
	}
	defer carol.Close()
	if got := listToolNames(ctx, t, carol); !slices.Equal(got, aliceTools) {
		t.Errorf("carol (JWT, group dev) lists %v, want alice's %v", got, aliceTools)
	}
	// Secrets never reach the log.
	for _, secret := range []string{aliceKey, bobKey, jwtSecret} {
		if strings.Contains(g.logs.String(), secret) {
			t.Errorf("the gateway log contains a secret")
		}
	}
}

// TestPolicyExplain runs `manifold policy explain` on the same config.
func TestPolicyExplain(t *testing.T) {
	t.Setenv("ALICE_KEY", aliceKey)
	t.Setenv("BOB_KEY", bobKey)
	t.Setenv("JWT_SECRET", jwtSecret)
	cfg := policyConfig(t, filepath.Join(t.TempDir(), "m.jsonl"))
	for _, tc := range []struct {
		args     []string
		code     int
		contains []string
	}{
		{[]string{"--principal", "alice", "--tool", "everything__get-env"}, 0, []string{"decision   allow", "policy.rules[0]", "group:dev", "server: everything"}},
		{[]string{"--principal", "bob", "--tool", "everything__get-env"}, 1, []string{"decision   deny", "default deny", "contractor"}},
		{[]string{"--principal", "alice", "--tool", "memory__delete_entities"}, 1, []string{"decision   deny", "policy.rules[2]", "*__delete_*"}},
		{[]string{"--principal", "carol", "--group", "contractor", "--tool", "memory__read_graph"}, 0, []string{"policy.rules[1]", "--group"}},
		{[]string{"--principal", "alice"}, 2, nil},
	} {
		cmd := exec.Command(binary, append([]string{"policy", "explain", "--config", cfg}, tc.args...)...)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != tc.code {
			t.Errorf("%v: exit %d, want %d\n%s", tc.args, code, tc.code, out)
		}
		for _, s := range tc.contains {
			if !strings.Contains(string(out), s) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, s, out)
			}
		}
	}
}
