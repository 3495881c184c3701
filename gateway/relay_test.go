package gateway

//lint:file-ignore SA1019 this test drives the sampling, roots and logging features that the gateway relays for protocol versions before 2026-07-28

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// askingServer is a pre-2026 upstream whose tools ask the client back:
// sample (sampling/createMessage), elicit (elicitation/create), roots
// (roots/list) and progress (three progress notifications, then a result).
// A 2026-07-28 upstream would use input_required instead.
func askingServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "asker"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	schema := map[string]any{"type": "object"}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	s.AddTool(&mcp.Tool{Name: "sample", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		}
		return text("sampled: " + res.Content.(*mcp.TextContent).Text), nil
	})
	s.AddTool(&mcp.Tool{Name: "elicit", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		}
		return text(fmt.Sprintf("%s %v", res.Action, res.Content["name"])), nil
	})
	s.AddTool(&mcp.Tool{Name: "roots", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return text(strings.Join(uris, ",")), nil
	})
	s.AddTool(&mcp.Tool{Name: "log", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Logger: "tool", Data: "noise"})
		req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "tool", Data: "hello"})
		time.Sleep(50 * time.Millisecond) // see progress
		return text("logged"), nil
	})
	s.AddTool(&mcp.Tool{Name: "progress", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i := range 3 {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Progress: float64(i + 1), Total: 3})
		}
		// The SDKs deliver a response before notifications still queued;
		// progress sent just before the result may be dropped as late.
		time.Sleep(50 * time.Millisecond)
		return text("done"), nil
	})
	return s
}

// relayClient connects to h's gateway a client that answers sampling,
// elicitation and roots with nonce, and records the progress it gets.
type relayClient struct {
	cs       *mcp.ClientSession
	mu       sync.Mutex
	progress []string
	logs     []string
}

func newRelayClient(t *testing.T, h *harness, nonce string) *relayClient {
	t.Helper()
	rc := &relayClient{}
	c := mcp.NewClient(&mcp.Implementation{Name: "client-" + nonce}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: nonce}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": nonce}}, nil
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			rc.mu.Lock()
			rc.logs = append(rc.logs, fmt.Sprintf("%s %s %v", req.Params.Level, req.Params.Logger, req.Params.Data))
			rc.mu.Unlock()
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			rc.mu.Lock()
			rc.progress = append(rc.progress, fmt.Sprintf("%v:%v", req.Params.ProgressToken, req.Params.Progress))
			rc.mu.Unlock()
		},
	})
	c.AddRoots(&mcp.Root{URI: "file:///" + nonce})
	rc.cs = connectClient(t, h, c, "2025-11-25")
	return rc
}

// connectClient connects c to h's gateway over in-memory transports,
// offering protocol version; the session is closed when the test ends.
func connectClient(t *testing.T, h *harness, c *mcp.Client, version string) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := h.gw.Server().Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := c.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func (rc *relayClient) call(ctx context.Context, tool string, meta mcp.Meta) (string, error) {
	res, err := rc.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Meta: meta})
	if err != nil {
		return "", err
	}
	out := textOfContent(res.Content)
	if res.IsError {
		return "", fmt.Errorf("tool error: %s", out)
	}
	return out, nil
}

func TestRelayReachesTheCallingClient(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "ask", server: askingServer()})
	rc := newRelayClient(t, h, "n1")
	ctx := context.Background()
	for tool, want := range map[string]string{
		"ask__sample": "sampled: n1",
		"ask__elicit": "accept n1",
		"ask__roots":  "file:///n1",
	} {
		if got, err := rc.call(ctx, tool, nil); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", tool, got, err, want)
		}
	}
}

func TestRelayLogging(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "ask", server: askingServer()})
	rc := newRelayClient(t, h, "l")
	ctx := context.Background()
	if err := rc.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.call(ctx, "ask__log", nil); err != nil {
		t.Fatal(err)
	}
	got := func() string {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return strings.Join(rc.logs, "; ")
	}
	waitFor(t, "the upstream's log message", func() bool { return got() != "" })
	if got() != "warning ask/tool hello" {
		t.Fatalf("logs = %q, want the warning only (the session asked for info), tagged with the server", got())
	}
}

