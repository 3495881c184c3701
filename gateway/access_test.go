package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The keys of the test principals.
const (
	aliceKey = "alice-key-0123456789"
	bobKey   = "bob-key-0123456789ab"
	eveKey   = "eve-key-0123456789abc" // no groups: sees nothing
)

// teamPolicy is the example: developers see every tool, contractors
// a few, and nobody deletes.
func teamPolicy(c *config.Config) {
	c.Auth.APIKeys = []config.APIKey{
		{Name: "alice", Key: aliceKey, Groups: []string{"dev"}},
		{Name: "bob", Key: bobKey, Groups: []string{"contractor"}},
		{Name: "eve", Key: eveKey},
	}
	c.Policy = &config.Policy{Default: config.Deny, Rules: []config.Rule{
		{Effect: config.Allow, Match: config.Match{Tools: []string{"*"}, Prompts: []string{"*"}, Resources: []string{"*"}, Templates: []string{"*"}}, Principals: []string{"group:dev"}},
		{Effect: config.Allow, Match: config.Match{Tools: []string{"alpha__echo", "alpha__link"}, Resources: []string{"manifold://alpha/demo://alpha/readme"}}, Principals: []string{"group:contractor"}},
		{Effect: config.Deny, Match: config.Match{Tools: []string{"*__fail"}}},
	}}
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// teamGateway serves the alpha demo upstream over HTTP with teamPolicy; it
// returns the upstream to count the requests reaching it.
func teamGateway(t *testing.T, edit func(*config.Config)) (*Gateway, *httptest.Server, *fakeUpstream) {
	t.Helper()
	return teamGatewayWith(t, demo.NewServer("alpha", nil), edit)
}

// teamGatewayWith is teamGateway with srv as the upstream named alpha.
func teamGatewayWith(t *testing.T, srv *mcp.Server, edit func(*config.Config)) (*Gateway, *httptest.Server, *fakeUpstream) {
	t.Helper()
	return teamGatewayOpts(t, srv, edit, nil)
}

// teamGatewayOpts is teamGatewayWith with opts (Transports is set here).
func teamGatewayOpts(t *testing.T, srv *mcp.Server, edit func(*config.Config), opts *Options) (*Gateway, *httptest.Server, *fakeUpstream) {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	f := newFakeUpstream(srv)
	cfg := &config.Config{Servers: map[string]config.Server{
		"alpha": {Name: "alpha", Type: "stdio", Command: "unused"},
	}, Gateway: config.DefaultGateway()}
	teamPolicy(cfg)
	if edit != nil {
		edit(cfg)
	}
	o.Transports = map[string]func() (mcp.Transport, error){"alpha": f.transport}
	gw, err := New(cfg, &o)
	if err != nil {
		t.Fatal(err)
	}
	return gw, serveGateway(t, gw), f
}

// connectAs opens a session over streamable HTTP with token at version.
func connectAs(t *testing.T, url, token, version string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: bearer{token, http.DefaultTransport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "policy-test"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated %s, want %s", got, version)
	}
	return cs
}

func TestPolicyPerPrincipalViews(t *testing.T) {
	_, srv, up := teamGateway(t, nil)
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			alice := connectAs(t, srv.URL, aliceKey, version)
			bob := connectAs(t, srv.URL, bobKey, version)
			ctx := context.Background()

			aliceTools := toolNames(t, alice)
			for _, want := range []string{"alpha__echo", "alpha__add", "alpha__slow"} {
				if !slices.Contains(aliceTools, want) {
					t.Errorf("alice's tools lack %s: %v", want, aliceTools)
				}
			}
			if slices.Contains(aliceTools, "alpha__fail") {
				t.Errorf("alice sees the denied alpha__fail: %v", aliceTools)
			}
			if got, want := toolNames(t, bob), []string{"alpha__echo", "alpha__link"}; !slices.Equal(got, want) {
				t.Errorf("bob's tools = %v, want %v", got, want)
			}

			lr, err := bob.ListResources(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(lr.Resources) != 1 || lr.Resources[0].URI != "manifold://alpha/demo://alpha/readme" || lr.CacheScope != "private" {
				t.Errorf("bob's resources = %+v (cacheScope %q), want only the readme, private", lr.Resources, lr.CacheScope)
			}
			if lp, err := bob.ListPrompts(ctx, nil); err != nil || len(lp.Prompts) != 0 {
				t.Errorf("bob's prompts = %v, %v; want none", lp, err)
			}
			if lt, err := bob.ListResourceTemplates(ctx, nil); err != nil || len(lt.ResourceTemplates) != 0 {
				t.Errorf("bob's templates = %v, %v; want none", lt, err)
			}

			// Instructions name only the servers a principal sees something of.
			if !strings.Contains(bob.InitializeResult().Instructions, "Demo server alpha") {
				t.Errorf("bob's instructions lack alpha's: %q", bob.InitializeResult().Instructions)
			}
			eve := connectAs(t, srv.URL, eveKey, version)
			if got := toolNames(t, eve); len(got) != 0 {
				t.Errorf("eve lists %v, want nothing", got)
			}
			if ins := eve.InitializeResult().Instructions; strings.Contains(ins, "alpha") || !strings.HasPrefix(ins, "Manifold MCP gateway") {
				t.Errorf("eve's instructions = %q; want the gateway's header only", ins)
			}

			// A denied name fails exactly like a name that does not exist,
			// and the upstream hears nothing of it.
			before := up.calls.Load()
			_, denied := bob.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__add", Arguments: map[string]any{"a": 1, "b": 2}})
			_, unknown := bob.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__nope"})
			_, deniedAll := alice.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__fail"})
			if rpcCode(denied) != jsonrpc.CodeInvalidParams || rpcCode(deniedAll) != jsonrpc.CodeInvalidParams {
				t.Errorf("denied calls: %v / %v; want invalid params", denied, deniedAll)
			}
			if want := strings.Replace(unknown.Error(), "alpha__nope", "alpha__add", 1); denied.Error() != want {
				t.Errorf("denied error %q differs from unknown-name error %q", denied, unknown)
			}
			if _, err := bob.GetPrompt(ctx, &mcp.GetPromptParams{Name: "alpha__greet", Arguments: map[string]string{"person": "x"}}); rpcCode(err) != jsonrpc.CodeInvalidParams {
				t.Errorf("bob's prompts/get = %v; want unknown prompt", err)
			}
			// Resource not found is -32002 before 2026-07-28, -32602 since.
			wantNotFound := int64(codeLegacyResourceNotFound)
			if mcpx.Stateless(version) {
				wantNotFound = jsonrpc.CodeInvalidParams
			}
			if _, err := bob.ReadResource(ctx, &mcp.ReadResourceParams{URI: "manifold://alpha/demo://alpha/logo"}); rpcCode(err) != wantNotFound {
				t.Errorf("bob's read of the logo = %v (code %d); want resource not found (%d)", err, rpcCode(err), wantNotFound)
			}
			if _, err := bob.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "alpha__greet"},
				Argument: mcp.CompleteParamsArgument{Name: "person", Value: "a"}}); err == nil {
				t.Error("bob completed an argument of a prompt he may not see")
			}
			if n := up.calls.Load() - before; n != 0 {
				t.Errorf("the upstream received %d requests for denied names", n)
			}

			// Allowed calls go through.
			res, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "hi"}})
			if err != nil || res.IsError || !strings.Contains(textOf(t, res.Content), "hi") {
				t.Errorf("bob's echo = %+v, %v", res, err)
			}
			if _, err := bob.ReadResource(ctx, &mcp.ReadResourceParams{URI: "manifold://alpha/demo://alpha/readme"}); err != nil {
				t.Errorf("bob's read of the readme: %v", err)
			}
			if _, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__add", Arguments: map[string]any{"a": 1, "b": 2}}); err != nil {
				t.Errorf("alice's add: %v", err)
			}
		})
	}
}

