package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/manifold-mcp/manifold/plugins/sdk"
	"github.com/manifold-mcp/manifold/upstream"
)

// The test binary is also the plugin the tests start (and the guard):
//
//	<bin> upstream-guard -- CMD…   upstream.RunGuard
//	MANIFOLD_PLUGIN=hook <bin>     testPlugin, served with sdk.Serve
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "upstream-guard" {
		os.Exit(upstream.RunGuard(os.Args[2:], os.Stderr))
	}
	if os.Getenv(sdk.Handshake.MagicCookieKey) == sdk.Handshake.MagicCookieValue {
		sdk.Serve(testPlugin())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testConfig is the test plugin's config.
type testConfig struct {
	// Block: a tool_pre_call whose arguments contain it is blocked.
	Block string `json:"block"`
	// Replace: tool_post_call replaces this text with "[gone]".
	Replace string `json:"replace"`
	// Rename: list_post renames these tools.
	Rename map[string]string `json:"rename"`
}

// testPlugin implements tool_pre_call, tool_post_call, prompt_pre_get
// (which answers with what the process sees of itself) and list_post.
func testPlugin() *sdk.Plugin {
	var cfg atomic.Pointer[testConfig]
	cfg.Store(&testConfig{})
	return &sdk.Plugin{
		Configure: func(_ context.Context, raw json.RawMessage) error {
			c := &testConfig{}
			if len(raw) > 0 {
				if err := json.Unmarshal(raw, c); err != nil {
					return err
				}
			}
			cfg.Store(c)
			return nil
		},
		ToolPreCall: func(_ context.Context, c *sdk.Context, args json.RawMessage) (sdk.Result, error) {
			if b := cfg.Load().Block; b != "" && strings.Contains(string(args), b) {
				return sdk.Result{Action: sdk.Block, Reason: "no " + b + " for " + c.Principal, Rule: "test"}, nil
			}
			return sdk.Result{}, nil
		},
		ToolPostCall: func(_ context.Context, _ *sdk.Context, res json.RawMessage) (sdk.Result, error) {
			r := cfg.Load().Replace
			if r == "" || !strings.Contains(string(res), r) {
				return sdk.Result{}, nil
			}
			return sdk.Result{Action: sdk.Modify, Payload: json.RawMessage(strings.ReplaceAll(string(res), r, "[gone]")), Counts: map[string]int64{"word": 1}}, nil
		},
		PromptPreGet: func(context.Context, *sdk.Context, json.RawMessage) (sdk.Result, error) {
			stdin, _ := io.ReadAll(os.Stdin)
			b, _ := json.Marshal(map[string]any{"env": os.Environ(), "stdin": len(stdin), "pgid": syscall.Getpgrp()})
			return sdk.Result{Action: sdk.Respond, Payload: b}, nil
		},
		ListPost: func(_ context.Context, _ *sdk.Context, items []sdk.Item) ([]sdk.Item, error) {
			for i := range items {
				if to, ok := cfg.Load().Rename[items[i].Name]; ok {
					items[i].Name = to
				}
			}
			return items, nil
		},
	}
}

// selfSum returns the SHA-256 of the test binary.
func selfSum(t *testing.T) string {
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
