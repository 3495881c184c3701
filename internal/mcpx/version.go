package mcpx

// StatelessVersion is the first MCP protocol version without sessions:
// from it on a client sends its version with every request (in the
// MCP-Protocol-Version header and params._meta), takes server requests as
// input_required results instead of receiving them, and sets the log level
// per request. A stateful streamable HTTP handler of the SDK rejects it.
const StatelessVersion = "2026-07-28"

// Stateless reports whether protocol version speaks the stateless protocol,
// StatelessVersion or later. Versions are dates (YYYY-MM-DD), so their
// lexical order is their order in time; the empty version (none sent or
// negotiated) counts as an older, stateful one.
func Stateless(version string) bool {
	return version >= StatelessVersion
}
