package conformance

import (
	"testing"
)

// AuthScenarios are the suite's auth/* client scenarios of the specification (2025-03-26,
// 2025-06-18, 2025-11-25), which Manifold must pass as the OAuth client of its upstream.
var AuthScenarios = []string{
	"auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
	"auth/basic-cimd",
	"auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported", "auth/scope-omitted-when-undefined",
	"auth/scope-step-up", "auth/scope-retry-limit",
	"auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
	"auth/pre-registration",
	"auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback",
}

// AuthOtherScenarios are the suite's draft and extension auth scenarios: reported, not
// required.
var AuthOtherScenarios = []string{
	"auth/resource-mismatch", "auth/offline-access-scope", "auth/offline-access-not-supported",
	"auth/client-credentials-jwt", "auth/client-credentials-basic", "auth/cross-app-access-complete-flow",
}

// knownAuthFailures are specification auth scenarios Manifold does not pass yet, with the
// reason.
var knownAuthFailures = map[string]string{}

// TestAuthScenarios runs the auth/* client scenarios with Manifold as the OAuth client:
// the test client (test/conformance/client) starts `manifold serve --stdio` with the
// scenario server as an upstream with `auth.type: oauth`, lists, calls the sign-in tool,
// opens the URL elicitation's link like a browser (the suite's /authorize answers with a
// code at once, to the gateway's loopback callback), lists again and calls the scenario's
// tool.
func TestAuthScenarios(t *testing.T) {
	Require(t)
	if testing.Short() {
		t.Skip("short mode")
	}
	if _, err := NetnsAvailable(); err != nil {
		t.Skipf("client scenarios need a private network namespace: %v", err)
	}
	client := Build(t, "test/conformance/client")
	manifold := Build(t, "cmd/manifold")
	via := map[string]Result{}
	for _, sc := range append(append([]string{}, AuthScenarios...), AuthOtherScenarios...) {
		via[sc] = RunClientScenario(t, sc, client+" --via-manifold "+manifold, nil)
	}
	t.Logf("Manifold as the OAuth client:\n%s", Summary(via))
	for _, sc := range AuthScenarios {
		r := via[sc]
		reason, known := knownAuthFailures[sc]
		switch {
		case !r.Passed() && known:
			t.Logf("known: %s (%s)", r, reason)
		case !r.Passed():
			t.Errorf("%s\n%s", r, diffChecks(Result{}, r))
		case known:
			t.Errorf("%s passes now: remove it from knownAuthFailures", sc)
		}
	}
}
