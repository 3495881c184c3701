package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lineConn speaks JSON lines to a stdio MCP server process.
type lineConn struct {
	t   *testing.T
	w   io.Writer
	out chan map[string]json.RawMessage
}

func newLineConn(t *testing.T, r io.Reader, w io.Writer) *lineConn {
	c := &lineConn{t: t, w: w, out: make(chan map[string]json.RawMessage, 100)}
	go func() {
		defer close(c.out)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				c.out <- m
			}
		}
	}()
	return c
}

func (c *lineConn) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.w, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// until returns the response with id, and the messages before it.
func (c *lineConn) until(id string) (map[string]json.RawMessage, []map[string]json.RawMessage) {
	c.t.Helper()
	var before []map[string]json.RawMessage
	timeout := time.After(60 * time.Second)
	for {
		select {
		case m, ok := <-c.out:
			if !ok {
				c.t.Fatalf("output ended before the response to %s", id)
			}
			if string(m["id"]) == id && m["method"] == nil {
				return m, before
			}
			before = append(before, m)
		case <-timeout:
			c.t.Fatalf("no response to %s within 60s", id)
		}
	}
}

// initialize runs the 2025-11-25 handshake.
func (c *lineConn) initialize() {
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e-raw","version":"1"}}}`)
	c.until("0")
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// progressCall is a tools/call of the fixture's progress tool, with a
// progress token, whose name is name.
func progressCall(name string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":{},"_meta":{"progressToken":"p-1"}}}`
}

// TestRawPathStdio: `serve --stdio` in front of the fixture serves a
// tools/call on the raw path (its debug log says so): the client gets the
// fixture's progress under its own token and the fixture's result bytes
// exactly as the fixture sends them directly, and the audit file has the
// call's record.
func TestRawPathStdio(t *testing.T) {
	fixture := fixtureBinary(t)

	// The fixture's own answer, directly.
	// Both speak 2025-11-25 with the fixture: a 2026-07-28 server marks its
	// results "resultType":"complete", which the gateway (on either path)
	// passes on and a 2025-11-25 server does not write.
	direct := exec.Command(fixture, "--stdio", "--protocol-versions", "2025-11-25")
	dIn, _ := direct.StdinPipe()
	dOut, _ := direct.StdoutPipe()
	if err := direct.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dIn.Close(); direct.Wait() })
	dc := newLineConn(t, dOut, dIn)
	dc.initialize()
	dc.send(progressCall("test_tool_with_progress"))
	want, _ := dc.until("1")

	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := writeConfig(t, fmt.Sprintf(`
mcpServers:
  fx:
    command: %q
    args: ["--stdio", "--protocol-versions", "2025-11-25"]
gateway:
  log: { level: debug }
audit: { file: %q, arguments: full }
`, fixture, auditFile))
	inR, inW, outR, outW := stdioPipes(t)
	g := launch(t, []string{"serve", "--stdio", "--config", cfg}, inR, func(cmd *exec.Cmd) { cmd.Stdout = outW })
	defer inR.Close() // kept to see the mode the gateway leaves its stdin in
	outW.Close()
	c := newLineConn(t, outR, inW)
	c.initialize()
	// The first call may come before the fixture is listed; wait for it.
	var got map[string]json.RawMessage
	var before []map[string]json.RawMessage
	for deadline := time.Now().Add(30 * time.Second); ; {
		c.send(progressCall("fx__test_tool_with_progress"))
		got, before = c.until("1")
		if got["error"] == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if string(got["result"]) != string(want["result"]) {
		t.Errorf("result through the gateway:\n%s\ndirect:\n%s", got["result"], want["result"])
	}
	var progress int
	for _, m := range before {
		if string(m["method"]) == `"notifications/progress"` {
			if !strings.Contains(string(m["params"]), `"progressToken":"p-1"`) {
				t.Errorf("progress with another token: %s", m["params"])
			}
			progress++
		}
	}
	if progress != 3 {
		t.Errorf("%d progress notifications, want 3", progress)
	}

	inW.Close() // the gateway exits at the end of its input
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not exit after its input ended")
	}
	outR.Close()
	if !strings.Contains(g.logs.String(), `"path":"raw"`) {
		t.Errorf("no raw call in the debug log:\n%s", g.logs.String())
	}
	// Its stdin and stdout are pipes of their own: it read and wrote them
	// with direct system calls (internal/rawio), and gave the shared open
	// file its blocking mode back at the end.
	if !strings.Contains(g.logs.String(), "stdio: direct system calls on stdin and stdout") {
		t.Errorf("stdin and stdout were not read and written directly:\n%s", g.logs.String())
	}
	if nonblocking(t, inR) {
		t.Error("the gateway left its stdin in non-blocking mode")
	}
	var rec map[string]any
	for _, r := range readAudit(t, auditFile) {
		if r["name"] == "fx__test_tool_with_progress" && r["outcome"] == "ok" {
			rec = r
		}
	}
	if rec == nil {
		t.Fatalf("no audit record of the call: %v", readAudit(t, auditFile))
	}
	if rec["result_bytes"] != float64(len(got["result"])) || rec["upstream_name"] != "test_tool_with_progress" || rec["decision"] != "allow" {
		t.Errorf("audit record %v (result %d bytes)", rec, len(got["result"]))
	}
}

