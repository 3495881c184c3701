package gateway

//lint:file-ignore SA1019 this test drives the sampling, roots and logging features that the gateway relays for protocol versions before 2026-07-28

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// nameSchema asks for one string, "name".
var nameSchema = map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// legacyServer is a 2025-11-25 upstream whose tools, prompt and resource ask
// the client back with real server requests:
//
//	three     elicitation, then sampling, then roots, one after the other
//	together  the same three at once
//	wait      one elicitation; reports how it ended on ended
//	hold      asks nothing; reports on ended when cancelled (10s at most)
//	urlerror  fails with -32042 for elicitation id args.id
//	urlask    a URL mode elicitation (id args.id), then its completion
//	complete  sends notifications/elicitation/complete for args.id
//	prompt greet, resource ask://name: one elicitation each
func legacyServer(ended chan<- string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "legacy"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	schema := map[string]any{"type": "object"}
	elicit := func(ctx context.Context, ss *mcp.ServerSession) (string, error) {
		res, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: nameSchema})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s:%v", res.Action, res.Content["name"]), nil
	}
	sample := func(ctx context.Context, ss *mcp.ServerSession) (string, error) {
		res, err := ss.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		if err != nil {
			return "", err
		}
		return res.Content.(*mcp.TextContent).Text, nil
	}
	roots := func(ctx context.Context, ss *mcp.ServerSession) (string, error) {
		res, err := ss.ListRoots(ctx, nil)
		if err != nil {
			return "", err
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return strings.Join(uris, ","), nil
	}
	fail := func(err error) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
	}
	idArg := func(req *mcp.CallToolRequest) string {
		var a struct{ ID string }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		return a.ID
	}
	s.AddTool(&mcp.Tool{Name: "three", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var out []string
		for _, ask := range []func(context.Context, *mcp.ServerSession) (string, error){elicit, sample, roots} {
			got, err := ask(ctx, req.Session)
			if err != nil {
				return fail(err)
			}
			out = append(out, got)
		}
		return textResult(strings.Join(out, " ")), nil
	})
	s.AddTool(&mcp.Tool{Name: "together", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		asks := []func(context.Context, *mcp.ServerSession) (string, error){elicit, sample, roots}
		out := make([]string, len(asks))
		errs := make([]error, len(asks))
		var wg sync.WaitGroup
		for i, ask := range asks {
			wg.Go(func() { out[i], errs[i] = ask(ctx, req.Session) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fail(err)
		}
		return textResult(strings.Join(out, " ")), nil
	})
	s.AddTool(&mcp.Tool{Name: "wait", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		got, err := elicit(ctx, req.Session)
		if err != nil {
			ended <- "error: " + err.Error()
			return fail(err)
		}
		ended <- got
		return textResult(got), nil
	})
	s.AddTool(&mcp.Tool{Name: "hold", InputSchema: schema}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-ctx.Done():
			ended <- "cancelled: " + ctx.Err().Error()
		case <-time.After(10 * time.Second):
			ended <- "not cancelled"
		}
		return textResult("held"), nil
	})
	s.AddTool(&mcp.Tool{Name: "urlerror", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, mcp.URLElicitationRequiredError([]*mcp.ElicitParams{
			{Mode: "url", URL: "https://auth.example/" + idArg(req), Message: "sign in", ElicitationID: idArg(req)}})
	})
	s.AddTool(&mcp.Tool{Name: "urlask", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		id := idArg(req)
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", URL: "https://auth.example/" + id, Message: "sign in", ElicitationID: id})
		if err != nil {
			return fail(err)
		}
		if err := req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: id}); err != nil {
			return fail(err)
		}
		return textResult(res.Action), nil
	})
	s.AddTool(&mcp.Tool{Name: "complete", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if err := req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: idArg(req)}); err != nil {
			return fail(err)
		}
		return textResult("sent"), nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		got, err := elicit(ctx, req.Session)
		if err != nil {
			return nil, err
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + got}}}}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "urlerror"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return nil, mcp.URLElicitationRequiredError([]*mcp.ElicitParams{{Mode: "url", URL: "https://auth.example/p", Message: "sign in", ElicitationID: "p"}})
	})
	s.AddResource(&mcp.Resource{Name: "name", URI: "ask://name"}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		got, err := elicit(ctx, req.Session)
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "name " + got}}}, nil
	})
	return s
}

