// Package loadgen drives an MCP server with concurrent sessions that call
// one tool a fixed number of times, and measures what a gateway costs:
// calls per second, call latency percentiles, errors, the time to connect
// (start + initialize) and to list tools, and the resident memory of the
// server's process tree. cmd/manifold-bench and the bench suite use it.
//
// A target is either a streamable HTTP URL, which all sessions share, or a
// stdio command. A stdio server process serves exactly one client, so C
// sessions over stdio are C processes, each started and initialized by its
// session, as C hosts launching the server would do.
package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of Config.
const (
	DefaultSessions    = 1
	DefaultCalls       = 1000
	DefaultTool        = "echo"
	DefaultArgs        = `{"message":"hello"}`
	DefaultDuration    = time.Minute
	DefaultCallTimeout = 30 * time.Second
	DefaultRSSInterval = 100 * time.Millisecond
	// maxErrorSamples is how many distinct error messages a Report keeps.
	maxErrorSamples = 5
)

// Target is what to drive: exactly one of URL and Command.
type Target struct {
	// URL is a streamable HTTP endpoint, shared by all sessions.
	URL string
	// Command is a stdio server: program and arguments, started once per
	// session in its own process group, which is killed when the session
	// ends.
	Command []string
	// Env, if not nil, is the environment of Command's processes.
	Env []string
}

// String describes t for reports.
func (t Target) String() string {
	if t.URL != "" {
		return t.URL
	}
	return fmt.Sprintf("%q (stdio)", t.Command)
}

// Config configures a load run. The zero value of every field but Target
// means its default.
type Config struct {
	Target Target
	// Sessions is the number of concurrent sessions. Default 1.
	Sessions int
	// Calls is the total number of tools/call, shared by the sessions.
	// Default 1000.
	Calls int
	// Tool is the tool to call. Default "echo".
	Tool string
	// Args are the tool's arguments, a JSON object. Default
	// {"message":"hello"}.
	Args json.RawMessage
	// Duration bounds the call phase: when it passes, the calls in flight
	// are cancelled (and counted neither as completed nor as errors) and
	// the report says TimedOut. Default 1 minute.
	Duration time.Duration
	// CallTimeout bounds each call, and connecting each session. Default 30s.
	CallTimeout time.Duration
	// ProtocolVersion is offered in initialize. Default: the SDK's newest.
	ProtocolVersion string
	// TargetPIDs are processes whose trees (with the stdio processes Run
	// starts) make up the server's memory, for URL targets. Default none.
	TargetPIDs []int
	// RSSInterval is how often memory is sampled during the call phase.
	// Default 100ms.
	RSSInterval time.Duration
	// Rate, when positive, paces the calls: Rate calls per second offered
	// in all, each session starting its calls Sessions/Rate seconds apart
	// (a session whose call took longer starts the next at once). Default
	// 0: each session calls as fast as its answers come.
	Rate float64
	// Token, when set, is sent as a bearer token on every HTTP request.
	Token string
}

func (c *Config) withDefaults() (Config, error) {
	d := *c
	if (d.Target.URL == "") == (len(d.Target.Command) == 0) {
		return d, errors.New("loadgen: the target needs exactly one of a URL and a command")
	}
	if d.Rate < 0 {
		return d, fmt.Errorf("loadgen: rate (%g) must not be negative", d.Rate)
	}
	if d.Sessions < 0 || d.Calls < 0 {
		return d, fmt.Errorf("loadgen: sessions (%d) and calls (%d) must not be negative", d.Sessions, d.Calls)
	}
	setDefault(&d.Sessions, DefaultSessions)
	setDefault(&d.Calls, DefaultCalls)
	setDefault(&d.Tool, DefaultTool)
	setDefault(&d.Duration, DefaultDuration)
	setDefault(&d.CallTimeout, DefaultCallTimeout)
	setDefault(&d.RSSInterval, DefaultRSSInterval)
	if len(d.Args) == 0 {
		d.Args = json.RawMessage(DefaultArgs)
	}
	var obj map[string]any
	if err := json.Unmarshal(d.Args, &obj); err != nil {
		return d, fmt.Errorf("loadgen: tool arguments must be a JSON object: %w", err)
	}
	return d, nil
}

func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// Run connects cfg.Sessions sessions to the target, lists tools once per
// session, then makes cfg.Calls calls of cfg.Tool across the sessions
// (each session calls in a loop, one call in flight at a time) and closes
// everything it started. A failed call is counted in the report, not
// returned; Run returns an error when a session cannot connect or the tool
// does not exist, or when ctx is done.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rep := &Report{Target: cfg.Target.String(), Tool: cfg.Tool, Sessions: cfg.Sessions, Calls: cfg.Calls}

	var hc *http.Client
	if cfg.Target.URL != "" {
		// Enough idle connections for every session's POSTs and GET
		// stream, so that the run does not measure connection churn.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 4 * cfg.Sessions
		tr.MaxIdleConnsPerHost = 4 * cfg.Sessions
		hc = &http.Client{Transport: tr}
		if cfg.Token != "" {
			hc.Transport = bearer{token: cfg.Token, rt: tr}
		}
		defer tr.CloseIdleConnections()
	}

	sessions, err := connectAll(ctx, cfg, hc, rep)
	defer closeAll(sessions)
	if err != nil {
		return rep, err
	}

	roots := slices.Clone(cfg.TargetPIDs)
	var servers []int // the processes the sessions talk to, for CPU
	if len(cfg.TargetPIDs) > 0 {
		servers = cfg.TargetPIDs[:1]
	}
	for _, s := range sessions {
		if s.proc != nil {
			roots = append(roots, s.proc.pid())
			servers = append(servers, s.proc.pid())
		}
	}
	sampler := startRSSSampler(roots, cfg.RSSInterval)
	rep.CPU = measureCPU(servers, func() int {
		callPhase(ctx, cfg, sessions, rep)
		return rep.Completed
	})
	rep.RSS = sampler.stop()
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	return rep, nil
}

