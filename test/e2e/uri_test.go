package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// server-everything's resources as the gateway shows them.
const (
	uriDenied  = "manifold://everything/demo://resource/static/document/architecture.md" // denied to everyone
	uriAllowed = "manifold://everything/demo://resource/static/document/features.md"
)

// uriAliases are spellings of uriDenied, and of a dynamic resource outside
// the static/* the principals may read, that server-everything (the
// TypeScript SDK's new URL(uri).toString()) resolves to them: issue 13,
// finding 1.
var uriAliases = []string{
	uriDenied + "\t",
	uriDenied + " ",
	uriDenied + "\x01",
	uriDenied + "\n",
	"manifold://everything/DEMO://resource/static/document/architecture.md",
	"manifold://everything/demo://@resource/static/document/architecture.md",
	"manifold://everything/demo://:@resource/static/document/architecture.md",
	"manifold://everything/demo://resource:/static/document/architecture.md",
	"manifold://everything/demo://resource/static/document/./architecture.md",
	"manifold://everything/demo://resource/static/.\t./dynamic/text/1",
	"manifold://everything/demo://resource/static/.%2e/dynamic/text/1",
	"manifold://everything/demo://resource/static/%2E%2E/dynamic/text/1",
	"manifold://everything/demo://resource/static/..\\dynamic\\text\\1",
	"MANIFOLD://everything/demo://resource/static/document/architecture.md",
}

// uriConfig fronts server-everything over stdio: alice and the local
// principal may read all its resources, bob only its static documents, and
// no one the one of uriDenied.
func uriConfig(t *testing.T, auditFile string) string {
	nm := filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol")
	return writeConfig(t, fmt.Sprintf(`
mcpServers:
  everything:
    command: node
    args: [%q, stdio]
auth:
  apiKeys:
    - { name: alice, key: "${ALICE_KEY}" }
    - { name: bob, key: "${BOB_KEY}" }
audit: { file: %q, arguments: none }
policy:
  default: deny
  rules:
    - { name: all, allow: { resources: ["manifold://everything/*"] }, principals: [alice, local] }
    - { name: static, allow: { resources: ["manifold://everything/demo://resource/static/*"] }, principals: [bob] }
    - { name: secret, deny: { resources: [%q] } }
`, filepath.Join(nm, "server-everything", "dist", "index.js"), auditFile, uriDenied))
}

// TestURIAliasesAreRefused is issue 13's finding 1 against the built
// binary and server-everything: every alias of a resource denied to
// everyone (alice may read the rest), or of one outside what bob may read
// (static documents), is answered as a resource that does not exist, over
// streamable HTTP at every protocol version from 2024-11-05 to 2026-07-28,
// legacy SSE, stdio and a 2025-03-26 JSON-RPC batch, and no audit record
// allows it; the allowed document still reads.
func TestURIAliasesAreRefused(t *testing.T) {
	requireNode(t)
	t.Setenv("ALICE_KEY", aliceKey)
	t.Setenv("BOB_KEY", bobKey)
	dir := t.TempDir()
	httpAudit, stdioAudit := filepath.Join(dir, "http.jsonl"), filepath.Join(dir, "stdio.jsonl")
	g := startGateway(t, "--config", uriConfig(t, httpAudit))
	bearer, bobBearer := "Authorization: Bearer "+aliceKey, "Authorization: Bearer "+bobKey

	// Each client first waits for server-everything, then reads every
	// alias, the denied URI, and the allowed one.
	steps := []nodeStep{{"op": "until", "step": nodeStep{"op": "readResource", "uri": uriAllowed}, "timeoutMs": 60000, "intervalMs": 300}}
	for _, uri := range uriAliases {
		steps = append(steps, nodeStep{"op": "readResource", "uri": uri})
	}
	steps = append(steps, nodeStep{"op": "readResource", "uri": uriDenied}, nodeStep{"op": "readResource", "uri": uriAllowed})
	type run struct {
		name string
		args []string
		out  nodeOutput
		err  error
	}
	var runs []*run
	for _, v := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"} {
		runs = append(runs, &run{name: "http " + v, args: []string{"--transport", "http", "--url", g.url("/mcp"), "--header", bearer, "--protocol-version", v}})
	}
	runs = append(runs,
		&run{name: "http bob", args: []string{"--transport", "http", "--url", g.url("/mcp"), "--header", bobBearer}},
		&run{name: "sse", args: []string{"--transport", "sse", "--url", g.url("/sse"), "--header", bearer}},
		&run{name: "sse bob", args: []string{"--transport", "sse", "--url", g.url("/sse"), "--header", bobBearer}},
		&run{name: "stdio", args: stdioArgs(binary, "serve", "--stdio", "--config", uriConfig(t, stdioAudit))})
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			r.out, r.err = execNodeClient(append([]string{"--timeout-ms", "30000"}, r.args...), steps, 120*time.Second)
		})
	}
	wg.Wait()
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			if r.err != nil {
				t.Fatal(r.err)
			}
			if first := r.out.Steps[0]; !first.OK {
				t.Fatalf("server-everything's document never became readable: %+v", first.Error)
			}
			for i, uri := range append(append([]string{}, uriAliases...), uriDenied) {
				s := r.out.Steps[1+i]
				if s.OK || s.Error == nil || s.Error.Code != -32002 || s.Error.Message != "Resource not found" {
					t.Errorf("resources/read %q: ok=%v result=%s error=%+v; want -32002 Resource not found", uri, s.OK, s.Result, s.Error)
				}
			}
			if last := r.out.Steps[len(steps)-1]; !last.OK || !strings.Contains(string(last.Result), "features") {
				t.Errorf("resources/read of the allowed %s: %s %+v", uriAllowed, last.Result, last.Error)
			}
		})
	}

	for _, key := range []string{aliceKey, bobKey} {
		t.Run("batch 2025-03-26", func(t *testing.T) { checkAliasBatch(t, g, key) })
	}

	t.Run("2026-07-28 bob", func(t *testing.T) {
		ctx := ctxT(t, 60*time.Second)
		cs, err := connectWithToken(ctx, g, bobKey, "2026-07-28")
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		for _, uri := range append(append([]string{}, uriAliases...), uriDenied) {
			// The Mcp-Name header cannot carry some aliases (the SDK trims
			// it, or refuses a control character): the transport refuses
			// those before the gateway sees them.
			res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err == nil || !strings.Contains(err.Error(), "Resource not found") && !strings.Contains(err.Error(), "Mcp-Name") {
				t.Errorf("resources/read %q: %v %v; want Resource not found", uri, res, err)
			}
		}
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uriAllowed}); err != nil {
			t.Errorf("resources/read of the allowed %s: %v", uriAllowed, err)
		}
	})

	g.stop(t) // writes out the audit records
	for _, file := range []string{httpAudit, stdioAudit} {
		reads := 0
		for _, rec := range readAudit(t, file) {
			if rec["method"] != "resources/read" {
				continue
			}
			reads++
			if rec["name"] != uriAllowed && rec["decision"] != "deny" {
				t.Errorf("%s: the read of %q is recorded as %v (rule %v)", filepath.Base(file), rec["name"], rec["decision"], rec["rule"])
			}
		}
		if reads < len(uriAliases)+2 {
			t.Errorf("%s has %d resources/read records, want at least %d", filepath.Base(file), reads, len(uriAliases)+2)
		}
	}
}

