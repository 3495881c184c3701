package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/cluster"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// loadSession is one client of the kill test: it calls alpha__echo in a
// loop through the load balancer and, when the replica that owns its
// session is gone, starts a new session (the spec's answer to 404).
type loadSession struct {
	cs        *mcp.ClientSession
	owner     string
	calls     int
	reinits   int
	errs      []string // errors of a session whose owner was alive
	lostErrs  int      // errors on a session whose owner was killed
	lostKinds []string // and what they were
}

func connectLoad(ctx context.Context, url string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-kill", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
}

// TestClusterKillAndRotate is acceptance 2 of cluster mode. Eight sessions
// call through a round-robin proxy in front of three replicas. One replica
// (which also holds a parked MRTR call) is taken out of the proxy's
// rotation, as a Service drops a pod, and killed with SIGKILL: sessions
// owned by the others see no error; its own sessions get 404, start a new
// session and go on; the parked call's retry fails with a clear error.
// Then the secret is rotated under load (the new secret first accepted
// everywhere, then issued with the old one still accepted) and no call
// fails.
func TestClusterKillAndRotate(t *testing.T) {
	servers := fmt.Sprintf(`mcpServers:
  alpha:
    command: %q
    args: [demo-server, --name, alpha]
  fx:
    command: %q
    args: [--stdio, --protocol-versions, "2025-11-25"]`, binary, fixtureBinary(t))
	c := startCluster(t, 3, servers)
	rr := newRoundRobin(t, c.addrs)
	keys, err := cluster.NewKeys([]byte(clusterSecret), nil)
	if err != nil {
		t.Fatal(err)
	}
	victim := 0
	t.Logf("replicas %v; the victim is %s", c.addrs, c.addrs[victim])

	// A 2026-07-28 call parked by the victim: its answer is input_required.
	parked := postJSON(t, "http://"+c.addrs[victim]+"/mcp", statelessCall(`"fx__test_sampling"`, `{"prompt":"hi"}`, ""))
	state, _ := parked["result"].(map[string]any)["requestState"].(string)
	if state == "" {
		t.Fatalf("no requestState in %v", parked)
	}

	ctx, cancel := context.WithCancel(ctxT(t, 3*time.Minute))
	defer cancel()
	sessions := make([]*loadSession, 8)
	for i := range sessions {
		cs, err := connectLoad(ctx, rr.URL+"/mcp")
		if err != nil {
			t.Fatal(err)
		}
		tok, err := keys.Open(cs.ID(), time.Now())
		if err != nil {
			t.Fatalf("session id %q: %v", cs.ID(), err)
		}
		sessions[i] = &loadSession{cs: cs, owner: tok.Owner}
		cs.Ping(ctx, nil) // a connect is three requests: move the next initialize on
		t.Logf("session %d is owned by %s", i, tok.Owner)
	}
	var killed atomic.Bool
	var phase atomic.Int32 // calls per session counted for the current phase
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, s := range sessions {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "hi"}})
				switch {
				case err == nil:
					s.calls++
					phase.Add(1)
				case s.owner == c.addrs[victim] && killed.Load():
					// The call in flight when its owner died fails however
					// the connection broke; then the session is gone: 404.
					s.lostErrs++
					if s.lostErrs > 1 && !errors.Is(err, mcp.ErrSessionMissing) {
						s.errs = append(s.errs, "lost session, not a 404: "+err.Error())
					}
					s.lostKinds = append(s.lostKinds, err.Error())
					s.cs.Close()
					cs, err := connectLoad(ctx, rr.URL+"/mcp")
					if err != nil {
						s.errs = append(s.errs, "re-initialize: "+err.Error())
						return
					}
					tok, _ := keys.Open(cs.ID(), time.Now())
					s.cs, s.owner = cs, tok.Owner
					s.reinits++
				default:
					s.errs = append(s.errs, err.Error())
					if ctx.Err() != nil {
						return
					}
				}
			}
		})
	}
	waitCalls := func(n int32) {
		t.Helper()
		phase.Store(0)
		for phase.Load() < n && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitCalls(200)

	// The victim leaves the rotation, then dies.
	rr.remove(c.addrs[victim])
	rr.idle(ctx, c.addrs[victim])
	killed.Store(true)
	c.replicas[victim].cmd.Process.Signal(syscall.SIGKILL)
	<-c.replicas[victim].done
	waitCalls(400)

	// The parked call's retry, wherever it lands, fails clearly.
	retry := postJSON(t, rr.URL+"/mcp", statelessCall(`"fx__test_sampling"`, `{"prompt":"hi"}`,
		`,"inputResponses":{"x":{"role":"assistant","content":{"type":"text","text":"ok"},"model":"m"}},"requestState":`+jsonString(state)))
	if e, _ := retry["error"].(map[string]any); e == nil || !strings.Contains(fmt.Sprint(e["message"]), "restarted or is gone") {
		t.Errorf("retry of a call parked by the killed replica: %v, want an error saying its replica is gone", retry)
	}

	// Rotation under load: the new secret is first accepted everywhere,
	// then issued, the old one still accepted.
	const newSecret = "e2e-cluster-secret-ROTATED-0123456789"
	live := []int{1, 2}
	for _, step := range []struct{ secret, previous string }{
		{clusterSecret, newSecret},
		{newSecret, clusterSecret},
	} {
		for _, i := range live {
			cfg := clusterConfig(servers, "  timeouts: { call: 30s }", c.addrs[i], c.addrs,
				fmt.Sprintf("    previousSecrets: [%q]", step.previous))
			cfg = strings.Replace(cfg, fmt.Sprintf("secret: %q", clusterSecret), fmt.Sprintf("secret: %q", step.secret), 1)
			rotated := strings.Count(c.replicas[i].logs.String(), "cluster secrets rotated")
			if err := os.WriteFile(c.cfgs[i], []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			c.replicas[i].cmd.Process.Signal(syscall.SIGHUP)
			for strings.Count(c.replicas[i].logs.String(), "cluster secrets rotated") == rotated && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
		}
		waitCalls(200)
	}
	// New sessions now carry tokens of the new secret.
	cs, err := connectLoad(ctx, rr.URL+"/mcp")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Open(cs.ID(), time.Now()); !errors.Is(err, cluster.ErrForged) {
		t.Errorf("a session opened after the rotation opens under the old secret (%v): it should be issued under the new one", err)
	}
	cs.Close()
	close(stop)
	wg.Wait()

	reinits := 0
	for i, s := range sessions {
		for _, e := range s.errs {
			t.Errorf("session %d: %s", i, e)
		}
		reinits += s.reinits
		t.Logf("session %d (owner %s): %d calls, %d re-initializations, errors after its owner was killed: %q", i, s.owner, s.calls, s.reinits, s.lostKinds)
		s.cs.Close()
	}
	if reinits == 0 {
		t.Log("no session was owned by the killed replica: its 404 path did not run this time")
	}
}

// statelessCall is a 2026-07-28 tools/call body; extra is added to params.
func statelessCall(name, args, extra string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":` + name + `,"arguments":` + args + extra +
		`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"e2e","version":"1"}}}}`
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// postJSON POSTs a 2026-07-28 request and decodes its answer (JSON, or the
// last event of a stream).
func postJSON(t *testing.T, url, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "fx__test_sampling")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if i := bytes.LastIndex(b, []byte("data: ")); i >= 0 {
		b = bytes.TrimSpace(b[i+len("data: "):])
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("answer %d %q: %v", resp.StatusCode, b, err)
	}
	return m
}
