package e2e

//lint:file-ignore SA1019 this test drives sampling, which the gateway bridges for 2026-07-28 clients

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// clusterWatched is the fixture's watched resource, as clients know it.
const clusterWatched = "manifold://fx/test://watched-resource"

// clusterSecret is the e2e cluster's secret (≥ 32 bytes).
const clusterSecret = "e2e-cluster-secret-0123456789abcdef"

// The e2e cluster's principals and their API keys: each client is its own
// principal, as in a team (a principal's sessionless calls share its
// per-client upstream session).
const (
	clusterKeyTS = "e2e-key-ts-client-0123456789"
	clusterKeyGo = "e2e-key-go-client-0123456789"
	clusterAuth  = `auth:
  apiKeys:
    - { name: ts, key: ` + clusterKeyTS + ` }
    - { name: gopher, key: ` + clusterKeyGo + ` }`
)

// testCluster is n replicas of the binary sharing one cluster secret, each
// on a port chosen first so that it can be advertised and listed as every
// replica's peer.
type testCluster struct {
	addrs    []string
	replicas []*gatewayProc
	cfgs     []string
}

// freePorts returns n loopback addresses nothing listens on now.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var lns []net.Listener
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return addrs
}

// clusterConfig is the config of replica self of addrs: servers, then
// gateway settings (gatewayExtra indented under gateway:) and the cluster.
func clusterConfig(servers, gatewayExtra, self string, addrs []string, clusterExtra string) string {
	return fmt.Sprintf(`%s
gateway:
%s
  cluster:
    secret: %q
    advertise: %q
    peers: [%s]
%s
`, servers, gatewayExtra, clusterSecret, self, strings.Join(addrs, ", "), clusterExtra)
}

// startCluster starts n replicas with servers (an mcpServers section).
func startCluster(t *testing.T, n int, servers string) *testCluster {
	t.Helper()
	c := &testCluster{addrs: freePorts(t, n)}
	for _, a := range c.addrs {
		cfg := writeConfig(t, clusterConfig(servers, "  timeouts: { call: 30s }", a, c.addrs, ""))
		c.cfgs = append(c.cfgs, cfg)
		c.replicas = append(c.replicas, launch(t, []string{"serve", "--listen", a, "--config", cfg}, nil))
	}
	for _, g := range c.replicas {
		serving(t, g)
	}
	return c
}

// roundRobin is a load balancer without affinity: every request goes to
// the next replica in rotation, on a new connection. A replica it cannot
// connect to is skipped (nothing was sent); remove takes one out of the
// rotation, as a Service does with a pod that is not ready.
type roundRobin struct {
	*httptest.Server
	mu       sync.Mutex
	next     int
	backends []string
	served   map[string]int
	inflight map[string]int
	idleCh   chan struct{}
}

func newRoundRobin(t *testing.T, backends []string) *roundRobin {
	rr := &roundRobin{backends: slices.Clone(backends), served: map[string]int{}, inflight: map[string]int{}, idleCh: make(chan struct{}, 1)}
	tr := &http.Transport{DisableKeepAlives: true, Proxy: nil}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: "backend"})
		},
		Transport:     rr.transport(tr),
		FlushInterval: -1,
	}
	rr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Full duplex: the response of a POST (an SSE stream) starts while
		// the proxy's transport may still be reading the request body to
		// its end; net/http would otherwise consume that body itself, and
		// the transport's failed read cuts the stream (and the result in
		// it) with "use of closed network connection".
		_ = http.NewResponseController(w).EnableFullDuplex()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(rr.Close)
	return rr
}

// transport sends each request to the next backend, trying the others when
// one refuses the connection.
func (rr *roundRobin) transport(tr *http.Transport) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		var err error
		stream := r.Method == http.MethodGet // a stream outlives any drain
		for range 3 {
			b := rr.pick(stream)
			r.URL.Host = b
			var resp *http.Response
			resp, err = tr.RoundTrip(r)
			var op *net.OpError
			if err == nil {
				resp.Body = &doneBody{ReadCloser: resp.Body, done: func() { rr.release(b, stream) }}
				return resp, nil
			}
			rr.release(b, stream)
			if !errors.As(err, &op) || op.Op != "dial" {
				return nil, err
			}
		}
		return nil, err
	})
}

