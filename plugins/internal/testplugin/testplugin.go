// Package testplugin is the hook plugin the tests of the plugin host and
// of the gateway start: its config says what to block, replace and rename.
// It also answers prompt_pre_get with what its process sees of itself
// (environment, stdin, process group).
package testplugin

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/manifold-mcp/manifold/plugins/sdk"
)

// Config is the test plugin's config.
type Config struct {
	// Block: a tool_pre_call whose arguments contain it is blocked.
	Block string `json:"block"`
	// Replace: tool_post_call replaces this text with "[gone]".
	Replace string `json:"replace"`
	// Rename: list_post renames these tools.
	Rename map[string]string `json:"rename"`
	// AuditFile: audit_event appends each record to this file.
	AuditFile string `json:"auditFile"`
	// Rewrite: tool_pre_call replaces this text in the arguments with "rewritten".
	Rewrite string `json:"rewrite"`
	// Answer: a tool_pre_call whose arguments contain it is answered by the plugin, with a
	// tool error.
	Answer string `json:"answer"`
}

// New returns a plugin that implements tool_pre_call, tool_post_call, prompt_pre_get
// (which answers with what the process sees of itself) and list_post.
func New() *sdk.Plugin {
	var cfg atomic.Pointer[Config]
	cfg.Store(&Config{})
	return &sdk.Plugin{
		Configure: func(_ context.Context, raw json.RawMessage) error {
			c := &Config{}
			if len(raw) > 0 {
				if err := json.Unmarshal(raw, c); err != nil {
					return err
				}
			}
			cfg.Store(c)
			return nil
		},
		ToolPreCall: func(_ context.Context, c *sdk.Context, args json.RawMessage) (sdk.Result, error) {
			conf := cfg.Load()
			switch {
			case conf.Block != "" && strings.Contains(string(args), conf.Block):
				return sdk.Result{Action: sdk.Block, Reason: "no " + conf.Block + " for " + c.Principal, Rule: "test"}, nil
			case conf.Answer != "" && strings.Contains(string(args), conf.Answer):
				return sdk.Result{Action: sdk.Respond, Payload: json.RawMessage(`{"content":[{"type":"text","text":"answered by the plugin"}],"isError":true}`)}, nil
			case conf.Rewrite != "" && strings.Contains(string(args), conf.Rewrite):
				return sdk.Result{Action: sdk.Modify, Payload: json.RawMessage(strings.ReplaceAll(string(args), conf.Rewrite, "rewritten"))}, nil
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
		AuditEvent: func(_ context.Context, record json.RawMessage) {
			if path := cfg.Load().AuditFile; path != "" {
				if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
					f.Write(append(record, '\n'))
					f.Close()
				}
			}
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
