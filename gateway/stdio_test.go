package gateway

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// newStdioGateway returns a started gateway with one in-memory upstream and
// the recorded logs.
func newStdioGateway(t testing.TB, maxBytes int64) (*Gateway, *observer.ObservedLogs) {
	core, logs := observer.New(zap.InfoLevel)
	gw := newAlphaGateway(t, func(c *config.Config) { c.Gateway.Limits.MaxMessageBytes = maxBytes }, &Options{Logger: zap.New(core)})
	return gw, logs
}

// serveLines runs one stdio session: it writes input, keeps stdin open
// until the output contains want (or 5s pass; want "" = do not wait), then
// closes stdin. It returns what the gateway wrote and ServeStdio's error.
func serveLines(t testing.TB, gw *Gateway, input, want string) (string, error) {
	inR, inW := io.Pipe()
	out := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- gw.ServeStdio(context.Background(), inR, out) }()
	go func() {
		inW.Write([]byte(input))
		deadline := time.Now().Add(5 * time.Second)
		for want != "" && !strings.Contains(out.String(), want) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		inW.Close()
	}()
	select {
	case err := <-done:
		inR.Close()
		return out.String(), err
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return after its input ended")
		return "", nil
	}
}

func TestStdio(t *testing.T) {
	gw, logs := newStdioGateway(t, 4096)
	init := initBody + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
	t.Run("call", func(t *testing.T) {
		out, err := serveLines(t, gw, init+`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"message":"via stdio"}}}`+"\n", "via stdio")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "via stdio") {
			t.Errorf("output = %s", out)
		}
	})
	t.Run("oversized message closes the session with a logged error", func(t *testing.T) {
		big := `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":"` + strings.Repeat("a", 8000) + `"}}` + "\n"
		_, err := serveLines(t, gw, init+big+`{"jsonrpc":"2.0","id":3,"method":"ping"}`+"\n", "")
		if err == nil {
			t.Error("no error for an oversized message")
		}
		if logs.FilterMessage("stdio session ended").Len() == 0 {
			t.Error("oversized message not logged")
		}
	})
	t.Run("malformed JSON gets an error, the session goes on", func(t *testing.T) {
		out, _ := serveLines(t, gw, init+"{not json\n"+`{"jsonrpc":"2.0","id":3,"method":"ping"}`+"\n", `"id":3`)
		if !strings.Contains(out, `"code":-32700`) || !strings.Contains(out, `"id":3`) {
			t.Errorf("ping after malformed input not answered; output: %s", out)
		}
	})
}

// FuzzStdio feeds arbitrary bytes to a stdio session: the gateway must not
// panic or hang, and must keep serving other sessions.
func FuzzStdio(f *testing.F) {
	gw, _ := newStdioGateway(f, 1<<16)
	f.Add([]byte(initBody + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha__echo"}}` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"resources/read","params":{"uri":"manifold://alpha/%zz"}}` + "\n"))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]` + "\n"))
	f.Add([]byte("\x00\xff\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		serveLines(t, gw, string(data), "")
		out, err := serveLines(t, gw, initBody+"\n", `"serverInfo"`)
		if err != nil || !strings.Contains(out, `"serverInfo"`) {
			t.Fatalf("gateway stopped serving after %q: %v %s", data, err, out)
		}
	})
}

// TestStdioLineBound: a client line of maxMessageBytes is read and one
// byte more is too large, with its newline or, the last line, without.
func TestStdioLineBound(t *testing.T) {
	g := &Gateway{log: zap.NewNop()}
	const max = 32
	line := func(n int) string { return `"` + strings.Repeat("a", n-2) + `"` } // a JSON string of n bytes
	for _, tc := range []struct {
		name     string
		in       string
		tooLarge bool
	}{
		{"max bytes and a newline", line(max) + "\n", false},
		{"max bytes at the end", line(max), false},
		{"max+1 bytes and a newline", line(max+1) + "\n", true},
		{"max+1 bytes at the end", line(max + 1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pass strings.Builder
			err := g.filterLines(strings.NewReader(tc.in), &pass, io.Discard, max, nil)
			if got := errors.Is(err, errTooLarge); got != tc.tooLarge || !tc.tooLarge && (err != nil || pass.Len() == 0) {
				t.Errorf("err %v, passed %q; want too large: %v", err, pass.String(), tc.tooLarge)
			}
		})
	}
}
