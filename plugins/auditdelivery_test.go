package plugins

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/plugins/proto"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
)

// Close delivers the records queued for audit_event before it stops the
// plugins; none vanishes uncounted.
func TestAuditRecordsQueuedAtCloseAreDelivered(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit")
	h := New(&Options{Logger: zaptest.NewLogger(t), GuardPath: os.Args[0], Executable: os.Args[0]})
	h.Apply(context.Background(), []config.Plugin{testPluginConfig(t, "p", `{"auditFile":`+strconv.Quote(file)+`}`)}, 1<<20)
	c := h.Chain()
	if !c.Audits() {
		t.Fatal("no audit_event")
	}
	const n = 200
	for range n {
		c.Audit([]byte(`{"method":"tools/call"}`))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(file)
	got := bytes.Count(b, []byte("\n"))
	if got != n || h.AuditDropped() != 0 {
		t.Fatalf("of %d records queued before Close, %d reached the plugin and %d were counted as dropped; want all delivered",
			n, got, h.AuditDropped())
	}
	c.Audit([]byte(`{"method":"tools/call"}`))
	if h.AuditDropped() != 1 {
		t.Errorf("a record after Close: dropped = %d; want it counted", h.AuditDropped())
	}
}

// Chain.Audit and Close run concurrently without a data race (run with
// -race).
func TestAuditDuringClose(t *testing.T) {
	h := New(&Options{Logger: zaptest.NewLogger(t)})
	c := &Chain{host: h}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				c.Audit([]byte(`{}`))
			}
		}
	}()
	time.Sleep(10 * time.Millisecond)
	if err := h.Close(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
		t.Error(err)
	}
	time.Sleep(10 * time.Millisecond)
	close(stop)
	wg.Wait()
}

// countRPC records the hook calls it gets.
type countRPC struct {
	mu    sync.Mutex
	calls []*proto.HookRequest
	seen  chan struct{}
}

func (f *countRPC) Configure(context.Context, *proto.ConfigureRequest, ...grpc.CallOption) (*proto.ConfigureResponse, error) {
	return &proto.ConfigureResponse{}, nil
}

func (f *countRPC) Hook(_ context.Context, r *proto.HookRequest, _ ...grpc.CallOption) (*proto.HookResponse, error) {
	f.mu.Lock()
	f.calls = append(f.calls, r)
	f.mu.Unlock()
	f.seen <- struct{}{}
	return &proto.HookResponse{}, nil
}

// audit_event follows the plugin's `match`: a plugin matched to server
// "other" and principal "bob" gets bob's records on "other" only, with
// their context.
func TestAuditEventFollowsMatch(t *testing.T) {
	h := New(&Options{Logger: zaptest.NewLogger(t)})
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	cfg := config.Plugin{Name: "p", Mode: config.PluginEnforce, OnError: config.PluginFailOpen, Timeout: time.Second,
		Match: config.PluginMatch{Servers: []string{"other"}, Principals: []string{"bob"}}}
	in := newInstance(&cfg, &spec{}, 1<<20, zap.NewNop(), nil)
	rpc := &countRPC{seen: make(chan struct{}, 10)}
	c := &conn{rpc: rpc}
	c.hooks.Store(uint32(hookSet(1 << AuditEvent)))
	in.cur.Store(c)
	in.known.Store(c.hooks.Load() | knownBit)
	ch := newChain([]config.Plugin{cfg}, map[string]*instance{"p": in}, h)
	ch.Audit([]byte(`{"method":"tools/call","principal":"alice","server":"s","name":"s__t","session_id":"abc"}`))
	ch.Audit([]byte(`{"method":"tools/call","principal":"bob","server":"other","name":"other__t","upstream_name":"t"}`))
	select {
	case <-rpc.seen:
	case <-time.After(5 * time.Second):
		t.Fatal("bob's record on server other did not reach the plugin")
	}
	select {
	case <-rpc.seen:
	case <-time.After(500 * time.Millisecond):
	}
	rpc.mu.Lock()
	defer rpc.mu.Unlock()
	if len(rpc.calls) != 1 {
		t.Fatalf("the plugin got %d records; want bob's only", len(rpc.calls))
	}
	pc := rpc.calls[0].GetContext()
	if rpc.calls[0].GetHook() != "audit_event" || pc.GetPrincipal() != "bob" || pc.GetServer() != "other" || pc.GetName() != "other__t" || pc.GetUpstreamName() != "t" {
		t.Errorf("hook %q, context %+v; want audit_event with bob's call", rpc.calls[0].GetHook(), pc)
	}
}
