package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpUpstream is a running test/e2e/httpupstream: an MCP server over
// HTTP with the tools echo and big (see its doc for the paths).
type httpUpstream struct {
	*serverProc
	url string // http://127.0.0.1:PORT
}

// startHTTPUpstream builds (once) and starts test/e2e/httpupstream; it is
// stopped when the test ends.
func startHTTPUpstream(t *testing.T) *httpUpstream {
	t.Helper()
	p, url := startServerProc(t, "httpupstream", exec.Command(helperBinary(t, "httpupstream", "./test/e2e/httpupstream")))
	return &httpUpstream{serverProc: p, url: url}
}

// sawToken reports whether a request carried the query parameter
// token=token.
func (u *httpUpstream) sawToken(t *testing.T, token string) bool {
	t.Helper()
	resp, err := http.Get(u.url + "/tokens")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tokens []string
	if err := json.NewDecoder(resp.Body).Decode(&tokens); err != nil {
		t.Fatal(err)
	}
	return slices.Contains(tokens, token)
}

// closedAddr returns a 127.0.0.1 address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// rawStatus returns the body of GET /status.
func rawStatus(t *testing.T, g *gatewayProc) string {
	t.Helper()
	resp, err := http.Get(g.url("/status"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// TestUpstreamURLSecret: a secret in an upstream's URL query (url:
// …?token=${UP_TOKEN}) reaches the upstream, and appears nowhere the
// gateway prints: not in the errors clients get (an upstream that drops
// the connection, an upstream that went away), not in its log or audit
// file, not on /status (an upstream never reachable), not in `manifold
// validate`.
func TestUpstreamURLSecret(t *testing.T) {
	const secret = "up-token-e2e-Vb7q2Lm"
	t.Setenv("UP_TOKEN", secret)
	up := startHTTPUpstream(t)
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := writeConfig(t, fmt.Sprintf(`
mcpServers:
  live: { url: "%[1]s/mcp?token=${UP_TOKEN}" }
  cut:  { url: "%[1]s/cut/mcp?token=${UP_TOKEN}#${UP_TOKEN}" }
  down: { url: "http://user:${UP_TOKEN}@%[2]s/mcp?token=${UP_TOKEN}" }
gateway:
  log: { level: debug }
  timeouts: { call: 10s, connect: 5s, drain: 1s }
audit: { file: %[3]q }
`, up.url, closedAddr(t), auditFile))
	g := startGateway(t, "--config", cfg)
	waitForTool(t, g, "live__echo")
	waitForTool(t, g, "cut__echo")
	cs := connectHTTP(t, g, nil)
	ctx := ctxT(t, 60*time.Second)

	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "live__echo", Arguments: map[string]any{"message": "hi"}}); err != nil || res.IsError {
		t.Fatalf("live__echo: %v %v", res, err)
	}
	if !up.sawToken(t, secret) {
		t.Error("the token in the URL's query did not reach the upstream")
	}

	var shown []string
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cut__echo", Arguments: map[string]any{"message": "hi"}})
	if err == nil {
		t.Fatal("cut__echo succeeded; its upstream drops the connection")
	}
	shown = append(shown, "cut__echo: "+err.Error())
	shown = append(shown, "status: "+rawStatus(t, g))

	up.stop(t) // live goes away: its calls fail, it reconnects and fails
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "live__echo", Arguments: map[string]any{"message": "hi"}})
	if err == nil {
		t.Fatal("live__echo succeeded after its upstream closed")
	}
	shown = append(shown, "live__echo: "+err.Error())
	eventually(t, "live reconnecting and failing", func() bool {
		return strings.Contains(rawStatus(t, g), `"state": "failed"`) && strings.Count(rawStatus(t, g), "connection refused") >= 2
	})
	shown = append(shown, "status: "+rawStatus(t, g))

	out, err := runValidate(cfg)
	if err != nil {
		t.Fatalf("validate: %v: %s", err, out)
	}
	shown = append(shown, "validate: "+out)
	g.stop(t)
	shown = append(shown, "log: "+g.logs.String())
	audit, err := os.ReadFile(auditFile)
	if err != nil {
		t.Fatal(err)
	}
	shown = append(shown, "audit: "+string(audit))

	all := strings.Join(shown, "\n")
	if strings.Contains(all, secret) {
		for _, s := range shown {
			if strings.Contains(s, secret) {
				t.Errorf("the secret shows in %s", s)
			}
		}
	}
	if !strings.Contains(all, "token=REDACTED") {
		t.Errorf("no redacted URL shown anywhere: the errors no longer say where a request went:\n%s", all)
	}
	t.Logf("cut__echo error: %s\nlive__echo error: %s", shown[0], shown[2])
}

