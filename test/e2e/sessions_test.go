package e2e

//lint:file-ignore SA1019 this test drives the sampling, roots and logging features that the gateway relays for protocol versions before 2026-07-28

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPerClientSessionsLeaveNoLeaks is acceptance 5 of the relay issue:
// 200 client sessions open and close, each calling a tool, subscribing to
// a resource and setting a log level through its own per-client session of
// the Go fixture over stdio (one process each). Afterwards the upstream
// processes, the gateway's goroutines and the subscriptions are back at
// their baseline.
func TestPerClientSessionsLeaveNoLeaks(t *testing.T) {
	tag := newTag()
	g := startGateway(t, "--config", writeConfig(t, fmt.Sprintf(`
mcpServers:
  fx:
    command: %q
    session: per-client
    env: { MANIFOLD_E2E_TAG: %q }
`, fixtureBinary(t), tag)))
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(300 * time.Millisecond)
	base := status(t, g)
	baseProcs := len(taggedProcesses(tag))
	// The upstream that lists the catalog: the fixture, and the guard
	// process that kills it if the gateway dies.
	if baseProcs == 0 {
		t.Fatal("no fixture process before any client: want the one listing the catalog")
	}
	if len(base.Upstreams) != 1 || base.Upstreams[0].Session != "per-client" {
		t.Fatalf("status upstreams = %+v, want fx in per-client mode", base.Upstreams)
	}

	const sessions, parallel = 200, 8
	ctx := ctxT(t, 3*time.Minute)
	var peak sync.Map // the most fixture processes seen while sessions were open
	work := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				c := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprint("leak-", i)}, nil)
				// 2025-11-25: a session of its own (2026-07-28 clients share
				// one upstream session per principal).
				cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url("/mcp")},
					&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
				if err != nil {
					t.Errorf("session %d: connect: %v", i, err)
					continue
				}
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__test_simple_text", Arguments: map[string]any{}})
				switch {
				case err != nil:
					t.Errorf("session %d: call: %v", i, err)
				case res.IsError:
					t.Errorf("session %d: tool error: %v", i, res.Content)
				}
				if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "manifold://fx/test://static-text"}); err != nil {
					t.Errorf("session %d: subscribe: %v", i, err)
				}
				if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
					t.Errorf("session %d: setLevel: %v", i, err)
				}
				if i%50 == 0 {
					peak.Store(i, len(taggedProcesses(tag)))
				}
				if err := cs.Close(); err != nil {
					t.Errorf("session %d: close: %v", i, err)
				}
			}
		}()
	}
	for i := range sessions {
		work <- i
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	peak.Range(func(k, v any) bool {
		if v.(int) <= baseProcs {
			t.Errorf("session %v saw %d fixture processes while open: it had no per-client process of its own", k, v)
		}
		return true
	})

	var now gatewayStatus
	var procs int
	deadline := time.Now().Add(20 * time.Second)
	for {
		http.DefaultClient.CloseIdleConnections()
		now, procs = status(t, g), len(taggedProcesses(tag))
		// Slack of two goroutines and one file: the /status request's
		// own connection.
		settled := procs == baseProcs && now.Subscriptions == 0 && now.Upstreams[0].ClientSessions == 0 &&
			now.Sessions == base.Sessions && now.Process.Goroutines <= base.Process.Goroutines+2
		if settled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d sessions: %d fixture processes (baseline %d), %d per-client sessions, %d subscriptions, %d sessions (%d), %d goroutines (%d)",
				sessions, procs, baseProcs, now.Upstreams[0].ClientSessions, now.Subscriptions, now.Sessions, base.Sessions,
				now.Process.Goroutines, base.Process.Goroutines)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("after %d sessions: %d fixture processes (baseline %d), %d subscriptions, %d goroutines (baseline %d), %d open files (baseline %d)",
		sessions, procs, baseProcs, now.Subscriptions, now.Process.Goroutines, base.Process.Goroutines, now.Process.OpenFiles, base.Process.OpenFiles)
}
