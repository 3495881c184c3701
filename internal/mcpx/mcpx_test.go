package mcpx

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestRecover: a panicking handler becomes an internal error, logged with
// its stack, and the session keeps serving.
func TestRecover(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	srv := mcp.NewServer(&mcp.Implementation{Name: "s"}, nil)
	srv.AddReceivingMiddleware(Recover(zap.New(core)))
	srv.AddTool(&mcp.Tool{Name: "boom", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { panic("kaboom") })
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for i := range 2 {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "boom"})
		rpcErr, ok := AsRPCError(err)
		if !ok || rpcErr.Code != jsonrpc.CodeInternalError {
			t.Fatalf("call %d: err = %v, want internal error", i, err)
		}
	}
	if err := cs.Ping(context.Background(), nil); err != nil {
		t.Errorf("session dead after panics: %v", err)
	}
	if n := logs.FilterMessage("panic in MCP handler").Len(); n != 2 {
		t.Errorf("logged %d panics, want 2", n)
	}
}

func TestAsRPCError(t *testing.T) {
	inner := RPCError(-31050, "upstream %q down", "a")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{name: "direct", err: inner, want: true},
		{name: "wrapped", err: fmt.Errorf("calling: %w", inner), want: true},
		{name: "other", err: errors.New("x"), want: false},
		{name: "nil", err: nil, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := AsRPCError(tc.err)
			if ok != tc.want || (ok && got.Code != -31050) {
				t.Errorf("AsRPCError(%v) = %v, %v", tc.err, got, ok)
			}
		})
	}
}
