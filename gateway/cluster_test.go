package gateway

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/cluster"
	"github.com/manifold-mcp/manifold/internal/demo"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const testClusterSecret = "gateway-cluster-test-secret-0123456789"

// replica is one gateway of an in-process cluster, served on 127.0.0.1.
type replica struct {
	gw  *Gateway
	srv *httptest.Server
}

func (r *replica) addr() string { return r.srv.Listener.Addr().String() }

// newReplicas starts n gateways in front of their own alpha demo
// upstream, with teamPolicy's keys, one cluster secret, and every replica
// as a peer; edit adjusts each config.
func newReplicas(t testing.TB, n int, edit func(*config.Config)) []*replica {
	t.Helper()
	rs := make([]*replica, n)
	var addrs []string
	for i := range rs {
		rs[i] = &replica{srv: httptest.NewUnstartedServer(nil)}
		addrs = append(addrs, rs[i].addr())
	}
	for _, r := range rs {
		startReplica(t, r, addrs, edit)
	}
	return rs
}

// startReplica builds r's gateway (again, for a restart) and serves it on
// r's listener address.
func startReplica(t testing.TB, r *replica, peers []string, edit func(*config.Config)) {
	t.Helper()
	h := &principalsHarness{edit: func(c *config.Config) {
		c.Gateway.Cluster = config.Cluster{Secret: testClusterSecret, Advertise: r.addr(), Peers: peers}
		if edit != nil {
			edit(c)
		}
	}}
	gw, err := New(h.config(), &Options{Transports: map[string]func() (mcp.Transport, error){
		"alpha": newFakeUpstream(demo.NewServer("alpha", nil)).transport,
	}})
	if err != nil {
		t.Fatal(err)
	}
	gw.Start(context.Background())
	r.gw = gw
	r.srv.Config.Handler = gw.Handler()
	r.srv.Config.ErrorLog = log.New(serverPanics{t}, "", 0)
	r.srv.Start()
	t.Cleanup(func() { stopReplica(r) })
}

// serverPanics fails t when a replica's HTTP server logs a panic it
// recovered from (net/http logs them and drops the connection).
type serverPanics struct{ t testing.TB }

func (w serverPanics) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("panic")) {
		w.t.Errorf("a replica's HTTP server: %s", p)
	}
	return len(p), nil
}

// restartReplica stops r and starts it again at the same address: a new
// process (another boot id), whose cleanup is outer's.
func restartReplica(t, outer testing.TB, r *replica, peers []string, edit func(*config.Config)) {
	t.Helper()
	addr := r.addr()
	stopReplica(r)
	r.srv = httptest.NewUnstartedServer(nil)
	r.srv.Listener.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s again: %v", addr, err)
	}
	r.srv.Listener = ln
	startReplica(outer, r, peers, edit)
}

// stopReplica stops r as a killed process would: its listener closes and
// its sessions are gone.
func stopReplica(r *replica) {
	for ss := range r.gw.Server().Sessions() {
		ss.Close()
	}
	r.srv.CloseClientConnections()
	r.srv.Close()
	r.gw.Close(context.Background())
}

