package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const edgeKey = "edge-e2e-key-0123456789ab"

// edgeConfig fronts one demo server, with an API key, extra gateway
// settings (YAML lines under gateway:) and extra top-level sections.
func edgeConfig(t *testing.T, gateway, extra string) string {
	t.Setenv("EDGE_KEY", edgeKey)
	return writeConfig(t, fmt.Sprintf(`
mcpServers:
  alpha: { command: %q, args: [demo-server, --name, alpha] }
auth:
  apiKeys:
    - { name: alice, key: "${EDGE_KEY}" }
gateway:
%s
%s
`, binary, gateway, extra))
}

// withFileLimit runs the gateway with RLIMIT_NOFILE at n (soft and hard, so
// the Go runtime cannot raise it), as a small server would be.
func withFileLimit(n int) func(*exec.Cmd) {
	return func(cmd *exec.Cmd) {
		cmd.Args = append([]string{"sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, n), cmd.Path}, cmd.Args[1:]...)
		cmd.Path = "/bin/sh"
	}
}

// openFiles counts the file descriptors of process pid.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// waitOpenFiles waits up to d for pid's open files to drop to at most
// max, and returns the last count.
func waitOpenFiles(t *testing.T, pid, max int, d time.Duration) int {
	t.Helper()
	n := openFiles(t, pid)
	for deadline := time.Now().Add(d); n > max && time.Now().Before(deadline); n = openFiles(t, pid) {
		time.Sleep(100 * time.Millisecond)
	}
	return n
}

// servedWithin connects a go-sdk client over a new connection (no
// keep-alive, no standalone SSE stream), lists the tools and returns the
// first error, all within d.
func servedWithin(g *gatewayProc, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	hc := &http.Client{Transport: bearerVia{token: edgeKey, rt: &http.Transport{DisableKeepAlives: true}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-edge"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: g.url("/mcp"), HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	if len(lt.Tools) == 0 {
		return errors.New("tools/list: no tools")
	}
	return nil
}

// bearerVia sets a bearer token on every request through rt.
type bearerVia struct {
	token string
	rt    http.RoundTripper
}

func (b bearerVia) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

// slowRequest opens a connection to addr and sends the headers of a POST
// to /mcp that announces a body of 1000 bytes, with the given token, and
// then only the first sent bytes of the body.
func slowRequest(addr, token string, sent int) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	req := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + token +
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n" +
		strings.Repeat(" ", sent)
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// TestSlowBodiesDoNotExhaustTheGateway is acceptance 3 of the security
// issue: 300 connections that send a POST's headers with a wrong key and
// never their announced body, against a gateway limited to 256 open files,
// each get their 401 and are closed by the gateway; a valid client is
// served within 1 s throughout, and the gateway's open files come back to
// their baseline while the attackers still hold their ends open.
func TestSlowBodiesDoNotExhaustTheGateway(t *testing.T) {
	const (
		attackers = 300
		fileLimit = 256
		serveIn   = time.Second
	)
	g := serving(t, launch(t, []string{"serve", "--listen", "127.0.0.1:0", "--config", edgeConfig(t, "  log: { level: info }", "")}, nil, withFileLimit(fileLimit)))
	if err := servedWithin(g, 30*time.Second); err != nil { // the upstream is up
		t.Fatal(err)
	}
	pid := g.cmd.Process.Pid
	baseline := openFiles(t, pid)
	if baseline+attackers <= fileLimit {
		t.Fatalf("baseline of %d open files: %d attackers would not reach the limit of %d", baseline, attackers, fileLimit)
	}

	// The valid client, sampled every 100 ms while the attack lasts.
	stop := make(chan struct{})
	var samples int
	var slowest time.Duration
	var failures []string
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		for i := 0; i < 200; i++ { // at most 200 samples
			start := time.Now()
			err := servedWithin(g, serveIn)
			samples++
			slowest = max(slowest, time.Since(start))
			if err != nil {
				failures = append(failures, fmt.Sprintf("sample %d at %s: %v", i, start.Format("15:04:05.000"), err))
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	// The attackers: 300 at once, each sending a slow request every second
	// for 5 s, reading its answer for up to 10 s, and holding its last
	// connection open until the end of the test.
	type outcome struct {
		requests, answered int
		last               net.Conn
		err                error
	}
	results := make([]outcome, attackers)
	end := time.Now().Add(5 * time.Second)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := &results[i]
			for round := 0; round < 6 && time.Now().Before(end); round++ {
				res.requests++
				c, err := slowRequest(g.addr, "wrong-key-0123456789abcdef", 0)
				if err != nil {
					res.err = err
					return
				}
				if res.last != nil {
					res.last.Close()
				}
				res.last = c
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					res.err = err
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
					res.err = fmt.Errorf("status %d, Connection %q; want 401 and close", resp.StatusCode, resp.Header.Get("Connection"))
					return
				}
				res.answered++
				time.Sleep(time.Second)
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, r := range results {
			if r.last != nil {
				r.last.Close()
			}
		}
	}()
	// The gateway closed its ends: its open files are back to about the
	// baseline although the attackers have not closed theirs.
	during := waitOpenFiles(t, pid, baseline+5, 10*time.Second)
	close(stop)
	sampled.Wait()

	requests, answered := 0, 0
	var errs []string
	for i, r := range results {
		requests += r.requests
		answered += r.answered
		if r.err != nil && len(errs) < 5 {
			errs = append(errs, fmt.Sprintf("attacker %d: %v", i, r.err))
		}
	}
	if answered != requests || len(errs) > 0 {
		t.Errorf("%d of %d slow requests got their 401 and a close; first errors: %s", answered, requests, strings.Join(errs, "; "))
	}
	if samples < 5 || len(failures) > 0 {
		t.Errorf("valid client: %d of %d samples not served within %s: %s", len(failures), samples, serveIn, strings.Join(failures, "; "))
	}
	if during > baseline+5 {
		t.Errorf("gateway holds %d open files with the attackers' connections open, baseline %d", during, baseline)
	}
	t.Logf("%d slow requests from %d connections at a time answered 401; valid client: %d samples, slowest %s; open files %d before, %d after", answered, attackers, samples, slowest, baseline, during)
}

// TestSlowAuthenticatedBodyIsCut: a valid client that announces a body and
// never completes it has its connection closed after
// gateway.timeouts.requestBody, and an idle keep-alive connection after
// gateway.timeouts.idleConnection; meanwhile a streamable call and a
// legacy SSE stream that outlast both timeouts are not cut.
func TestSlowAuthenticatedBodyIsCut(t *testing.T) {
	g := startGateway(t, "--config", edgeConfig(t, "  timeouts: { requestBody: 1s, idleConnection: 1s }", ""))
	if err := servedWithin(g, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	pid := g.cmd.Process.Pid
	baseline := openFiles(t, pid)
	hc := &http.Client{Transport: bearerVia{token: edgeKey, rt: http.DefaultTransport}}
	ctx := ctxT(t, 60*time.Second)

	// A legacy SSE session, opened before and used after the timeouts.
	sse, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-edge-sse"}, nil).Connect(ctx,
		&mcp.SSEClientTransport{Endpoint: g.url("/sse"), HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sse.Close()
	// A streamable call whose response streams for 3 s.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-edge"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: g.url("/mcp"), HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	slow := make(chan error, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{"ms": 3000}})
		if err == nil && res.IsError {
			err = fmt.Errorf("tool error: %v", res.Content)
		}
		slow <- err
	}()

	c, err := slowRequest(g.addr, edgeKey, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The gateway answers (or not) and closes the connection: the read
	// ends, well before this 15 s bound.
	c.SetReadDeadline(time.Now().Add(15 * time.Second))
	got, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection with an unfinished body still open after 15 s (read %q)", got)
	}
	t.Logf("slow body: read %q, %v", firstLine(got), err)

	// A keep-alive connection without a next request is closed after
	// idleConnection.
	idle, err := net.DialTimeout("tcp", g.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	fmt.Fprintf(idle, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", g.addr)
	idle.SetReadDeadline(time.Now().Add(15 * time.Second))
	br := bufio.NewReader(idle)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /healthz: %v %v", resp, err)
	}
	if _, err := io.Copy(io.Discard, br); errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("idle keep-alive connection still open after 15 s")
	}

	if err := <-slow; err != nil {
		t.Errorf("a 3 s streamable call with requestBody and idleConnection of 1 s: %v", err)
	}
	res, err := sse.CallTool(ctx, &mcp.CallToolParams{Name: "alpha__echo", Arguments: map[string]any{"message": "still here"}})
	if err != nil {
		t.Fatalf("SSE session after the timeouts: %v", err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != "still here" {
		t.Errorf("SSE echo = %q", text)
	}
	cs.Close()
	sse.Close()
	if n := waitOpenFiles(t, pid, baseline, 10*time.Second); n > baseline {
		t.Errorf("gateway holds %d open files, baseline %d", n, baseline)
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\r\n")
	return s
}

// TestMetricsHostOrigin is finding 9 of the security issue: the metrics
// listener refuses a foreign Host (DNS rebinding) or Origin with 403, like
// the main listener, and serves loopback names.
func TestMetricsHostOrigin(t *testing.T) {
	g := startGateway(t, "--config", edgeConfig(t, "  allowedHosts: [metrics.internal]", `telemetry: { metrics: { listen: "127.0.0.1:0" } }`))
	addr := metricsAddr(t, g)
	_, port, _ := net.SplitHostPort(addr)
	tests := []struct {
		name   string
		host   string // empty: the listener's address
		origin string
		want   int
	}{
		{name: "loopback address", want: http.StatusOK},
		{name: "localhost", host: "localhost:" + port, want: http.StatusOK},
		{name: "allowed host", host: "metrics.internal:" + port, want: http.StatusOK},
		{name: "same origin", origin: "http://" + addr, want: http.StatusOK},
		{name: "rebinding host", host: "evil.example:" + port, want: http.StatusForbidden},
		{name: "foreign origin", origin: "https://evil.example", want: http.StatusForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("GET /metrics: %d %.200s; want %d", resp.StatusCode, body, tc.want)
			}
			if tc.want != http.StatusOK && strings.Contains(string(body), "manifold_") {
				t.Errorf("refused request still shows metrics: %.200s", body)
			}
		})
	}
}

// metricsAddr returns the metrics listener's address from the log.
func metricsAddr(t *testing.T, g *gatewayProc) string {
	t.Helper()
	line := g.logs.waitFor(t, `"msg":"serving metrics"`, 10*time.Second)
	var rec struct{ Listen string }
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Listen == "" {
		t.Fatalf("no metrics address in %q: %v", line, err)
	}
	return rec.Listen
}
