package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/testauth"
	"github.com/manifold-mcp/manifold/internal/testutil"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// oauthGateway serves a gateway in front of one oauth server, "user", of
// the test authorization server (its users: users), with auth off: every
// client is the local principal.
func oauthGateway(t *testing.T, users ...string) (*testauth.Server, *httptest.Server, *Gateway) {
	t.Helper()
	as := &testauth.Server{}
	upURL, stop := testauth.StartAuthCode(as, users...)
	t.Cleanup(stop)
	cfg := &config.Config{Servers: map[string]config.Server{
		"user": {Name: "user", Type: config.TypeHTTP, URL: upURL, Session: config.SessionPerClient, Auth: config.UpstreamAuth{Type: config.UpstreamAuthOAuth}},
	}, Gateway: config.DefaultGateway()}
	hs, gw := servePublicGateway(t, cfg) // oauthidentity_test.go
	return as, hs, gw
}

// signInAs opens a start link in a browser that signs in at the test
// authorization server as user, and returns the final status.
func signInAs(t *testing.T, link, user string) int {
	t.Helper()
	code, _, err := testauth.Browse(link, user, "")
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// connectModern connects a 2026-07-28 client (sessionless) to hs.
func connectModern(t *testing.T, hs *httptest.Server, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := testutil.ConnectStateless(context.Background(), hs.URL+"/mcp", nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listedTools(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return strings.Join(names, ",")
}

func resultText(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// TestSessionlessSignInByURLElicitation: a 2026-07-28 client, which has no
// session, lists its principal's own tools of an oauth server: the sign-in
// tool until it signed in. Its call of that tool is answered input_required
// with a URL elicitation of the gateway's start link and a requestState;
// the client's elicitation handler opens the link (the browser step), the
// SDK retries with the answer and the state, and the retry succeeds. Then
// the client lists the upstream's tools and its call reaches the upstream
// with the principal's token.
func TestSessionlessSignInByURLElicitation(t *testing.T) {
	as, hs, _ := oauthGateway(t, "local")
	var asked atomic.Int32
	var link atomic.Value
	changed := make(chan struct{}, 8)
	cs := connectModern(t, hs, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			link.Store(req.Params.URL)
			if req.Params.Mode != "url" || !strings.HasPrefix(req.Params.URL, hs.URL+"/oauth/start/") {
				t.Errorf("elicitation %+v, want a URL elicitation of the start page", req.Params)
				return &mcp.ElicitResult{Action: "cancel"}, nil
			}
			if code := signInAs(t, req.Params.URL, "local"); code != http.StatusOK {
				t.Errorf("sign-in: %d", code)
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	if got := listedTools(t, cs); got != "user__sign_in" {
		t.Fatalf("before signing in the tools are %q, want the sign-in tool alone", got)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "user__sign_in"})
	if err != nil || res.IsError || !strings.Contains(resultText(res), "signed in") {
		t.Fatalf("sign-in call: %v %q", err, resultText(res))
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("the client was asked %d times, want once", n)
	}
	// Its listen stream (opened at connect) hears that its tools changed.
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed on the client's listen stream after the sign-in")
	}
	if got := listedTools(t, cs); got != "user__whoami" {
		t.Fatalf("after the sign-in the tools are %q", got)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "user__whoami"})
	if err != nil || res.IsError || resultText(res) != "local" {
		t.Fatalf("whoami: %v %q", err, resultText(res))
	}
	seen := false
	for _, h := range as.Seen() {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
			if i, ok := as.Lookup(tok); ok && i.Principal == "local" {
				seen = true
			}
		}
	}
	if !seen {
		t.Error("the upstream never saw the principal's token")
	}
}

// TestSessionlessSignInAnswers: the other answers a 2026-07-28 client gets
// for a sign-in: without URL elicitation, an isError result naming the
// start link and what to do; a declined elicitation, an isError result that
// says so; a requestState altered, an invalid params error. None of them
// signs in.
func TestSessionlessSignInAnswers(t *testing.T) {
	_, hs, _ := oauthGateway(t, "local")
	t.Run("without URL elicitation", func(t *testing.T) {
		cs := connectModern(t, hs, &mcp.ClientOptions{})
		if got := listedTools(t, cs); got != "user__sign_in" {
			t.Fatalf("tools %q, want the sign-in tool alone", got)
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "user__sign_in"})
		if err != nil || !res.IsError || !strings.Contains(resultText(res), hs.URL+"/oauth/start/") || !strings.Contains(resultText(res), "retry") {
			t.Fatalf("got %v %+v, want an isError result with the start link", err, res)
		}
	})
	t.Run("declined", func(t *testing.T) {
		cs := connectModern(t, hs, &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "decline"}, nil
			},
		})
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "user__sign_in"})
		if err != nil || !res.IsError || !strings.Contains(resultText(res), "declined") {
			t.Fatalf("got %v %q, want an isError result saying it was declined", err, resultText(res))
		}
	})
	t.Run("altered requestState", func(t *testing.T) {
		cs := connectModern(t, hs, &mcp.ClientOptions{
			Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
			MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		})
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "user__sign_in"})
		if err != nil || !res.NeedsInput() || res.RequestState == "" || len(res.InputRequests) != 1 {
			t.Fatalf("got %v %+v, want input_required with a requestState", err, res)
		}
		_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "user__sign_in",
			InputResponses: mcp.InputResponseMap{consentInputKey: &mcp.ElicitResult{Action: "accept"}},
			RequestState:   res.RequestState[:len(res.RequestState)-2] + "AA"})
		if err == nil || !strings.Contains(err.Error(), "invalid requestState") {
			t.Fatalf("a retry with an altered state: %v, want invalid requestState", err)
		}
	})
}

// TestOAuthPoolUpstreamStandsBy: the pool upstream of an oauth server has
// no token of its own, so it never connects: /status shows it standing by
// for per-user sign-ins (not failed, no error, no restarts), and readiness
// does not wait for it.
func TestOAuthPoolUpstreamStandsBy(t *testing.T) {
	_, _, gw := oauthGateway(t, "local")
	st := gw.Status(nil)
	if len(st.Upstreams) != 1 {
		t.Fatalf("upstreams %+v", st.Upstreams)
	}
	u := st.Upstreams[0]
	if u.State != upstream.StateStandby || u.Error != "" || u.Restarts != 0 || !strings.Contains(u.Note, "per-user sign-in") {
		t.Errorf("the oauth server's status is %+v, want standby awaiting per-user sign-in", u.Status)
	}
	if r := gw.Readiness(); !r.Ready {
		t.Errorf("readiness %+v", r)
	}
}

// TestConsentWaits: a retry waiting for a sign-in is woken by it; the
// registry forgets a key once its last waiter stops or it is released.
func TestConsentWaits(t *testing.T) {
	var w consentWaits
	done, stop := w.waiting("s", "alice")
	_, stop2 := w.waiting("s", "alice")
	stop2()
	if len(w.m) != 1 {
		t.Fatalf("%d keys while one waits, want 1", len(w.m))
	}
	w.release("s", "alice")
	select {
	case <-done:
	default:
		t.Fatal("the sign-in did not wake the waiter")
	}
	stop()
	_, stop3 := w.waiting("s", "bob")
	stop3()
	if len(w.m) != 0 {
		t.Fatalf("%d keys left after every waiter stopped, want 0", len(w.m))
	}
}
