package telemetry_test

import (
	"context"
	"fmt"

	"github.com/manifold-mcp/manifold/internal/telemetry"
)

// The trace context a client puts in params._meta reaches the upstream's params._meta; with
// tracing on, the gateway's own client span becomes the upstream's parent.
func ExampleInject() {
	var tel *telemetry.Telemetry // tracing off: the client's context passes through
	downstream := map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}

	ctx := telemetry.Extract(context.Background(), downstream)
	ctx, server := tel.StartServer(ctx, telemetry.SpanInfo{Method: "tools/call", Target: "weather__forecast"})
	ctx, client := tel.StartClient(ctx, telemetry.SpanInfo{Method: "tools/call", Target: "forecast", Server: "weather"})
	upstream := telemetry.Inject(ctx, nil)
	telemetry.EndSpan(client, telemetry.ErrorTypeToolError)
	telemetry.EndSpan(server, "")

	fmt.Println(upstream["traceparent"])
	fmt.Println(telemetry.IDs(ctx))
	// Output:
	// 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	// 4bf92f3577b34da6a3ce929d0e0e4736 00f067aa0ba902b7
}
