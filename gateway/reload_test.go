package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reloadHarness is a started gateway in front of in-memory demo upstreams
// alpha and beta (beta configured only when a config names it), whose
// LoadConfig returns whatever the test set last.
type reloadHarness struct {
	*harness
	mu   sync.Mutex
	next *config.Config
	err  error
	n    int // configs built, for distinct hashes
}

// reloadConfig is the base config of the reload tests: alpha, and beta
// when withBeta.
func (h *reloadHarness) reloadConfig(withBeta bool, edit func(*config.Config)) *config.Config {
	h.mu.Lock()
	h.n++
	n := h.n
	h.mu.Unlock()
	cfg := &config.Config{Servers: map[string]config.Server{
		"alpha": {Name: "alpha", Type: "stdio", Command: "unused"},
	}, Gateway: config.DefaultGateway(), Source: "reload.yaml", Hash: fmt.Sprintf("sha256:%d", n)}
	if withBeta {
		cfg.Servers["beta"] = config.Server{Name: "beta", Type: "stdio", Command: "unused"}
	}
	cfg.Gateway.Backoff.Initial = 10 * time.Millisecond
	cfg.Gateway.Backoff.Max = 50 * time.Millisecond
	cfg.Gateway.Timeouts.Call = 5 * time.Second
	cfg.Gateway.Timeouts.Connect = 2 * time.Second
	cfg.Auth.Local.Name = "local"
	if edit != nil {
		edit(cfg)
	}
	return cfg
}

func newReloadHarness(t *testing.T, withBeta bool) *reloadHarness {
	t.Helper()
	h := &reloadHarness{}
	load := func() (*config.Config, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.next, h.err
	}
	// Both fakes have transports; the config names beta only withBeta.
	h.harness = newHarnessOpts(t, &Options{LoadConfig: load}, func(c *config.Config) { *c = *h.reloadConfig(withBeta, nil) },
		upstreamSpec{name: "alpha", demoName: "alpha"}, upstreamSpec{name: "beta", demoName: "beta"})
	return h
}

// reload applies cfg (or fails to load with err) and returns the result.
func (h *reloadHarness) reload(t *testing.T, cfg *config.Config, err error) *ReloadResult {
	t.Helper()
	h.mu.Lock()
	h.next, h.err = cfg, err
	h.mu.Unlock()
	res, rerr := h.gw.Reload(context.Background(), TriggerSignal)
	if (rerr != nil) != (err != nil) {
		t.Fatalf("Reload: %v (load error %v)", rerr, err)
	}
	return res
}

// drainNotes empties the notification channel.
func (h *reloadHarness) drainNotes() {
	for {
		select {
		case <-h.notes:
		default:
			return
		}
	}
}

func (h *reloadHarness) call(ctx context.Context, name string) error {
	res, err := h.client.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"message": "hi"}})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("tool error: %s", textOfContent(res.Content))
	}
	return nil
}

