// Package mcpx holds small helpers around the go-sdk shared by the gateway's
// server side and the upstream client side: panic recovery middleware,
// JSON-RPC error helpers, the protocol version split (Stateless), and the
// one adapter to the SDK's deprecated sampling, roots and logging APIs
// (deprecated.go). It has no state.
package mcpx

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// Recover returns a middleware that turns a panic in any later handler into a
// JSON-RPC internal error, logged with its stack. The go-sdk has no recover of
// its own, so without this a panicking handler kills the process. A nil logger
// logs nothing.
func Recover(logger *zap.Logger) mcp.Middleware {
	if logger == nil {
		logger = zap.NewNop()
	}
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			defer func() {
				if r := recover(); r != nil {
					logger.Error("panic in MCP handler",
						zap.String("method", method),
						zap.Any("panic", r),
						zap.ByteString("stack", debug.Stack()))
					res = nil
					err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
				}
			}()
			return next(ctx, method, req)
		}
	}
}

// AsRPCError returns the JSON-RPC error inside err, if any. The go-sdk wraps
// errors received from a peer, so errors.As is needed to keep their code.
func AsRPCError(err error) (*jsonrpc.Error, bool) {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return rpcErr, true
	}
	return nil, false
}

// RPCError builds a JSON-RPC error with a formatted message.
func RPCError(code int64, format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
