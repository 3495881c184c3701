package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDiscovery(t *testing.T) {
	doc := `
gateway:
  discovery:
    mode: progressive
    groups: {admins: full, bots: progressive}
    always: ["everything__echo", "memory__*"]
`
	cfg, err := Parse([]byte(doc), FormatYAML, "d.yaml", testOpts(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Discovery{
		Mode:   DiscoveryProgressive,
		Groups: map[string]string{"admins": DiscoveryFull, "bots": DiscoveryProgressive},
		Always: []string{"everything__echo", "memory__*"},
	}
	if diff := cmp.Diff(want, cfg.Gateway.Discovery); diff != "" {
		t.Errorf("discovery (-want +got):\n%s", diff)
	}
	if !cfg.Gateway.Discovery.Progressive() {
		t.Error("Progressive() = false for mode progressive")
	}
}

func TestDiscoveryProgressive(t *testing.T) {
	tests := []struct {
		name string
		d    Discovery
		want bool
	}{
		{name: "absent section is full for everyone", d: Discovery{}, want: false},
		{name: "mode full", d: Discovery{Mode: DiscoveryFull}, want: false},
		{name: "mode progressive", d: Discovery{Mode: DiscoveryProgressive}, want: true},
		{name: "one group progressive", d: Discovery{Mode: DiscoveryFull, Groups: map[string]string{"bots": DiscoveryProgressive}}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.Progressive(); got != tt.want {
				t.Errorf("Progressive() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDiscoveryValidation(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []wantErr
	}{
		{
			name: "unknown mode",
			doc:  "gateway: {discovery: {mode: lazy}}\n",
			want: []wantErr{{"d.yaml", "gateway.discovery.mode", "full or progressive"}},
		},
		{
			name: "unknown group mode",
			doc:  "gateway: {discovery: {groups: {bots: some}}}\n",
			want: []wantErr{{"d.yaml", "gateway.discovery.groups.bots", "full or progressive"}},
		},
		{
			name: "empty always pattern",
			doc:  "gateway: {discovery: {always: ['']}}\n",
			want: []wantErr{{"d.yaml", "gateway.discovery.always", "empty pattern"}},
		},
		{
			name: "unknown key",
			doc:  "gateway: {discovery: {mod: full}}\n",
			want: []wantErr{{"d.yaml", "gateway.discovery.mod", "unknown key"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), FormatYAML, "d.yaml", testOpts(nil))
			checkErrors(t, err, tt.want)
		})
	}
}

func TestDiscoveryFromEnvironment(t *testing.T) {
	cfg, err := Parse([]byte("gateway: {discovery: {mode: full}}\n"), FormatYAML, "d.yaml",
		testOpts(nil, "MANIFOLD_GATEWAY__DISCOVERY__MODE=progressive", "MANIFOLD_GATEWAY__DISCOVERY__ALWAYS=a__x, b__*"))
	if err != nil {
		t.Fatal(err)
	}
	want := Discovery{Mode: DiscoveryProgressive, Always: []string{"a__x", "b__*"}}
	if diff := cmp.Diff(want, cfg.Gateway.Discovery); diff != "" {
		t.Errorf("discovery (-want +got):\n%s", diff)
	}
	_, err = Parse(nil, FormatYAML, "d.yaml", testOpts(nil, "MANIFOLD_GATEWAY__DISCOVERY__MODE=lazy"))
	checkErrors(t, err, []wantErr{{"environment", "MANIFOLD_GATEWAY__DISCOVERY__MODE", "full or progressive"}})
}