// modernServer is a 2026-07-28 upstream whose tool "three" asks for an
// elicitation, then a sample, then the roots, with input_required results
// and a requestState of its own ("up:…"), and whose tool "sample" asks for
// a sample once.
func modernServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "modern"}, nil)
	schema := map[string]any{"type": "object"}
	ask := func(key string, ir mcp.InputRequest, state string) *mcp.CallToolResult {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{key: ir}, RequestState: state}
	}
	sampling := &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}
	s.AddTool(&mcp.Tool{Name: "three", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p := req.Params
		state, answer := p.RequestState, func(k string) mcp.InputResponse { return p.InputResponses[k] }
		switch {
		case state == "":
			return ask("who", &mcp.ElicitParams{Message: "name?", RequestedSchema: nameSchema}, "up:1"), nil
		case state == "up:1":
			e, ok := answer("who").(*mcp.ElicitResult)
			if !ok {
				return ask("who", &mcp.ElicitParams{Message: "name?", RequestedSchema: nameSchema}, "up:1"), nil
			}
			return ask("llm", sampling, fmt.Sprintf("up:2:%s:%v", e.Action, e.Content["name"])), nil
		case strings.HasPrefix(state, "up:2:"):
			r, ok := answer("llm").(*mcp.CreateMessageWithToolsResult)
			if !ok || len(r.Content) == 0 {
				return ask("llm", sampling, state), nil
			}
			return ask("where", &mcp.ListRootsParams{}, state[len("up:2:"):]+" "+r.Content[0].(*mcp.TextContent).Text), nil
		default:
			r, ok := answer("where").(*mcp.ListRootsResult)
			if !ok {
				return ask("where", &mcp.ListRootsParams{}, state), nil
			}
			var uris []string
			for _, root := range r.Roots {
				uris = append(uris, root.URI)
			}
			return textResult(state + " " + strings.Join(uris, ",")), nil
		}
	})
	s.AddTool(&mcp.Tool{Name: "sample", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r, ok := req.Params.InputResponses["llm"].(*mcp.CreateMessageWithToolsResult); ok {
			return textResult("sampled " + r.Content[0].(*mcp.TextContent).Text), nil
		}
		return ask("llm", sampling, "up:s"), nil
	})
	return s
}

// testClient is a downstream client whose answers carry its nonce, and
// which counts how it was asked.
type testClient struct {
	cs     *mcp.ClientSession
	nonce  string
	action string // of its elicitation answers; "accept" by default
	// handled counts its sampling and elicitation handlers' runs; asked
	// counts the server→client requests it received (each then runs a
	// handler); a 2026-07-28 client is asked through input_required only.
	handled, asked atomic.Int32
	completed      chan string // elicitation ids of notifications/elicitation/complete
}

type clientOptions struct {
	version    string // "" = the SDK's latest, 2026-07-28
	action     string // of elicitation answers; "" = accept
	manual     bool   // no automatic MRTR rounds: the test answers
	noSampling bool
	urlElicit  bool // declare URL mode elicitation
}

