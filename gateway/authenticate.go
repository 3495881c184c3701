package gateway

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// authenticate is the authenticate stage of the call pipeline: it resolves
// who sent req under the call's snapshot (principal, access.go), once for
// the whole call. It refuses nothing: a caller without a principal is
// refused by the policy stage, which answers as for an unknown name.
func (g *Gateway) authenticate(ctx context.Context, c *call, req mcp.Request) {
	c.principal, c.known = principal(ctx, c.snap.access, req)
}
