package upstream

import (
	"context"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Relay receives what an upstream server sends toward clients: its
// server→client requests and the notifications that belong to a client.
// The gateway implements it; the upstream package knows nothing of client
// sessions. Requests block until answered, and their ctx ends when the
// server cancels them. Notification methods of one connection run one at a
// time, in the order the server sent them, and before Settle returns for a
// call answered after them (notes.go); they must not block for long, since
// the notifications behind them wait.
type Relay interface {
	CreateMessage(ctx context.Context, from *Upstream, p *mcpx.CreateMessageWithToolsParams) (*mcpx.CreateMessageWithToolsResult, error)
	Elicit(ctx context.Context, from *Upstream, p *mcp.ElicitParams) (*mcp.ElicitResult, error)
	ListRoots(ctx context.Context, from *Upstream, p *mcpx.ListRootsParams) (*mcpx.ListRootsResult, error)
	Progress(from *Upstream, p *mcp.ProgressNotificationParams)
	Log(from *Upstream, p *mcpx.LoggingMessageParams)
	ResourceUpdated(from *Upstream, p *mcp.ResourceUpdatedNotificationParams)
	// ElicitationComplete receives notifications/elicitation/complete, which
	// ends a URL mode elicitation (protocol version 2025-11-25).
	ElicitationComplete(from *Upstream, p *mcp.ElicitationCompleteParams)
}

// relayRequests answers the server→client requests the connection declared
// capabilities for, through Options.Relay. It intercepts them before the
// SDK's own handlers, which would validate the server's elicitation schema
// and apply defaults to the answer: a relay passes both through untouched.
func (u *Upstream) relayRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		r, caps := u.opts.Relay, u.opts.Capabilities
		if r == nil || caps == nil {
			return next(ctx, method, req)
		}
		switch method {
		case "sampling/createMessage":
			if rq, ok := req.(*mcp.CreateMessageWithToolsRequest); ok && mcpx.Sampling(caps) != nil && rq.Params != nil {
				return r.CreateMessage(ctx, u, rq.Params)
			}
		case "elicitation/create":
			if rq, ok := req.(*mcp.ElicitRequest); ok && caps.Elicitation != nil {
				if rq.Params == nil {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "elicitation/create without params"}
				}
				return r.Elicit(ctx, u, rq.Params)
			}
		case "roots/list":
			if mcpx.RootsV2(caps) != nil {
				p, _ := req.GetParams().(*mcpx.ListRootsParams)
				return r.ListRoots(ctx, u, p)
			}
		}
		return next(ctx, method, req)
	}
}

// relayNotifications sets the handlers of o that pass notifications on to
// Options.Relay. They run only for connections the SDK reads alone (the
// standalone stream of streamable HTTP); the others queue them
// (withNoteQueue).
func (u *Upstream) relayNotifications(o *mcp.ClientOptions) {
	r := u.opts.Relay
	if r == nil {
		return
	}
	o.ProgressNotificationHandler = func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		if req.Params != nil {
			r.Progress(u, req.Params)
		}
	}
	mcpx.SetLoggingMessageHandler(o, func(_ context.Context, req *mcp.LoggingMessageRequest) {
		if req.Params != nil {
			r.Log(u, req.Params)
		}
	})
	o.ResourceUpdatedHandler = func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		if req.Params != nil {
			r.ResourceUpdated(u, req.Params)
		}
	}
	o.ElicitationCompleteHandler = func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
		if req.Params != nil {
			r.ElicitationComplete(u, req.Params)
		}
	}
}
