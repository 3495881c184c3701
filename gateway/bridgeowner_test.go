package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/manifold-mcp/manifold/config"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestBridgeStateBindsTheCredential: a call parked by alice, authenticated
// with her API key, cannot be resumed by a JWT whose subject is alice with
// the same groups: the state is refused as a tampered one is, and the call
// goes on; alice with her key resumes it.
func TestBridgeStateBindsTheCredential(t *testing.T) {
	const secret = "a-jwt-hmac-secret-of-at-least-32-bytes"
	h := newHarnessWith(t, func(c *config.Config) {
		c.Auth.APIKeys = []config.APIKey{{Name: "alice", Key: aliceKey, Groups: []string{"dev"}}}
		c.Auth.JWT = &config.JWT{Issuer: "https://idp.example", Audience: []string{"manifold"},
			Secret: secret, PrincipalClaim: "sub", GroupsClaim: "groups"}
	}, upstreamSpec{name: "ask", server: askingServer()})
	srv := httptest.NewServer(h.gw.Handler())
	t.Cleanup(srv.Close)
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": "https://idp.example", "aud": "manifold", "sub": "alice", "groups": []string{"dev"},
		"iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	connect := func(bearerToken string) *mcp.ClientSession {
		hc := &http.Client{Transport: bearer{bearerToken, http.DefaultTransport}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "owner-test"}, &mcp.ClientOptions{
			MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return nil, errors.New("answered through input_required only")
			},
		}).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: hc}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	byKey, byJWT := connect(aliceKey), connect(token)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := byKey.CallTool(ctx, &mcp.CallToolParams{Name: "ask__elicit"})
	if err != nil || !first.NeedsInput() || !isBridgeState(first.RequestState) {
		t.Fatalf("first round: %+v, %v; want input_required with the gateway's state", first, err)
	}
	answers := (&testClient{nonce: "k"}).answers(first.InputRequests)
	retry := &mcp.CallToolParams{Name: "ask__elicit", InputResponses: answers, RequestState: first.RequestState}

	_, err = byJWT.CallTool(ctx, retry)
	if rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "invalid requestState") {
		t.Errorf("resume by a JWT of the same name and groups: %v, want -32602 invalid requestState", err)
	}
	res, err := byKey.CallTool(ctx, retry)
	if err != nil || res.NeedsInput() || textOfContent(res.Content) != "accept k" {
		t.Fatalf("resume by alice's key: %+v, %v", res, err)
	}
	settled(t, h.gw)
}

// TestBindOwnerIsInjective: owners that differ in method, source or
// principal differ, however the strings are cut.
func TestBindOwnerIsInjective(t *testing.T) {
	triples := [][3]string{
		{"apikey", "key-1", "alice"}, {"jwt", "key-1", "alice"}, {"apikey", "key-2", "alice"},
		{"apikey", "key-1", "bob"}, {"apikeyk", "ey-1", "alice"}, {"apikey", "key-1a", "lice"},
		{"", "", "alice"}, {"", "", ""}, {"apikey", "", "key-1alice"},
	}
	seen := map[string][3]string{}
	for _, tr := range triples {
		o := bindOwner(tr[0], tr[1], tr[2])
		if prev, ok := seen[o]; ok {
			t.Errorf("%q and %q bind the same owner", prev, tr)
		}
		seen[o] = tr
	}
}