func textOfContent(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestReloadAddsAndRemovesServersKeepingTheOthers(t *testing.T) {
	h := newReloadHarness(t, false)
	h.drainNotes()

	res := h.reload(t, h.reloadConfig(true, nil), nil)
	if res.Result != ReloadApplied || !slices.Equal(res.Added, []string{"beta"}) || len(res.Restarted)+len(res.Removed) != 0 {
		t.Fatalf("adding beta: %+v", res)
	}
	waitNote(t, h.notes, "tools")
	expectNoMoreNotes(t, h.notes, "tools")
	if names := toolNames(t, h.client); !slices.Contains(names, "beta__echo") || !slices.Contains(names, "alpha__echo") {
		t.Fatalf("after adding beta, tools = %v", names)
	}
	if err := h.call(context.Background(), "beta__echo"); err != nil {
		t.Fatalf("calling the added server: %v", err)
	}

	res = h.reload(t, h.reloadConfig(false, nil), nil)
	if !slices.Equal(res.Removed, []string{"beta"}) {
		t.Fatalf("removing beta: %+v", res)
	}
	waitNote(t, h.notes, "tools")
	if names := toolNames(t, h.client); slices.Contains(names, "beta__echo") {
		t.Fatalf("after removing beta, tools = %v", names)
	}
	if got := h.ups["alpha"].dials; got != 1 {
		t.Errorf("alpha was connected %d times, want 1: an unchanged server keeps its session", got)
	}
	waitFor(t, "beta to be stopped", func() bool { return h.gw.Status(nil).Draining == 0 })
	waitFor(t, "beta's session to close", func() bool { return sessions(h.ups["beta"].server) == 0 })
}

func TestReloadReplacesAChangedServerWithoutFailedCalls(t *testing.T) {
	h := newReloadHarness(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls, failures atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := h.call(ctx, "alpha__echo"); err != nil && ctx.Err() == nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				calls.Add(1)
			}
		}()
	}
	for i := range 5 {
		res := h.reload(t, h.reloadConfig(false, func(c *config.Config) {
			s := c.Servers["alpha"]
			s.Env = map[string]string{"ROUND": fmt.Sprint(i)}
			c.Servers["alpha"] = s
		}), nil)
		if !slices.Equal(res.Restarted, []string{"alpha"}) {
			t.Fatalf("round %d: %+v", i, res)
		}
		waitFor(t, "the replacement to serve", func() bool {
			st := h.gw.Status(nil)
			return len(st.Upstreams) == 1 && st.Upstreams[0].Replacement == nil && st.Upstreams[0].State == upstream.StateReady
		})
	}
	waitFor(t, "replaced upstreams to stop", func() bool { return h.gw.Status(nil).Draining == 0 })
	cancel()
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d calls failed across replacements; first: %v", n, calls.Load(), firstErr.Load())
	}
	if got := h.ups["alpha"].dials; got != 6 {
		t.Errorf("alpha connected %d times, want 6 (start + 5 replacements)", got)
	}
	// Old sessions must be closed; the server side notices asynchronously.
	waitFor(t, "alpha to have 1 session left", func() bool { return sessions(h.ups["alpha"].server) == 1 })
	t.Logf("%d calls during 5 replacements, none failed", calls.Load())
}

// expectNoMoreNotes fails if another kind notification arrives soon: one
// reload must notify once, not in a storm.
func expectNoMoreNotes(t *testing.T, notes chan string, kind string) {
	t.Helper()
	quiet := time.After(200 * time.Millisecond)
	for {
		select {
		case got := <-notes:
			if got == kind {
				t.Fatalf("a second %s list_changed for one reload", kind)
			}
		case <-quiet:
			return
		}
	}
}

func TestReloadLetsCallsOnAReplacedServerFinish(t *testing.T) {
	h := newReloadHarness(t, false)
	done := make(chan error, 1)
	go func() {
		res, err := h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{"ms": 400}})
		if err == nil && res.IsError {
			err = errors.New(textOfContent(res.Content))
		}
		done <- err
	}()
	waitFor(t, "the slow call to be in flight", func() bool {
		st := h.gw.Status(nil)
		return len(st.Upstreams) == 1 && st.Upstreams[0].InFlight == 1
	})
	h.reload(t, h.reloadConfig(false, func(c *config.Config) {
		s := c.Servers["alpha"]
		s.Env = map[string]string{"CHANGED": "yes"}
		c.Servers["alpha"] = s
	}), nil)
	waitFor(t, "the replacement to serve", func() bool { return h.gw.Status(nil).Upstreams[0].Replacement == nil })
	if st := h.gw.Status(nil); st.Draining != 1 {
		t.Errorf("draining = %d while the old upstream has a call in flight, want 1", st.Draining)
	}
	if err := <-done; err != nil {
		t.Fatalf("the call in flight on the replaced upstream: %v", err)
	}
	waitFor(t, "the old upstream to stop", func() bool { return h.gw.Status(nil).Draining == 0 })
}

func TestReloadPolicyAppliesToTheNextCall(t *testing.T) {
	h := newReloadHarness(t, false)
	if err := h.call(context.Background(), "alpha__echo"); err != nil {
		t.Fatal(err)
	}
	h.drainNotes()
	res := h.reload(t, h.reloadConfig(false, func(c *config.Config) {
		c.Policy = &config.Policy{Default: config.Allow, Rules: []config.Rule{
			{Effect: config.Deny, Match: config.Match{Tools: []string{"alpha__echo"}}},
		}}
	}), nil)
	if res.Result != ReloadApplied || !res.poolChanges.empty() {
		t.Fatalf("policy change: %+v", res)
	}
	if err := h.call(context.Background(), "alpha__echo"); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("call denied by the new policy: %v", err)
	}
	waitNote(t, h.notes, "tools")
	if names := toolNames(t, h.client); slices.Contains(names, "alpha__echo") || !slices.Contains(names, "alpha__add") {
		t.Fatalf("after the policy change, tools = %v", names)
	}
	if got := h.ups["alpha"].dials; got != 1 {
		t.Errorf("a policy change reconnected alpha (%d dials)", got)
	}
}

