package upstream

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/manifold-mcp/manifold/config"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// TestKeepAliveRestarts: a server that stops answering pings is restarted.
func TestKeepAliveRestarts(t *testing.T) {
	checkLeaks(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "sleepy", Version: "v1"}, nil)
	srv.AddTool(objectTool("t"), noopTool)
	var hang, refuse atomic.Bool
	var pings atomic.Int32
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "ping" {
				pings.Add(1)
			}
			if method == "ping" && refuse.Load() {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no ping here"}
			}
			if method == "ping" && hang.Load() {
				select { // bounded, so that closing the session never waits long
				case <-ctx.Done():
				case <-time.After(2 * time.Second):
				}
				return nil, ctx.Err()
			}
			return next(ctx, method, req)
		}
	})
	mem := newMemServer(t, srv)
	opts := mem.options()
	opts.KeepAlive = 200 * time.Millisecond
	var rec recorder
	opts.OnChange = rec.onChange
	u := startUpstream(t, config.Server{Name: "sleepy"}, opts)
	waitReady(t, u, 5*time.Second)
	if v := u.Catalog().ProtocolVersion; v != "2026-07-28" {
		t.Errorf("negotiated %q; this test covers the 2026-07-28 path", v)
	}

	// Answered pings keep it up. (The server negotiates 2026-07-28, where
	// the SDK's own keep-alive does not run.)
	waitFor(t, 5*time.Second, "three pings", func() bool { return pings.Load() >= 3 })
	if st := u.Status(); st.State != StateReady || st.Restarts != 0 {
		t.Fatalf("status with answered pings = %+v, want ready without restarts", st)
	}

	// A server without ping answers with an error: alive all the same.
	refuse.Store(true)
	before := pings.Load()
	waitFor(t, 5*time.Second, "three refused pings", func() bool { return pings.Load() >= before+3 })
	if st := u.Status(); st.State != StateReady || st.Restarts != 0 {
		t.Fatalf("status with refused pings = %+v, want ready without restarts", st)
	}
	refuse.Store(false)

	hang.Store(true)
	waitFor(t, 5*time.Second, "a restart after unanswered pings", func() bool { return u.Status().Restarts >= 1 })
	hang.Store(false)
	waitReady(t, u, 5*time.Second)
	var failed []string
	for _, st := range rec.states() {
		if st.State == StateFailed {
			failed = append(failed, st.Error)
		}
	}
	if len(failed) == 0 || !strings.Contains(failed[0], "no answer to 2 pings") {
		t.Errorf("failure errors = %q, want one naming the unanswered pings", failed)
	}
	if n := mem.dialCount(); n < 2 {
		t.Errorf("dialed %d times, want a new connection", n)
	}
}

func TestOptionsDefaults(t *testing.T) {
	want := Options{
		ConnectTimeout:  30 * time.Second,
		CallTimeout:     60 * time.Second,
		BackoffInitial:  500 * time.Millisecond,
		BackoffMax:      30 * time.Second,
		MaxConcurrency:  64,
		MaxMessageBytes: 4 << 20,
		StopGrace:       2 * time.Second,
		KeepAlive:       30 * time.Second,
		ClientInfo:      &mcp.Implementation{Name: "manifold"},
	}
	ignore := cmpopts.IgnoreFields(Options{}, "Logger", "OnChange", "Transport")
	for _, in := range []*Options{nil, {}} {
		got := in.withDefaults()
		if diff := cmp.Diff(want, got, ignore); diff != "" {
			t.Errorf("defaults of %v (-want +got):\n%s", in, diff)
		}
		if got.Logger == nil || got.OnChange == nil {
			t.Error("Logger and OnChange must default to no-ops")
		}
	}
	set := Options{
		ConnectTimeout: time.Second, CallTimeout: 2 * time.Second, BackoffInitial: 3 * time.Millisecond,
		BackoffMax: 4 * time.Millisecond, MaxConcurrency: 5, MaxMessageBytes: 6, StopGrace: 7 * time.Millisecond,
		KeepAlive: -1, ClientInfo: &mcp.Implementation{Name: "x", Version: "1"}, Logger: zap.NewNop(),
	}
	if diff := cmp.Diff(set, set.withDefaults(), ignore); diff != "" {
		t.Errorf("set options were changed (-want +got):\n%s", diff)
	}
}

func TestNewStatus(t *testing.T) {
	u := New(config.Server{Name: "fresh", Type: "http", Timeout: 5 * time.Second}, &Options{CallTimeout: time.Minute})
	st := u.Status()
	if st.Name != "fresh" || st.State != StateConnecting || st.Transport != "http" || st.Since.IsZero() {
		t.Errorf("status of a new upstream = %+v", st)
	}
	if u.Name() != "fresh" || u.Config().Timeout != 5*time.Second || u.callTimeout != 5*time.Second {
		t.Errorf("Name %q, Config %+v, call timeout %s", u.Name(), u.Config(), u.callTimeout)
	}
	if u.Catalog() != nil {
		t.Error("catalog before Start must be nil")
	}
}

// TestConnectTimeoutMuteServer: a server that never reads nor answers fails
// the connect within the connect timeout, is retried, and Close still
// returns promptly with its process gone.
func TestConnectTimeoutMuteServer(t *testing.T) {
	checkLeaks(t)
	opts := fastOptions()
	opts.ConnectTimeout = 300 * time.Millisecond
	opts.BackoffInitial, opts.BackoffMax = 200*time.Millisecond, 400*time.Millisecond
	u := New(childConfig("mute", "mute", nil), opts)
	u.Start(context.Background())
	waitFor(t, 5*time.Second, "a failed connect naming the timeout", func() bool {
		st := u.Status()
		return st.State == StateFailed && strings.Contains(st.Error, "300ms")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := u.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Close took %s", took)
	}
}

// TestStandbyNeverConnects: an upstream with Standby never dials: it
// stands by with the note, its first attempt counts as done, calls fail as
// unavailable with the note, and Close stops it.
func TestStandbyNeverConnects(t *testing.T) {
	checkLeaks(t)
	var dials atomic.Int32
	u := New(config.Server{Name: "per-user", Type: config.TypeHTTP}, &Options{
		Standby: "awaiting per-user sign-in",
		Transport: func() (mcp.Transport, error) {
			dials.Add(1)
			_, c := mcp.NewInMemoryTransports()
			return c, nil
		},
	})
	ctx := context.Background()
	u.Start(ctx)
	<-u.Attempted()
	if s := u.Status(); s.State != StateStandby || s.Note != "awaiting per-user sign-in" || s.Error != "" {
		t.Errorf("status %+v, want standby with the note", s)
	}
	_, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "x"})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "awaiting per-user sign-in") {
		t.Errorf("call: %v, want unavailable with the note", err)
	}
	if err := u.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if s := u.Status(); s.State != StateStopped {
		t.Errorf("after Close the state is %s", s.State)
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("%d connection attempts, want none", n)
	}
}
