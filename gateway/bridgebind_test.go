package gateway

// Tests of the MRTR bridge's bindings and limits (bridge.go, mrtr.go), from
// a review: each failed on the code before its fix.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reviewLegacyServer is a 2025-11-25 upstream whose tool "act" asks one
// elicitation, then answers with the target it was called with (what it
// acted on), and reports that target on acted.
func reviewLegacyServer(acted chan<- string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "legacy-review"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	s.AddTool(&mcp.Tool{Name: "act", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Target string }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		if _, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "confirm?", RequestedSchema: nameSchema}); err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		}
		if acted != nil {
			acted <- a.Target
		}
		return textResult("acted on " + a.Target), nil
	})
	return s
}

// TestBridgeRetryMustRepeatTheArguments: a bridged call's upstream acts on
// its first round's arguments, and its one audit record is written by the
// round that ends it. A retry carrying other arguments is refused (the
// spec asks servers to bind "a digest of its salient parameters" to the
// state), and leaves the call as it was: the retry with the first
// arguments then completes it, and the record shows what the upstream
// acted on. Before the binding, the retry with other arguments resumed the
// call and the audit log said "staging" where the upstream acted on
// "prod".
func TestBridgeRetryMustRepeatTheArguments(t *testing.T) {
	sink := newAuditSink(t, config.ArgumentsFull)
	acted := make(chan string, 4)
	h := newHarnessOpts(t, &Options{Audit: sink.log}, nil, upstreamSpec{name: "b", server: reviewLegacyServer(acted)})
	tc := newTestClient(t, h, "args", clientOptions{manual: true})
	prod := map[string]any{"target": "prod", "n": 1.0}
	first, err := tc.call(t, "b__act", &mcp.CallToolParams{Arguments: prod})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first round: %+v, %v", first, err)
	}
	res, err := tc.call(t, "b__act", &mcp.CallToolParams{Arguments: map[string]any{"target": "staging", "n": 1.0},
		InputResponses: tc.answers(first.InputRequests), RequestState: first.RequestState})
	if rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "other arguments") {
		t.Fatalf("retry with other arguments: %+v, %v; want invalid params", res, err)
	}
	// The same arguments written otherwise (key order, number form) are
	// the same arguments.
	res, err = tc.call(t, "b__act", &mcp.CallToolParams{Arguments: json.RawMessage(`{"n":1e0,"target":"prod"}`),
		InputResponses: tc.answers(first.InputRequests), RequestState: first.RequestState})
	if err != nil || textOfContent(res.Content) != "acted on prod" {
		t.Fatalf("retry with the first arguments: %+v, %v", res, err)
	}
	if got := <-acted; got != "prod" {
		t.Fatalf("upstream acted on %q", got)
	}
	settled(t, h.gw)
	var found bool
	for _, r := range sink.records(t) {
		if r["name"] != "b__act" || r["outcome"] != "ok" {
			continue
		}
		found = true
		if args, _ := json.Marshal(r["arguments"]); !strings.Contains(string(args), "prod") {
			t.Errorf("audit record of the call has arguments %s, but the upstream acted on prod", args)
		}
	}
	if !found {
		t.Error("no audit record of the completed call")
	}
}

// TestBridgedCallHoldsItsConcurrencySlot: a rate limit's maxConcurrent caps
// the calls in flight; a legacy client's call that waits for an
// elicitation holds its slot throughout, but a bridged call releases it
// when its first round answers input_required, while its upstream call
// goes on. A second call is then admitted and reaches the upstream
// although one is in flight.
func TestBridgedCallHoldsItsConcurrencySlot(t *testing.T) {
	h := newHarnessOpts(t, nil, func(c *config.Config) {
		c.RateLimits = []config.RateLimit{{Tools: []string{"b__*"}, MaxConcurrent: 1}}
	}, upstreamSpec{name: "b", server: reviewLegacyServer(nil)})
	tc := newTestClient(t, h, "conc", clientOptions{manual: true})
	first, err := tc.call(t, "b__act", &mcp.CallToolParams{Arguments: map[string]any{"target": "one"}})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first call: %+v, %v", first, err)
	}
	if n := countFlights(h.gw); n != 1 {
		t.Fatalf("%d calls in flight upstream, want the first call's", n)
	}
	second, err := tc.call(t, "b__act", &mcp.CallToolParams{Arguments: map[string]any{"target": "two"}})
	if err != nil || !strings.Contains(textOfContent(second.Content), "too many calls in flight") {
		t.Errorf("second call while the first is in flight upstream: %q (input_required %v), %v; want rate limited (too many calls in flight)",
			textOfContent(second.Content), second != nil && second.NeedsInput(), err)
	}
	// Let the first call end.
	res, err := tc.call(t, "b__act", &mcp.CallToolParams{Arguments: map[string]any{"target": "one"},
		InputResponses: tc.answers(first.InputRequests), RequestState: first.RequestState})
	if err != nil || textOfContent(res.Content) != "acted on one" {
		t.Fatalf("first call, retried: %+v, %v", res, err)
	}
	// Its end gave the slot back.
	settled(t, h.gw)
	third, err := tc.call(t, "b__act", &mcp.CallToolParams{Arguments: map[string]any{"target": "three"}})
	if err != nil || !third.NeedsInput() {
		t.Fatalf("a call after the first ended: %q, %v; want it admitted", textOfContent(third.Content), err)
	}
	if _, err := tc.call(t, "b__act", &mcp.CallToolParams{Arguments: map[string]any{"target": "three"},
		InputResponses: tc.answers(third.InputRequests), RequestState: third.RequestState}); err != nil {
		t.Fatal(err)
	}
}