func TestUnauthenticatedRequestsGet401(t *testing.T) {
	_, srv, up := teamGateway(t, func(c *config.Config) {
		c.Auth.Scopes = []string{"mcp"}
	})
	before := up.calls.Load()
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":"x"}}}`
	for _, tc := range []struct {
		name, auth string
		invalid    bool
	}{
		{"no header", "", false},
		{"wrong key", "Bearer wrong-key-0123456789", true},
		{"key of another scheme", "Basic " + aliceKey, true},
		{"key without scheme", aliceKey, true},
		{"key with trailing garbage", "Bearer " + aliceKey + "x", true},
		{"two tokens", "Bearer " + aliceKey + " " + aliceKey, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, body := range []string{initBody, call} {
				h := map[string]string{"Mcp-Protocol-Version": "2026-07-28"}
				if tc.auth != "" {
					h["Authorization"] = tc.auth
				}
				resp, text := post(t, srv.URL+"/mcp", body, h)
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("status %d (%s), want 401", resp.StatusCode, text)
				}
				ch := resp.Header.Get("WWW-Authenticate")
				if !strings.HasPrefix(ch, `Bearer realm="manifold"`) || !strings.Contains(ch, `scope="mcp"`) {
					t.Errorf("WWW-Authenticate = %q", ch)
				}
				if got := strings.Contains(ch, `error="invalid_token"`); got != tc.invalid {
					t.Errorf("WWW-Authenticate = %q: invalid_token present = %v, want %v", ch, got, tc.invalid)
				}
				if strings.Contains(ch, aliceKey) || strings.Contains(text, aliceKey) {
					t.Error("the response repeats the key")
				}
			}
		})
	}
	// Without JWT or authorization servers there is no OAuth metadata.
	resp, err := http.Get(srv.URL + prmPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("metadata without OAuth: status %d, want 404", resp.StatusCode)
	}
	if n := up.calls.Load() - before; n != 0 {
		t.Errorf("the upstream received %d requests from unauthenticated clients", n)
	}
}

