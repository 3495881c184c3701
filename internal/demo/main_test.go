package demo

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runMainHTTP runs Main in HTTP mode on 127.0.0.1:0 and returns the address
// it reported on stderr, and a stop function that cancels Main's context and
// checks that Main returns nil promptly.
func runMainHTTP(t *testing.T, args ...string) (addr string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderrR, stderrW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Main(ctx, append([]string{"--http", "127.0.0.1:0"}, args...), strings.NewReader(""), io.Discard, stderrW)
		stderrW.Close()
		done <- err
	}()

	br := bufio.NewReader(stderrR)
	line, err := br.ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("reading stderr: %v (Main: %v)", err, <-done)
	}
	go io.Copy(io.Discard, br) // ends when Main returns and closes stderrW
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on http://")
	if !ok || strings.HasSuffix(addr, ":0") {
		cancel()
		t.Fatalf("first stderr line = %q, want listening on http://127.0.0.1:PORT", line)
	}

	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Main returned %v, want nil", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("Main did not return after its context was cancelled")
		}
	}
	t.Cleanup(stop)
	return addr, stop
}

// httpTransports builds client transports for both HTTP endpoints.
var httpTransports = []struct {
	name string
	make func(base string, hc *http.Client) mcp.Transport
}{
	{
		name: "streamable",
		make: func(base string, hc *http.Client) mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc}
		},
	},
	{
		name: "sse",
		make: func(base string, hc *http.Client) mcp.Transport {
			return &mcp.SSEClientTransport{Endpoint: base + "/sse", HTTPClient: hc}
		},
	},
}

// newHTTPClient returns a client with its own transport, whose idle
// connections are closed when the test ends (for goleak).
func newHTTPClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func echo(ctx context.Context, cs *mcp.ClientSession, msg string) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
	if err != nil {
		return "", err
	}
	if len(res.Content) != 1 {
		return "", errors.New("want one content block")
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return "", errors.New("want text content")
	}
	return tc.Text, nil
}

func TestMainHTTP(t *testing.T) {
	addr, stop := runMainHTTP(t, "--name", "beta", "--extra-tools", "zeta")
	base := "http://" + addr
	hc := newHTTPClient(t)
	ctx := context.Background()

	for _, tr := range httpTransports {
		t.Run(tr.name, func(t *testing.T) {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, tr.make(base, hc), nil)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ServerInfo.Name; got != "beta" {
				t.Errorf("server name = %q, want beta", got)
			}
			got, err := echo(ctx, cs, "over "+tr.name)
			if err != nil {
				t.Fatalf("echo: %v", err)
			}
			if want := "over " + tr.name; got != want {
				t.Errorf("echo = %q, want %q", got, want)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "zeta"})
			if err != nil {
				t.Fatalf("zeta: %v", err)
			}
			if diff := cmp.Diff([]mcp.Content{&mcp.TextContent{Text: "zeta"}}, res.Content); diff != "" {
				t.Errorf("zeta content (-want +got):\n%s", diff)
			}
		})
	}

	stop()
	if conn, err := net.Dial("tcp", addr); err == nil {
		conn.Close()
		t.Error("listener still accepts connections after Main returned")
	}
}

// TestMainHTTPShutdownWithOpenSessions checks that cancelling Main's context
// ends open sessions on both endpoints and in-flight calls, instead of
// waiting for clients to go away.
func TestMainHTTPShutdownWithOpenSessions(t *testing.T) {
	addr, stop := runMainHTTP(t)
	hc := newHTTPClient(t)
	ctx := context.Background()

	var sessions []*mcp.ClientSession
	for _, tr := range httpTransports {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, tr.make("http://"+addr, hc), nil)
		if err != nil {
			t.Fatalf("%s: connect: %v", tr.name, err)
		}
		defer cs.Close()
		sessions = append(sessions, cs)
	}
	slowDone := make(chan error, len(sessions))
	for _, cs := range sessions {
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": MaxSlowMillis}})
			slowDone <- err
		}()
	}
	time.Sleep(100 * time.Millisecond) // let the slow calls start

	start := time.Now()
	stop()
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("shutdown took %v with open sessions", d)
	}
	for range sessions {
		select {
		case <-slowDone: // a tool error or a transport error: either way it ended
		case <-time.After(15 * time.Second):
			t.Fatal("slow call still running after shutdown")
		}
	}
}