func newTestClient(t *testing.T, h *harness, nonce string, o clientOptions) *testClient {
	t.Helper()
	tc := &testClient{nonce: nonce, action: cmpOr(o.action, "accept"), completed: make(chan string, 10)}
	opts := &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			tc.handled.Add(1)
			if tc.action != "accept" {
				return &mcp.ElicitResult{Action: tc.action}, nil
			}
			if req.Params.Mode == "url" {
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": nonce}}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			tc.completed <- req.Params.ElicitationID
		},
	}
	if !o.noSampling {
		opts.CreateMessageHandler = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			tc.handled.Add(1)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: nonce}}, nil
		}
	}
	if o.manual {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	if o.urlElicit {
		opts.Capabilities = &mcp.ClientCapabilities{
			RootsV2:     &mcp.RootCapabilities{ListChanged: true},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "client-" + nonce}, opts)
	c.AddRoots(&mcp.Root{URI: "file:///" + nonce})
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "sampling/createMessage", "elicitation/create", "roots/list":
				tc.asked.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	tc.cs = connectClient(t, h, c, o.version)
	want := cmpOr(o.version, mcpx.StatelessVersion)
	if got := tc.cs.InitializeResult().ProtocolVersion; got != want {
		t.Fatalf("client negotiated %q, want %q", got, want)
	}
	return tc
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (tc *testClient) call(t *testing.T, name string, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	t.Helper()
	if p == nil {
		p = &mcp.CallToolParams{}
	}
	p.Name = name
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return tc.cs.CallTool(ctx, p)
}

// answers answers each input request as tc's handlers would.
func (tc *testClient) answers(irs mcp.InputRequestMap) mcp.InputResponseMap {
	out := mcp.InputResponseMap{}
	for id, ir := range irs {
		switch ir.(type) {
		case *mcp.ElicitParams:
			out[id] = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": tc.nonce}}
		case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
			out[id] = &mcp.CreateMessageWithToolsResult{Role: "assistant", Model: "m", Content: []mcp.Content{&mcp.TextContent{Text: tc.nonce}}}
		case *mcp.ListRootsParams:
			out[id] = &mcp.ListRootsResult{Roots: []*mcp.Root{{URI: "file:///" + tc.nonce}}}
		}
	}
	return out
}

// newBridgeHarness serves legacyServer as "b" and modernServer as "m".
func newBridgeHarness(t *testing.T, opts *Options, ended chan<- string) *harness {
	t.Helper()
	if ended == nil {
		ended = make(chan string, 10)
	}
	h := newHarnessOpts(t, opts, func(c *config.Config) { c.Gateway.Timeouts.Call = 10 * time.Second },
		upstreamSpec{name: "b", server: legacyServer(ended)}, upstreamSpec{name: "m", server: modernServer()})
	for _, name := range []string{"b", "m"} {
		want := map[string]string{"b": "2025-11-25", "m": mcpx.StatelessVersion}[name]
		if got := upstreamVersion(h.gw.pool.members[name].up); got != want {
			t.Fatalf("upstream %s negotiated %q, want %q", name, got, want)
		}
	}
	return h
}

func bridgedCalls(g *Gateway) int {
	n := 0
	g.bridge.calls.Range(func(any, any) bool { n++; return true })
	return n
}

// settled waits until no call is bridged or in flight.
func settled(t *testing.T, g *Gateway) {
	t.Helper()
	waitFor(t, "no call bridged or in flight", func() bool { return bridgedCalls(g) == 0 && countFlights(g) == 0 })
}

// TestBridgeOneRound: a 2026-07-28 client completes each kind of server
// request of an older upstream in one input_required round, answered by
// its own handlers through the SDK's MRTR loop; it never receives a
// server request.
func TestBridgeOneRound(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "ask", server: askingServer()})
	tc := newTestClient(t, h, "n1", clientOptions{})
	for tool, want := range map[string]string{
		"ask__sample": "sampled: n1",
		"ask__elicit": "accept n1",
		"ask__roots":  "file:///n1",
	} {
		res, err := tc.call(t, tool, nil)
		if err != nil || res.IsError || textOfContent(res.Content) != want {
			t.Errorf("%s = %+v, %v; want %q", tool, res, err, want)
		}
	}
	if got, asked := tc.handled.Load(), tc.asked.Load(); got != 2 || asked != 0 {
		t.Errorf("handlers ran %d times (want 2: sampling, elicitation), %d server requests (want 0: input_required only)", got, asked)
	}
	settled(t, h.gw)

	t.Run("by hand", func(t *testing.T) {
		tc := newTestClient(t, h, "n2", clientOptions{manual: true})
		res, err := tc.call(t, "ask__elicit", nil)
		if err != nil || !res.NeedsInput() || len(res.InputRequests) != 1 || !isBridgeState(res.RequestState) {
			t.Fatalf("first round: %+v, %v; want input_required with one request and the gateway's state", res, err)
		}
		for id, ir := range res.InputRequests {
			if p, ok := ir.(*mcp.ElicitParams); !ok || p.Message != "name?" || !strings.HasPrefix(id, "elicitation-") {
				t.Fatalf("input request %q = %#v", id, ir)
			}
		}
		res, err = tc.call(t, "ask__elicit", &mcp.CallToolParams{InputResponses: tc.answers(res.InputRequests), RequestState: res.RequestState})
		if err != nil || res.NeedsInput() || textOfContent(res.Content) != "accept n2" {
			t.Fatalf("retry: %+v, %v", res, err)
		}
		settled(t, h.gw)
	})
}

