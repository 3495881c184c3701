package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// demoUpstream starts an Upstream on an in-memory demo server.
func demoUpstream(t *testing.T, cfg config.Server, opts *Options) *Upstream {
	t.Helper()
	mem := newMemServer(t, demo.NewServer(cfg.Name, nil))
	o := mem.options()
	if opts != nil {
		o.CallTimeout = opts.CallTimeout
		o.MaxConcurrency = opts.MaxConcurrency
	}
	u := startUpstream(t, cfg, o)
	waitReady(t, u, 5*time.Second)
	return u
}

func echo(ctx context.Context, u *Upstream, msg string) (string, error) {
	res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
	if err != nil {
		return "", err
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

func slowCall(ctx context.Context, u *Upstream, ms int) error {
	_, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": ms}})
	return err
}

func TestCallTimeout(t *testing.T) {
	tests := []struct {
		name string
		cfg  config.Server
		opts *Options
	}{
		{name: "server timeout", cfg: config.Server{Name: "timely", Timeout: 100 * time.Millisecond}, opts: &Options{CallTimeout: time.Minute}},
		{name: "default timeout", cfg: config.Server{Name: "timely"}, opts: &Options{CallTimeout: 100 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			u := demoUpstream(t, tt.cfg, tt.opts)
			start := time.Now()
			err := slowCall(context.Background(), u, 2000)
			took := time.Since(start)
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("slow call: err = %v, want ErrTimeout", err)
			}
			if !strings.Contains(err.Error(), `"timely"`) || !strings.Contains(err.Error(), "100ms") {
				t.Errorf("err = %q, want the server name and the timeout", err)
			}
			if took > time.Second {
				t.Errorf("timed out after %s, want about 100ms", took)
			}
			// The upstream is still usable, and the slot was released.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if got, err := echo(ctx, u, "still here"); err != nil || got != "still here" {
				t.Errorf("echo after timeout = %q, %v", got, err)
			}
			if st := u.Status(); st.State != StateReady || st.Restarts != 0 {
				t.Errorf("status after a timeout = %+v, want ready without restarts", st)
			}
		})
	}
}