func TestReloadRejectsABadConfig(t *testing.T) {
	h := newReloadHarness(t, false)
	before := h.gw.current()
	loadErr := &config.FieldError{Source: "reload.yaml", Key: "gateway.limits.maxSessions", Msg: "must be greater than 0"}
	res := h.reload(t, nil, loadErr)
	if res.Result != ReloadRejected || !strings.Contains(res.Error, "gateway.limits.maxSessions") || len(res.Problems) != 1 {
		t.Fatalf("rejection: %+v", res)
	}
	if h.gw.current() != before {
		t.Fatal("a rejected config replaced the snapshot")
	}
	if err := h.call(context.Background(), "alpha__echo"); err != nil {
		t.Fatalf("the previous config stopped serving: %v", err)
	}
	st := h.gw.Status(nil)
	if st.Reloads.Rejected != 1 || st.Reloads.Last == nil || st.Reloads.Last.Result != ReloadRejected {
		t.Fatalf("status after a rejection: %+v", st.Reloads)
	}
	// Fixed: applied.
	if res := h.reload(t, h.reloadConfig(true, nil), nil); res.Result != ReloadApplied {
		t.Fatalf("the fixed config: %+v", res)
	}
}

func TestReloadUnchangedFileIsNotApplied(t *testing.T) {
	h := newReloadHarness(t, false)
	cfg := h.reloadConfig(false, nil)
	cfg.Hash = h.gw.current().cfg.Hash
	h.mu.Lock()
	h.next = cfg
	h.mu.Unlock()
	res, err := h.gw.Reload(context.Background(), TriggerFile)
	if err != nil || res.Result != ReloadUnchanged {
		t.Fatalf("same bytes: %+v, %v", res, err)
	}
}

// TestReloadOfAnEmptyFileWaitsForItsContent: a file change read empty is
// an in-place write in progress (config.Watcher), not a config of no
// servers, when the file was truncated again between the watcher's read
// and the reload's. A SIGHUP or POST /reload applies it: an operator asked.
func TestReloadOfAnEmptyFileWaitsForItsContent(t *testing.T) {
	h := newReloadHarness(t, false)
	empty := &config.Config{Servers: map[string]config.Server{}, Gateway: config.DefaultGateway(), Source: "reload.yaml", Hash: config.EmptyHash}
	empty.Auth.Local.Name = "local"
	h.mu.Lock()
	h.next = empty
	h.mu.Unlock()
	res, err := h.gw.Reload(context.Background(), TriggerFile)
	if err != nil || res.Result != ReloadUnchanged || len(res.Removed) != 0 {
		t.Fatalf("an empty file on a file change: %+v, %v", res, err)
	}
	if err := h.call(context.Background(), "alpha__echo"); err != nil {
		t.Fatalf("alpha after the empty read: %v", err)
	}
	res, err = h.gw.Reload(context.Background(), TriggerSignal)
	if err != nil || !slices.Equal(res.Removed, []string{"alpha"}) {
		t.Fatalf("an empty file on SIGHUP: %+v, %v", res, err)
	}
}

func TestReloadRestartOnlySettings(t *testing.T) {
	h := newReloadHarness(t, false)
	res := h.reload(t, h.reloadConfig(false, func(c *config.Config) {
		c.Gateway.Listen = "127.0.0.1:9999"
		c.Gateway.Log.Format = "console"
		c.Gateway.Timeouts.IdleConnection = time.Hour
	}), nil)
	if res.Result != ReloadApplied || !slices.Equal(res.RestartRequired, []string{"gateway.listen", "gateway.timeouts.idleConnection", "gateway.log.format"}) {
		t.Fatalf("restart-only keys: %+v", res)
	}
	if got := h.gw.current().cfg.Gateway.Listen; got != config.DefaultGateway().Listen {
		t.Errorf("running listen became %q", got)
	}
	if got := h.gw.current().cfg.Gateway.Timeouts.IdleConnection; got != config.DefaultGateway().Timeouts.IdleConnection {
		t.Errorf("running idle connection timeout became %s", got)
	}
}