func TestRelayProgressIsRemappedAndEndsWithTheCall(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "ask", server: askingServer()})
	rc := newRelayClient(t, h, "p")
	if _, err := rc.call(context.Background(), "ask__progress", mcp.Meta{"progressToken": "mine"}); err != nil {
		t.Fatal(err)
	}
	got := func() string {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return strings.Join(rc.progress, " ")
	}
	waitFor(t, "three progress notifications", func() bool { return len(got()) >= len("mine:1 mine:2 mine:3") })
	if got() != "mine:1 mine:2 mine:3" {
		t.Fatalf("progress = %q, want the client's own token, in order", got())
	}
	if n := countFlights(h.gw); n != 0 {
		t.Errorf("%d upstream calls still registered after the call", n)
	}
	// After the call, progress with its (gateway) token goes nowhere.
	relay{h.gw}.Progress(h.gw.pool.serving()[0], &mcp.ProgressNotificationParams{ProgressToken: h.gw.flights.prefix + "1", Progress: 9})
	time.Sleep(50 * time.Millisecond)
	if strings.Contains(got(), ":9") {
		t.Fatalf("progress after the response reached the client: %q", got())
	}
}

// TestRelayFanOut: 8 clients answer sampling and elicitation with their own
// nonce through one shared upstream session. Taking turns, each gets its
// own answer; all at once, each gets its own answer or a clear refusal,
// never another client's.
func TestRelayFanOut(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "ask", server: askingServer()})
	ctx := context.Background()
	clients := make([]*relayClient, 8)
	for i := range clients {
		clients[i] = newRelayClient(t, h, fmt.Sprintf("nonce%d", i))
	}
	tools := []string{"ask__sample", "ask__elicit"}
	for i, rc := range clients {
		for _, tool := range tools {
			if got, err := rc.call(ctx, tool, nil); err != nil || !strings.HasSuffix(got, fmt.Sprintf(" nonce%d", i)) {
				t.Fatalf("%s for client %d in turn: %q, %v", tool, i, got, err)
			}
		}
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	var own, refused int
	for i, rc := range clients {
		nonce := fmt.Sprintf("nonce%d", i)
		for _, tool := range tools {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					got, err := rc.call(ctx, tool, nil)
					mu.Lock()
					switch {
					case err == nil && strings.HasSuffix(got, " "+nonce):
						own++
					case err != nil && strings.Contains(err.Error(), "cannot route") && strings.Contains(err.Error(), "client sessions are in flight"):
						refused++
					default:
						t.Errorf("%s for %s: %q, %v: another client's answer, or an unclear error", tool, nonce, got, err)
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("80 concurrent calls: %d answered by their own client, %d refused as ambiguous", own, refused)
}

func TestRelayRefusesWhenNoCallIsInFlight(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "ask", server: askingServer()})
	up := h.gw.pool.serving()[0]
	_, err := relay{h.gw}.CreateMessage(context.Background(), up, &mcp.CreateMessageWithToolsParams{})
	if err == nil || !strings.Contains(err.Error(), "no client call is in flight") {
		t.Fatalf("sampling outside any call: %v", err)
	}
}

func TestRelayRefusesAClientWithoutTheCapability(t *testing.T) {
	h := newHarness(t, upstreamSpec{name: "ask", server: askingServer()})
	// h.client declares neither sampling nor elicitation.
	for _, tool := range []string{"ask__sample", "ask__elicit"} {
		res, err := h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: tool})
		if err != nil || !res.IsError || !strings.Contains(textOfContent(res.Content), "does not support") {
			t.Errorf("%s from a client without the capability: %v %v", tool, textOfContent(res.Content), err)
		}
	}
}

func countFlights(g *Gateway) int {
	n := 0
	g.flights.byUp.Range(func(_, v any) bool {
		uf := v.(*upFlights)
		uf.mu.Lock()
		n += len(uf.m)
		uf.mu.Unlock()
		return true
	})
	g.flights.byTok.Range(func(any, any) bool { n++; return true })
	return n
}
