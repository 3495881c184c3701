package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reloadState is one config of the hot-reload tests: server a always,
// server b when withB (with env value bEnv), and a policy that denies
// a__add when denyAdd.
type reloadState struct {
	withB   bool
	bEnv    string
	denyAdd bool
	tag     string // MANIFOLD_E2E_TAG of the upstream processes
	round   int
}

func (s reloadState) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# round %d\nmcpServers:\n  a:\n    command: %q\n    args: [demo-server, --name, a]\n    env: {MANIFOLD_E2E_TAG: %q}\n", s.round, binary, s.tag)
	if s.withB {
		fmt.Fprintf(&b, "  b:\n    command: %q\n    args: [demo-server, --name, b]\n    env: {MANIFOLD_E2E_TAG: %q, DEMO_VALUE: %q}\n", binary, s.tag, s.bEnv)
	}
	b.WriteString("gateway:\n  timeouts: {drain: 5s}\n")
	if s.denyAdd {
		b.WriteString("policy:\n  default: allow\n  rules:\n    - deny: {tools: [a__add]}\n")
	}
	return b.String()
}

// gatewayStatus is the part of GET /status the tests read.
type gatewayStatus struct {
	Config struct {
		Hash string `json:"hash"`
	} `json:"config"`
	Reloads struct {
		Applied  int `json:"applied"`
		Rejected int `json:"rejected"`
		Last     *struct {
			Result   string   `json:"result"`
			Error    string   `json:"error"`
			Problems []string `json:"problems"`
		} `json:"last"`
	} `json:"reloads"`
	Upstreams []struct {
		Name           string `json:"name"`
		State          string `json:"state"`
		PID            int    `json:"pid"`
		Session        string `json:"session"`
		ClientSessions int    `json:"clientSessions"`
	} `json:"upstreams"`
	Draining      int `json:"draining"`
	Sessions      int `json:"sessions"`
	Subscriptions int `json:"subscriptions"`
	Process       struct {
		Goroutines int `json:"goroutines"`
		OpenFiles  int `json:"openFiles"`
	} `json:"process"`
}

func status(t *testing.T, g *gatewayProc) gatewayStatus {
	t.Helper()
	resp, err := http.Get(g.url("/status"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st gatewayStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET /status: %d: %v", resp.StatusCode, err)
	}
	return st
}

func hashOf(content string) string {
	sum := sha256.Sum256([]byte(content))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeAtomically replaces path the way editors and config tools do: a new
// file renamed over the old one.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".manifold.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// waitServing polls /status until the config with hash serves and returns
// how long that took.
func waitServing(t *testing.T, g *gatewayProc, hash string, since time.Time) time.Duration {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if status(t, g).Config.Hash == hash {
			return time.Since(since)
		}
		if time.Now().After(deadline) {
			t.Fatalf("config %s not serving 10s after the write; status: %+v", hash, status(t, g))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func pidOf(t *testing.T, g *gatewayProc, server string) int {
	t.Helper()
	for _, u := range status(t, g).Upstreams {
		if u.Name == server {
			return u.PID
		}
	}
	t.Fatalf("no upstream %q in /status", server)
	return 0
}

// eventually polls cond for up to 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// TestHotReloadUnderLoad is issue 5's acceptance 1, 3 (rename-replace) and
// 5: while clients call a's tools without pause, the config is rewritten
// 50 times (b added, b's env changed, a policy rule toggled, b removed),
// alternating in-place writes and rename-replace. No call to a fails, a
// keeps its process, b's tools come and go, clients get list_changed, and
// each policy change holds for the next call.
func TestHotReloadUnderLoad(t *testing.T) {
	st := reloadState{tag: newTag()}
	path := writeConfig(t, st.yaml())
	g := startGateway(t, "--config", path)
	ctx := ctxT(t, 3*time.Minute)
	pidA := pidOf(t, g, "a")

	var listChanged atomic.Int64
	watcher, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-watcher"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged.Add(1) },
	}).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url("/mcp")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()

	loadCtx, stopLoad := context.WithCancel(ctx)
	var calls, failures atomic.Int64
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	for i := range 4 {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("e2e-load-%d", i)}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: g.url("/mcp")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for loadCtx.Err() == nil {
				res, err := cs.CallTool(loadCtx, &mcp.CallToolParams{Name: "a__echo", Arguments: map[string]any{"message": "x"}})
				if loadCtx.Err() != nil {
					return
				}
				calls.Add(1)
				if err != nil || res.IsError {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%v %+v", err, res))
				}
			}
		}()
	}

	var unchangedServers, all []time.Duration
	for round := 1; round <= 50; round++ {
		st.round = round
		switch round % 4 {
		case 1: // add b
			st.withB, st.bEnv = true, "v1"
		case 2: // change b's env: b restarts
			st.bEnv = fmt.Sprintf("v%d", round)
		case 3: // toggle the policy rule: no server changes
			st.denyAdd = !st.denyAdd
		case 0: // remove b
			st.withB = false
		}
		content := st.yaml()
		start := time.Now()
		if round%2 == 0 {
			writeAtomically(t, path, content)
		} else if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		took := waitServing(t, g, hashOf(content), start)
		all = append(all, took)
		if round%4 == 3 {
			unchangedServers = append(unchangedServers, took)
			// The policy holds for the very next call.
			_, err := watcher.CallTool(ctx, &mcp.CallToolParams{Name: "a__add", Arguments: map[string]any{"a": 1, "b": 2}})
			if denied := err != nil && strings.Contains(err.Error(), "unknown tool"); denied != st.denyAdd {
				t.Fatalf("round %d: deny a__add = %v, but the call gave %v", round, st.denyAdd, err)
			}
		}
		hasB := func() bool { return slices.Contains(listToolNames(ctx, t, watcher), "b__echo") }
		if st.withB {
			eventually(t, fmt.Sprintf("round %d: b__echo listed", round), hasB)
		} else {
			eventually(t, fmt.Sprintf("round %d: b__echo gone", round), func() bool { return !hasB() })
		}
	}
	time.Sleep(200 * time.Millisecond) // more calls after the last reload
	stopLoad()
	wg.Wait()

	if n := failures.Load(); n != 0 {
		t.Fatalf("%d of %d calls to a failed during the reloads; first: %v", n, calls.Load(), firstFailure.Load())
	}
	if calls.Load() < 100 {
		t.Fatalf("only %d calls ran during the reloads: the load did not run", calls.Load())
	}
	if got := pidOf(t, g, "a"); got != pidA {
		t.Fatalf("a's process changed: pid %d, then %d", pidA, got)
	}
	if n := listChanged.Load(); n < 25 {
		t.Errorf("the watching client got %d tools/list_changed over 50 reloads that changed its list each time", n)
	}
	s := status(t, g)
	if s.Reloads.Applied != 50 || s.Reloads.Rejected != 0 {
		t.Errorf("status counts %d applied, %d rejected reloads; want 50, 0", s.Reloads.Applied, s.Reloads.Rejected)
	}
	t.Logf("%d calls to a, none failed; a kept pid %d; %d tools/list_changed", calls.Load(), pidA, listChanged.Load())
	t.Logf("file write -> new config serving: policy-only changes median %v max %v; all 50 median %v max %v",
		median(unchangedServers), slices.Max(unchangedServers), median(all), slices.Max(all))
}

