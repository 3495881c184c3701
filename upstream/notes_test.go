package upstream

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// noteLog is a Relay that records the notifications it gets, each after
// gate lets it through (nil: at once) and after delay: a slow client.
type noteLog struct {
	gate  chan struct{}
	delay time.Duration

	mu  sync.Mutex
	got []string
}

func (r *noteLog) record(s string) {
	if r.gate != nil {
		<-r.gate
	}
	time.Sleep(r.delay)
	r.mu.Lock()
	r.got = append(r.got, s)
	r.mu.Unlock()
}

func (r *noteLog) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (r *noteLog) CreateMessage(context.Context, *Upstream, *mcpx.CreateMessageWithToolsParams) (*mcpx.CreateMessageWithToolsResult, error) {
	return nil, fmt.Errorf("not here")
}
func (r *noteLog) Elicit(context.Context, *Upstream, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return nil, fmt.Errorf("not here")
}
func (r *noteLog) ListRoots(context.Context, *Upstream, *mcpx.ListRootsParams) (*mcpx.ListRootsResult, error) {
	return nil, fmt.Errorf("not here")
}
func (r *noteLog) Progress(_ *Upstream, p *mcp.ProgressNotificationParams) {
	r.record(fmt.Sprintf("progress %v", p.Progress))
}
func (r *noteLog) Log(_ *Upstream, p *mcpx.LoggingMessageParams) {
	r.record(fmt.Sprintf("log %v", p.Data))
}
func (r *noteLog) ResourceUpdated(_ *Upstream, p *mcp.ResourceUpdatedNotificationParams) {
	r.record("updated " + p.URI)
}
func (r *noteLog) ElicitationComplete(_ *Upstream, p *mcp.ElicitationCompleteParams) {
	r.record("complete " + p.ElicitationID)
}