func TestProtectedResourceMetadata(t *testing.T) {
	_, srv, _ := teamGateway(t, func(c *config.Config) {
		c.Auth.JWT = &config.JWT{Issuer: "https://idp.example", Audience: []string{"manifold"},
			Secret: strings.Repeat("s", 32), PrincipalClaim: "sub", GroupsClaim: "groups"}
		c.Auth.Scopes = []string{"mcp:tools"}
	})
	resp, _ := post(t, srv.URL+"/mcp", initBody, nil)
	ch := resp.Header.Get("WWW-Authenticate")
	wantURL := srv.URL + prmPath + "/mcp"
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(ch, fmt.Sprintf("resource_metadata=%q", wantURL)) {
		t.Fatalf("status %d, WWW-Authenticate %q; want 401 naming %s", resp.StatusCode, ch, wantURL)
	}
	for _, path := range []string{prmPath + "/mcp", prmPath} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var meta map[string]any
		err = json.NewDecoder(resp.Body).Decode(&meta)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"resource":                 srv.URL + "/mcp",
			"authorization_servers":    []any{"https://idp.example"},
			"scopes_supported":         []any{"mcp:tools"},
			"bearer_methods_supported": []any{"header"},
			"resource_name":            "Manifold MCP gateway",
		}
		if diff := gocmp.Diff(want, meta); diff != "" {
			t.Errorf("%s (-want +got):\n%s", path, diff)
		}
	}
}

// TestStdioIsTheLocalPrincipal: stdio sessions (and in-memory ones, which
// connect the same way) act as auth.local, whatever the HTTP auth.
func TestStdioIsTheLocalPrincipal(t *testing.T) {
	h := newHarnessWith(t, func(c *config.Config) {
		teamPolicy(c)
		c.Auth.Local = config.Principal{Name: "ops-bot", Groups: []string{"contractor"}}
	}, upstreamSpec{name: "alpha", demoName: "alpha"})
	ctx := context.Background()
	fromGateway, toClient := io.Pipe()
	fromClient, toGateway := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- h.gw.ServeStdio(ctx, fromClient, toClient) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio"}, nil).Connect(ctx, &mcp.IOTransport{Reader: fromGateway, Writer: toGateway}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := toolNames(t, cs), []string{"alpha__echo", "alpha__link"}; !slices.Equal(got, want) {
		t.Errorf("local principal's tools = %v, want %v", got, want)
	}
	cs.Close()
	<-done
	// A session without any identity while auth is on sees nothing.
	if got := toolNames(t, h.client); len(got) != 0 {
		t.Errorf("a session without identity lists %v", got)
	}
}
