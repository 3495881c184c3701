package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/manifold-mcp/manifold/internal/redact"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// call runs f on the live session under the concurrency limit and the call
// timeout, and turns transport failures into the package's errors. A
// JSON-RPC error from the upstream is returned wrapped, code intact. URLs
// in an error are redacted (net/http's errors show the upstream's URL,
// query included).
func call[R any](ctx context.Context, u *Upstream, f func(context.Context, *mcp.ClientSession) (R, error)) (R, error) {
	res, err := callRaw(ctx, u, f)
	return res, redact.Error(err)
}

func callRaw[R any](ctx context.Context, u *Upstream, f func(context.Context, *mcp.ClientSession) (R, error)) (R, error) {
	var zero R
	ctx, stop := detach(ctx)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, u.callTimeout)
	defer cancel()
	cs, err := u.acquire(ctx)
	if err != nil {
		return zero, err
	}
	defer u.release()
	res, err := f(ctx, cs)
	if err == nil {
		return res, nil
	}
	switch {
	case isTooLarge(err):
		return zero, fmt.Errorf("upstream %q: %w (%d bytes)", u.cfg.Name, ErrTooLarge, u.opts.MaxMessageBytes)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(context.Cause(ctx), context.Canceled):
		return zero, fmt.Errorf("upstream %q: %w after %s", u.cfg.Name, ErrTimeout, u.callTimeout)
	case connectionLost(err):
		return zero, fmt.Errorf("upstream %q: %w (connection lost: %v)", u.cfg.Name, ErrUnavailable, err)
	}
	return zero, fmt.Errorf("upstream %q: %w", u.cfg.Name, err)
}

// connectionLost reports whether err means the connection to the upstream
// is gone (a call racing a crash sees any of these), as opposed to an
// answer or a malformed message.
func connectionLost(err error) bool {
	for _, target := range []error{
		mcp.ErrConnectionClosed, io.EOF, io.ErrUnexpectedEOF, io.ErrClosedPipe,
		os.ErrClosed, net.ErrClosed, syscall.EPIPE, syscall.ECONNRESET, syscall.ECONNREFUSED,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// detach returns a context that is cancelled with ctx but carries none of
// its values, except the OpenTelemetry trace context and baggage (see
// withTraceContext), which an http or sse upstream receives as W3C headers.
// The go-sdk keys protocol state on context values (the downstream
// request's protocol version, its response stream): a downstream request's
// must not leak into the upstream call, or an HTTP upstream gets the
// client's MCP-Protocol-Version header.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	d, cancel := context.WithCancelCause(withTraceContext(context.Background(), ctx))
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	return d, func() {
		stop()
		cancel(context.Canceled)
	}
}

// CallTool forwards tools/call; params.Name is the upstream's own name.
func (u *Upstream) CallTool(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	if params != nil && params.Arguments == nil {
		p := *params
		p.Arguments = map[string]any{} // as the SDK sends it: never null
		params = &p
	}
	if res, ok, err := viaRaw[mcp.CallToolResult](ctx, u, "tools/call", params); ok {
		return res, err
	}
	return call(ctx, u, func(ctx context.Context, cs *mcp.ClientSession) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, params)
	})
}

// GetPrompt forwards prompts/get.
func (u *Upstream) GetPrompt(ctx context.Context, params *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	if res, ok, err := viaRaw[mcp.GetPromptResult](ctx, u, "prompts/get", params); ok {
		return res, err
	}
	return call(ctx, u, func(ctx context.Context, cs *mcp.ClientSession) (*mcp.GetPromptResult, error) {
		return cs.GetPrompt(ctx, params)
	})
}

// ReadResource forwards resources/read; params.URI is the upstream's own URI.
func (u *Upstream) ReadResource(ctx context.Context, params *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	if res, ok, err := viaRaw[mcp.ReadResourceResult](ctx, u, "resources/read", params); ok {
		return res, err
	}
	return call(ctx, u, func(ctx context.Context, cs *mcp.ClientSession) (*mcp.ReadResourceResult, error) {
		return cs.ReadResource(ctx, params)
	})
}

