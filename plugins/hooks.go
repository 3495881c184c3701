package plugins

import "github.com/manifold-mcp/manifold/plugins/sdk"

// Hook is one of the hooks a plugin may implement.
type Hook uint8

// The hooks, in the order of hookNames.
const (
	ToolPreCall Hook = iota
	ToolPostCall
	PromptPreGet
	PromptPostGet
	ResourcePreRead
	ResourcePostRead
	ListPost
	AuditEvent
	numHooks
)

var hookNames = [numHooks]string{
	sdk.ToolPreCall, sdk.ToolPostCall, sdk.PromptPreGet, sdk.PromptPostGet,
	sdk.ResourcePreRead, sdk.ResourcePostRead, sdk.ListPost, sdk.AuditEvent,
}

// String returns the hook's name in the protocol.
func (h Hook) String() string {
	if h < numHooks {
		return hookNames[h]
	}
	return "unknown"
}

// hookSet is a set of hooks, one bit each.
type hookSet uint16

// knownBit marks instance.known as set.
const knownBit = 1 << 16

func (s hookSet) has(h Hook) bool { return s&(1<<h) != 0 }

// parseHooks returns the set of a manifest's hook names; unknown names are
// ignored (a newer plugin's hooks).
func parseHooks(names []string) hookSet {
	var s hookSet
	for _, n := range names {
		for h, name := range hookNames {
			if n == name {
				s |= 1 << h
			}
		}
	}
	return s
}