// TestClusterSessionIDs: a session opened on one replica is served
// through any other (forwarded to its owner, which alone holds it); ids
// that are forged, truncated, altered, expired, of another cluster or
// another principal get 404 on every replica, as does a session whose
// owner restarted or is gone.
func TestClusterSessionIDs(t *testing.T) {
	outer := t
	rs := newReplicas(t, 2, nil)
	a, b := rs[0], rs[1]
	sid, status, body := openRaw(t, a.srv.URL, aliceKey)
	if status != http.StatusOK {
		t.Fatalf("initialize: %d %s", status, body)
	}
	if _, err := a.gw.cluster.Open(sid); err != nil {
		t.Fatalf("the session id is not a cluster token: %v", err)
	}
	for _, r := range rs {
		if got := pingRaw(t, r.srv.URL, aliceKey, sid); got != http.StatusOK {
			t.Errorf("ping through %s: %d, want 200", r.addr(), got)
		}
	}
	if n, _ := b.gw.clients.count(""); n != 0 {
		t.Errorf("the replica that forwarded holds %d sessions, want 0", n)
	}

	keysB, _ := cluster.NewKeys([]byte("another-cluster-secret-0123456789abcdef"), nil)
	otherCluster, _ := keysB.Seal(&cluster.Token{Kind: cluster.KindSession, Owner: a.addr(), Boot: a.gw.cluster.Boot(),
		Expires: time.Now().Add(time.Hour), Principal: cluster.PrincipalOf("apikey:alice")})
	expired, _ := a.gw.cluster.Keys().Seal(&cluster.Token{Kind: cluster.KindSession, Owner: a.addr(), Boot: a.gw.cluster.Boot(),
		Expires: time.Now().Add(-time.Second), Principal: cluster.PrincipalOf("apikey:alice")})
	sse, _ := a.gw.cluster.Issue(cluster.KindSSE, cluster.PrincipalOf("apikey:alice"), "x")
	altered := []byte(sid)
	altered[len(altered)/2] ^= 1
	for _, c := range []struct {
		name, token, sid string
	}{
		{name: "forged", token: aliceKey, sid: "forged-" + strings.Repeat("A", 100)},
		{name: "truncated", token: aliceKey, sid: sid[:len(sid)-8]},
		{name: "altered", token: aliceKey, sid: string(altered)},
		{name: "expired", token: aliceKey, sid: expired},
		{name: "another cluster's", token: aliceKey, sid: otherCluster},
		{name: "another kind", token: aliceKey, sid: sse},
		{name: "another principal's", token: bobKey, sid: sid},
	} {
		for _, r := range rs {
			t.Run(c.name+" via "+r.addr(), func(t *testing.T) {
				if got := pingRaw(t, r.srv.URL, c.token, c.sid); got != http.StatusNotFound {
					t.Errorf("ping: %d, want 404", got)
				}
			})
		}
	}

	t.Run("a forged hop header", func(t *testing.T) {
		resp, _ := post(t, b.srv.URL+"/mcp", `{"jsonrpc":"2.0","id":2,"method":"ping"}`, map[string]string{
			"Authorization": "Bearer " + aliceKey, "Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25",
			cluster.HopHeader: "9999999999999.AAAA"})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("status %d, want 403", resp.StatusCode)
		}
	})

	t.Run("owner restarted", func(t *testing.T) {
		restartReplica(t, outer, a, []string{a.addr(), b.addr()}, nil)
		for _, r := range rs {
			if got := pingRaw(t, r.srv.URL, aliceKey, sid); got != http.StatusNotFound {
				t.Errorf("ping via %s of a session of the previous process: %d, want 404", r.addr(), got)
			}
		}
		sid2, status, _ := openRaw(t, b.srv.URL, aliceKey)
		if status != http.StatusOK || pingRaw(t, a.srv.URL, aliceKey, sid2) != http.StatusOK {
			t.Errorf("a new session after the restart does not serve")
		}
	})

	t.Run("owner gone", func(t *testing.T) {
		sid3, _, _ := openRaw(t, a.srv.URL, aliceKey)
		stopReplica(a)
		if got := pingRaw(t, b.srv.URL, aliceKey, sid3); got != http.StatusNotFound {
			t.Errorf("ping of a session whose owner is gone: %d, want 404", got)
		}
	})
}

// TestClusterSSE: a legacy SSE session's endpoint names a token, and its
// messages POSTed to another replica reach it.
func TestClusterSSE(t *testing.T) {
	rs := newReplicas(t, 2, nil)
	a, b := rs[0], rs[1]
	req, _ := http.NewRequest(http.MethodGet, a.srv.URL+"/sse", nil)
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	var endpoint string
	for lines.Scan() {
		if e, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
			endpoint = e
			break
		}
	}
	_, tok, _ := strings.Cut(endpoint, "sessionid=")
	if _, err := a.gw.cluster.Open(tok); err != nil {
		t.Fatalf("endpoint %q does not name a cluster token: %v", endpoint, err)
	}
	hdr := map[string]string{"Authorization": "Bearer " + aliceKey}
	r, body := post(t, b.srv.URL+endpoint, initBody, hdr)
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("initialize POSTed to the other replica: %d %s", r.StatusCode, body)
	}
	for lines.Scan() {
		if strings.Contains(lines.Text(), `"protocolVersion"`) {
			break // the answer came on the owner's stream
		}
	}
	if r, _ := post(t, b.srv.URL+endpoint, initBody, map[string]string{"Authorization": "Bearer " + bobKey}); r.StatusCode != http.StatusNotFound {
		t.Errorf("POST of another principal: %d, want 404", r.StatusCode)
	}
	if r, _ := post(t, b.srv.URL+"/sse?sessionid="+tok[:len(tok)-6], initBody, hdr); r.StatusCode != http.StatusNotFound {
		t.Errorf("POST to a truncated session: %d, want 404", r.StatusCode)
	}
}

// BenchmarkClusterForward measures what forwarding adds to a request of a
// streamable session: a ping sent to the replica that owns the session,
// and the same ping sent to another replica, which forwards it (a pooled
// connection between the replicas, as in a cluster at work).
func BenchmarkClusterForward(b *testing.B) {
	rs := newReplicas(b, 2, nil)
	owner, other := rs[0], rs[1]
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	req, _ := http.NewRequest(http.MethodPost, owner.srv.URL+"/mcp", strings.NewReader(initBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	resp, err := hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("initialize: %v %v", resp, err)
	}
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	for _, c := range []struct {
		name string
		url  string
	}{
		{name: "owner", url: owner.srv.URL},
		{name: "forwarded", url: other.srv.URL},
	} {
		b.Run(c.name, func(b *testing.B) {
			// Each request's time, for the p50 (the ns/op is a mean).
			took := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				req, _ := http.NewRequest(http.MethodPost, c.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"ping"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Authorization", "Bearer "+aliceKey)
				req.Header.Set("Mcp-Session-Id", sid)
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				resp, err := hc.Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("ping: %v %v", resp, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
		})
	}
}