// TestReloadInPlaceWriteThatPauses: an in-place write truncates the file,
// then writes it. On a loaded machine the writer can pause in between for
// longer than the watch's debounce, and the watcher then reads an empty
// file: a valid config of no servers. It must wait for the content instead
// of applying that, which stopped every upstream and started them again (a
// new process, its tools unknown until it connected): the flake of
// TestHotReloadUnderLoad, whose policy rounds are in-place writes, where the
// call right after a toggle got "unknown tool".
func TestReloadInPlaceWriteThatPauses(t *testing.T) {
	debug := func(s reloadState) string {
		return strings.Replace(s.yaml(), "gateway:\n", "gateway:\n  log: {level: debug}\n", 1)
	}
	st := reloadState{tag: newTag(), denyAdd: true}
	path := writeConfig(t, debug(st))
	g := startGateway(t, "--config", path)
	ctx := ctxT(t, time.Minute)
	pidA := pidOf(t, g, "a")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url("/mcp")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The watcher has read the truncated file: it says it waits for the
	// content, or (the bug) the empty config was applied.
	applied := `"msg":"config reloaded","trigger":"file","hash":"` + hashOf("") + `"`
	eventually(t, "the watcher to read the truncated file", func() bool {
		l := g.logs.String()
		return strings.Contains(l, "the config file is empty") || strings.Contains(l, applied)
	})
	if strings.Contains(g.logs.String(), applied) {
		t.Fatal("the truncated (empty) file of an in-place write was applied as a config")
	}
	st.denyAdd = false
	content := debug(st)
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitServing(t, g, hashOf(content), time.Now())
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__add", Arguments: map[string]any{"a": 1, "b": 2}}); err != nil {
		t.Fatalf("a__add right after the policy allowed it: %v", err)
	}
	if got := pidOf(t, g, "a"); got != pidA {
		t.Errorf("a's process changed: pid %d, then %d", pidA, got)
	}
	if s := status(t, g); s.Reloads.Applied != 1 || s.Reloads.Rejected != 0 {
		t.Errorf("status counts %d applied, %d rejected reloads; want 1, 0", s.Reloads.Applied, s.Reloads.Rejected)
	}
}

