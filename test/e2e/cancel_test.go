package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/fixture"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Acceptance 4 of the relay issue: a cancelled call stops the upstream's
// work, and no progress of it reaches the client afterwards; a client's
// notifications/cancelled cancels the upstream call, and a client that goes
// away cancels its calls in flight, but nobody else's.
//
// The upstream is the Go fixture (cmd/manifold-fixture), whose slow_progress
// tool reports progress every 20 ms and records whether it completed or saw
// its context cancelled; slow_progress_runs reports those records (and
// --run-log writes them to a file, for when the fixture is gone). It is
// reached over stdio, over streamable HTTP (which the gateway speaks
// 2026-07-28, sessionless, to it), and over streamable HTTP restricted to
// 2025-11-25 (sessions: cancellation travels as notifications/cancelled).
// The client is the go-sdk over streamable HTTP (2025-11-25 with a session,
// and 2026-07-28 sessionless) and over stdio (`manifold serve --stdio`).

const (
	slowTool  = "fx__slow_progress"
	runsTool  = "fx__slow_progress_runs"
	slowSteps = 1000 // 20 s at 20 ms: far longer than any test waits
	// quietWindow is how long a cancelled call must stay silent, while the
	// tool would have sent ~15 more progress notifications.
	quietWindow = 300 * time.Millisecond
)

// fixtureBinary builds cmd/manifold-fixture once (helperBinary).
func fixtureBinary(t *testing.T) string {
	t.Helper()
	return helperBinary(t, "manifold-fixture", "./cmd/manifold-fixture")
}

// startFixture runs the fixture over HTTP on 127.0.0.1 and returns its
// endpoint URL. It is stopped when the test ends.
func startFixture(t *testing.T, args ...string) string {
	t.Helper()
	_, line := startServerProc(t, "fixture", exec.Command(fixtureBinary(t), append([]string{"--http", "127.0.0.1:0"}, args...)...))
	if !strings.HasPrefix(line, "http://127.0.0.1:") {
		t.Fatalf("fixture announced %q", line)
	}
	return line
}

// upstreamKind is one way the gateway reaches the fixture.
type upstreamKind struct {
	name string
	// server returns the config of server fx; runLog is the file a stdio
	// fixture logs its runs to. direct, when not nil, opens a session to
	// the fixture that bypasses the gateway (HTTP fixtures only).
	server func(t *testing.T, runLog string) (yaml string, direct func(t *testing.T) *mcp.ClientSession)
}

var upstreamKinds = []upstreamKind{
	{name: "stdio", server: func(t *testing.T, runLog string) (string, func(*testing.T) *mcp.ClientSession) {
		return fmt.Sprintf("mcpServers:\n  fx:\n    command: %q\n    args: [--stdio, --run-log, %q]\n", fixtureBinary(t), runLog), nil
	}},
	{name: "http", server: func(t *testing.T, _ string) (string, func(*testing.T) *mcp.ClientSession) {
		url := startFixture(t)
		return fmt.Sprintf("mcpServers:\n  fx:\n    type: http\n    url: %q\n", url), directSession(url)
	}},
	{name: "http-2025-11-25", server: func(t *testing.T, _ string) (string, func(*testing.T) *mcp.ClientSession) {
		url := startFixture(t, "--protocol-versions", "2025-11-25")
		return fmt.Sprintf("mcpServers:\n  fx:\n    type: http\n    url: %q\n", url), directSession(url)
	}},
}

func directSession(url string) func(*testing.T) *mcp.ClientSession {
	return func(t *testing.T) *mcp.ClientSession {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-direct"}, nil).
			Connect(ctxT(t, 30*time.Second), &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
}

// progressLog records the progress notifications a client receives, by
// token.
type progressLog struct {
	mu   sync.Mutex
	byTo map[string][]float64
}

func (p *progressLog) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.byTo == nil {
			p.byTo = map[string][]float64{}
		}
		tok := fmt.Sprint(req.Params.ProgressToken)
		p.byTo[tok] = append(p.byTo[tok], req.Params.Progress)
	}}
}