func TestMainStdio(t *testing.T) {
	tests := []struct {
		name string
		// end ends the session: by closing the client (stdin EOF) or by
		// cancelling Main's context.
		end func(cs *mcp.ClientSession, cancel context.CancelFunc)
	}{
		{name: "stdin closed", end: func(cs *mcp.ClientSession, _ context.CancelFunc) { cs.Close() }},
		{name: "context cancelled", end: func(cs *mcp.ClientSession, cancel context.CancelFunc) {
			cancel()
			cs.Wait()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stdinR, stdinW := io.Pipe()
			stdoutR, stdoutW := io.Pipe()
			done := make(chan error, 1)
			go func() {
				done <- Main(ctx, []string{"--name", "alpha", "--long-names"}, stdinR, stdoutW, io.Discard)
				stdoutW.Close()
			}()

			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
				Connect(ctx, &mcp.IOTransport{Reader: stdoutR, Writer: stdinW}, nil)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			got, err := echo(ctx, cs, "over stdio")
			if err != nil || got != "over stdio" {
				t.Errorf("echo = %q, %v; want %q", got, err, "over stdio")
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: LongToolName}); err != nil {
				t.Errorf("calling the long-named tool: %v", err)
			}

			tt.end(cs, cancel)
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Main returned %v, want nil", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("Main did not return")
			}
		})
	}
}

// subprocessEnv makes the test binary run Main on its real stdio (see TestMain).
const subprocessEnv = "DEMO_SERVER_SUBPROCESS"

// TestMainSubprocess runs Main as a child process over real stdin/stdout, the
// way the gateway runs `manifold demo-server`.
func TestMainSubprocess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "--name", "alpha")
	// GORACE: a -race child otherwise sleeps 1s at exit.
	cmd.Env = append(os.Environ(), subprocessEnv+"=1", "DEMO_VALUE=sub", "GORACE=atexit_sleep_ms=0")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "info"})
	if err != nil {
		t.Fatalf("info: %v", err)
	}
	got, _ := res.StructuredContent.(map[string]any)
	if got["server"] != "alpha" || got["env"] != "sub" || got["pid"] == float64(os.Getpid()) {
		t.Errorf("info = %v, want server alpha, env sub and the child's pid", got)
	}
	// Closing the session closes the child's stdin; it must exit cleanly.
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v (stderr: %s)", err, stderr.String())
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("child exited with %v (stderr: %s)", cmd.ProcessState, stderr.String())
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    config
		wantErr error // checked with errors.Is when non-nil
		anyErr  bool
	}{
		{name: "defaults", want: config{name: "demo"}},
		{
			name: "all flags",
			args: []string{"--name", "alpha", "--http", "127.0.0.1:0", "--long-names", "--extra-tools", " a, b,,c "},
			want: config{name: "alpha", httpAddr: "127.0.0.1:0", opts: Options{LongNames: true, ExtraTools: []string{"a", "b", "c"}}},
		},
		{name: "help", args: []string{"-h"}, wantErr: flag.ErrHelp},
		{name: "unknown flag", args: []string{"--bogus"}, anyErr: true},
		{name: "bad name", args: []string{"--name", "a b"}, anyErr: true},
		{name: "empty name", args: []string{"--name", ""}, anyErr: true},
		{name: "positional argument", args: []string{"extra"}, anyErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseFlags(tt.args, io.Discard)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("err = %v, want %v", err, tt.wantErr)
				}
			case tt.anyErr:
				if err == nil {
					t.Errorf("parseFlags(%q) succeeded, want error", tt.args)
				}
			case err != nil:
				t.Errorf("parseFlags(%q): %v", tt.args, err)
			default:
				if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(config{})); diff != "" {
					t.Errorf("config (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestMainBadListenAddress(t *testing.T) {
	err := Main(context.Background(), []string{"--http", "256.0.0.1:bad"}, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil {
		t.Fatal("Main with a bad --http address succeeded")
	}
}
