//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/manifold-mcp/manifold/internal/fixture"
	"github.com/manifold-mcp/manifold/internal/loadgen"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The memory mode (--memory) measures what the gateway process holds for
// large messages and for idle sessions; only the gateway's own memory
// counts, not the fixture's nor this client's:
//
//   - payload: a fresh gateway per (shape, kind); after a warm-up call of
//     1 KiB its peak resident set is reset (ResetPeak) and its resident set
//     read, then one tools/call of the fixture's payload tool or one
//     resources/read of test://payload/N passes through it; growth is its
//     peak (VmHWM) minus that resident set, also as a multiple of N.
//   - idle: a fresh gateway (HTTP, the fixture as stdio upstream); its
//     resident set before and after opening S streamable-HTTP sessions, each
//     initialized and holding its GET stream open. The sessions are deleted
//     after.

// memShape is a gateway setup the payload is measured through.
type memShape struct {
	name string
	// connect starts the fixture and the gateway in e, the gateway's config
	// being its upstream followed by limits (a gateway section), and returns
	// a client session to the gateway and the gateway's process id.
	connect func(ctx context.Context, e *env, upstream string) (*mcp.ClientSession, int, error)
}

var memShapes = []memShape{
	{"manifold http→stdio", func(ctx context.Context, e *env, limits string) (*mcp.ClientSession, int, error) {
		return e.httpGatewaySession(ctx, stdioUpstream(e.bin("manifold-fixture"))+limits)
	}},
	{"manifold http→http", func(ctx context.Context, e *env, limits string) (*mcp.ClientSession, int, error) {
		furl, _, err := e.startFixtureHTTP(ctx)
		if err != nil {
			return nil, 0, err
		}
		return e.httpGatewaySession(ctx, httpUpstream(furl)+limits)
	}},
	{"manifold stdio→stdio", func(ctx context.Context, e *env, limits string) (*mcp.ClientSession, int, error) {
		cfg, err := e.config("stdio.yaml", stdioUpstream(e.bin("manifold-fixture"))+limits)
		if err != nil {
			return nil, 0, err
		}
		cmd := exec.Command(e.bin("manifold"), "serve", "--stdio", "--config", cfg)
		if len(e.gatewayEnv) > 0 {
			cmd.Env = append(os.Environ(), e.gatewayEnv...)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cs, err := newClient().Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil)
		if cmd.Process != nil {
			e.groups = append(e.groups, cmd.Process.Pid)
		}
		if err != nil {
			return nil, 0, err
		}
		if err := waitSessionTool(ctx, cs, fixture.PayloadTool, e.timeout); err != nil {
			cs.Close()
			return nil, 0, err
		}
		return cs, cmd.Process.Pid, nil
	}},
}

func newClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "manifold-bench-memory", Version: "v0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
}

// httpGatewaySession starts a gateway over HTTP with config body and
// connects a session to it.
func (e *env) httpGatewaySession(ctx context.Context, body string) (*mcp.ClientSession, int, error) {
	cfg, err := e.config("gateway.yaml", body)
	if err != nil {
		return nil, 0, err
	}
	url, pid, err := e.startGateway(ctx, cfg)
	if err != nil {
		return nil, 0, err
	}
	cs, err := newClient().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, 0, err
	}
	return cs, pid, nil
}

// waitSessionTool lists tools on cs until tool is among them, or timeout
// (a stdio gateway answers before its upstream is ready).
func waitSessionTool(ctx context.Context, cs *mcp.ClientSession, tool string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		res, err := cs.ListTools(ctx, nil)
		if err == nil {
			for _, t := range res.Tools {
				if t.Name == tool {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no tool %q after %v (last error %v)", tool, timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// payloadKind is one way a payload passes: a tool result or a resource.
type payloadKind struct {
	name string
	// fetch asks for n bytes and returns how many arrived.
	fetch func(ctx context.Context, cs *mcp.ClientSession, n int) (int, error)
}

var payloadKinds = []payloadKind{
	{"tools/call", func(ctx context.Context, cs *mcp.ClientSession, n int) (int, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: fixture.PayloadTool, Arguments: map[string]any{"bytes": n}})
		if err != nil {
			return 0, err
		}
		if res.IsError || len(res.Content) != 1 {
			return 0, fmt.Errorf("payload(%d): an error or not one content: %v", n, res.Content)
		}
		t, ok := res.Content[0].(*mcp.TextContent)
		if !ok {
			return 0, fmt.Errorf("payload(%d): %T, not text", n, res.Content[0])
		}
		return len(t.Text), nil
	}},
	{"resources/read", func(ctx context.Context, cs *mcp.ClientSession, n int) (int, error) {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: fixture.PayloadURI(n)})
		if err != nil {
			return 0, err
		}
		if len(res.Contents) != 1 {
			return 0, fmt.Errorf("read %s: %d contents", fixture.PayloadURI(n), len(res.Contents))
		}
		return len(res.Contents[0].Text), nil
	}},
}