// TestBridgeThreeRounds: an upstream that asks three times, one after the
// other, takes three input_required rounds; each round's state is new,
// and the call is one audit record, of 4 rounds.
func TestBridgeThreeRounds(t *testing.T) {
	sink := newAuditSink(t, config.ArgumentsNone)
	h := newBridgeHarness(t, &Options{Audit: sink.log}, nil)

	auto := newTestClient(t, h, "auto", clientOptions{})
	res, err := auto.call(t, "b__three", nil)
	if err != nil || textOfContent(res.Content) != "accept:auto auto file:///auto" {
		t.Fatalf("b__three = %+v, %v", res, err)
	}
	if auto.handled.Load() != 2 || auto.asked.Load() != 0 {
		t.Errorf("handlers ran %d times, %d server requests; want 2 and 0", auto.handled.Load(), auto.asked.Load())
	}

	tc := newTestClient(t, h, "hand", clientOptions{manual: true})
	res, err = tc.call(t, "b__three", nil)
	var states, kinds []string
	for err == nil && res.NeedsInput() {
		if len(res.InputRequests) != 1 || slices.Contains(states, res.RequestState) {
			t.Fatalf("round %d: %d requests, state %q (seen %q)", len(states)+1, len(res.InputRequests), res.RequestState, states)
		}
		for _, ir := range res.InputRequests {
			kinds = append(kinds, inputMethod(ir))
		}
		states = append(states, res.RequestState)
		res, err = tc.call(t, "b__three", &mcp.CallToolParams{InputResponses: tc.answers(res.InputRequests), RequestState: res.RequestState})
	}
	if err != nil || textOfContent(res.Content) != "accept:hand hand file:///hand" {
		t.Fatalf("final: %+v %q, %v", res, textOfContent(res.Content), err)
	}
	if want := []string{"elicitation/create", "sampling/createMessage", "roots/list"}; !slices.Equal(kinds, want) {
		t.Errorf("rounds asked for %v, want %v", kinds, want)
	}
	// A state serves once: the call is over.
	if _, err := tc.call(t, "b__three", &mcp.CallToolParams{RequestState: states[2]}); rpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Errorf("replayed state after the end: %v, want -32602", err)
	}
	settled(t, h.gw)

	got := map[string][]any{}
	for _, r := range sink.records(t) {
		got[fmt.Sprint(r["client_name"])] = append(got[fmt.Sprint(r["client_name"])], []any{r["outcome"], r["rounds"], r["error_code"]})
	}
	want := map[string][]any{
		"client-auto": {[]any{"ok", 4.0, nil}},
		// the call, then the replayed state
		"client-hand": {[]any{"ok", 4.0, nil}, []any{"error", 1.0, float64(jsonrpc.CodeInvalidParams)}},
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("audit records (outcome, rounds, error code) by client (-want +got):\n%s", diff)
	}
}