// viaRaw sends a typed call of method as a raw call (CallRaw) when the
// connection takes raw calls, and decodes the result; ok is false when it
// does not, or params is nil (the SDK fills them in), and the SDK session
// is to send it. The raw path is the one whose notifications are relayed
// before the answer on every transport: the SDK's streamable HTTP
// connection hands a response over before its handlers have run for the
// notifications read just ahead of it (see notes.go). It also adds the
// members a stateless version's requests carry, and the Mcp-Name and
// Mcp-Param-* headers, as the SDK does.
func viaRaw[R, P any](ctx context.Context, u *Upstream, method string, params *P) (_ *R, ok bool, _ error) {
	if params == nil || !u.TakesRaw() {
		return nil, false, nil
	}
	body, err := json.Marshal(params)
	if err != nil {
		return nil, true, fmt.Errorf("upstream %q: %s params: %w", u.cfg.Name, method, err)
	}
	// Detached as the SDK path's calls are (see detach).
	ctx, stop := detach(ctx)
	defer stop()
	out, err := u.CallRaw(ctx, method, body)
	switch {
	case errors.Is(err, ErrRawUnsupported):
		return nil, false, nil // the connection changed since TakesRaw
	case err != nil:
		return nil, true, err
	}
	res := new(R)
	if err := json.Unmarshal(out, res); err != nil {
		return nil, true, fmt.Errorf("upstream %q: %s result: %w", u.cfg.Name, method, err)
	}
	return res, true, nil
}

// Complete forwards completion/complete.
func (u *Upstream) Complete(ctx context.Context, params *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	return call(ctx, u, func(ctx context.Context, cs *mcp.ClientSession) (*mcp.CompleteResult, error) {
		return cs.Complete(ctx, params)
	})
}

// SetLoggingLevel forwards logging/setLevel (protocol versions before
// 2026-07-28, where the level is per session).
func (u *Upstream) SetLoggingLevel(ctx context.Context, level mcpx.LoggingLevel) error {
	_, err := call(ctx, u, func(ctx context.Context, cs *mcp.ClientSession) (struct{}, error) {
		return struct{}{}, mcpx.SetLoggingLevel(ctx, cs, &mcpx.SetLoggingLevelParams{Level: level})
	})
	return err
}

// Subscribe forwards resources/subscribe for uri (the upstream's own URI).
// The subscription is renewed whenever the upstream reconnects, until
// Unsubscribe.
func (u *Upstream) Subscribe(ctx context.Context, uri string) error {
	_, err := call(ctx, u, func(ctx context.Context, cs *mcp.ClientSession) (struct{}, error) {
		return struct{}{}, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	})
	if err == nil {
		u.mu.Lock()
		if u.subs == nil {
			u.subs = map[string]bool{}
		}
		u.subs[uri] = true
		u.mu.Unlock()
	}
	return err
}

// Unsubscribe forwards resources/unsubscribe for uri.
func (u *Upstream) Unsubscribe(ctx context.Context, uri string) error {
	u.mu.Lock()
	delete(u.subs, uri)
	u.mu.Unlock()
	_, err := call(ctx, u, func(ctx context.Context, cs *mcp.ClientSession) (struct{}, error) {
		return struct{}{}, cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
	})
	return err
}

// Subscriptions returns the number of resource URIs subscribed to.
func (u *Upstream) Subscriptions() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.subs)
}

// rootsChanged is the placeholder root whose (re)addition makes the go-sdk
// client send notifications/roots/list_changed: the client's own roots are
// never listed, since roots/list is relayed (see relayRequests).
var rootsChanged = &mcpx.Root{URI: "manifold:roots-changed"}

// NotifyRootsListChanged sends notifications/roots/list_changed to the
// server, when the connection declared roots with listChanged.
func (u *Upstream) NotifyRootsListChanged() {
	u.mu.Lock()
	c := u.client
	u.mu.Unlock()
	if c != nil {
		mcpx.AddRoots(c, rootsChanged)
	}
}
