package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func parseTraffic(t *testing.T, doc string) (*Config, []string) {
	t.Helper()
	cfg, err := Parse([]byte("mcpServers: {a: {command: x}}\n"+doc), "yaml", "t.yaml", &LoadOptions{Environ: []string{}})
	var keys []string
	for _, fe := range FieldErrors(err) {
		keys = append(keys, fe.Key+": "+fe.Msg)
	}
	slices.Sort(keys)
	return cfg, keys
}

func TestTrafficKeysDecode(t *testing.T) {
	cfg, errs := parseTraffic(t, `
gateway: {pinning: {mode: warn, file: /tmp/pins.json, newTools: hold}}
rateLimits:
  - {principals: ["group:contractor"], tools: ["*"], rate: 5/s, burst: 5}
  - {tools: ["github__*"], rate: 100/m, scope: global, maxConcurrent: 8}
  - {servers: [a], maxConcurrent: 2}
`)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := []RateLimit{
		{Principals: []string{"group:contractor"}, Tools: []string{"*"}, Rate: "5/s", Burst: 5},
		{Tools: []string{"github__*"}, Rate: "100/m", Scope: ScopeGlobal, MaxConcurrent: 8},
		{Servers: []string{"a"}, MaxConcurrent: 2},
	}
	if diff := cmp.Diff(want, cfg.RateLimits); diff != "" {
		t.Errorf("rateLimits (-want +got):\n%s", diff)
	}
	if got := cfg.Gateway.Pinning; got != (Pinning{Mode: PinningWarn, File: "/tmp/pins.json", NewTools: NewToolsHold}) {
		t.Errorf("pinning = %+v", got)
	}
	if b := want[1].EffectiveBurst(); b != 100 {
		t.Errorf("default burst of 100/m = %d, want 100", b)
	}
}

func TestPinningOfAServerOverridesTheGateways(t *testing.T) {
	cfg, errs := parseTraffic(t, `
gateway: {pinning: {mode: block, file: p.json}}
servers: {}
`)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	cfg.Servers["b"] = Server{Name: "b", Pinning: ServerPinning{Mode: PinningWarn, NewTools: NewToolsHold}}
	for _, tc := range []struct{ server, mode, newTools string }{
		{"a", PinningBlock, NewToolsAllow},
		{"b", PinningWarn, NewToolsHold},
	} {
		if m, n := cfg.PinningOf(cfg.Servers[tc.server]); m != tc.mode || n != tc.newTools {
			t.Errorf("server %s: %s %s, want %s %s", tc.server, m, n, tc.mode, tc.newTools)
		}
	}
}

func TestTrafficKeysReportEveryProblem(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string // key prefixes of the errors
	}{
		{"pinning without a file", "gateway: {pinning: {mode: block}}", []string{"gateway.pinning.file"}},
		{"a server pins without a file", "mcpServers: {b: {command: y, pinning: {mode: warn}}}", []string{"gateway.pinning.file"}},
		{"bad modes", "gateway: {pinning: {mode: strict, newTools: deny, file: x}}", []string{"gateway.pinning.mode", "gateway.pinning.newTools"}},
		{"unknown pinning key", "gateway: {pinning: {file: x, hash: sha1}}", []string{"gateway.pinning.hash"}},
		{"bad rates", "rateLimits: [{rate: 5/d}, {rate: 0/s}, {rate: fast}, {rate: 5/s, scope: team}]",
			[]string{"rateLimits[0].rate", "rateLimits[1].rate", "rateLimits[2].rate", "rateLimits[3].scope"}},
		{"a limit of nothing", "rateLimits: [{tools: [x]}]", []string{"rateLimits[0]"}},
		{"burst without a rate", "rateLimits: [{maxConcurrent: 1, burst: 3}]", []string{"rateLimits[0].burst"}},
		{"negative numbers", "rateLimits: [{rate: 1/s, burst: -1, maxConcurrent: -2}]", []string{"rateLimits[0].burst", "rateLimits[0].maxConcurrent"}},
		{"empty principals", "rateLimits: [{rate: 1/s, principals: []}]", []string{"rateLimits[0].principals"}},
		{"unknown key", "rateLimits: [{rate: 1/s, tool: [x]}]", []string{"rateLimits[0].tool"}},
		{"a typo of the section", "ratelimits: []", []string{"ratelimits"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.doc
			if strings.HasPrefix(doc, "mcpServers:") {
				doc = strings.Replace(doc, "mcpServers: {", "mcpServers: {a: {command: x}, ", 1)
				cfg, err := Parse([]byte(doc), "yaml", "t.yaml", &LoadOptions{Environ: []string{}})
				_ = cfg
				if err == nil || !strings.Contains(err.Error(), tt.want[0]) {
					t.Fatalf("error %v, want one for %s", err, tt.want[0])
				}
				return
			}
			_, errs := parseTraffic(t, doc)
			if len(errs) != len(tt.want) {
				t.Fatalf("errors %q, want one for each of %q", errs, tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(errs[i], w+":") {
					t.Errorf("error %q, want one for %s", errs[i], w)
				}
			}
		})
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in  string
		n   int
		per time.Duration
		ok  bool
	}{
		{"20/s", 20, time.Second, true},
		{" 100 / m ", 100, time.Minute, true},
		{"1/h", 1, time.Hour, true},
		{"0/s", 0, 0, false},
		{"1.5/s", 0, 0, false},
		{"5/d", 0, 0, false},
		{"5", 0, 0, false},
		{"", 0, 0, false},
	} {
		n, per, err := ParseRate(tc.in)
		if (err == nil) != tc.ok || n != tc.n || per != tc.per {
			t.Errorf("ParseRate(%q) = %d, %v, %v", tc.in, n, per, err)
		}
	}
}

// FuzzParseRate: ParseRate never panics, and what it accepts is a positive count over one of
// the three periods.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"20/s", "100/m", "1/h", "0/s", "-1/s", "9999999999/s", "/", "1//s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, per, err := ParseRate(s)
		if err == nil && (n < 1 || (per != time.Second && per != time.Minute && per != time.Hour)) {
			t.Fatalf("ParseRate(%q) = %d, %v", s, n, per)
		}
	})
}
