package conformance

import (
	"testing"
)

// knownClientFailures are client scenarios the Go SDK client itself does
// not pass (so neither can the gateway, which uses it upstream), with the
// reason.
var knownClientFailures = map[string]string{}

// TestClientScenarios runs the suite's client scenarios with the Go SDK
// client (test/conformance/client) directly, and with Manifold as the
// client side: the scenario server is the gateway's HTTP upstream, and the
// same driver plays the scenario through `manifold serve --stdio`. Each
// run happens in a private network namespace, because the suite's
// scenario servers listen on all interfaces.
func TestClientScenarios(t *testing.T) {
	Require(t)
	if testing.Short() {
		t.Skip("short mode")
	}
	if _, err := NetnsAvailable(); err != nil {
		t.Skipf("client scenarios need a private network namespace: %v", err)
	}
	client := Build(t, "test/conformance/client")
	manifold := Build(t, "cmd/manifold")
	direct := map[string]Result{}
	via := map[string]Result{}
	for _, sc := range ClientScenarios {
		direct[sc] = RunClientScenario(t, sc, client, nil)
		via[sc] = RunClientScenario(t, sc, client+" --via-manifold "+manifold, nil)
	}
	t.Logf("Go SDK client, direct:\n%s", Summary(direct))
	t.Logf("Manifold as the client:\n%s", Summary(via))
	for _, sc := range ClientScenarios {
		if r := direct[sc]; !r.Passed() {
			if reason, ok := knownClientFailures[sc]; ok {
				t.Logf("known: %s (%s)", r, reason)
				continue
			}
			t.Errorf("direct: %s\n%s", r, diffChecks(Result{}, r))
		}
	}
	CheckNoRegressions(t, "manifold as the client", direct, via, knownGatewayClientFailures)
}

// knownGatewayClientFailures are client scenarios that pass with the Go
// SDK client directly but not yet with Manifold as the client.
var knownGatewayClientFailures = map[string]string{}
