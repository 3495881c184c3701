package gateway

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestOAuthCallbackOnlyInTheCheckedBrowser: the start page checks that whoever opens carol's
// link is carol, then redirects to the upstream's authorization server. carol passes the
// check and, instead of following the redirect, hands the authorization URL to alice, who
// signs in there: the callback, reached in alice's browser (no sign-in cookie of carol's), is
// refused, and carol's calls do not reach the upstream as alice. The state is left as it
// was: carol's own browser completes the sign-in with it, as carol. Before the check, alice's
// upstream account was stored as carol's.
func TestOAuthCallbackOnlyInTheCheckedBrowser(t *testing.T) {
	r := newIdentityRig(t)
	carols := newBrowser()
	code, loc := formOf(t, carols, r.link(t, "carol", "user"), carolKey)
	authz := redirectTo(t, "carol's key", code, loc, "", r.as.Issuer)
	as := func(b *http.Client, user string) (int, string) {
		u, err := url.Parse(authz)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("user", user)
		u.RawQuery = q.Encode()
		code, loc, page := visit(t, b, u.String())
		code, _, page = visit(t, b, redirectTo(t, "the authorization server", code, loc, page, r.url))
		return code, page
	}
	if code, page := as(newBrowser(), "alice"); code != http.StatusForbidden || !strings.Contains(page, "Not your sign-in") {
		t.Errorf("callback in a browser that never proved to be carol: %d %q, want 403", code, page)
	}
	if code, page := as(carols, "carol"); code != http.StatusOK || !strings.Contains(page, "Signed in") {
		t.Fatalf("callback in carol's browser: %d %q, want signed in", code, page)
	}
	cs := connectAs(t, r.url, carolKey, "2025-11-25")
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "user__whoami"})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "carol" {
		t.Errorf("carol's call: %+v, %v; want the upstream to see carol", res, err)
	}
}
