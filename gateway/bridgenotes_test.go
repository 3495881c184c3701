package gateway

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reportingServer is an older upstream whose tool "report" sends progress
// before it asks the client for a name, while the question waits for the
// answer (once between says so), and after the answer.
func reportingServer(between <-chan struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "reporting"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	s.AddTool(&mcp.Tool{Name: "report", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := req.Params.GetProgressToken()
		notify := func(n float64, msg string) {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: n, Total: 3, Message: msg})
		}
		notify(1, "before")
		asked := make(chan error, 1)
		go func() {
			_, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: nameSchema})
			asked <- err
		}()
		select {
		case <-between:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		notify(2, "between")
		if err := <-asked; err != nil {
			return nil, err
		}
		notify(3, "after")
		return textResult("reported"), nil
	})
	return s
}

type progressNote struct {
	token any
	msg   string
}

// TestBridgeRelaysProgressOfEveryRound: a 2026-07-28 client over HTTP
// (each round a request of its own, whose stream closes with its answer)
// gets the progress an older upstream sends in every round of a bridged
// call: in the round that runs, with that round's token, and what came
// while the client had not come back yet at the start of the next round.
// Before, everything after the first input_required was sent to the first
// round's finished stream, and lost.
func TestBridgeRelaysProgressOfEveryRound(t *testing.T) {
	between := make(chan struct{})
	h := newHarness(t, upstreamSpec{name: "r", server: reportingServer(between)})
	srv := httptest.NewServer(h.gw.Handler())
	t.Cleanup(srv.Close)
	notes := make(chan progressNote, 10)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "progress-test"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			notes <- progressNote{req.Params.ProgressToken, req.Params.Message}
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "p"}}, nil
		},
	}).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	next := func(what string) progressNote {
		t.Helper()
		select {
		case n := <-notes:
			return n
		case <-ctx.Done():
			t.Fatalf("no progress %s", what)
			return progressNote{}
		}
	}

	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "r__report", Meta: mcp.Meta{"progressToken": "round-1"}})
	if err != nil || !first.NeedsInput() {
		t.Fatalf("first round: %+v, %v", first, err)
	}
	if n := next("of the first round"); n != (progressNote{"round-1", "before"}) {
		t.Fatalf("first round's progress: %+v", n)
	}
	// The upstream reports while the gateway waits for the client.
	close(between)
	waitFor(t, "the report between the rounds to be held", func() bool { return heldNotes(h.gw) == 1 })

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "r__report", Meta: mcp.Meta{"progressToken": "round-2"},
		InputResponses: (&testClient{nonce: "p"}).answers(first.InputRequests), RequestState: first.RequestState})
	if err != nil || res.NeedsInput() || textOfContent(res.Content) != "reported" {
		t.Fatalf("second round: %+v, %v", res, err)
	}
	got := []progressNote{next("sent between the rounds"), next("of the second round")}
	if want := []progressNote{{"round-2", "between"}, {"round-2", "after"}}; !slices.Equal(got, want) {
		t.Fatalf("second round's progress %+v, want %+v", got, want)
	}
	settled(t, h.gw)
}

// heldNotes counts the notifications the gateway holds for the next
// round of its bridged calls.
func heldNotes(g *Gateway) int {
	n := 0
	g.bridge.calls.Range(func(_, v any) bool {
		n += v.(*bridgedCall).heldNotes()
		return true
	})
	return n
}
