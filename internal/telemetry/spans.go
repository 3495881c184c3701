package telemetry

import (
	"context"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-mcp/manifold/internal/mcpx"
)

// ServerKey is the attribute naming the upstream server (its mcpServers key) on spans and
// metrics; Prometheus shows it as manifold_server.
const ServerKey = attribute.Key("manifold.server")

// Values of the network.transport attribute (SpanInfo.Transport).
const (
	TransportTCP  = "tcp"  // streamable HTTP and SSE
	TransportPipe = "pipe" // stdio
)

// Values of error.type besides JSON-RPC error codes; see ErrorType.
const (
	ErrorTypeToolError = "tool_error"
	ErrorTypeTimeout   = "timeout"
	ErrorTypeCanceled  = "canceled"
	ErrorTypeOther     = "_OTHER"
)

// SpanInfo describes an MCP request for StartServer and StartClient. Empty fields are left
// out of the span.
type SpanInfo struct {
	// Method is the MCP method (mcp.method.name), such as "tools/call".
	Method string
	// Target is the tool or prompt name, or the resource URI, as the receiving side knows it:
	// namespaced on the server span, the upstream's own name on the client span. It is recorded
	// as gen_ai.tool.name (tools/call), gen_ai.prompt.name (prompts/get) or mcp.resource.uri
	// (resources/…), and the first two also name the span ("tools/call get_weather").
	Target string
	// RequestID is the JSON-RPC id of the request (jsonrpc.request.id).
	RequestID string
	// SessionID is the MCP session id (mcp.session.id).
	SessionID string
	// ProtocolVersion is the negotiated MCP version (mcp.protocol.version).
	ProtocolVersion string
	// Transport is TransportTCP or TransportPipe (network.transport).
	Transport string
	// Server is the upstream server's name (manifold.server).
	Server string
	// Attrs are added as they are.
	Attrs []attribute.KeyValue
}

// StartServer starts the server span of a downstream request, a child of the span context in
// ctx (see Extract and ExtractHTTP), and returns it with a context holding it. With tracing
// off it returns ctx and the (non-recording) span already in it, allocating nothing: a trace
// context received from the client then still reaches the upstreams through Inject.
func (t *Telemetry) StartServer(ctx context.Context, info SpanInfo) (context.Context, trace.Span) {
	if !t.Tracing() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.start(ctx, trace.SpanKindServer, &info)
}

// StartClient starts the client span of an upstream call, a child of the span in ctx; inject
// it into the call's params._meta with Inject. With tracing off it returns ctx and the span in
// it, like StartServer.
func (t *Telemetry) StartClient(ctx context.Context, info SpanInfo) (context.Context, trace.Span) {
	if !t.Tracing() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.start(ctx, trace.SpanKindClient, &info)
}

func (t *Telemetry) start(ctx context.Context, kind trace.SpanKind, info *SpanInfo) (context.Context, trace.Span) {
	// The sampler (parent-based ratio) needs neither the name's target nor the attributes:
	// give them only to spans that record, so that a request sampled out costs little.
	ctx, span := t.tracer.Start(ctx, info.Method, trace.WithSpanKind(kind))
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := make([]attribute.KeyValue, 0, 8+len(info.Attrs))
	attrs = append(attrs, semconv.McpMethodNameKey.String(info.Method))
	if info.Target != "" {
		switch info.Method {
		case "tools/call":
			attrs = append(attrs, semconv.GenAIToolName(info.Target), semconv.GenAIOperationNameExecuteTool)
			span.SetName(info.Method + " " + info.Target)
		case "prompts/get":
			attrs = append(attrs, semconv.GenAIPromptName(info.Target))
			span.SetName(info.Method + " " + info.Target)
		case "resources/read", "resources/subscribe", "resources/unsubscribe":
			attrs = append(attrs, semconv.McpResourceURI(info.Target)) // not in the name: unbounded
		}
	}
	for _, a := range [...]struct {
		key attribute.Key
		val string
	}{
		{semconv.JSONRPCRequestIDKey, info.RequestID},
		{semconv.McpSessionIDKey, info.SessionID},
		{semconv.McpProtocolVersionKey, info.ProtocolVersion},
		{semconv.NetworkTransportKey, info.Transport},
		{ServerKey, info.Server},
	} {
		if a.val != "" {
			attrs = append(attrs, a.key.String(a.val))
		}
	}
	span.SetAttributes(append(attrs, info.Attrs...)...)
	return ctx, span
}

// EndSpan ends span. A non-empty errType (see ErrorType) marks it failed: error.type is set,
// and rpc.response.status_code too when errType is a JSON-RPC error code, and the status is
// Error. A tool result with isError is a failure too: pass ErrorTypeToolError.
func EndSpan(span trace.Span, errType string) {
	if !span.IsRecording() {
		return
	}
	if errType != "" {
		if _, err := strconv.ParseInt(errType, 10, 64); err == nil {
			span.SetAttributes(semconv.ErrorTypeKey.String(errType), semconv.RPCResponseStatusCode(errType))
		} else {
			span.SetAttributes(semconv.ErrorTypeKey.String(errType))
		}
		span.SetStatus(codes.Error, errType)
	}
	span.End()
}

// ErrorType returns the error.type of err as the MCP semantic conventions define it: "" for
// nil; the JSON-RPC error code ("-32602") when err holds a *jsonrpc.Error; else
// ErrorTypeTimeout or ErrorTypeCanceled for a context error; else ErrorTypeOther.
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	if rpcErr, ok := mcpx.AsRPCError(err); ok {
		return strconv.FormatInt(rpcErr.Code, 10)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ErrorTypeTimeout
	case errors.Is(err, context.Canceled):
		return ErrorTypeCanceled
	}
	return ErrorTypeOther
}

// IDs returns the trace and span id (hex) of the span context in ctx, for the audit log, or
// two empty strings when there is none.
func IDs(ctx context.Context) (traceID, spanID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}
