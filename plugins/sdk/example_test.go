package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/manifold-mcp/manifold/plugins/sdk"
)

// A plugin that blocks tool calls whose arguments hold "rm -rf" and
// implements no other hook. main calls Serve; the gateway starts the binary
// (`command:` and `sha256:` in its plugins section).
func Example() {
	p := &sdk.Plugin{
		ToolPreCall: func(_ context.Context, c *sdk.Context, args json.RawMessage) (sdk.Result, error) {
			if bytes.Contains(args, []byte("rm -rf")) {
				return sdk.Result{Action: sdk.Block, Reason: "not on " + c.Server, Rule: "no-rm"}, nil
			}
			return sdk.Result{}, nil
		},
	}
	_ = p // in main: sdk.Serve(p)
}
