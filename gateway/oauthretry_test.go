package gateway

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestConsentRetryWaitsAfterLinkOpened: a 2026-07-28 client's retry waits for the sign-in to
// complete (README: "the retry waits for the sign-in ... and succeeds") also once the browser
// opened the start link and the user is at the authorization server: it succeeds when the
// callback comes, instead of answering at once with a new input_required.
func TestConsentRetryWaitsAfterLinkOpened(t *testing.T) {
	_, hs, _ := oauthGateway(t, "local")
	cs := connectModern(t, hs, &mcp.ClientOptions{
		Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "user__sign_in"})
	if err != nil || !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("got %v %+v, want input_required", err, res)
	}
	link := res.InputRequests[consentInputKey].(*mcp.ElicitParams).URL

	// The browser opens the link and reaches the authorization server; the user has not
	// finished there yet when the client retries.
	b := newBrowser()
	code, loc, page := visit(t, b, link)
	if code != http.StatusFound {
		t.Fatalf("start link: %d, want a redirect to the authorization server\n%s", code, page)
	}
	u, _ := url.Parse(loc)
	q := u.Query()
	q.Set("user", "local")
	u.RawQuery = q.Encode()
	code, loc, page = visit(t, b, u.String())
	callback := redirectTo(t, "the authorization server", code, loc, page, hs.URL)

	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "user__sign_in",
			InputResponses: mcp.InputResponseMap{consentInputKey: &mcp.ElicitResult{Action: "accept"}},
			RequestState:   res.RequestState})
		done <- answer{r, err}
	}()
	time.Sleep(300 * time.Millisecond) // the user signs in at the authorization server
	if code, _, page := visit(t, b, callback); code != http.StatusOK {
		t.Fatalf("callback: %d\n%s", code, page)
	}
	a := <-done
	if a.err != nil || a.res.NeedsInput() || !strings.Contains(resultText(a.res), "signed in") {
		t.Errorf("retry after the link was opened: %v, needs input %v, %q; want it to wait for the sign-in and succeed",
			a.err, a.res != nil && a.res.NeedsInput(), resultText(a.res))
	}
}