// TestBridgedCallIsChargedOnce: a rate limit counts calls; a legacy
// client's call with an elicitation costs one token, but each MRTR round
// of a bridged call is charged as a call of its own, so under "1/h" a
// 2026-07-28 client can never finish a call that asks for input: its
// retry is refused, and the parked call waits for nothing.
func TestBridgedCallIsChargedOnce(t *testing.T) {
	h := newHarnessOpts(t, nil, func(c *config.Config) {
		c.RateLimits = []config.RateLimit{{Tools: []string{"b__*"}, Rate: "1/h"}}
	}, upstreamSpec{name: "b", server: reviewLegacyServer(nil)})
	tc := newTestClient(t, h, "rate", clientOptions{manual: true})
	first, err := tc.call(t, "b__act", &mcp.CallToolParams{Arguments: map[string]any{"target": "x"}})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first round: %+v, %v", first, err)
	}
	res, err := tc.call(t, "b__act", &mcp.CallToolParams{Arguments: map[string]any{"target": "x"},
		InputResponses: tc.answers(first.InputRequests), RequestState: first.RequestState})
	if err != nil || textOfContent(res.Content) != "acted on x" {
		t.Errorf("retry of the one call allowed per hour: %q, %v; want the call's result", textOfContent(res.Content), err)
	}
}

// TestRefusedRetryEndsTheBridgedCall: a reload denies the tool of
// a bridged call between its rounds. The retry is refused by policy (a
// retry is a request of its own: right), but the call authorized under
// the old policy stays parked, its upstream call running, until the call
// timeout and the TTL, although no retry can ever resume it; its audit
// record then says the client did not answer.
func TestRefusedRetryEndsTheBridgedCall(t *testing.T) {
	acted := make(chan string, 4)
	var base *config.Config
	next := make(chan *config.Config, 1)
	load := func() (*config.Config, error) {
		select {
		case c := <-next:
			return c, nil
		default:
			return base, nil
		}
	}
	h := newHarnessOpts(t, &Options{LoadConfig: load}, func(c *config.Config) {
		c.Source, c.Hash = "review.yaml", "sha256:1"
		c.Gateway.Timeouts.Call = 30 * time.Second
		c.Auth.Local.Name = "local"
		c.Policy = &config.Policy{Default: config.Allow}
		cp := *c
		base = &cp
	}, upstreamSpec{name: "b", server: reviewLegacyServer(acted)})
	tc := newTestClient(t, h, "deny", clientOptions{manual: true})
	first, err := tc.call(t, "b__act", &mcp.CallToolParams{Arguments: map[string]any{"target": "x"}})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first round: %+v, %v", first, err)
	}
	v2 := *base
	v2.Hash = "sha256:2"
	v2.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
		{Name: "no-act", Effect: config.Deny, Match: config.Match{Tools: []string{"b__act"}}}}}
	next <- &v2
	if res, err := h.gw.Reload(context.Background(), TriggerSignal); err != nil || res.Result != ReloadApplied {
		t.Fatalf("Reload: %+v, %v", res, err)
	}
	if _, err := tc.call(t, "b__act", &mcp.CallToolParams{Arguments: map[string]any{"target": "x"},
		InputResponses: tc.answers(first.InputRequests), RequestState: first.RequestState}); err == nil {
		t.Fatal("the retry of a tool the policy now denies was served")
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && (bridgedCalls(h.gw) > 0 || countFlights(h.gw) > 0) {
		time.Sleep(20 * time.Millisecond)
	}
	if n, f := bridgedCalls(h.gw), countFlights(h.gw); n > 0 || f > 0 {
		t.Errorf("2s after the denied retry: %d bridged calls parked, %d upstream calls in flight; want the call abandoned", n, f)
	}
}

// TestBridgeNoFormElicitationForURLOnlyClient: a client that declares
// elicitation in URL mode only ({"url": {}}, no "form") must not be sent a
// form mode elicitation (spec, client/elicitation: "Servers MUST NOT send
// elicitation requests with modes that are not supported by the client").
// The bridge checks only that elicitation is declared, and hands the
// upstream's form elicitation to the client in input_required.
func TestBridgeNoFormElicitationForURLOnlyClient(t *testing.T) {
	h := newHarnessOpts(t, nil, nil, upstreamSpec{name: "b", server: reviewLegacyServer(nil)})
	c := mcp.NewClient(&mcp.Implementation{Name: "url-only"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	cs := connectClient(t, h, c, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "b__act", Arguments: map[string]any{"target": "x"}})
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	for id, ir := range res.InputRequests {
		if p, ok := ir.(*mcp.ElicitParams); ok && p.Mode != "url" && p.URL == "" {
			t.Errorf("input request %q is a form mode elicitation, sent to a client that declared URL mode only", id)
		}
	}
	if res.NeedsInput() {
		_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "b__act", Arguments: map[string]any{"target": "x"},
			InputResponses: mcp.InputResponseMap{}, RequestState: res.RequestState})
	}
}

// TestFulfilNoFormElicitationForURLOnlyClient: the other
// direction (fulfilRounds): a 2026-07-28 upstream asks a form mode
// elicitation of a 2025-11-25 client that declared URL mode only.
// inputCapable lets it through, the SDK's ServerSession.Elicit then
// refuses it, and the client gets -32603 (internal error) where a missing
// capability is -32021, as for a client without elicitation at all.
func TestFulfilNoFormElicitationForURLOnlyClient(t *testing.T) {
	h := newBridgeHarness(t, nil, nil)
	c := mcp.NewClient(&mcp.Implementation{Name: "url-only-legacy"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	cs := connectClient(t, h, c, "2025-11-25")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "m__three"})
	if rpcCode(err) != codeMissingCapability {
		t.Errorf("form elicitation for a URL-only client: %v (code %d), want %d", err, rpcCode(err), codeMissingCapability)
	}
}