// TestBridgeConcurrentRequestsInOneRound: requests the upstream sends at
// once reach the client in one input_required result.
func TestBridgeConcurrentRequestsInOneRound(t *testing.T) {
	h := newBridgeHarness(t, nil, nil)
	tc := newTestClient(t, h, "c", clientOptions{manual: true})
	res, err := tc.call(t, "b__together", nil)
	if err != nil || !res.NeedsInput() || len(res.InputRequests) != 3 {
		t.Fatalf("first round: %+v, %v; want the three requests at once", res, err)
	}
	res, err = tc.call(t, "b__together", &mcp.CallToolParams{InputResponses: tc.answers(res.InputRequests), RequestState: res.RequestState})
	if err != nil || res.NeedsInput() || textOfContent(res.Content) != "accept:c c file:///c" {
		t.Fatalf("retry: %+v, %v", res, err)
	}

	// An answer left out is asked for again, alone.
	res, _ = tc.call(t, "b__together", nil)
	all := tc.answers(res.InputRequests)
	partial := mcp.InputResponseMap{}
	var left string
	for id, a := range all {
		if strings.HasPrefix(id, "roots-") {
			left = id
			continue
		}
		partial[id] = a
	}
	res, err = tc.call(t, "b__together", &mcp.CallToolParams{InputResponses: partial, RequestState: res.RequestState})
	if err != nil || !res.NeedsInput() || len(res.InputRequests) != 1 || res.InputRequests[left] == nil {
		t.Fatalf("after a partial answer: %+v, %v; want %q asked again", res, err, left)
	}
	res, err = tc.call(t, "b__together", &mcp.CallToolParams{InputResponses: all, RequestState: res.RequestState})
	if err != nil || textOfContent(res.Content) != "accept:c c file:///c" {
		t.Fatalf("final: %+v, %v", res, err)
	}
	settled(t, h.gw)
}

// TestBridgeDeclineAndCancel: a client's decline or cancel reaches the
// upstream as such; a client that cannot answer makes the upstream get a
// missing-capability error.
func TestBridgeDeclineAndCancel(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "ask", server: askingServer()})
	for _, action := range []string{"decline", "cancel"} {
		tc := newTestClient(t, h, action, clientOptions{action: action})
		res, err := tc.call(t, "ask__elicit", nil)
		if err != nil || textOfContent(res.Content) != action+" <nil>" {
			t.Errorf("%s: %+v, %v", action, res, err)
		}
	}
	tc := newTestClient(t, h, "nosampling", clientOptions{noSampling: true})
	res, err := tc.call(t, "ask__sample", nil)
	if err != nil || !res.IsError || !strings.Contains(textOfContent(res.Content), "does not support sampling/createMessage") {
		t.Errorf("sampling for a client without it: %+v, %v", res, err)
	}
	settled(t, h.gw)
}