func (p *progressLog) of(token string) []float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]float64(nil), p.byTo[token]...)
}

// waitProgress waits up to 10s for n progress notifications of token.
func (p *progressLog) waitProgress(t *testing.T, token string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(p.of(token)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("got %d progress notifications for %s after 10s, want %d", len(p.of(token)), token, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cancelClient is a go-sdk client session with the gateway.
type cancelClient struct {
	cs       *mcp.ClientSession
	progress *progressLog
	// disconnect ends the client abruptly, without cancelling its calls
	// first: it closes stdin (stdio), DELETEs the session (2025-11-25), or
	// drops the TCP connections (sessionless 2026-07-28).
	disconnect func(t *testing.T)
}

// downstreamKind is one way a client reaches the gateway.
type downstreamKind struct {
	name string
	// stdio clients each get their own gateway; the others share one.
	stdio   bool
	version string // requested; "" = the SDK's latest
	want    string // negotiated
}

var downstreamKinds = []downstreamKind{
	{name: "http-2025-11-25", version: "2025-11-25", want: "2025-11-25"},
	{name: "http-2026-07-28", want: "2026-07-28"},
	{name: "stdio", stdio: true, want: "2025-11-25"},
}

// trackingDialer remembers its connections, so a test can drop them.
type trackingDialer struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (d *trackingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.mu.Unlock()
	}
	return c, err
}

func (d *trackingDialer) drop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

// connectHTTPClient opens a session with the gateway over streamable HTTP.
func connectHTTPClient(t *testing.T, g *gatewayProc, dk downstreamKind) *cancelClient {
	t.Helper()
	var dialer trackingDialer
	hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	c := &cancelClient{progress: &progressLog{}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-cancel"}, c.progress.options()).Connect(ctxT(t, 30*time.Second),
		&mcp.StreamableClientTransport{Endpoint: g.url("/mcp"), HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: dk.version})
	if err != nil {
		t.Fatal(err)
	}
	c.cs = cs
	if got := cs.InitializeResult().ProtocolVersion; got != dk.want {
		t.Fatalf("negotiated %q, want %q", got, dk.want)
	}
	c.disconnect = func(t *testing.T) {
		if id := cs.ID(); id != "" {
			// What a client does when it goes away: end its session. (Its
			// pending calls are not cancelled first: ClientSession.Close
			// would wait for them.)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, g.url("/mcp"), nil)
			req.Header.Set("Mcp-Session-Id", id)
			req.Header.Set("Mcp-Protocol-Version", dk.want)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				// The SDK closes a session once its requests have returned.
				t.Fatalf("DELETE session (did the gateway wait for the call instead of cancelling it?): %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				t.Fatalf("DELETE session: %s", resp.Status)
			}
		}
		dialer.drop()
	}
	t.Cleanup(func() {
		dialer.drop()
		done := make(chan struct{})
		go func() { cs.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("closing the client session took over 10s")
		}
		hc.CloseIdleConnections()
	})
	return c
}

// startStdioClient runs `manifold serve --stdio` with cfg and connects a
// go-sdk client to it over its stdin and stdout.
func startStdioClient(t *testing.T, cfg string) (*gatewayProc, *cancelClient) {
	t.Helper()
	inR, inW, outR, outW := stdioPipes(t)
	g := launch(t, []string{"serve", "--stdio", "--config", cfg}, inR, func(cmd *exec.Cmd) { cmd.Stdout = outW })
	inR.Close()
	outW.Close()
	var closeIn sync.Once
	closeStdin := func() { closeIn.Do(func() { inW.Close() }) }
	c := &cancelClient{progress: &progressLog{}, disconnect: func(*testing.T) { closeStdin() }}
	// Cleanups run last first: stdin closes before the harness stops g.
	t.Cleanup(func() {
		closeStdin()
		select {
		case <-g.done:
		case <-time.After(15 * time.Second):
			t.Errorf("stdio gateway did not exit within 15s of stdin closing")
		}
		outR.Close()
		if c.cs != nil {
			c.cs.Close()
		}
	})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-cancel"}, c.progress.options()).Connect(ctxT(t, 60*time.Second),
		&mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect over stdio: %v", err)
	}
	c.cs = cs
	return g, c
}

// waitTools waits until the gateway lists the fixture's slow tools.
func waitTools(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	for {
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, tool := range lt.Tools {
			if tool.Name == slowTool || tool.Name == runsTool {
				n++
			}
		}
		if n == 2 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s and %s never appeared", slowTool, runsTool)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// runsVia returns slow_progress_runs(label) called as name on cs.
func runsVia(t *testing.T, cs *mcp.ClientSession, name, label string) []fixture.Run {
	t.Helper()
	res, err := cs.CallTool(ctxT(t, 30*time.Second), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"label": label}})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("%s: %+v", name, res.Content)
	}
	var runs []fixture.Run
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &runs); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return runs
}

