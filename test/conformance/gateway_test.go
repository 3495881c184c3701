package conformance

import (
	"os"
	"path/filepath"
	"testing"
)

// knownGatewayFailures are the scenarios that pass against the fixture
// directly but not yet through the gateway, with the reason. They are
// logged, not failed; remove an entry when the gateway learns the feature.
var knownGatewayFailures = map[string]string{}

// TestGatewayServerScenarios runs the suite's server scenarios against
// Manifold fronting the fixture, (b) as a stdio upstream and (c) as a
// streamable HTTP upstream, with prefix "" so that names and URIs are the
// ones the suite calls. Every scenario that passes against the fixture
// directly must pass through the gateway.
func TestGatewayServerScenarios(t *testing.T) {
	Require(t)
	if testing.Short() {
		t.Skip("short mode")
	}
	fixture := Build(t, "cmd/manifold-fixture")
	manifold := Build(t, "cmd/manifold")
	fixtureURL, _ := StartHTTP(t, fixture, "--http", "127.0.0.1:0")
	direct := RunServerScenarios(t, fixtureURL, &ServerOptions{Suite: "all"})

	for _, tc := range []struct{ name, upstream string }{
		{"stdio upstream", fixture},
		{"http upstream", fixtureURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "manifold.yaml")
			if err := os.WriteFile(cfg, []byte(GatewayConfig(tc.upstream)), 0o600); err != nil {
				t.Fatal(err)
			}
			url := StartGateway(t, manifold, cfg)
			via := RunServerScenarios(t, url, &ServerOptions{Suite: "all"})
			t.Logf("through the gateway, %s:\n%s", tc.name, Summary(via))
			CheckNoRegressions(t, "gateway with "+tc.name, direct, via, knownGatewayFailures)
		})
	}
}
