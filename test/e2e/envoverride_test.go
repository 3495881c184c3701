package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestEnvOverridesReachTheServers runs the binary with a config whose server name has a dot
// and capitals, and overrides that server's prefix and a secret file through the
// environment: the tools appear under the overridden prefix, and the API key read from the
// file is the one the gateway asks for.
func TestEnvOverridesReachTheServers(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "api-key")
	if err := os.WriteFile(keyFile, []byte("e2e-key-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf(`mcpServers:
  Demo.One: { command: %q, args: [demo-server, --name, one] }
auth:
  apiKeys: [{name: ci, keyFile: %q}]
`, binary, keyFile))
	g := serving(t, launch(t, []string{"serve", "--listen", "127.0.0.1:0", "--config", cfg}, nil, func(c *exec.Cmd) {
		c.Env = append(os.Environ(), "MANIFOLD_MCPSERVERS__DEMO.ONE__PREFIX=renamed", "MANIFOLD_GATEWAY__LOG__LEVEL=debug")
	}))
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-env"}, nil)
	cs, err := client.Connect(ctxT(t, 30*time.Second), &mcp.StreamableClientTransport{
		Endpoint:   g.url("/mcp"),
		HTTPClient: &http.Client{Transport: bearerVia{token: "e2e-key-0123456789abcdef", rt: http.DefaultTransport}},
	}, nil)
	if err != nil {
		t.Fatalf("connect with the key from the file: %v", err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctxT(t, 30*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) == 0 {
		t.Fatalf("no tools")
	}
	for _, tool := range res.Tools {
		if !strings.HasPrefix(tool.Name, "renamed__") {
			t.Errorf("tool %q: want the prefix the environment set", tool.Name)
		}
	}
}

// TestEnvOverrideTypoFailsValidate checks that `manifold validate` reports an override naming
// no key, naming the variable.
func TestEnvOverrideTypoFailsValidate(t *testing.T) {
	cfg := writeConfig(t, fmt.Sprintf("mcpServers:\n  a: { command: %q, args: [demo-server] }\n", binary))
	cmd := exec.Command(binary, "validate", "--config", cfg)
	cmd.Env = append(os.Environ(), "MANIFOLD_GATEWAY__LISTNE=127.0.0.1:9", "MANIFOLD_CLUSTER_SECRET=not-an-override")
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() == 0 {
		t.Fatalf("validate with a misspelt override: err = %v, output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "environment: MANIFOLD_GATEWAY__LISTNE: unknown key") || strings.Contains(string(out), "CLUSTER_SECRET") {
		t.Errorf("output:\n%s", out)
	}
}