// TestBridgeRejectsTamperedState: a requestState that was altered, is
// stale or belongs to another call is refused with -32602, and the call
// it would have touched goes on unharmed.
func TestBridgeRejectsTamperedState(t *testing.T) {
	h := newBridgeHarness(t, nil, nil)
	tc := newTestClient(t, h, "t", clientOptions{manual: true})
	first, err := tc.call(t, "b__three", nil)
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first round: %+v, %v", first, err)
	}
	answers := tc.answers(first.InputRequests)
	st := first.RequestState
	flip := func(s string, i int) string {
		b := []byte(s)
		b[i] ^= 1
		return string(b)
	}
	for _, c := range []struct {
		name, tool, state string
	}{
		{name: "payload bit", tool: "b__three", state: flip(st, len(bridgeStatePrefix)+3)},
		{name: "mac bit", tool: "b__three", state: flip(st, len(st)-2)},
		{name: "truncated", tool: "b__three", state: st[:len(st)-4]},
		{name: "other tool", tool: "b__together", state: st},
		{name: "prefix only", tool: "b__three", state: bridgeStatePrefix},
	} {
		_, err := tc.call(t, c.tool, &mcp.CallToolParams{InputResponses: answers, RequestState: c.state})
		if rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "invalid requestState") {
			t.Errorf("%s: %v, want -32602 invalid requestState", c.name, err)
		}
	}
	// A wrong kind of answer is refused before anything is handed over.
	wrong := mcp.InputResponseMap{}
	for id := range first.InputRequests {
		wrong[id] = &mcp.ListRootsResult{}
	}
	if _, err := tc.call(t, "b__three", &mcp.CallToolParams{InputResponses: wrong, RequestState: st}); rpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Errorf("a roots list answering an elicitation: %v, want -32602", err)
	}
	// Nothing changed: the genuine retry goes on.
	second, err := tc.call(t, "b__three", &mcp.CallToolParams{InputResponses: answers, RequestState: st})
	if err != nil || !second.NeedsInput() {
		t.Fatalf("genuine retry: %+v, %v", second, err)
	}
	// The first round's state was answered: a replay is stale.
	if _, err := tc.call(t, "b__three", &mcp.CallToolParams{InputResponses: answers, RequestState: st}); rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "answered already") {
		t.Errorf("replay of round 1: %v", err)
	}
	res, err := tc.call(t, "b__three", &mcp.CallToolParams{InputResponses: tc.answers(second.InputRequests), RequestState: second.RequestState})
	for err == nil && res.NeedsInput() {
		res, err = tc.call(t, "b__three", &mcp.CallToolParams{InputResponses: tc.answers(res.InputRequests), RequestState: res.RequestState})
	}
	if err != nil || textOfContent(res.Content) != "accept:t t file:///t" {
		t.Fatalf("final: %+v, %v", res, err)
	}
	settled(t, h.gw)
}

// TestBridgeStateBinding: a state verifies only for its method, name and
// principal, before it expires.
func TestBridgeStateBinding(t *testing.T) {
	s := stateSigner{key: newStateKey()}
	now := time.Now()
	st := bridgeState{id: 42, round: 3, expires: now.Add(time.Minute)}
	state := s.sign(st, "tools/call", "a__x", "alice")
	if got, err := s.verify(state, "tools/call", "a__x", "alice", now); err != nil || got.id != 42 || got.round != 3 {
		t.Fatalf("verify = %+v, %v", got, err)
	}
	for _, c := range []struct {
		name, method, tool, principal string
		at                            time.Time
		key                           []byte
	}{
		{name: "other principal", method: "tools/call", tool: "a__x", principal: "bob", at: now},
		{name: "other name", method: "tools/call", tool: "a__y", principal: "alice", at: now},
		{name: "other method", method: "prompts/get", tool: "a__x", principal: "alice", at: now},
		{name: "expired", method: "tools/call", tool: "a__x", principal: "alice", at: now.Add(time.Minute)},
		{name: "another process", method: "tools/call", tool: "a__x", principal: "alice", at: now, key: newStateKey()},
	} {
		v := s
		if c.key != nil {
			v.key = c.key
		}
		if _, err := v.verify(state, c.method, c.tool, c.principal, c.at); !errors.Is(err, errBadState) {
			t.Errorf("%s: %v, want errBadState", c.name, err)
		}
	}
}

// TestBridgeExpiredState: after the TTL, the state is refused, the
// upstream call has been cancelled, and the call has its audit record.
func TestBridgeExpiredState(t *testing.T) {
	ended := make(chan string, 10)
	sink := newAuditSink(t, config.ArgumentsNone)
	h := newBridgeHarness(t, &Options{Audit: sink.log}, ended)
	h.gw.bridge.ttl = 150 * time.Millisecond
	tc := newTestClient(t, h, "x", clientOptions{manual: true})
	res, err := tc.call(t, "b__wait", nil)
	if err != nil || !res.NeedsInput() {
		t.Fatalf("first round: %+v, %v", res, err)
	}
	select {
	case got := <-ended:
		if !strings.HasPrefix(got, "error: ") {
			t.Errorf("the upstream's elicitation ended with %q, want an error", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream call was not cancelled after the TTL")
	}
	_, err = tc.call(t, "b__wait", &mcp.CallToolParams{InputResponses: tc.answers(res.InputRequests), RequestState: res.RequestState})
	if rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), "expired") {
		t.Errorf("retry after the TTL: %v, want -32602 expired", err)
	}
	settled(t, h.gw)
	var got [][]any
	for _, r := range sink.records(t) {
		got = append(got, []any{r["name"], r["outcome"], r["rounds"], r["error_code"]})
	}
	want := [][]any{
		{"b__wait", "error", 1.0, float64(codeClientNoAnswer)},        // the abandoned call
		{"b__wait", "error", 1.0, float64(jsonrpc.CodeInvalidParams)}, // the late retry
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("audit records (-want +got):\n%s", diff)
	}
}