// nonblocking reports whether f's open file is in non-blocking mode,
// without changing it (as f.Fd would).
func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags uintptr
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) { flags, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0) }); err != nil || errno != 0 {
		t.Fatalf("fcntl: %v %v", err, errno)
	}
	return flags&syscall.O_NONBLOCK != 0
}

// TestStdioSharedStderr: `serve --stdio` whose stdout and stderr are one
// pipe (2>&1) cannot put that pipe in non-blocking mode (its log lines on
// stderr would meet EAGAIN), but still reads its stdin through the poller,
// never with a read that blocks in the kernel (internal/rawio, Standard):
// through an open file of its own, which leaves the shared one blocking.
// Calls are served, and the end of stdin still ends the gateway.
func TestStdioSharedStderr(t *testing.T) {
	cfg := fixtureDebugConfig(t)
	inR, inW, outR, outW := stdioPipes(t)
	cmd := exec.Command(binary, "serve", "--stdio", "--config", cfg)
	cmd.Dir = repo
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, outW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	defer inR.Close()
	defer outW.Close() // kept to see the mode the gateway leaves them in

	c := newLineConn(t, outR, inW)
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e-raw","version":"1"}}}`)
	_, seen := c.until("0") // log lines and notifications, from the start
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	seen = append(seen, c.callServed()...)
	inW.Close()
	select {
	case <-done:
		done <- nil // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not exit after its input ended")
	}
	var how string
	for _, m := range seen {
		if msg := string(m["msg"]); strings.HasPrefix(msg, `"stdio: direct system calls on`) {
			how = msg
		}
	}
	if how != `"stdio: direct system calls on stdin"` {
		t.Errorf("log says %s, want stdin alone read directly", how)
	}
	if nonblocking(t, inR) || nonblocking(t, outW) {
		t.Error("the gateway left its stdin or its shared stdout non-blocking")
	}
}

// TestStdioOneSocket: `serve --stdio` whose stdin and stdout are one
// socket (as a host with a socketpair gives them) reads and writes it with
// direct system calls (internal/rawio, Standard): calls are served, the
// end of its input ends it, and the socket is blocking again afterwards.
func TestStdioOneSocket(t *testing.T) {
	cfg := fixtureDebugConfig(t)
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "client"), os.NewFile(uintptr(fds[1]), "gateway")
	defer ours.Close()
	defer theirs.Close() // kept to see the mode the gateway leaves it in
	g := launch(t, []string{"serve", "--stdio", "--config", cfg}, theirs, func(cmd *exec.Cmd) { cmd.Stdout = theirs })

	c := newLineConn(t, ours, ours)
	c.initialize()
	c.callServed()
	if err := syscall.Shutdown(fds[0], syscall.SHUT_WR); err != nil { // the end of its input
		t.Fatal(err)
	}
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not exit after its input ended")
	}
	if !strings.Contains(g.logs.String(), "stdio: direct system calls on stdin and stdout") {
		t.Errorf("the socket was not read and written directly:\n%s", g.logs.String())
	}
	if nonblocking(t, theirs) {
		t.Error("the gateway left its socket non-blocking")
	}
}

// fixtureDebugConfig writes a config with the fixture as upstream fx and
// debug logs.
func fixtureDebugConfig(t *testing.T) string {
	t.Helper()
	return writeConfig(t, fmt.Sprintf(`
mcpServers:
  fx:
    command: %q
    args: ["--stdio"]
gateway:
  log: { level: debug }
`, fixtureBinary(t)))
}

// callServed calls fx's progress tool as id 1 until it is served (the
// first call may come before the fixture is listed), and returns the
// messages before the result.
func (c *lineConn) callServed() []map[string]json.RawMessage {
	c.t.Helper()
	var seen []map[string]json.RawMessage
	for deadline := time.Now().Add(30 * time.Second); ; {
		c.send(progressCall("fx__test_tool_with_progress"))
		got, before := c.until("1")
		seen = append(seen, before...)
		if got["result"] != nil {
			return seen
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no result: %s", got["error"])
		}
		time.Sleep(100 * time.Millisecond)
	}
}