func TestReloadMustBeValidWithTheRunningListener(t *testing.T) {
	h := newReloadHarness(t, false)
	// Pretend the gateway listens on all interfaces, as allowed with insecure.
	running := h.reloadConfig(false, func(c *config.Config) {
		c.Gateway.Listen = "0.0.0.0:8080"
		c.Gateway.Insecure = true
	})
	h.gw.snap.Store(newSnapshot(running, nil))
	// The new file asks for loopback and drops insecure: valid by itself,
	// not with the running listener, which it cannot move.
	next := h.reloadConfig(false, nil)
	h.mu.Lock()
	h.next = next
	h.mu.Unlock()
	res, err := h.gw.Reload(context.Background(), TriggerSignal)
	if err == nil || res.Result != ReloadRejected || !strings.Contains(res.Error, "0.0.0.0:8080") || !strings.Contains(res.Error, "gateway.listen") {
		t.Fatalf("turning insecure off under a running 0.0.0.0 listener: %+v, %v", res, err)
	}
	if !h.gw.current().cfg.Gateway.Insecure {
		t.Fatal("the rejected config was applied")
	}
}

func TestReloadLimitsApplyToTheNextRequest(t *testing.T) {
	h := newReloadHarness(t, false)
	srv := httptest.NewServer(h.gw.Handler())
	defer srv.Close()
	body := strings.Replace(initBody, `"t"`, `"`+strings.Repeat("x", 600)+`"`, 1)
	if resp, _ := post(t, srv.URL+"/mcp", body, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("before: %d", resp.StatusCode)
	}
	h.reload(t, h.reloadConfig(false, func(c *config.Config) { c.Gateway.Limits.MaxMessageBytes = 512 }), nil)
	resp, text := post(t, srv.URL+"/mcp", body, nil)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(text, "512") {
		t.Fatalf("after lowering maxMessageBytes: %d %s", resp.StatusCode, text)
	}
	// Without a declared length the body is cut at the new limit too.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", io.MultiReader(strings.NewReader(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	chunked, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	chunked.Body.Close()
	if req.ContentLength != 0 || chunked.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked body over the new limit: %d (content length %d)", chunked.StatusCode, req.ContentLength)
	}
	for ss := range h.gw.Server().Sessions() {
		if ss != nil && h.client.ID() != ss.ID() {
			ss.Close()
		}
	}
}

func TestStatusEndpoint(t *testing.T) {
	h := newReloadHarness(t, false)
	srv := httptest.NewServer(h.gw.Handler())
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("POST /reload with nothing to load: %d, want 422", resp.StatusCode)
	}
	next := h.reloadConfig(true, nil)
	h.mu.Lock()
	h.next, h.err = next, nil
	h.mu.Unlock()
	resp, err = http.Post(srv.URL+"/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var rr ReloadResult
	json.NewDecoder(resp.Body).Decode(&rr)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || rr.Result != ReloadApplied || rr.Trigger != TriggerAPI {
		t.Fatalf("POST /reload: %d %+v", resp.StatusCode, rr)
	}

	resp, err = http.Get(srv.URL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	names := []string{}
	for _, u := range st.Upstreams {
		names = append(names, u.Name)
	}
	if st.Config.Hash != h.gw.current().cfg.Hash || st.Reloads.Applied != 1 || st.Reloads.Rejected != 1 ||
		!slices.Equal(names, []string{"alpha", "beta"}) || st.Sessions < 1 || st.Process.Goroutines == 0 {
		t.Fatalf("status: %+v", st)
	}
	if resp, _ := post(t, srv.URL+"/status", "{}", nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /status: %d", resp.StatusCode)
	}
}

// sessions counts the open sessions of a fake upstream's server.
func sessions(s *mcp.Server) int {
	n := 0
	for range s.Sessions() {
		n++
	}
	return n
}

// waitFor polls cond for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