// TestBridgeNeverResumedLeaksNothing: a call whose client never comes back
// is cancelled upstream after the TTL, and leaves no goroutine, timer or
// registry entry behind.
func TestBridgeNeverResumedLeaksNothing(t *testing.T) {
	ended := make(chan string, 10)
	h := newBridgeHarness(t, nil, ended)
	h.gw.bridge.ttl = 100 * time.Millisecond
	tc := newTestClient(t, h, "gone", clientOptions{manual: true})
	if _, err := tc.call(t, "b__three", nil); err != nil { // warm the sessions up
		t.Fatal(err)
	}
	settled(t, h.gw)
	before := goleak.IgnoreCurrent()
	for range 3 {
		res, err := tc.call(t, "b__wait", nil)
		if err != nil || !res.NeedsInput() {
			t.Fatalf("first round: %q, %v", textOfContent(res.Content), err)
		}
		select {
		case got := <-ended:
			if !strings.HasPrefix(got, "error: ") {
				t.Errorf("the upstream's elicitation ended with %q, want an error", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("an abandoned call was not cancelled upstream")
		}
		settled(t, h.gw)
	}
	settled(t, h.gw)
	goleak.VerifyNone(t, before)
}

// TestBridgeClientCancelEndsTheCall: a client that cancels a bridged call
// while its round waits for the upstream cancels the upstream call.
func TestBridgeClientCancelEndsTheCall(t *testing.T) {
	ended := make(chan string, 10)
	h := newBridgeHarness(t, nil, ended)
	tc := newTestClient(t, h, "cancel", clientOptions{manual: true})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := tc.cs.CallTool(ctx, &mcp.CallToolParams{Name: "b__hold"})
		errc <- err
	}()
	waitFor(t, "the call to be bridged", func() bool { return bridgedCalls(h.gw) == 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled call returned no error")
	}
	select {
	case got := <-ended:
		if !strings.HasPrefix(got, "cancelled") {
			t.Errorf("the upstream call ended with %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream call was not cancelled")
	}
	settled(t, h.gw)
}

// TestBridgeSiblingCallsAreNotGuessed: while two calls of one client are
// in flight on a shared upstream, a request of the upstream cannot be tied
// to either: it is refused, never parked on the wrong call, and the other
// call goes on.
func TestBridgeSiblingCallsAreNotGuessed(t *testing.T) {
	ended := make(chan string, 10)
	h := newBridgeHarness(t, nil, ended)
	tc := newTestClient(t, h, "sib", clientOptions{manual: true})
	first, err := tc.call(t, "b__wait", nil)
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first call: %+v, %v", first, err)
	}
	second, err := tc.call(t, "b__wait", nil)
	if err != nil || !second.IsError || !strings.Contains(textOfContent(second.Content), "2 calls are in flight") {
		t.Fatalf("second call: %q, %v; want the upstream's error for an unroutable request", textOfContent(second.Content), err)
	}
	if got := <-ended; !strings.Contains(got, "cannot route") {
		t.Errorf("the second call's elicitation ended with %q", got)
	}
	res, err := tc.call(t, "b__wait", &mcp.CallToolParams{InputResponses: tc.answers(first.InputRequests), RequestState: first.RequestState})
	if err != nil || textOfContent(res.Content) != "accept:sib" {
		t.Fatalf("first call, retried: %q, %v", textOfContent(res.Content), err)
	}
	settled(t, h.gw)
}

// TestBridgePromptAndResource: prompts/get and resources/read of a
// 2026-07-28 client to an older upstream are bridged as tools/call is.
func TestBridgePromptAndResource(t *testing.T) {
	h := newBridgeHarness(t, nil, nil)
	tc := newTestClient(t, h, "pr", clientOptions{})
	ctx := context.Background()
	p, err := tc.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "b__greet"})
	if err != nil || len(p.Messages) != 1 || p.Messages[0].Content.(*mcp.TextContent).Text != "hello accept:pr" {
		t.Fatalf("prompt: %+v, %v", p, err)
	}
	uri := "manifold://b/ask://name"
	r, err := tc.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil || len(r.Contents) != 1 || r.Contents[0].Text != "name accept:pr" {
		t.Fatalf("resource: %+v, %v", r, err)
	}
	// resources/read is answered by the gateway's interceptor, outside the
	// SDK's handler: input_required must be on the wire all the same.
	manual := newTestClient(t, h, "pr2", clientOptions{manual: true})
	r, err = manual.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil || !r.NeedsInput() || len(r.InputRequests) != 1 {
		t.Fatalf("resource, first round: %+v, %v", r, err)
	}
	r, err = manual.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri, InputResponses: manual.answers(r.InputRequests), RequestState: r.RequestState})
	if err != nil || r.NeedsInput() || r.Contents[0].Text != "name accept:pr2" {
		t.Fatalf("resource, retry: %+v, %v", r, err)
	}
	settled(t, h.gw)
}