// pick returns the next backend; requests but streams count in flight.
func (rr *roundRobin) pick(stream bool) string {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	b := rr.backends[rr.next%len(rr.backends)]
	rr.next++
	rr.served[b]++
	if !stream {
		rr.inflight[b]++
	}
	return b
}

func (rr *roundRobin) release(b string, stream bool) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if !stream {
		rr.inflight[b]--
	}
	select {
	case rr.idleCh <- struct{}{}:
	default:
	}
}

// remove takes backend b out of the rotation.
func (rr *roundRobin) remove(b string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.backends = slices.DeleteFunc(rr.backends, func(x string) bool { return x == b })
}

// idle waits until no request but GET streams is in flight to backend
// b, as a load balancer drains a backend it removed.
func (rr *roundRobin) idle(ctx context.Context, b string) {
	for ctx.Err() == nil {
		rr.mu.Lock()
		n := rr.inflight[b]
		rr.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-rr.idleCh:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// doneBody calls done once, when the body is closed.
type doneBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (d *doneBody) Close() error {
	err := d.ReadCloser.Close()
	d.once.Do(d.done)
	return err
}

// TestClusterRoundRobin is acceptance 1 of cluster mode: three replicas with
// one secret behind a round-robin proxy that sends every request to the
// next replica on a new connection (in Go, and HAProxy's balance
// roundrobin when installed). Through it, a 2025-11-25 TypeScript SDK
// client runs every relay scenario (sampling, elicitation, roots, progress,
// logging, subscriptions: its session lives on one replica, every other
// request of it is forwarded there), and a 2026-07-28 go-sdk client lists,
// calls, gets progress, answers sampling and elicitation (MRTR rounds whose
// retries land on other replicas) and receives resources/updated; with no
// error. server-everything runs per replica, per-client (a 2026-07-28
// client's calls go to its home replica); the fixture is one HTTP server
// behind all replicas, as a remote upstream is (its resources/updated
// reach a subscription whichever replica holds it).
func TestClusterRoundRobin(t *testing.T) {
	requireNode(t)
	nm := filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol")
	servers := fmt.Sprintf(`mcpServers:
  everything:
    command: node
    args: [%q, stdio]
    session: per-client
  fx:
    type: http
    url: %q
    session: shared
%s`, filepath.Join(nm, "server-everything", "dist", "index.js"), startFixture(t), clusterAuth)
	c := startCluster(t, 3, servers)
	lbs := map[string]string{}
	rr := newRoundRobin(t, c.addrs)
	lbs["go"] = rr.URL
	if addr := startHAProxy(t, c.addrs); addr != "" {
		lbs["haproxy"] = "http://" + addr
	}
	for name, lb := range lbs {
		t.Run(name, func(t *testing.T) {
			var wg sync.WaitGroup
			wg.Go(func() { clusterNodeClient(t, lb) })
			wg.Go(func() { clusterGoClient(t, lb) })
			wg.Wait()
		})
	}
	for i, a := range c.addrs {
		rr.mu.Lock()
		n := rr.served[a]
		rr.mu.Unlock()
		if n == 0 {
			t.Errorf("replica %d got no request from the round-robin proxy", i)
		}
	}
	for i, g := range c.replicas {
		if strings.Contains(g.logs.String(), `"level":"error"`) {
			t.Errorf("replica %d logged an error:\n%s", i, g.logs.String())
		}
	}
}

// clusterNodeClient runs the relay issue's main client.mjs script (every
// scenario, per-client mode) through lb, and its checks.
func clusterNodeClient(t *testing.T, lb string) {
	s := relayMainScript("per-client", "http")
	args := []string{"--timeout-ms", "10000", "--capabilities", relayMainCaps,
		"--roots", fmt.Sprintf(`[{"uri":%q,"name":"one"}]`, s.root("one")), "--client-name", "relay-main",
		"--transport", "http", "--url", lb + "/mcp", "--header", "Authorization: Bearer " + clusterKeyTS}
	out, err := execNodeClient(args, s.steps, 120*time.Second)
	if err != nil {
		t.Errorf("client.mjs through the cluster: %v", err)
		return
	}
	if v := out.ProtocolVersion; v != "2025-11-25" {
		t.Errorf("TS client negotiated %q, want 2025-11-25", v)
	}
	for _, sc := range relayMainChecks {
		t.Run("ts/"+sc.name, func(t *testing.T) { sc.check(t, s, out) })
	}
}

// clusterGoClient is the 2026-07-28 go-sdk client's part.
func clusterGoClient(t *testing.T, lb string) {
	t.Run("go-2026-07-28", func(t *testing.T) {
		ctx := ctxT(t, 90*time.Second)
		var updates atomic.Int32
		var progress atomic.Int32
		bc := &bridgeClient{nonce: "cluster"}
		c := mcp.NewClient(&mcp.Implementation{Name: "e2e-cluster", Version: "1"}, &mcp.ClientOptions{
			// No roots: server-everything would ask for them when the
			// client's upstream session opens, and a request the bridge
			// parks in the middle of the progress call takes that call's
			// later progress with it (a bridge limit, not the cluster's).
			Capabilities: &mcp.ClientCapabilities{},
			CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				bc.sampled.Add(1)
				return &mcp.CreateMessageResult{Role: "assistant", Model: "e2e-model", Content: &mcp.TextContent{Text: bc.nonce + "-sampled"}}, nil
			},
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				bc.elicited.Add(1)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": bc.nonce + "-name"}}, nil
			},
			ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				if req.Params.URI == clusterWatched {
					updates.Add(1)
				}
			},
			ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
		})
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: lb + "/mcp",
			HTTPClient: &http.Client{Transport: bearerVia{clusterKeyGo, http.DefaultTransport}}},
			&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if got := cs.InitializeResult().ProtocolVersion; got != "2026-07-28" {
			t.Fatalf("negotiated %q, want 2026-07-28", got)
		}
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		if len(tools.Tools) == 0 {
			t.Fatal("tools/list: no tools")
		}
		for range 2 { // each call's rounds land on other replicas than the last
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__trigger-sampling-request",
				Arguments: map[string]any{"prompt": "say hi", "maxTokens": 20}})
			if text := bridgeText(res); err != nil || res.IsError || !strings.Contains(text, "cluster-sampled") {
				t.Errorf("trigger-sampling-request: %q, %v", text, err)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__trigger-elicitation-request", Arguments: map[string]any{}})
			if text := bridgeText(res); err != nil || res.IsError || !strings.Contains(text, "- Name: cluster-name") {
				t.Errorf("trigger-elicitation-request: %q, %v", text, err)
			}
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "everything__trigger-long-running-operation",
			Arguments: map[string]any{"duration": 0.6, "steps": 3}, Meta: mcp.Meta{"progressToken": "cluster-progress"}})
		if err != nil || res.IsError {
			t.Errorf("trigger-long-running-operation: %v %v", bridgeText(res), err)
		}
		// The SDK may hand a notification to its handler after the call
		// returns: wait for it.
		for progress.Load() == 0 && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		if n := progress.Load(); n < 1 {
			t.Errorf("%d progress notifications, want some", n)
		}
		// The subscription is a subscriptions/listen stream the SDK opens in
		// the background, on whichever replica: trigger updates (on
		// whichever replica) until one arrives.
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: clusterWatched}); err != nil {
			t.Fatalf("subscribe: %v", err)
		}
		for updates.Load() == 0 && ctx.Err() == nil {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fx__test_trigger_resource_update", Arguments: map[string]any{}}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if updates.Load() == 0 {
			t.Errorf("no resources/updated for %s", clusterWatched)
		}
		if s, e := bc.sampled.Load(), bc.elicited.Load(); s != 2 || e != 2 {
			t.Errorf("sampling handler ran %d times, elicitation %d (want 2 each)", s, e)
		}
	})
}

// startHAProxy runs HAProxy in front of backends with balance roundrobin
// and no keep-alive to the servers, when it is installed; it returns its
// address, or "" (and logs why) when it is not.
func startHAProxy(t *testing.T, backends []string) string {
	path, err := exec.LookPath("haproxy")
	if err != nil {
		t.Log("haproxy not installed: only the Go round-robin proxy runs (apt-get install haproxy)")
		return ""
	}
	addr := freePorts(t, 1)[0]
	var servers strings.Builder
	for i, b := range backends {
		fmt.Fprintf(&servers, "    server r%d %s\n", i, b)
	}
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`global
    maxconn 256
defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s
    option http-server-close
frontend fe
    bind %s
    default_backend be
backend be
    balance roundrobin
%s`, addr, servers.String())), 0o600)
	cmd := exec.Command(path, "-db", "-f", cfg)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("haproxy: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for range 100 {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			return addr
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("haproxy does not listen on %s", addr)
	return ""
}