// checkAliasBatch reads every alias in one JSON-RPC batch of a 2025-03-26
// session, which allows batches.
func checkAliasBatch(t *testing.T, g *gatewayProc, key string) {
	h := map[string]string{"Authorization": "Bearer " + key}
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"e2e-batch","version":"0"}}}`
	resp, _ := rpcPost(t, g.url("/mcp"), init, h)
	if h["Mcp-Session-Id"] = resp.Header.Get("Mcp-Session-Id"); h["Mcp-Session-Id"] == "" {
		t.Fatalf("no session: %d", resp.StatusCode)
	}
	h["Mcp-Protocol-Version"] = "2025-03-26"
	rpcPost(t, g.url("/mcp"), `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
	uris := append(append([]string{}, uriAliases...), uriDenied, uriAllowed)
	var batch []map[string]any
	for i, uri := range uris {
		batch = append(batch, map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": "resources/read", "params": map[string]any{"uri": uri}})
	}
	body, _ := json.Marshal(batch)
	_, answers := rpcPost(t, g.url("/mcp"), string(body), h)
	byID := map[int]rpcAnswer{}
	for _, a := range answers {
		byID[a.ID] = a
	}
	for i, uri := range uris {
		a, ok := byID[i+1]
		switch {
		case !ok:
			t.Errorf("no answer for %q", uri)
		case uri == uriAllowed:
			if a.Error != nil || !strings.Contains(string(a.Result), "features") {
				t.Errorf("resources/read of the allowed %s: %s %+v", uri, a.Result, a.Error)
			}
		case a.Error == nil || a.Error.Code != -32002 || a.Error.Message != "Resource not found":
			t.Errorf("resources/read %q: result=%s error=%+v; want -32002 Resource not found", uri, a.Result, a.Error)
		}
	}
}

// rpcAnswer is one JSON-RPC response.
type rpcAnswer struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// rpcPost POSTs a JSON-RPC message or batch to a streamable HTTP endpoint
// and returns the responses, from a JSON body or an SSE stream.
func rpcPost(t *testing.T, url, body string, header map[string]string) (*http.Response, []rpcAnswer) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t, 60*time.Second), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		t.Fatal(err)
	}
	var payloads [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				payloads = append(payloads, []byte(strings.TrimSpace(p)))
			}
		}
	} else if len(bytes.TrimSpace(data)) > 0 {
		payloads = append(payloads, data)
	}
	var out []rpcAnswer
	for _, p := range payloads {
		var many []rpcAnswer
		if err := json.Unmarshal(p, &many); err == nil {
			out = append(out, many...)
			continue
		}
		var one rpcAnswer
		if err := json.Unmarshal(p, &one); err != nil {
			t.Fatalf("answer %q: %v", p, err)
		}
		out = append(out, one)
	}
	return resp, out
}
