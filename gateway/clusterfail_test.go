package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// chunkedPOST posts body to url without a Content-Length (chunked), with
// alice's key and session sid, and returns the status.
func chunkedPOST(t *testing.T, url, sid string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/mcp", struct{ io.Reader }{body})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestClusterForwardOversizeChunkedBody: a session message without a
// Content-Length over gateway.limits.maxMessageBytes gets 413 on its owner;
// through another replica it gets the same answer, not 502 "replica
// forwarding failed".
func TestClusterForwardOversizeChunkedBody(t *testing.T) {
	rs := newReplicas(t, 2, func(c *config.Config) { c.Gateway.Limits.MaxMessageBytes = 4096 })
	a, b := rs[0], rs[1]
	sid, status, body := openRaw(t, a.srv.URL, aliceKey)
	if status != http.StatusOK {
		t.Fatalf("initialize: %d %s", status, body)
	}
	big := `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"` + strings.Repeat("x", 64<<10) + `"}}`
	direct, dbody := chunkedPOST(t, a.srv.URL, sid, strings.NewReader(big))
	viaB, bbody := chunkedPOST(t, b.srv.URL, sid, strings.NewReader(big))
	t.Logf("owner: %d %q", direct, dbody)
	t.Logf("via another replica: %d %q", viaB, bbody)
	if direct != http.StatusRequestEntityTooLarge || viaB != direct || bbody != dbody {
		t.Errorf("oversize chunked message through another replica: %d %q; on its owner: %d %q; want 413 both", viaB, bbody, direct, dbody)
	}
}

// TestClusterCloseClosesPeerConnections: Gateway.Close ends every
// goroutine of the gateway, the forwarding proxy's pooled keep-alive
// connections to the peers (and their read and write goroutines) included,
// rather than leaving them until IdleConnTimeout (90 s).
func TestClusterCloseClosesPeerConnections(t *testing.T) {
	http.DefaultClient.CloseIdleConnections()
	rs := newReplicas(t, 2, nil)
	a, b := rs[0], rs[1]
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	do := func(url, sid string, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id") + " " + string(got)
	}
	status, out := do(a.srv.URL, "", initBody)
	if status != http.StatusOK {
		t.Fatalf("initialize: %d %s", status, out)
	}
	sid := strings.Fields(out)[0]
	if n := peerConns(); n != 0 {
		t.Fatalf("%d client connections before the forward, want 0", n)
	}
	if status, out := do(b.srv.URL, sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); status != http.StatusOK {
		t.Fatalf("ping through the other replica: %d %s", status, out)
	}
	before := peerConns()
	stopReplica(b)
	deadline := time.Now().Add(3 * time.Second)
	for peerConns() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := peerConns(); n > 0 {
		t.Errorf("%d pooled client connections (%d before) still open 3s after the forwarding replica's Gateway.Close", n, before)
	}
}

// peerConns counts the client connections (net/http persistConn read
// loops) of this process.
func peerConns() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "net/http.(*persistConn).readLoop(")
}

// TestClusterCallRunsOnceWhenHomeDies: a 2026-07-28 call of a per-client
// server lands on a replica that is not its principal's home and is
// forwarded there; the home runs it (the upstream tool runs) and dies
// before answering. The call reached the home, so the entry replica does
// not serve it again (clusterStateless's serveHere): the tool runs once,
// and the client gets an error.
func TestClusterCallRunsOnceWhenHomeDies(t *testing.T) {
	var runs atomic.Int32
	release := make(chan struct{})
	defer close(release)
	up := mcp.NewServer(&mcp.Implementation{Name: "alpha"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		runs.Add(1) // the side effect
		select {
		case <-ctx.Done():
		case <-release:
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	rs := []*replica{{srv: httptest.NewUnstartedServer(nil)}, {srv: httptest.NewUnstartedServer(nil)}}
	peers := []string{rs[0].addr(), rs[1].addr()}
	for _, r := range rs {
		h := &principalsHarness{edit: func(c *config.Config) {
			c.Gateway.Cluster = config.Cluster{Secret: testClusterSecret, Advertise: r.addr(), Peers: peers}
			s := c.Servers["alpha"]
			s.Session = config.SessionPerClient
			c.Servers["alpha"] = s
		}}
		gw, err := New(h.config(), &Options{Transports: map[string]func() (mcp.Transport, error){"alpha": newFakeUpstream(up).transport}})
		if err != nil {
			t.Fatal(err)
		}
		gw.Start(context.Background())
		r.gw = gw
		r.srv.Config.Handler = gw.Handler()
		r.srv.Start()
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { stopReplica(r) }) })
	}
	home, entry := rs[0], rs[1]
	if rs[0].gw.cluster.Home("apikey:alice") != rs[0].addr() {
		home, entry = rs[1], rs[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	hc := &http.Client{Transport: bearer{aliceKey, http.DefaultTransport}}
	cs, err := testutil.ConnectStateless(ctx, entry.srv.URL+"/mcp", hc, &mcp.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	callDone := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{}})
		callDone <- err
	}()
	for runs.Load() == 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if runs.Load() != 1 {
		t.Fatalf("the tool ran %d times before the home died", runs.Load())
	}
	t0 := time.Now()
	// The home dies with the call in flight: as a killed process, its
	// listener and its connections close at once.
	home.srv.Listener.Close()
	home.srv.CloseClientConnections()
	t.Logf("home stopped in %v", time.Since(t0))
	select {
	case err := <-callDone:
		if err == nil {
			t.Error("the call succeeded, though its home died before answering")
		}
		t.Logf("call: %v", err)
	case <-time.After(3 * time.Second):
		t.Error("the call still runs 3s after its home died")
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("one call, forwarded to its home which ran it and died: the tool ran %d times", n)
	}
}
