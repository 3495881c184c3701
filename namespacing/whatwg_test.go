package namespacing_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/namespacing"
)

// FuzzURIAgainstWHATWG is the differential half of the canonical-URI rule:
// the oracle is Node's new URL(u).href, the WHATWG URL Standard as the
// TypeScript SDK applies it when a server looks a resource up. For every
// URI that NonCanonicalURI accepts, and for the original URI it wraps,
// new URL either throws (the server finds nothing) or gives back the URI
// unchanged, so the server resolves exactly what the gateway decided on.
//
// It needs node on PATH (the e2e suite needs it too); without it the test
// is skipped, except in CI (CI set), where it fails.
func FuzzURIAgainstWHATWG(f *testing.F) {
	oracle := startWHATWG(f)
	for _, a := range aliases {
		f.Add(a.uri)
	}
	for _, u := range canonicalURIs {
		f.Add(u)
	}
	for _, u := range []string{"demo://r/x/.%2E", "http://h/?'", "demo://r:0/", "file:///c:/x", "file://h/C:/x",
		"demo:/a/b", "demo:///a", "demo:////a", "http://xn--caf-dma.com/", "http://1.2.3/", "ws://h:443/"} {
		f.Add(u)
		f.Add(namespacing.WrapURI("p", u))
	}
	f.Fuzz(func(t *testing.T, uri string) {
		if namespacing.NonCanonicalURI(uri) {
			return
		}
		check := func(u string) {
			href, err := oracle.href(u)
			if err != nil {
				var thrown *whatwgError
				if errors.As(err, &thrown) {
					return // no server resolves it to anything
				}
				t.Fatalf("oracle: %v", err)
			}
			if href != u {
				t.Fatalf("canonical %q is %q to a WHATWG URL parser", u, href)
			}
		}
		check(uri)
		if _, inner, ok := namespacing.UnwrapURI(uri); ok {
			check(inner)
		}
	})
}

// whatwgScript answers each line of stdin, a JSON string, with one line:
// {"href": new URL(s).href} or {"error": why new URL(s) threw}.
const whatwgScript = `
const rl = require('readline').createInterface({input: process.stdin, crlfDelay: Infinity});
rl.on('line', (line) => {
  let out;
  try { out = {href: new URL(JSON.parse(line)).href}; } catch (e) { out = {error: String(e && (e.code || e.message))}; }
  process.stdout.write(JSON.stringify(out) + '\n');
});`

// whatwg is one long-lived node process answering new URL() questions;
// one per test process (and so per fuzz worker), shared by its tests.
type whatwg struct {
	mu  sync.Mutex
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// whatwgError is the error new URL threw for a URI.
type whatwgError struct{ uri, why string }

func (e *whatwgError) Error() string { return fmt.Sprintf("new URL(%q) threw %s", e.uri, e.why) }

var oracle struct {
	once sync.Once
	w    *whatwg
	err  error
}

// startWHATWG returns the process's oracle, starting it on first use. Without
// node it skips tb, or fails it in CI.
func startWHATWG(tb testing.TB) *whatwg {
	tb.Helper()
	oracle.once.Do(func() {
		if _, err := exec.LookPath("node"); err != nil {
			oracle.err = err
			return
		}
		cmd := exec.Command("node", "-e", whatwgScript)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			oracle.err = err
			return
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			oracle.err = err
			return
		}
		if err := cmd.Start(); err != nil {
			oracle.err = err
			return
		}
		oracle.w = &whatwg{cmd: cmd, in: in, out: bufio.NewReader(out)}
	})
	if oracle.err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("node is required in CI for the WHATWG URL oracle: %v", oracle.err)
		}
		tb.Skipf("node not available for the WHATWG URL oracle: %v", oracle.err)
	}
	return oracle.w
}

// href returns new URL(uri).href, or a *whatwgError if it threw. A question
// gets 10 s, after which the process is killed and every later one fails.
func (w *whatwg) href(uri string) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q, err := json.Marshal(uri)
	if err != nil {
		return "", err
	}
	kill := time.AfterFunc(10*time.Second, func() { w.cmd.Process.Kill() })
	defer kill.Stop()
	if _, err := w.in.Write(append(q, '\n')); err != nil {
		return "", fmt.Errorf("writing to node: %w", err)
	}
	line, err := w.out.ReadBytes('\n')
	if err != nil {
		return "", fmt.Errorf("reading from node: %w", err)
	}
	var a struct {
		Href  *string `json:"href"`
		Error string  `json:"error"`
	}
	if err := json.Unmarshal(line, &a); err != nil {
		return "", fmt.Errorf("node answered %q: %w", line, err)
	}
	if a.Href == nil {
		return "", &whatwgError{uri, a.Error}
	}
	return *a.Href, nil
}

// stopWHATWG ends the oracle process, if one was started.
func stopWHATWG() {
	if w := oracle.w; w != nil {
		w.in.Close() // node exits at the end of its input
		done := make(chan struct{})
		go func() { w.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			w.cmd.Process.Kill()
			<-done
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	stopWHATWG()
	os.Exit(code)
}

// TestWHATWGOracle checks the oracle itself on the finding's examples, so
// that a broken oracle cannot pass the fuzz target.
func TestWHATWGOracle(t *testing.T) {
	w := startWHATWG(t)
	tests := []struct{ uri, href string }{
		{"demo://resource/static/document/architecture.md\t", "demo://resource/static/document/architecture.md"},
		{"DEMO://resource/x", "demo://resource/x"},
		{"demo://:@resource/x", "demo://resource/x"},
		{"demo://resource:/x", "demo://resource/x"},
		{"demo://resource/static/.\t./dynamic/text/1", "demo://resource/dynamic/text/1"},
		{"https://example.com", "https://example.com/"},
	}
	for _, tt := range tests {
		if got, err := w.href(tt.uri); err != nil || got != tt.href {
			t.Errorf("href(%q) = %q, %v; want %q", tt.uri, got, err, tt.href)
		}
	}
	var thrown *whatwgError
	if _, err := w.href("demo://r:65536/"); !errors.As(err, &thrown) {
		t.Errorf("href of a port out of range: %v, want a thrown error", err)
	}
}
