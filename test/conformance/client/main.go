// Command client is the MCP client that test/conformance puts under the
// conformance suite's client scenarios (initialize, tools_call,
// elicitation-sep1034-client-defaults, sse-retry). The suite runs it as
//
//	client [--via-manifold BIN] URL
//
// with MCP_CONFORMANCE_SCENARIO naming the scenario. Without --via-manifold
// it is the Go SDK's client talking to the scenario server at URL
// directly. With it, it starts `BIN serve --stdio` with the scenario server
// as the one upstream (prefix "", so names are unchanged) and plays the
// scenario through the gateway: the gateway's upstream side is then the
// client under test.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	via := flag.String("via-manifold", "", "manifold `binary` to play the scenario through (stdio)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: client [--via-manifold BIN] URL")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := run(ctx, os.Getenv("MCP_CONFORMANCE_SCENARIO"), flag.Arg(0), *via); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, scenario, url, via string) error {
	if strings.HasPrefix(scenario, "auth/") {
		if via == "" {
			return errors.New("auth scenarios run through Manifold only (--via-manifold)")
		}
		return runAuth(ctx, url, via)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "manifold-conformance-client", Version: "v0.1.0"}, &mcp.ClientOptions{
		// Accept every elicitation without filling anything in: the SDK
		// must apply the schema's defaults (SEP-1034).
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		},
	})
	var transport mcp.Transport = &mcp.StreamableClientTransport{Endpoint: url}
	if via != "" {
		dir, err := os.MkdirTemp("", "conformance-client-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg := filepath.Join(dir, "manifold.yaml")
		body := fmt.Sprintf("mcpServers:\n  scenario:\n    type: http\n    url: %q\n    prefix: \"\"\n", url)
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			return err
		}
		cmd := exec.Command(via, "serve", "--stdio", "--config", cfg)
		cmd.Stderr = os.Stderr
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	call := func(name string, args map[string]any) error {
		found := false
		for _, t := range tools.Tools {
			found = found || t.Name == name
		}
		if !found {
			return fmt.Errorf("no tool %q among %d tools", name, len(tools.Tools))
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return fmt.Errorf("tools/call %s: %w", name, err)
		}
		if res.IsError {
			return fmt.Errorf("tools/call %s: tool error %v", name, res.Content)
		}
		return nil
	}
	switch scenario {
	case "initialize":
		return nil
	case "tools_call":
		return call("add_numbers", map[string]any{"a": 5, "b": 3})
	case "elicitation-sep1034-client-defaults":
		return call("test_client_elicitation_defaults", map[string]any{})
	case "sse-retry":
		return call("test_reconnection", map[string]any{})
	case "":
		return errors.New("MCP_CONFORMANCE_SCENARIO is not set")
	}
	return fmt.Errorf("unknown scenario %q", scenario)
}
