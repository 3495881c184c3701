// Package builtin holds the plugins shipped inside the manifold binary:
// `builtin: NAME` in a plugins entry runs `manifold plugin NAME`, which
// serves Registry[NAME] with the SDK, a process of its own like any
// third-party plugin (docs/architecture.md, Plugins). The adapters here
// turn the detection engines (redact, guard) into hooks.
package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/manifold-mcp/manifold/plugins/builtin/guard"
	"github.com/manifold-mcp/manifold/plugins/builtin/redact"
	"github.com/manifold-mcp/manifold/plugins/sdk"
)

// Registry maps each builtin's name to the constructor of its plugin. Its
// keys are config.BuiltinPlugins.
var Registry = map[string]func() *sdk.Plugin{
	"redact": Redact,
	"guard":  Guard,
}

// Redact returns the redact plugin: tool results, prompt messages and
// resource contents (and, when its config says arguments: true, tool and
// prompt arguments) have their secrets and personal data replaced by
// [REDACTED:<kind>]; the audit record gets the counts by kind.
func Redact() *sdk.Plugin {
	r, configure := engine(redact.New)
	post := func(_ context.Context, _ *sdk.Context, payload json.RawMessage) (sdk.Result, error) {
		return redactResult(r.Load(), payload)
	}
	pre := func(_ context.Context, _ *sdk.Context, payload json.RawMessage) (sdk.Result, error) {
		red := r.Load()
		if red == nil || !red.Arguments() {
			return sdk.Result{}, nil
		}
		return redactResult(red, payload)
	}
	return &sdk.Plugin{
		Configure:   configure,
		ToolPreCall: pre, PromptPreGet: pre,
		ToolPostCall: post, PromptPostGet: post, ResourcePostRead: post,
	}
}

// redactResult redacts payload with red.
func redactResult(red *redact.Redactor, payload json.RawMessage) (sdk.Result, error) {
	if red == nil {
		return sdk.Result{}, fmt.Errorf("redact: not configured")
	}
	out, n, err := red.JSON(payload)
	if err != nil {
		return sdk.Result{}, err
	}
	if len(n) == 0 {
		return sdk.Result{}, nil
	}
	counts := make(map[string]int64, len(n))
	for k, v := range n {
		counts[k] = int64(v)
	}
	return sdk.Result{Action: sdk.Modify, Payload: out, Rule: "redact", Counts: counts}, nil
}

// Guard returns the guard plugin: a tool call whose arguments match one of
// its rules is blocked with the rule's message.
func Guard() *sdk.Plugin {
	g, configure := engine(guard.New)
	return &sdk.Plugin{
		Configure: configure,
		ToolPreCall: func(_ context.Context, c *sdk.Context, args json.RawMessage) (sdk.Result, error) {
			gd := g.Load()
			if gd == nil {
				return sdk.Result{}, fmt.Errorf("guard: not configured")
			}
			v, err := gd.Check(c.Name, args)
			if err != nil {
				return sdk.Result{}, err
			}
			if !v.Blocked {
				return sdk.Result{}, nil
			}
			return sdk.Result{Action: sdk.Block, Reason: v.Message, Rule: v.Rule}, nil
		},
	}
}

// engine holds the engine newEngine builds from the plugin's config: its
// empty-config engine at first, then each config Configure accepts.
func engine[E any](newEngine func([]byte) (*E, error)) (*atomic.Pointer[E], func(context.Context, json.RawMessage) error) {
	var p atomic.Pointer[E]
	if e, err := newEngine(nil); err == nil {
		p.Store(e)
	}
	return &p, func(_ context.Context, config json.RawMessage) error {
		e, err := newEngine(config)
		if err != nil {
			return err
		}
		p.Store(e)
		return nil
	}
}

// Main is the body of `manifold plugin NAME`: it serves the builtin NAME
// to the gateway that started it, and returns the exit code (2 for an
// unknown name).
func Main(args []string, errOut func(string)) int {
	if len(args) != 1 {
		errOut("usage: manifold plugin NAME (started by the gateway for `builtin: NAME`)")
		return 2
	}
	mk, ok := Registry[args[0]]
	if !ok {
		errOut(fmt.Sprintf("manifold plugin: unknown builtin %q", args[0]))
		return 2
	}
	sdk.Serve(mk())
	return 0
}