// runsInLog returns the runs with label in a fixture's --run-log file.
func runsInLog(t *testing.T, path, label string) []fixture.Run {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var runs []fixture.Run
	for line := range strings.Lines(string(b)) {
		var r fixture.Run
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("run log line %q: %v", line, err)
		}
		if r.Label == label {
			runs = append(runs, r)
		}
	}
	return runs
}

// waitEnded polls runs until the one run labelled label has ended (up to
// 10s) and returns it.
func waitEnded(t *testing.T, label string, runs func() []fixture.Run) fixture.Run {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := runs()
		if len(got) > 1 {
			t.Fatalf("%d runs labelled %s: %+v", len(got), label, got)
		}
		if len(got) == 1 && got[0].State != fixture.RunRunning {
			return got[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s has not ended 10s later: %+v", label, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var labelSeq atomic.Int64

// newLabel returns a label unique in this test process.
func newLabel(what string) string {
	return fmt.Sprintf("%s-%d-%d", what, os.Getpid(), labelSeq.Add(1))
}

// slowCall is a slow_progress call in flight.
type slowCall struct {
	label, token string
	cancel       context.CancelFunc
	done         chan struct{}
	res          *mcp.CallToolResult
	err          error
}

// startSlow calls slow_progress through c in the background, with a
// progress token; lingerMs > 0 makes the tool go on sending progress that
// long after it is cancelled.
func startSlow(t *testing.T, c *cancelClient, what string, steps, lingerMs int) *slowCall {
	t.Helper()
	sc := &slowCall{label: newLabel(what), done: make(chan struct{})}
	sc.token = "tok-" + sc.label
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	sc.cancel = cancel
	t.Cleanup(func() {
		cancel()
		select {
		case <-sc.done:
		case <-time.After(15 * time.Second):
			t.Errorf("call %s did not return within 15s of the test's end", sc.label)
		}
	})
	params := &mcp.CallToolParams{Name: slowTool, Arguments: map[string]any{
		"label": sc.label, "steps": steps, "intervalMs": 20, "lingerMs": lingerMs,
	}}
	params.SetProgressToken(sc.token)
	go func() {
		defer close(sc.done)
		sc.res, sc.err = c.cs.CallTool(ctx, params)
	}()
	return sc
}

func (sc *slowCall) running() bool {
	select {
	case <-sc.done:
		return false
	default:
		return true
	}
}

// wait waits up to d for the call to return.
func (sc *slowCall) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-sc.done:
	case <-time.After(d):
		t.Fatalf("call %s did not return within %s", sc.label, d)
	}
}

// checkSibling checks that sibling, in flight while another call was
// cancelled, was not: it completes, with its own progress.
func checkSibling(t *testing.T, sibling *slowCall, c *cancelClient, steps int, runs func(label string) []fixture.Run) {
	t.Helper()
	sibling.wait(t, 30*time.Second)
	if sibling.err != nil {
		t.Fatalf("sibling call: %v", sibling.err)
	}
	if want := fmt.Sprintf("%s: completed %d steps", sibling.label, steps); sibling.res.IsError || sibling.res.Content[0].(*mcp.TextContent).Text != want {
		t.Errorf("sibling result = %+v, want %q", sibling.res.Content, want)
	}
	if run := waitEnded(t, sibling.label, func() []fixture.Run { return runs(sibling.label) }); run.State != fixture.RunCompleted || run.Done != steps {
		t.Errorf("sibling run = %+v, want completed", run)
	}
	if got := c.progress.of(sibling.token); len(got) < 2 {
		t.Errorf("sibling got %d progress notifications, want several", len(got))
	}
}

// TestCancelCall: a client cancels a call after two progress notifications
// (the go-sdk sends notifications/cancelled, or, sessionless, drops the
// request). The call returns with the cancellation at once; the fixture
// records that the call was cancelled and stopped early; no progress of it
// arrives afterwards, even from a server that goes on sending some after it
// was cancelled (lingerMs); and a sibling call in flight on the same
// upstream, from another session (over stdio: the same one), completes.
func TestCancelCall(t *testing.T) {
	for _, uk := range upstreamKinds {
		t.Run(uk.name, func(t *testing.T) {
			yaml, _ := uk.server(t, filepath.Join(t.TempDir(), "runs.jsonl"))
			cfg := writeConfig(t, yaml)
			shared := startGateway(t, "--config", cfg) // for the HTTP clients
			for _, dk := range downstreamKinds {
				for _, linger := range []int{0, 300} {
					t.Run(fmt.Sprintf("%s/linger=%dms", dk.name, linger), func(t *testing.T) {
						var c, other *cancelClient
						if dk.stdio {
							_, c = startStdioClient(t, cfg)
							other = c
						} else {
							c = connectHTTPClient(t, shared, dk)
							other = connectHTTPClient(t, shared, downstreamKinds[0])
						}
						waitTools(t, c.cs)
						runs := func(label string) []fixture.Run { return runsVia(t, other.cs, runsTool, label) }
						testCancel(t, c, other, linger, uk.name == "stdio", runs)
					})
				}
			}
		})
	}
}

func testCancel(t *testing.T, c, other *cancelClient, linger int, lateReachGateway bool, runs func(string) []fixture.Run) {
	const siblingSteps = 75 // 1.5 s: in flight across the cancellation
	sibling := startSlow(t, other, "sibling", siblingSteps, 0)
	other.progress.waitProgress(t, sibling.token, 1)

	call := startSlow(t, c, "cancelled", slowSteps, linger)
	c.progress.waitProgress(t, call.token, 2)
	call.cancel()
	if !sibling.running() {
		t.Fatalf("the sibling call ended before the cancellation (%v): the test proves nothing", sibling.err)
	}
	call.wait(t, 5*time.Second)
	if !errors.Is(call.err, context.Canceled) {
		t.Errorf("cancelled call: res %+v, err %v; want context.Canceled", call.res, call.err)
	}

	run := waitEnded(t, call.label, func() []fixture.Run { return runs(call.label) })
	if run.State != fixture.RunCancelled || run.Done >= run.Steps {
		t.Fatalf("fixture run = %+v, want cancelled early", run)
	}
	if linger > 0 && lateReachGateway && run.Late == 0 {
		t.Errorf("fixture run = %+v: the fixture sent no progress after the cancellation, so nothing was tested", run)
	}
	// Nothing arrives once the fixture has stopped (it stops for good), and
	// nothing of what it sent after it saw the cancellation ever arrives:
	// those notifications carry steps past run.Done.
	before := c.progress.of(call.token)
	time.Sleep(quietWindow)
	after := c.progress.of(call.token)
	if len(after) != len(before) {
		t.Errorf("%d progress notifications arrived for the cancelled call within %s after the fixture stopped it: %v", len(after)-len(before), quietWindow, after[len(before):])
	}
	for _, p := range after {
		if p > float64(run.Done) {
			t.Errorf("progress %v arrived for the cancelled call; the fixture had done %d steps when it saw the cancellation (run %+v)", p, run.Done, run)
			break
		}
	}
	t.Logf("cancelled after step %d; client got %d progress notifications; fixture sent %d (%d late)", run.Done, len(after), run.Notified, run.Late)

	checkSibling(t, sibling, other, siblingSteps, runs)
}

// TestCancelDisconnect: a client goes away with a call in flight (stdio:
// its stdin closes; 2025-11-25: its session is deleted; 2026-07-28: its
// connection drops). The fixture records the call cancelled, and a sibling
// call from another session on the same upstream completes.
func TestCancelDisconnect(t *testing.T) {
	for _, uk := range upstreamKinds {
		t.Run(uk.name, func(t *testing.T) {
			runLog := filepath.Join(t.TempDir(), "runs.jsonl")
			yaml, direct := uk.server(t, runLog)
			cfg := writeConfig(t, yaml)
			shared := startGateway(t, "--config", cfg) // for the HTTP clients
			for _, dk := range downstreamKinds {
				t.Run(dk.name, func(t *testing.T) {
					if dk.stdio {
						testDisconnectStdio(t, cfg, runLog, direct)
						return
					}
					c := connectHTTPClient(t, shared, dk)
					other := connectHTTPClient(t, shared, downstreamKinds[0])
					waitTools(t, c.cs)
					runs := func(label string) []fixture.Run { return runsVia(t, other.cs, runsTool, label) }

					const siblingSteps = 75 // 1.5 s: in flight across the disconnection
					sibling := startSlow(t, other, "sibling", siblingSteps, 0)
					other.progress.waitProgress(t, sibling.token, 1)
					call := startSlow(t, c, "abandoned", slowSteps, 0)
					c.progress.waitProgress(t, call.token, 2)
					c.disconnect(t)
					if !sibling.running() {
						t.Fatalf("the sibling call ended before the disconnection (%v): the test proves nothing", sibling.err)
					}
					run := waitEnded(t, call.label, func() []fixture.Run { return runs(call.label) })
					if run.State != fixture.RunCancelled || run.Done >= run.Steps {
						t.Errorf("fixture run = %+v, want cancelled early", run)
					}
					checkSibling(t, sibling, other, siblingSteps, runs)
				})
			}
		})
	}
}

// testDisconnectStdio: the stdin of `manifold serve --stdio` closes with a
// call in flight. The gateway ends, and with it a stdio fixture, so the
// run is read from the fixture's run log, or from an HTTP fixture directly.
func testDisconnectStdio(t *testing.T, cfg, runLog string, direct func(*testing.T) *mcp.ClientSession) {
	g, c := startStdioClient(t, cfg)
	waitTools(t, c.cs)
	call := startSlow(t, c, "abandoned", slowSteps, 0)
	c.progress.waitProgress(t, call.token, 2)
	c.disconnect(t)
	select {
	case <-g.done:
	case <-time.After(15 * time.Second):
		t.Fatal("stdio gateway did not exit within 15s of stdin closing")
	}
	runs := func() []fixture.Run { return runsInLog(t, runLog, call.label) }
	if direct != nil {
		cs := direct(t)
		runs = func() []fixture.Run { return runsVia(t, cs, "slow_progress_runs", call.label) }
	}
	run := waitEnded(t, call.label, runs)
	if run.State != fixture.RunCancelled || run.Done >= run.Steps {
		t.Errorf("fixture run = %+v, want cancelled early", run)
	}
}