// session is one client session and, for stdio targets, its process.
type session struct {
	cs   *mcp.ClientSession
	proc *process
}

// connectAll connects and lists tools on every session concurrently.
func connectAll(ctx context.Context, cfg Config, hc *http.Client, rep *Report) ([]*session, error) {
	sessions := make([]*session, cfg.Sessions)
	initTimes := make([]time.Duration, cfg.Sessions)
	listTimes := make([]time.Duration, cfg.Sessions)
	errs := make([]error, cfg.Sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			sessions[i], initTimes[i], listTimes[i], errs[i] = connect(ctx, cfg, hc)
		})
	}
	wg.Wait()
	rep.Initialize = percentiles(initTimes)
	rep.ListTools = percentiles(listTimes)
	return slices.DeleteFunc(sessions, func(s *session) bool { return s == nil }), errors.Join(errs...)
}

// connect starts (stdio) and initializes one session, then lists its tools
// and checks cfg.Tool is among them.
func connect(ctx context.Context, cfg Config, hc *http.Client) (*session, time.Duration, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
	defer cancel()
	s := &session{}
	var transport mcp.Transport
	if cfg.Target.URL != "" {
		transport = &mcp.StreamableClientTransport{Endpoint: cfg.Target.URL, HTTPClient: hc}
	} else {
		s.proc = newProcess(cfg.Target.Command, cfg.Target.Env)
		transport = &mcp.CommandTransport{Command: s.proc.cmd, TerminateDuration: time.Second}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "manifold-bench", Version: "v0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	start := time.Now()
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: cfg.ProtocolVersion})
	initTime := time.Since(start)
	if err != nil {
		if s.proc != nil {
			s.proc.kill()
		}
		return nil, initTime, 0, fmt.Errorf("loadgen: connect: %w", err)
	}
	s.cs = cs
	start = time.Now()
	found := false
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return s, initTime, time.Since(start), fmt.Errorf("loadgen: tools/list: %w", err)
		}
		found = found || tool.Name == cfg.Tool
	}
	listTime := time.Since(start)
	if !found {
		return s, initTime, listTime, fmt.Errorf("loadgen: the target has no tool %q", cfg.Tool)
	}
	return s, initTime, listTime, nil
}

// closeAll closes every session and kills what is left of their processes.
func closeAll(sessions []*session) {
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() {
			if s.cs != nil {
				_ = s.cs.Close()
			}
			if s.proc != nil {
				s.proc.kill()
			}
		})
	}
	wg.Wait()
}

// callPhase makes the calls and fills in the call fields of rep.
func callPhase(ctx context.Context, cfg Config, sessions []*session, rep *Report) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var (
		tickets  atomic.Int64
		mu       sync.Mutex
		all      []time.Duration
		errCount int
		toolErrs int
		samples  []string
	)
	record := func(lat []time.Duration, errs []string, n, te int) {
		mu.Lock()
		defer mu.Unlock()
		all = append(all, lat...)
		errCount += n
		toolErrs += te
		for _, e := range errs {
			if len(samples) < maxErrorSamples && !slices.Contains(samples, e) {
				samples = append(samples, e)
			}
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() {
			lat := make([]time.Duration, 0, cfg.Calls/len(sessions)+1)
			var errs []string
			n, te := 0, 0
			params := &mcp.CallToolParams{Name: cfg.Tool, Arguments: cfg.Args}
			pace := newPacer(cfg.Rate, len(sessions))
			for tickets.Add(1) <= int64(cfg.Calls) && pace.wait(ctx) {
				cctx, ccancel := context.WithTimeout(ctx, cfg.CallTimeout)
				t0 := time.Now()
				res, err := s.cs.CallTool(cctx, params)
				d := time.Since(t0)
				ccancel()
				switch {
				case err != nil && ctx.Err() != nil:
					// Cut by the end of the run (Duration, or ctx): neither
					// a success nor the target's failure.
				case err != nil:
					n++
					errs = append(errs, err.Error())
				case res.IsError:
					n++
					te++
					errs = append(errs, "tool error: "+contentText(res.Content))
				default:
					lat = append(lat, d)
				}
			}
			record(lat, errs, n, te)
		})
	}
	wg.Wait()
	rep.Elapsed = time.Since(start)
	rep.Completed = len(all)
	rep.Errors = errCount
	rep.ToolErrors = toolErrs
	rep.ErrorSamples = samples
	rep.TimedOut = ctx.Err() != nil && len(all)+errCount < cfg.Calls
	if s := rep.Elapsed.Seconds(); s > 0 {
		rep.CallsPerSecond = float64(len(all)) / s
	}
	rep.Latency = percentiles(all)
}

// contentText returns the text of the first text content, for errors.
func contentText(c []mcp.Content) string {
	for _, x := range c {
		if t, ok := x.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return "(no text)"
}