// burstBeforeAnswer makes the fake answer every raw call with four
// notifications and then the result, in one burst.
func burstBeforeAnswer(t *testing.T) func(*fakeStdio) {
	return func(f *fakeStdio) {
		f.onRaw = func(f *fakeStdio, req []byte) {
			for i := 1; i <= 3; i++ {
				f.send(fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":%d}}`, i))
			}
			f.send([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"last"}}`))
			f.send([]byte(`{"jsonrpc":"2.0","id":` + idOf(t, req) + `,"result":{"ok":true}}`))
		}
	}
}

// TestSettleAfterRawCall: the notifications a stdio server sends just
// before its answer are all relayed, in order, once Settle returns, however
// slow the relay: the answer itself never waits for them.
func TestSettleAfterRawCall(t *testing.T) {
	checkLeaks(t)
	relay := &noteLog{delay: 20 * time.Millisecond}
	opts := fastOptions()
	opts.Relay = relay
	u, _ := rawUpstream(t, opts, burstBeforeAnswer(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"x"}`))
	if err != nil || string(got) != `{"ok":true}` {
		t.Fatalf("CallRaw = %s, %v", got, err)
	}
	if !u.Settle(10 * time.Second) {
		t.Fatal("Settle gave up")
	}
	want := []string{"progress 1", "progress 2", "progress 3", "log last"}
	if seen := relay.seen(); !slices.Equal(seen, want) {
		t.Errorf("relayed by the time Settle returned: %q, want %q", seen, want)
	}
}

// TestSettleBounded: a relay that blocks holds Settle only until its bound,
// and never the answer; once the relay moves, Settle returns at once.
func TestSettleBounded(t *testing.T) {
	checkLeaks(t)
	relay := &noteLog{gate: make(chan struct{})}
	opts := fastOptions()
	opts.Relay = relay
	u, _ := rawUpstream(t, opts, burstBeforeAnswer(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"x"}`)); err != nil {
		t.Fatalf("the answer waited on a blocked relay: %v", err)
	}
	if u.Settle(20 * time.Millisecond) {
		t.Fatal("Settle returned true while the relay was blocked")
	}
	close(relay.gate)
	if !u.Settle(10 * time.Second) {
		t.Fatal("Settle gave up after the relay moved")
	}
	if n := len(relay.seen()); n != 4 {
		t.Errorf("%d notifications relayed, want 4", n)
	}
	u.notes.mu.Lock()
	defer u.notes.mu.Unlock()
	if len(u.notes.waiters) != 0 {
		t.Errorf("%d waiters left behind", len(u.notes.waiters))
	}
}

// TestSettleAfterSDKCall: on a connection the SDK reads (here in memory,
// as for legacy SSE), a typed call's notifications are queued too, and
// relayed by the time Settle returns after the call.
func TestSettleAfterSDKCall(t *testing.T) {
	checkLeaks(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "work"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		for i := 1; i <= 3; i++ {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i)}); err != nil {
				return nil, nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	relay := &noteLog{delay: 20 * time.Millisecond}
	opts := fastOptions()
	opts.Relay = relay
	opts.Transport = func() (mcp.Transport, error) {
		st, ct := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(context.Background(), st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
	u := startUpstream(t, config.Server{Name: "notes", Type: "stdio"}, opts)
	waitReady(t, u, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params := &mcp.CallToolParams{Name: "work", Arguments: map[string]any{}}
	params.SetProgressToken("t")
	if _, err := u.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	if !u.Settle(10 * time.Second) {
		t.Fatal("Settle gave up")
	}
	want := []string{"progress 1", "progress 2", "progress 3"}
	if seen := relay.seen(); !slices.Equal(seen, want) {
		t.Errorf("relayed by the time Settle returned: %q, want %q", seen, want)
	}
}

// TestNoteQueueOrder: notifications pushed from one goroutine are relayed
// in that order while others settle concurrently; each Settle sees at
// least what was pushed before it.
func TestNoteQueueOrder(t *testing.T) {
	checkLeaks(t)
	var got []int
	q := &noteQueue{relay: func(n *jsonrpc.Request) {
		got = append(got, int(n.ID.Raw().(int64)))
	}}
	var wg sync.WaitGroup
	for i := range 500 {
		id, _ := jsonrpc.MakeID(float64(i))
		q.push(&jsonrpc.Request{ID: id, Method: "notifications/progress"})
		if i%50 == 0 {
			wg.Go(func() {
				if !q.settle(10 * time.Second) {
					t.Error("settle gave up")
				}
			})
		}
	}
	if !q.settle(10 * time.Second) {
		t.Fatal("settle gave up")
	}
	wg.Wait()
	if len(got) != 500 {
		t.Fatalf("%d relayed, want 500", len(got))
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("relayed #%d is %d: out of order", i, v)
		}
	}
}

// TestSettleAfterBatchedAnswer: a server (2025-03-26 allows batches) that
// sends a progress notification and then the call's answer in one batch:
// a StartRaw call whose completion settles (on the reading goroutine, as
// the gateway's stdio fast path's does) finds the progress relayed. The
// batch's answer used to be delivered while the batch was read, before the
// progress was queued for the relay (a review found it).
func TestSettleAfterBatchedAnswer(t *testing.T) {
	checkLeaks(t)
	relay := &noteLog{}
	opts := fastOptions()
	opts.Relay = relay
	u, _ := rawUpstream(t, opts, func(f *fakeStdio) {
		f.onRaw = func(f *fakeStdio, req []byte) {
			f.send([]byte(`[{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}},` +
				`{"jsonrpc":"2.0","id":` + idOf(t, req) + `,"result":{"ok":true}}]`))
		}
	})
	type outcome struct {
		res  string
		err  error
		seen []string
	}
	done := make(chan outcome, 1)
	if u.StartRaw("tools/call", []byte(`{"name":"x"}`), func(res []byte, err error) {
		u.Settle(time.Second)
		done <- outcome{string(res), err, relay.seen()}
	}) == nil {
		t.Fatal("the call did not start")
	}
	got := <-done
	if got.err != nil || got.res != `{"ok":true}` {
		t.Fatalf("the call: %s, %v", got.res, got.err)
	}
	if !slices.Equal(got.seen, []string{"progress 1"}) {
		t.Errorf("relayed when Settle returned: %q, want [progress 1]", got.seen)
	}
}