// TestMRTRModernUpstreamToLegacyClient: a 2026-07-28 upstream's three
// input_required rounds reach a 2025-11-25 client as three real server
// requests within its one call, which the audit log counts as 4 rounds.
func TestMRTRModernUpstreamToLegacyClient(t *testing.T) {
	sink := newAuditSink(t, config.ArgumentsNone)
	h := newBridgeHarness(t, &Options{Audit: sink.log}, nil)
	tc := newTestClient(t, h, "old", clientOptions{version: "2025-11-25"})
	res, err := tc.call(t, "m__three", nil)
	if err != nil || res.NeedsInput() || textOfContent(res.Content) != "accept:old old file:///old" {
		t.Fatalf("m__three = %+v, %v", res, err)
	}
	if tc.asked.Load() != 3 || tc.handled.Load() != 2 {
		t.Errorf("server requests %d (want 3), handler runs %d (want 2)", tc.asked.Load(), tc.handled.Load())
	}
	var rounds []any
	for _, r := range sink.records(t) {
		if r["name"] == "m__three" {
			rounds = append(rounds, r["rounds"])
		}
	}
	if !slices.Equal(rounds, []any{4.0}) {
		t.Errorf("audit rounds = %v, want one record of 4 rounds", rounds)
	}
}

// TestMRTRModernUpstreamLimits: a legacy client without the capability an
// upstream asks for gets -32021; a 2026-07-28 client gets the upstream's
// input_required and state untouched.
func TestMRTRModernUpstreamLimits(t *testing.T) {
	h := newBridgeHarness(t, nil, nil)
	old := newTestClient(t, h, "old", clientOptions{version: "2025-11-25", noSampling: true})
	if _, err := old.call(t, "m__sample", nil); rpcCode(err) != codeMissingCapability {
		t.Errorf("sampling for a client without it: %v, want %d", err, codeMissingCapability)
	}
	tc := newTestClient(t, h, "new", clientOptions{manual: true})
	res, err := tc.call(t, "m__three", nil)
	if err != nil || !res.NeedsInput() || res.RequestState != "up:1" {
		t.Fatalf("2026 client: %+v, %v; want the upstream's own input_required", res, err)
	}
	res, err = tc.call(t, "m__three", &mcp.CallToolParams{InputResponses: tc.answers(res.InputRequests), RequestState: res.RequestState})
	if err != nil || res.RequestState != "up:2:accept:new" {
		t.Fatalf("2026 client, round 2: %+v, %v", res, err)
	}
}
