package gateway

import (
	"context"
	"fmt"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The relay's side of the bridge (bridge.go): which server requests of an
// older upstream may be parked for a 2026-07-28 client, and parking them
// with their types.

// bridgeable checks that a server request of method from up, resolved to
// o, whose client is on version 2026-07-28 or later, can be asked through
// the bridge. Only a bridged call can ask, and only when it is the one
// call in flight on up: the request names no call, and parking it on a
// sibling call of the same client would leave the call that needs the
// answer waiting for nothing (the relay of older clients can afford the
// oldest call of the session, since any of its streams reaches the client).
func (r relay) bridgeable(up *upstream.Upstream, o *origin, method, version string) error {
	if bridgedOf(o) == nil {
		return &jsonrpc.Error{Code: codeUnroutable, Message: fmt.Sprintf(
			"manifold: cannot relay %s to a %s client outside a call the gateway bridges", method, version)}
	}
	uf := r.g.flights.lookup(up)
	uf.mu.Lock()
	n := 0
	for _, f := range uf.m {
		if f.ctx.Err() == nil {
			n++
		}
	}
	uf.mu.Unlock()
	if n > 1 {
		return &jsonrpc.Error{Code: codeUnroutable, Message: fmt.Sprintf(
			"manifold: cannot route %s from upstream %q: %d calls are in flight on its shared session, and a %s client can only be asked within the call", method, up.Name(), n, version)}
	}
	return nil
}

// checkAnswer checks that answer a is of the kind request p asks for.
func checkAnswer(p mcp.InputRequest, a mcp.InputResponse) error {
	ok := false
	switch p.(type) {
	case *mcp.ElicitParams:
		_, ok = a.(*mcp.ElicitResult)
	case *mcpx.CreateMessageParams, *mcpx.CreateMessageWithToolsParams:
		switch a.(type) {
		case *mcpx.CreateMessageWithToolsResult, *mcpx.CreateMessageResult:
			ok = true
		}
	case *mcpx.ListRootsParams:
		_, ok = a.(*mcpx.ListRootsResult)
	}
	if !ok {
		return fmt.Errorf("a %s does not answer %s", responseKind(a), inputMethod(p))
	}
	return nil
}

// responseKind names the kind of an input response, for errors.
func responseKind(a mcp.InputResponse) string {
	switch a.(type) {
	case *mcp.ElicitResult:
		return "elicitation result"
	case *mcpx.CreateMessageWithToolsResult, *mcpx.CreateMessageResult:
		return "sampling result"
	case *mcpx.ListRootsResult:
		return "roots list"
	}
	return fmt.Sprintf("%T", a)
}

// createMessage parks a sampling request of the upstream on bc.
func (bc *bridgedCall) createMessage(ctx context.Context, p *mcpx.CreateMessageWithToolsParams) (*mcpx.CreateMessageWithToolsResult, error) {
	a, err := bc.park(ctx, p, "sampling")
	if err != nil {
		return nil, err
	}
	switch r := a.(type) {
	case *mcpx.CreateMessageWithToolsResult:
		return r, nil
	case *mcpx.CreateMessageResult:
		return &mcpx.CreateMessageWithToolsResult{Meta: r.Meta, Content: []mcp.Content{r.Content},
			Model: r.Model, Role: r.Role, StopReason: r.StopReason}, nil
	}
	return nil, errInternal // checkAnswer let nothing else through
}

// elicit parks an elicitation request of the upstream on bc.
func (bc *bridgedCall) elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	a, err := bc.park(ctx, p, "elicitation")
	if err != nil {
		return nil, err
	}
	if r, ok := a.(*mcp.ElicitResult); ok {
		return r, nil
	}
	return nil, errInternal
}

// listRoots parks a roots request of the upstream on bc.
func (bc *bridgedCall) listRoots(ctx context.Context, p *mcpx.ListRootsParams) (*mcpx.ListRootsResult, error) {
	a, err := bc.park(ctx, p, "roots")
	if err != nil {
		return nil, err
	}
	if r, ok := a.(*mcpx.ListRootsResult); ok {
		return r, nil
	}
	return nil, errInternal
}
