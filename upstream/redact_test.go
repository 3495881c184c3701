package upstream

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// closedPort returns a 127.0.0.1 address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestURLSecretsRedacted: the query, userinfo and fragment of an upstream's
// URL (where ${VAR} secrets go) appear in none of what the upstream prints:
// its status, its log, the errors of calls. net/http's errors embed the URL
// (an unreachable server; a redirect loop, with the URL the server sent).
func TestURLSecretsRedacted(t *testing.T) {
	const secret = "Qs3cret-4f1d"
	loop := startHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mcp?session="+secret+"&token="+r.URL.Query().Get("token"), http.StatusTemporaryRedirect)
	}), false)
	// cut serves MCP but drops the connection of every tools/call.
	mcp := mcpHandler("http", "web")
	cut := startHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		mcp.ServeHTTP(w, r)
	}), false)
	tests := []struct {
		name, typ, url string
		ready          bool // the upstream connects; its calls fail
	}{
		{name: "unreachable http", typ: "http", url: "http://" + closedPort(t) + "/mcp?token=" + secret + "#" + secret},
		{name: "unreachable sse", typ: "sse", url: "http://user:" + secret + "@" + closedPort(t) + "/sse?token=" + secret},
		{name: "redirect loop", typ: "http", url: loop.URL + "/mcp?token=" + secret},
		{name: "connection cut during a call", typ: "http", url: cut.URL + "/mcp?token=" + secret, ready: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			core, logs := observer.New(zap.DebugLevel)
			opts := fastOptions()
			opts.Logger = zap.New(core)
			u := startUpstream(t, config.Server{Name: "web", Type: tt.typ, URL: tt.url}, opts)
			// failed is the status error of a failed attempt: the upstream
			// may be connecting again (no error) by the time it is read below.
			var failed string
			if tt.ready {
				waitReady(t, u, 10*time.Second)
			} else {
				waitFor(t, 10*time.Second, "a failed attempt", func() bool { failed = u.Status().Error; return failed != "" })
			}

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := echo(ctx, u, "x")
			if err == nil {
				t.Fatal("a call to an unreachable upstream succeeded")
			}
			st := u.Status()
			var logged []string
			for _, e := range logs.All() {
				logged = append(logged, e.Message)
				for _, f := range e.Context {
					logged = append(logged, f.String)
					if fe, ok := f.Interface.(error); ok {
						logged = append(logged, fe.Error())
					}
				}
			}
			for what, text := range map[string]string{"status": st.Error, "failed status": failed, "call error": err.Error(), "log": strings.Join(logged, "\n")} {
				if strings.Contains(text, secret) {
					t.Errorf("the %s shows the secret: %s", what, text)
				}
			}
			if shown := failed + st.Error + err.Error(); !strings.Contains(shown, "token=REDACTED") {
				t.Errorf("the errors (%q, %q, %q) do not show the redacted URL", failed, st.Error, err)
			}
			t.Logf("status: %s\ncall: %v", st.Error, err)
		})
	}
}