// payloadResult is one payload measurement.
type payloadResult struct {
	Shape    string `json:"shape"`
	Kind     string `json:"kind"`
	Round    int    `json:"round"`
	Payload  int    `json:"payload_bytes"`
	Baseline int64  `json:"baseline_rss_bytes"`
	Peak     int64  `json:"peak_rss_bytes"`
}

func (r payloadResult) growth() int64 { return max(0, r.Peak-r.Baseline) }

// idleResult is one idle-session measurement.
type idleResult struct {
	Round    int   `json:"round"`
	Sessions int   `json:"sessions"`
	Before   int64 `json:"rss_before_bytes"`
	After    int64 `json:"rss_after_bytes"`
}

// maxMessageBytes is the gateway's limit in the memory mode: 8 MiB, or
// more for a payload that would not fit.
func maxMessageBytes(payload int) int { return max(8<<20, 2*payload) }

func limitsConfig(payload, sessions int) string {
	return fmt.Sprintf("gateway:\n  limits:\n    maxMessageBytes: %d\n    maxSessions: %d\n", maxMessageBytes(payload), sessions+16)
}

// measurePayload measures one payload of cfg.payload bytes of kind through
// shape, on a fresh gateway.
func measurePayload(ctx context.Context, cfg config, shape memShape, kind payloadKind) (payloadResult, error) {
	res := payloadResult{Shape: shape.name, Kind: kind.name, Payload: cfg.payload}
	e, err := newEnv(cfg)
	if err != nil {
		return res, err
	}
	defer e.close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cs, pid, err := shape.connect(ctx, e, limitsConfig(cfg.payload, 1))
	if err != nil {
		return res, fmt.Errorf("start: %w\n%s", err, e.logTail())
	}
	defer cs.Close()
	if _, err := kind.fetch(ctx, cs, 1<<10); err != nil {
		return res, fmt.Errorf("warm-up: %w", err)
	}
	if err := loadgen.ResetPeak(pid); err != nil {
		return res, fmt.Errorf("reset the gateway's peak RSS: %w", err)
	}
	before, err := loadgen.ProcessMemory(pid)
	if err != nil {
		return res, err
	}
	n, err := kind.fetch(ctx, cs, cfg.payload)
	if err != nil {
		return res, fmt.Errorf("%d bytes: %w\n%s", cfg.payload, err, e.logTail())
	}
	if n != cfg.payload {
		return res, fmt.Errorf("asked %d bytes, got %d", cfg.payload, n)
	}
	after, err := loadgen.ProcessMemory(pid)
	if err != nil {
		return res, err
	}
	// The kernel's RSS counters are batched per CPU, so VmHWM may read a
	// few pages under the VmRSS read before it; the peak was at least that.
	res.Baseline, res.Peak = before.RSS, max(after.Peak, before.RSS)
	return res, nil
}

