package mcpx

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The go-sdk deprecates sampling, roots and logging as of protocol version
// 2026-07-28 (SEP-2577). A gateway must still relay them: clients and
// servers on every older version use them, and the SDK keeps them working
// through the deprecation window. Every use of those APIs in this
// repository's non-test code goes through this file, each with its own
// lint:ignore, so that staticcheck reports any other deprecated API as
// soon as it is used.

// Types of the deprecated features, under their SDK names.
type (
	//lint:ignore SA1019 sampling is relayed for clients and servers before 2026-07-28
	CreateMessageParams = mcp.CreateMessageParams
	//lint:ignore SA1019 sampling is relayed for clients and servers before 2026-07-28
	CreateMessageResult = mcp.CreateMessageResult
	//lint:ignore SA1019 sampling is relayed for clients and servers before 2026-07-28
	CreateMessageWithToolsParams = mcp.CreateMessageWithToolsParams
	//lint:ignore SA1019 sampling is relayed for clients and servers before 2026-07-28
	CreateMessageWithToolsResult = mcp.CreateMessageWithToolsResult
	//lint:ignore SA1019 sampling is relayed for clients and servers before 2026-07-28
	SamplingMessage = mcp.SamplingMessage
	//lint:ignore SA1019 sampling is relayed for clients and servers before 2026-07-28
	SamplingMessageV2 = mcp.SamplingMessageV2
	//lint:ignore SA1019 sampling is relayed for clients and servers before 2026-07-28
	SamplingCapabilities = mcp.SamplingCapabilities
	//lint:ignore SA1019 sampling is relayed for clients and servers before 2026-07-28
	SamplingToolsCapabilities = mcp.SamplingToolsCapabilities
	//lint:ignore SA1019 roots are relayed for clients and servers before 2026-07-28
	ListRootsParams = mcp.ListRootsParams
	//lint:ignore SA1019 roots are relayed for clients and servers before 2026-07-28
	ListRootsResult = mcp.ListRootsResult
	//lint:ignore SA1019 roots are relayed for clients and servers before 2026-07-28
	Root = mcp.Root
	//lint:ignore SA1019 roots are relayed for clients and servers before 2026-07-28
	RootCapabilities = mcp.RootCapabilities
	//lint:ignore SA1019 logging is relayed for clients and servers before 2026-07-28
	LoggingLevel = mcp.LoggingLevel
	//lint:ignore SA1019 logging is relayed for clients and servers before 2026-07-28
	LoggingMessageParams = mcp.LoggingMessageParams
	//lint:ignore SA1019 logging is relayed for clients and servers before 2026-07-28
	SetLoggingLevelParams = mcp.SetLoggingLevelParams
	//lint:ignore SA1019 logging is relayed for clients and servers before 2026-07-28
	LoggingCapabilities = mcp.LoggingCapabilities
)

// MetaKeyLogLevel is the _meta key of a 2026-07-28 request's log level.
//
//lint:ignore SA1019 the level of 2026-07-28 requests is relayed like logging/setLevel
const MetaKeyLogLevel = mcp.MetaKeyLogLevel

// Sampling returns c's sampling capability (nil: none).
func Sampling(c *mcp.ClientCapabilities) *SamplingCapabilities {
	//lint:ignore SA1019 sampling is relayed for clients and servers before 2026-07-28
	return c.Sampling
}

// SetSampling sets c's sampling capability.
func SetSampling(c *mcp.ClientCapabilities, s *SamplingCapabilities) {
	//lint:ignore SA1019 sampling is relayed for clients and servers before 2026-07-28
	c.Sampling = s
}

// RootsV2 returns c's roots capability as the SDK keeps it for clients
// that declared it (nil: none, or declared only through the legacy field;
// see RootsListChanged).
func RootsV2(c *mcp.ClientCapabilities) *RootCapabilities {
	//lint:ignore SA1019 roots are relayed for clients and servers before 2026-07-28
	return c.RootsV2
}

// RootsListChanged reports the listChanged of c's legacy roots field.
func RootsListChanged(c *mcp.ClientCapabilities) bool {
	//lint:ignore SA1019 roots are relayed for clients and servers before 2026-07-28
	return c.Roots.ListChanged
}

// SetRootsV2 sets c's roots capability.
func SetRootsV2(c *mcp.ClientCapabilities, r *RootCapabilities) {
	//lint:ignore SA1019 roots are relayed for clients and servers before 2026-07-28
	c.RootsV2 = r
}

// Logging returns c's logging capability (nil: none).
func Logging(c *mcp.ServerCapabilities) *LoggingCapabilities {
	//lint:ignore SA1019 logging is relayed for clients and servers before 2026-07-28
	return c.Logging
}

// SetLogging sets c's logging capability.
func SetLogging(c *mcp.ServerCapabilities, l *LoggingCapabilities) {
	//lint:ignore SA1019 logging is relayed for clients and servers before 2026-07-28
	c.Logging = l
}

// SetRootsListChangedHandler sets o's handler of
// notifications/roots/list_changed.
func SetRootsListChangedHandler(o *mcp.ServerOptions, h func(context.Context, *mcp.RootsListChangedRequest)) {
	//lint:ignore SA1019 roots are relayed for clients and servers before 2026-07-28
	o.RootsListChangedHandler = h
}

// SetLoggingMessageHandler sets o's handler of notifications/message.
func SetLoggingMessageHandler(o *mcp.ClientOptions, h func(context.Context, *mcp.LoggingMessageRequest)) {
	//lint:ignore SA1019 logging is relayed for clients and servers before 2026-07-28
	o.LoggingMessageHandler = h
}

// CreateMessageWithTools sends sampling/createMessage to ss's client.
func CreateMessageWithTools(ctx context.Context, ss *mcp.ServerSession, p *CreateMessageWithToolsParams) (*CreateMessageWithToolsResult, error) {
	//lint:ignore SA1019 sampling is relayed for clients and servers before 2026-07-28
	return ss.CreateMessageWithTools(ctx, p)
}

// ListRoots sends roots/list to ss's client.
func ListRoots(ctx context.Context, ss *mcp.ServerSession, p *ListRootsParams) (*ListRootsResult, error) {
	//lint:ignore SA1019 roots are relayed for clients and servers before 2026-07-28
	return ss.ListRoots(ctx, p)
}

// Log sends notifications/message to ss's client, if it asked for the level.
func Log(ctx context.Context, ss *mcp.ServerSession, p *LoggingMessageParams) error {
	//lint:ignore SA1019 logging is relayed for clients and servers before 2026-07-28
	return ss.Log(ctx, p)
}

// SetLoggingLevel sends logging/setLevel to cs's server.
func SetLoggingLevel(ctx context.Context, cs *mcp.ClientSession, p *SetLoggingLevelParams) error {
	//lint:ignore SA1019 logging is relayed for clients and servers before 2026-07-28
	return cs.SetLoggingLevel(ctx, p)
}

// AddRoots adds roots to c, which notifies its servers that declared
// interest (notifications/roots/list_changed).
func AddRoots(c *mcp.Client, roots ...*Root) {
	//lint:ignore SA1019 roots are relayed for clients and servers before 2026-07-28
	c.AddRoots(roots...)
}