func TestCallerCancel(t *testing.T) {
	checkLeaks(t)
	u := demoUpstream(t, config.Server{Name: "cancelled"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	err := slowCall(ctx, u, 5000)
	if err == nil || errors.Is(err, ErrTimeout) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("cancelled call: err = %v, want a cancellation error (not timeout or unavailable)", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want errors.Is context.Canceled", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("cancelled call returned after %s", took)
	}
	if got, err := echo(context.Background(), u, "ok"); err != nil || got != "ok" {
		t.Errorf("echo after cancel = %q, %v", got, err)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	checkLeaks(t)
	u := demoUpstream(t, config.Server{Name: "narrow", MaxConcurrency: 1}, &Options{MaxConcurrency: 64})
	if cap(u.slots) != 1 {
		t.Fatalf("slots = %d, want the server's MaxConcurrency 1", cap(u.slots))
	}

	slowCtx, cancelSlow := context.WithCancel(context.Background())
	defer cancelSlow()
	slowDone := make(chan error, 1)
	go func() { slowDone <- slowCall(slowCtx, u, 10000) }()
	waitFor(t, 5*time.Second, "the slow call to hold the slot", func() bool { return u.InFlight() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := echo(ctx, u, "second")
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), `"narrow"`) {
		t.Errorf("second call: err = %v, want ErrBusy naming the server", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("busy error after %s, want about 50ms", took)
	}

	cancelSlow()
	select {
	case <-slowDone:
	case <-time.After(5 * time.Second):
		t.Fatal("slow call did not end after its context was cancelled")
	}
	if got, err := echo(context.Background(), u, "third"); err != nil || got != "third" {
		t.Errorf("call after the slot was freed = %q, %v", got, err)
	}
	if n := u.InFlight(); n != 0 {
		t.Errorf("%d slots still taken after all calls ended", n)
	}
}

func TestConcurrencyDefault(t *testing.T) {
	tests := []struct {
		name string
		cfg  config.Server
		opts *Options
		want int
	}{
		{name: "package default", cfg: config.Server{Name: "a"}, opts: nil, want: 64},
		{name: "options", cfg: config.Server{Name: "a"}, opts: &Options{MaxConcurrency: 7}, want: 7},
		{name: "server overrides options", cfg: config.Server{Name: "a", MaxConcurrency: 3}, opts: &Options{MaxConcurrency: 7}, want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := New(tt.cfg, tt.opts)
			if got := cap(u.slots); got != tt.want {
				t.Errorf("concurrency = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestCallErrors: errors from the upstream pass through with their JSON-RPC
// code; tool errors are results, not errors.
func TestCallErrors(t *testing.T) {
	checkLeaks(t)
	u := demoUpstream(t, config.Server{Name: "errs"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	res, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "fail"})
	if err != nil || !res.IsError {
		t.Errorf("fail tool = %+v, %v; want a result with isError", res, err)
	}

	_, err = u.GetPrompt(ctx, &mcp.GetPromptParams{Name: "no-such-prompt"})
	rpcErr, ok := mcpx.AsRPCError(err)
	if !ok || !strings.Contains(err.Error(), `"errs"`) {
		t.Fatalf("unknown prompt: err = %v, want a JSON-RPC error naming the server", err)
	}
	if rpcErr.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("unknown prompt: code %d, want %d", rpcErr.Code, jsonrpc.CodeInvalidParams)
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrTimeout) {
		t.Errorf("unknown prompt: err = %v, must not look like a transport failure", err)
	}

	// Completion is forwarded too.
	comp, err := u.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
		Argument: mcp.CompleteParamsArgument{Name: "person", Value: ""},
	})
	if err != nil || len(comp.Completion.Values) == 0 {
		t.Errorf("Complete = %+v, %v; want some values", comp, err)
	}
}

// TestCallConnectionLost: a call in flight when the server goes away gets
// ErrUnavailable, and the upstream reconnects.
func TestCallConnectionLost(t *testing.T) {
	checkLeaks(t)
	mem := newMemServer(t, demo.NewServer("lost", nil))
	u := startUpstream(t, config.Server{Name: "lost"}, mem.options())
	waitReady(t, u, 5*time.Second)

	done := make(chan error, 1)
	go func() { done <- slowCall(context.Background(), u, 10000) }()
	waitFor(t, 5*time.Second, "the call to be in flight", func() bool { return u.InFlight() == 1 })
	mem.dropAll() // the cut ends the call; the server's handler is cancelled
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), `"lost"`) {
			t.Errorf("call when the connection dropped: err = %v, want ErrUnavailable naming the server", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("call did not end when the connection dropped")
	}
	waitFor(t, 5*time.Second, "a reconnect", func() bool {
		st := u.Status()
		return st.State == StateReady && st.Restarts >= 1
	})
}

type ctxKey struct{}

func TestDetach(t *testing.T) {
	t.Run("values dropped, cancellation kept", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "downstream"))
		d, stop := detach(parent)
		defer stop()
		if v := d.Value(ctxKey{}); v != nil {
			t.Errorf("detached context carries %v", v)
		}
		cancel()
		select {
		case <-d.Done():
		case <-time.After(time.Second):
			t.Fatal("detached context not cancelled with its parent")
		}
		if !errors.Is(context.Cause(d), context.Canceled) {
			t.Errorf("cause = %v", context.Cause(d))
		}
	})
	t.Run("deadline cause kept", func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		d, stop := detach(parent)
		defer stop()
		<-d.Done()
		if !errors.Is(context.Cause(d), context.DeadlineExceeded) {
			t.Errorf("cause = %v, want DeadlineExceeded", context.Cause(d))
		}
	})
	t.Run("stop releases", func(t *testing.T) {
		d, stop := detach(context.Background())
		stop()
		select {
		case <-d.Done():
		default:
			t.Error("stop did not cancel the detached context")
		}
	})
}

func TestConnectionLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{name: "broken pipe", err: fmt.Errorf("calling: %w", &os.PathError{Op: "write", Path: "|1", Err: syscall.EPIPE}), want: true},
		{name: "reset", err: fmt.Errorf("post: %w", syscall.ECONNRESET), want: true},
		{name: "refused", err: fmt.Errorf("dial: %w", syscall.ECONNREFUSED), want: true},
		{name: "EOF", err: fmt.Errorf("read: %w", io.EOF), want: true},
		{name: "closed", err: mcp.ErrConnectionClosed, want: true},
		{name: "other", err: errors.New("unknown content type"), want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := connectionLost(tc.err); got != tc.want {
				t.Errorf("connectionLost(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