// runValidate runs `manifold validate --config cfg` and returns its output.
func runValidate(cfg string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "validate", "--config", cfg).CombinedOutput()
	return string(out), err
}

// vmHWM returns the peak resident set size of process pid, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmHWM in /proc/PID/status")
	return 0
}

// TestUpstreamAnswerLimit: a tool result far over
// gateway.limits.maxMessageBytes from an HTTP upstream (an SSE stream, a
// JSON body, the legacy SSE transport) fails that call with an error
// naming the server and the limit; the gateway stays up and serves the next
// call on the same upstream; its peak memory stays far below the result
// size; and the limit follows a reload.
func TestUpstreamAnswerLimit(t *testing.T) {
	const (
		limit  = 1 << 20
		result = 64 << 20
	)
	up := startHTTPUpstream(t)
	config := func(limit int) string {
		return fmt.Sprintf(`
mcpServers:
  stream: { url: "%[1]s/mcp" }
  json:   { url: "%[1]s/json/mcp" }
  legacy: { type: sse, url: "%[1]s/sse" }
gateway:
  limits: { maxMessageBytes: %[2]d }
  timeouts: { call: 30s, drain: 1s }
`, up.url, limit)
	}
	path := writeConfig(t, config(limit))
	g := startGateway(t, "--config", path)
	for _, s := range []string{"stream", "json", "legacy"} {
		waitForTool(t, g, s+"__big")
	}
	cs := connectHTTP(t, g, nil)
	ctx := ctxT(t, 120*time.Second)
	call := func(name string, n int) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"bytes": n}})
	}
	for _, s := range []string{"stream", "json", "legacy"} { // a first round, for the baseline
		if _, err := call(s+"__big", 1000); err != nil {
			t.Fatalf("%s__big(1000): %v", s, err)
		}
	}
	before := vmHWM(t, g.cmd.Process.Pid)

	for _, s := range []string{"stream", "json", "legacy"} {
		_, err := call(s+"__big", result)
		want := fmt.Sprintf(`upstream %q: response exceeds maxMessageBytes (%d bytes)`, s, limit)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s__big(%d) = %v, want an error with %q", s, result, err, want)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: s + "__echo", Arguments: map[string]any{"message": "still here"}})
		if err != nil || res.IsError {
			t.Errorf("%s__echo after the oversized result: %v %v", s, res, err)
		}
	}
	after := vmHWM(t, g.cmd.Process.Pid)
	t.Logf("gateway VmHWM: %d MiB before, %d MiB after three %d MiB results (limit %d MiB)", before>>20, after>>20, result>>20, limit>>20)
	if after-before > result/2 {
		t.Errorf("the gateway's peak RSS grew by %d MiB for a %d MiB result over a %d MiB limit", (after-before)>>20, result>>20, limit>>20)
	}

	// The limit follows a reload (every upstream is rebuilt with it).
	if _, err := call("stream__big", 2*limit); err == nil {
		t.Fatalf("stream__big(%d) passed a %d limit", 2*limit, limit)
	}
	content := config(4 * limit)
	writeAtomically(t, path, content)
	waitServing(t, g, hashOf(content), time.Now())
	eventually(t, "a 2 MiB result after raising the limit to 4 MiB", func() bool {
		res, err := call("stream__big", 2*limit)
		return err == nil && !res.IsError && len(res.Content[0].(*mcp.TextContent).Text) == 2*limit
	})
}