// measureIdle opens cfg.idleSessions idle sessions on a fresh HTTP gateway.
func measureIdle(ctx context.Context, cfg config) (idleResult, error) {
	res := idleResult{Sessions: cfg.idleSessions}
	e, err := newEnv(cfg)
	if err != nil {
		return res, err
	}
	defer e.close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	gcfg, err := e.config("gateway.yaml", stdioUpstream(e.bin("manifold-fixture"))+limitsConfig(1<<10, cfg.idleSessions))
	if err != nil {
		return res, err
	}
	url, pid, err := e.startGateway(ctx, gcfg)
	if err != nil {
		return res, fmt.Errorf("start: %w\n%s", err, e.logTail())
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64, MaxIdleConns: 64}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	// One session opened and closed first, so that what every session
	// shares (handlers, buffers, the upstream session) is in the baseline.
	warm, err := openIdleSession(ctx, hc, url)
	if err != nil {
		return res, fmt.Errorf("first session: %w\n%s", err, e.logTail())
	}
	warm.close(hc)
	before, err := loadgen.ProcessMemory(pid)
	if err != nil {
		return res, err
	}
	sessions, err := openIdleSessions(ctx, hc, url, cfg.idleSessions)
	defer closeIdleSessions(hc, sessions)
	if err != nil {
		return res, fmt.Errorf("%d of %d sessions open: %w\n%s", len(sessions), cfg.idleSessions, err, e.logTail())
	}
	after, err := loadgen.ProcessMemory(pid)
	if err != nil {
		return res, err
	}
	res.Before, res.After = before.RSS, after.RSS
	return res, nil
}

// idleProtocolVersion is the version idle sessions negotiate: the newest
// with sessions and a GET stream.
const idleProtocolVersion = "2025-11-25"

// idleSession is one downstream session: its id and its open GET stream.
type idleSession struct {
	url, id string
	stream  io.ReadCloser
}

