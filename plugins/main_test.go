package plugins

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"testing"

	"github.com/manifold-mcp/manifold/plugins/internal/testplugin"
	"github.com/manifold-mcp/manifold/plugins/sdk"
	"github.com/manifold-mcp/manifold/upstream"
)

// The test binary is also the plugin the tests start (and the guard):
//
//	<bin> upstream-guard -- CMD…   upstream.RunGuard
//	MANIFOLD_PLUGIN=hook <bin>     testplugin.New(), served with sdk.Serve
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "upstream-guard" {
		os.Exit(upstream.RunGuard(os.Args[2:], os.Stderr))
	}
	if os.Getenv(sdk.Handshake.MagicCookieKey) == sdk.Handshake.MagicCookieValue {
		sdk.Serve(testplugin.New())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// selfSum returns the SHA-256 of the test binary.
func selfSum(t testing.TB) string {
	t.Helper()
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
