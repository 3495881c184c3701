package mcpx

import (
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStateless: the split falls at 2026-07-28, by date, and a missing
// version is an old one.
func TestStateless(t *testing.T) {
	tests := []struct {
		name    string
		version string
		want    bool
	}{
		{name: "empty", version: "", want: false},
		{name: "first version", version: "2024-11-05", want: false},
		{name: "handshake era's last", version: "2025-11-25", want: false},
		{name: "the day before", version: "2026-07-27", want: false},
		{name: "stateless", version: "2026-07-28", want: true},
		{name: "later", version: "2027-01-01", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Stateless(tt.version); got != tt.want {
				t.Errorf("Stateless(%q) = %v, want %v", tt.version, got, tt.want)
			}
		})
	}
}

// TestStatelessSDKVersions: the SDK speaks StatelessVersion and at least one
// older version, so both sides of the split are reachable.
func TestStatelessSDKVersions(t *testing.T) {
	versions := mcp.SupportedProtocolVersions()
	if !slices.Contains(versions, StatelessVersion) {
		t.Errorf("SDK versions %v lack %s", versions, StatelessVersion)
	}
	if !slices.ContainsFunc(versions, func(v string) bool { return !Stateless(v) }) {
		t.Errorf("SDK versions %v: none before %s", versions, StatelessVersion)
	}
}