// openIdleSession initializes a session over raw HTTP, sends
// notifications/initialized and opens its GET stream, returning once the
// stream's response headers have arrived.
func openIdleSession(ctx context.Context, hc *http.Client, url string) (*idleSession, error) {
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + idleProtocolVersion +
		`","capabilities":{},"clientInfo":{"name":"manifold-bench-idle","version":"v0"}}}`
	resp, err := post(ctx, hc, url, "", init)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	s := &idleSession{url: url, id: resp.Header.Get("Mcp-Session-Id")}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || s.id == "" || !bytes.Contains(body, []byte(`"result"`)) {
		return nil, fmt.Errorf("initialize: status %d, session %q, %v: %.200s", resp.StatusCode, s.id, err, body)
	}
	resp, err = post(ctx, hc, url, s.id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil {
		return nil, fmt.Errorf("initialized: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return nil, fmt.Errorf("initialized: status %d", resp.StatusCode)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	s.header(req)
	req.Header.Set("Accept", "text/event-stream")
	resp, err = hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET stream: status %d", resp.StatusCode)
	}
	s.stream = resp.Body
	return s, nil
}

func (s *idleSession) header(req *http.Request) {
	req.Header.Set("Mcp-Session-Id", s.id)
	req.Header.Set("Mcp-Protocol-Version", idleProtocolVersion)
}

// close closes the GET stream and deletes the session (bounded by 10s).
func (s *idleSession) close(hc *http.Client) {
	if s.stream != nil {
		s.stream.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.url, nil)
	if err != nil {
		return
	}
	s.header(req)
	if resp, err := hc.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func post(ctx context.Context, hc *http.Client, url, session, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		(&idleSession{id: session}).header(req)
	}
	return hc.Do(req)
}

// idleOpeners is how many sessions are opened at once.
const idleOpeners = 16

// openIdleSessions opens n idle sessions, idleOpeners at a time. It returns
// those it opened, also on error.
func openIdleSessions(ctx context.Context, hc *http.Client, url string, n int) ([]*idleSession, error) {
	var (
		mu       sync.Mutex
		sessions []*idleSession
		errs     []error
		wg       sync.WaitGroup
	)
	next := make(chan struct{})
	for range idleOpeners {
		wg.Go(func() {
			for range next {
				s, err := openIdleSession(ctx, hc, url)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					sessions = append(sessions, s)
				}
				mu.Unlock()
			}
		})
	}
	for range n {
		mu.Lock()
		failed := len(errs) > 0
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	if len(errs) == 0 && len(sessions) < n {
		errs = append(errs, ctx.Err())
	}
	return sessions, errors.Join(errs...)
}

func closeIdleSessions(hc *http.Client, sessions []*idleSession) {
	var wg sync.WaitGroup
	work := make(chan *idleSession)
	for range idleOpeners {
		wg.Go(func() {
			for s := range work {
				s.close(hc)
			}
		})
	}
	for _, s := range sessions {
		work <- s
	}
	close(work)
	wg.Wait()
}

// runMemory runs the memory mode: every payload measurement, then the idle
// sessions, cfg.rounds times, and prints the medians.
func runMemory(ctx context.Context, cfg config, stdout, stderr io.Writer) (payloads []payloadResult, idles []idleResult, err error) {
	var failures []error
	for round := 1; round <= cfg.rounds; round++ {
		for _, shape := range memShapes {
			for _, kind := range payloadKinds {
				if err := ctx.Err(); err != nil {
					return payloads, idles, err
				}
				r, err := measurePayload(ctx, cfg, shape, kind)
				if err != nil {
					err = fmt.Errorf("round %d, %s, %s: %w", round, shape.name, kind.name, err)
					fmt.Fprintln(stderr, err)
					failures = append(failures, err)
					continue
				}
				r.Round = round
				fmt.Fprintf(stderr, "round %d/%d  %-22s %-15s %8.2f MiB  rss %6.1f MiB  peak %6.1f MiB  growth %.2fx\n",
					round, cfg.rounds, shape.name, kind.name, mib(int64(r.Payload)), mib(r.Baseline), mib(r.Peak), float64(r.growth())/float64(r.Payload))
				payloads = append(payloads, r)
			}
		}
		r, err := measureIdle(ctx, cfg)
		if err != nil {
			err = fmt.Errorf("round %d, idle sessions: %w", round, err)
			fmt.Fprintln(stderr, err)
			failures = append(failures, err)
			continue
		}
		r.Round = round
		fmt.Fprintf(stderr, "round %d/%d  %d idle sessions  rss %6.1f → %6.1f MiB\n", round, cfg.rounds, r.Sessions, mib(r.Before), mib(r.After))
		idles = append(idles, r)
	}
	printMemory(stdout, cfg, payloads, idles)
	return payloads, idles, errors.Join(failures...)
}

// printGatewayEnv names the settings the gateway ran with, if any, under
// a report's heading.
func printGatewayEnv(w io.Writer, cfg config) {
	if len(cfg.gatewayEnv) > 0 {
		fmt.Fprintf(w, "The gateway ran with %s in its environment.\n", strings.Join(cfg.gatewayEnv, " "))
	}
}

// printMemory prints the medians over the rounds of the payload and the
// idle-session measurements.
func printMemory(w io.Writer, cfg config, payloads []payloadResult, idles []idleResult) {
	fmt.Fprintf(w, "Gateway process memory, medians over %d round(s); maxMessageBytes %d. Growth = peak RSS (VmHWM) during the call − RSS before it.\n\n",
		cfg.rounds, maxMessageBytes(cfg.payload))
	printGatewayEnv(w, cfg)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "shape\tmethod\tpayload MiB\tbaseline RSS MiB\tpeak RSS MiB\tgrowth MiB\tgrowth/payload\t")
	for _, shape := range memShapes {
		for _, kind := range payloadKinds {
			var base, peak, growth []float64
			for _, r := range payloads {
				if r.Shape == shape.name && r.Kind == kind.name {
					base = append(base, mib(r.Baseline))
					peak = append(peak, mib(r.Peak))
					growth = append(growth, mib(r.growth()))
				}
			}
			if len(growth) == 0 {
				fmt.Fprintf(tw, "%s\t%s\t(failed)\t\t\t\t\t\n", shape.name, kind.name)
				continue
			}
			g := medianOf(growth)
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.1f\t%.1f\t%.1f\t%.2fx\t\n", shape.name, kind.name, mib(int64(cfg.payload)),
				medianOf(base), medianOf(peak), g, g/mib(int64(cfg.payload)))
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "idle HTTP sessions, each with its GET stream (fixture as stdio upstream)\tRSS before MiB\tRSS after MiB\tgrowth MiB\tMiB per 1,000\t")
	if len(idles) == 0 {
		fmt.Fprintf(tw, "%d\t(failed)\t\t\t\t\n", cfg.idleSessions)
	} else {
		var before, after, growth []float64
		for _, r := range idles {
			before = append(before, mib(r.Before))
			after = append(after, mib(r.After))
			growth = append(growth, mib(r.After-r.Before))
		}
		g := medianOf(growth)
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%.1f\t\n", cfg.idleSessions, medianOf(before), medianOf(after), g, g*1000/float64(cfg.idleSessions))
	}
	tw.Flush()
}