// TestReloadRejectsBrokenConfigs is acceptance 2: bad YAML, an unknown key
// and an invalid value each leave the previous config serving, with the
// problem named on /status and in the log; fixing the file is picked up.
func TestReloadRejectsBrokenConfigs(t *testing.T) {
	st := reloadState{tag: newTag()}
	good := st.yaml()
	path := writeConfig(t, good)
	g := startGateway(t, "--config", path)
	ctx := ctxT(t, time.Minute)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url("/mcp")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	broken := []struct{ name, doc, want string }{
		{"bad YAML", good + "gateway: [unclosed\n", "manifold.yaml"},
		{"unknown key", good + "  bogusKey: 1\n", "gateway.bogusKey"},
		{"invalid value", strings.Replace(good, "drain: 5s", "drain: -5s", 1), "gateway.timeouts.drain"},
	}
	for i, b := range broken {
		if err := os.WriteFile(path, []byte(b.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		eventually(t, b.name+" rejected", func() bool { return status(t, g).Reloads.Rejected == i+1 })
		s := status(t, g)
		if s.Config.Hash != hashOf(good) || s.Reloads.Last == nil || s.Reloads.Last.Result != "rejected" || !strings.Contains(s.Reloads.Last.Error, b.want) {
			t.Fatalf("%s: status %+v, last %+v; want the good config serving and an error naming %q", b.name, s.Config, s.Reloads.Last, b.want)
		}
		g.logs.waitFor(t, b.want, 5*time.Second)
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__echo", Arguments: map[string]any{"message": "still"}}); err != nil || res.IsError {
			t.Fatalf("%s: the previous config stopped serving: %v", b.name, err)
		}
	}
	if !strings.Contains(g.logs.String(), `"msg":"config rejected; the previous config keeps serving"`) {
		t.Error("no rejection line in the log")
	}

	st.withB, st.bEnv = true, "fixed"
	fixed := st.yaml()
	writeAtomically(t, path, fixed)
	waitServing(t, g, hashOf(fixed), time.Now())
	eventually(t, "b__echo after the fix", func() bool { return slices.Contains(listToolNames(ctx, t, cs), "b__echo") })
}

// TestReloadConfigMapSymlinkSwap is acceptance 3 for Kubernetes: the config
// path is a ConfigMap volume's symlink chain, swapped as kubelet does.
func TestReloadConfigMapSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	st := reloadState{tag: newTag()}
	mkVersion := func(name, content string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "manifold.yaml"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	first := st.yaml()
	mkVersion("..2026_11_21_v1", first)
	if err := os.Symlink("..2026_11_21_v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "manifold.yaml")
	if err := os.Symlink("..data/manifold.yaml", path); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "--config", path)
	if got := status(t, g).Config.Hash; got != hashOf(first) {
		t.Fatalf("serving %s, want %s", got, hashOf(first))
	}
	for i, withB := range []bool{true, false, true} {
		st.withB, st.bEnv, st.round = withB, "cm", i+1
		content := st.yaml()
		v := fmt.Sprintf("..2026_11_21_v%d", i+2)
		mkVersion(v, content)
		start := time.Now()
		if err := os.Symlink(v, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		took := waitServing(t, g, hashOf(content), start)
		t.Logf("swap %d served after %v", i+1, took)
	}
}

// TestReloadLeavesNoLeaks is acceptance 4: after 100 reloads that add,
// change and remove a server, the upstream processes, the gateway's
// goroutines and its open file descriptors are back to their baseline.
func TestReloadLeavesNoLeaks(t *testing.T) {
	st := reloadState{tag: newTag()}
	path := writeConfig(t, st.yaml())
	g := startGateway(t, "--config", path)
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(300 * time.Millisecond)
	base := status(t, g)
	baseProcs := len(taggedProcesses(st.tag))
	if baseProcs == 0 {
		t.Fatal("no tagged upstream process found for a")
	}

	for round := 1; round <= 100; round++ {
		st.round = round
		switch round % 3 {
		case 1:
			st.withB, st.bEnv = true, "one"
		case 2:
			st.bEnv = "two"
		case 0:
			st.withB = false
		}
		if round == 100 {
			st.withB = false // end where we started
		}
		content := st.yaml()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		waitServing(t, g, hashOf(content), time.Now())
	}
	eventually(t, "replaced and removed upstreams to finish draining", func() bool { return status(t, g).Draining == 0 })

	var now gatewayStatus
	var procs int
	deadline := time.Now().Add(15 * time.Second)
	for {
		http.DefaultClient.CloseIdleConnections()
		now, procs = status(t, g), len(taggedProcesses(st.tag))
		// One connection of slack: the /status request itself.
		settled := procs == baseProcs && now.Process.Goroutines <= base.Process.Goroutines+2 && now.Process.OpenFiles <= base.Process.OpenFiles+1
		if settled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 100 reloads: %d upstream processes (baseline %d), %d goroutines (%d), %d open files (%d)",
				procs, baseProcs, now.Process.Goroutines, base.Process.Goroutines, now.Process.OpenFiles, base.Process.OpenFiles)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if now.Reloads.Applied != 100 {
		t.Errorf("%d reloads applied, want 100", now.Reloads.Applied)
	}
	t.Logf("after 100 reloads: %d upstream processes (baseline %d), %d goroutines (%d), %d open files (%d)",
		procs, baseProcs, now.Process.Goroutines, base.Process.Goroutines, now.Process.OpenFiles, base.Process.OpenFiles)
}
