package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/internal/envelope"
)

// scriptedUpstream is a stdio upstream over pipes of the system (as a
// real upstream process's), speaking bytes: it answers the handshake and
// lists itself, and hands every tools/call to the test, which answers it
// (or not) with reply.
type scriptedUpstream struct {
	t      testing.TB
	calls  chan scriptedCall // tools/call requests, in arrival order
	cancel chan string       // the requestId of each notifications/cancelled
	mu     sync.Mutex
	w      *os.File // to the gateway; nil once closed
	conns  chan struct{}
	// echo, when set, is the answer to every tools/call, written before
	// the next request is read, as a server that serves one request at a
	// time: it stops reading when the gateway does not read its answers.
	echo string
}

// scriptedCall is one tools/call the scripted upstream received.
type scriptedCall struct {
	id   string // raw JSON
	tool string
	arg  string // arguments.message
}

var scriptedResults = map[string]string{
	"initialize": `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"1"}}`,
	"tools/list": `{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"hang","inputSchema":{"type":"object"}}]}`,
	"ping":       `{}`,
}

func newScriptedUpstream(t testing.TB) *scriptedUpstream {
	return &scriptedUpstream{t: t, calls: make(chan scriptedCall, 10000), cancel: make(chan string, 100), conns: make(chan struct{}, 10)}
}

// pipe is the gateway's Pipes entry: each connection gets fresh pipes.
func (s *scriptedUpstream) pipe() (io.ReadCloser, io.WriteCloser, error) {
	inR, inW, outR, outW, err := osPipes()
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	s.w = outW
	s.mu.Unlock()
	s.t.Cleanup(func() { inR.Close(); outW.Close() })
	go s.serve(inR, outW)
	s.conns <- struct{}{}
	return outR, inW, nil
}

func (s *scriptedUpstream) serve(r *os.File, w *os.File) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return
		}
		env, err := envelope.Scan(line)
		if err != nil {
			continue
		}
		method := string(envelope.Text(env.Method.In(line)))
		switch {
		case method == "notifications/cancelled":
			i := strings.Index(string(line), `"requestId":`)
			id := string(line[i+len(`"requestId":`):])
			id = id[:strings.IndexAny(id, ",}")]
			s.cancel <- id
		case !env.ID.Present():
		case method == "tools/call" && s.echo != "":
			s.reply(scriptedCall{id: string(env.ID.In(line))}, s.echo)
		case method == "tools/call":
			s.calls <- scriptedCall{id: string(env.ID.In(line)), tool: string(envelope.Text(env.Name.In(line))), arg: argMessage(line)}
		default:
			res, ok := scriptedResults[method]
			if !ok {
				res = `{}`
			}
			s.write(`{"jsonrpc":"2.0","id":` + string(env.ID.In(line)) + `,"result":` + res + `}`)
		}
	}
}

// argMessage returns arguments.message of a tools/call line ("" if none).
func argMessage(line []byte) string {
	i := strings.Index(string(line), `"message":"`)
	if i < 0 {
		return ""
	}
	rest := string(line[i+len(`"message":"`):])
	return rest[:strings.IndexByte(rest, '"')]
}

// write sends one line to the gateway.
func (s *scriptedUpstream) write(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		s.w.Write([]byte(line + "\n"))
	}
}

// reply answers call c with a text result.
func (s *scriptedUpstream) reply(c scriptedCall, text string) {
	s.write(`{"jsonrpc":"2.0","id":` + c.id + `,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`)
}

// die closes the upstream's side of the connection, as a process that
// exits.
func (s *scriptedUpstream) die() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.Close()
	s.w = nil
}

// next returns the next tools/call the upstream received.
func (s *scriptedUpstream) next(t testing.TB) scriptedCall {
	t.Helper()
	select {
	case c := <-s.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream got no call in 10s")
		return scriptedCall{}
	}
}

// newScriptedGateway starts a gateway whose one upstream, alpha, is s.
func newScriptedGateway(t testing.TB, s *scriptedUpstream) *Gateway {
	t.Helper()
	gw := newRawGatewayPipes(t, map[string]func() (io.ReadCloser, io.WriteCloser, error){"alpha": s.pipe})
	return gw
}

// TestStdioFastCancelWhileForwarded: a call on the stdio fast path that
// the client cancels while the upstream holds it is cancelled upstream
// (notifications/cancelled with the gateway's id), answered, and forgotten:
// the session goes on, and the id can be used again.
func TestStdioFastCancelWhileForwarded(t *testing.T) {
	up := newScriptedUpstream(t)
	gw := newScriptedGateway(t, up)
	c := serveStdioLines(t, gw, "2025-11-25", "{}")

	c.send(callLine("7", "alpha__hang", `{"message":"x"}`))
	held := up.next(t)
	if n := gw.stdioFastServed.Load(); n != 1 {
		t.Fatalf("the stdio fast path served %d calls, want 1", n)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`)
	select {
	case id := <-up.cancel:
		if id != held.id {
			t.Errorf("upstream cancelled %s, want %s", id, held.id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream was not told of the cancellation")
	}
	if m := c.await("7"); m.Error == nil {
		t.Errorf("cancelled call answered %s, want an error", m.line)
	}
	up.reply(held, "late") // dropped: the call has ended

	c.send(callLine("7", "alpha__echo", `{"message":"again"}`))
	go func() { up.reply(up.next(t), "again") }()
	if got := firstText(t, c.await("7")); got != "again" {
		t.Errorf("second call = %q, want again", got)
	}
}

// TestStdioFastManyInFlight: many calls in flight at once on the fast
// path, answered by the upstream in reverse order with notifications
// between the answers, each reach the client under its own id.
func TestStdioFastManyInFlight(t *testing.T) {
	up := newScriptedUpstream(t)
	gw := newScriptedGateway(t, up)
	c := serveStdioLines(t, gw, "2025-11-25", "{}")
	const n = 40
	for i := range n {
		c.send(callLine(fmt.Sprint(i+1), "alpha__echo", fmt.Sprintf(`{"message":"m%d"}`, i+1)))
	}
	held := make([]scriptedCall, n)
	for i := range held {
		held[i] = up.next(t)
	}
	for i := n - 1; i >= 0; i-- {
		up.write(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"between"}}`)
		up.write(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
		up.reply(held[i], "re-"+held[i].arg)
	}
	got := map[string]string{}
	for len(got) < n {
		m := c.next()
		if m.Method != "" {
			continue
		}
		got[string(m.ID)] = firstText(t, m)
	}
	for i := range n {
		if want := fmt.Sprintf("re-m%d", i+1); got[fmt.Sprint(i+1)] != want {
			t.Errorf("call %d = %q, want %q", i+1, got[fmt.Sprint(i+1)], want)
		}
	}
	if f := gw.stdioFastServed.Load(); f != n {
		t.Errorf("the stdio fast path served %d calls, want %d", f, n)
	}
}

// TestStdioFastUpstreamDiesMidCall: the calls in flight on the fast path
// when the upstream's connection ends are answered with errors at once,
// and the session serves calls again once the upstream is back.
func TestStdioFastUpstreamDiesMidCall(t *testing.T) {
	up := newScriptedUpstream(t)
	gw := newScriptedGateway(t, up)
	<-up.conns
	c := serveStdioLines(t, gw, "2025-11-25", "{}")
	for i := range 3 {
		c.send(callLine(fmt.Sprint(i+1), "alpha__hang", `{"message":"x"}`))
		up.next(t)
	}
	up.die()
	// The connection's end fails its pending calls in no set order.
	for answered := map[string]bool{}; len(answered) < 3; {
		m := c.next()
		if m.Method != "" {
			continue
		}
		answered[string(m.ID)] = true
		if m.Error == nil {
			t.Errorf("call %s answered %s, want an error", m.ID, m.line)
		}
	}
	select {
	case <-up.conns:
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream was not reconnected")
	}
	for i := 10; ; i++ {
		id := fmt.Sprint(i)
		c.send(callLine(id, "alpha__echo", `{"message":"back"}`))
		var m message
		select {
		case call := <-up.calls:
			up.reply(call, "back")
			m = c.await(id)
		case <-time.After(100 * time.Millisecond):
			m = c.await(id) // not reconnected yet: an error
		}
		if m.Error == nil {
			if got := firstText(t, m); got != "back" {
				t.Errorf("after the reconnection: %q", got)
			}
			return
		}
		if i > 200 {
			t.Fatalf("no call served after the reconnection: %s", m.line)
		}
	}
}

// TestStdioFastClientWritesWithoutReading: a client that writes many
// calls before it reads any answer is served: the front never waits on
// the upstream's pipe while it reads the client (upstream.StartRaw), so
// the four pipes between client, gateway and upstream cannot all fill.
func TestStdioFastClientWritesWithoutReading(t *testing.T) {
	up := newScriptedUpstream(t)
	up.echo = strings.Repeat("a", 2000)
	gw := newScriptedGateway(t, up)
	c := serveStdioLines(t, gw, "2025-11-25", "{}")
	// 1,300 calls of 4 KiB and their answers of 2 KiB: far more than the
	// pipes hold, and more than the upstream's concurrency slots, with
	// calls in flight enough to fill the pipe to the upstream.
	const n = 1300 // more than the client reader holds (lineClient.lines)
	var line strings.Builder
	arg := `{"message":"` + strings.Repeat("x", 4<<10) + `"}`
	for i := range n {
		line.WriteString(callLine(fmt.Sprint(i+1), "alpha__echo", arg) + "\n")
	}
	wrote := make(chan error, 1)
	go func() { _, err := io.WriteString(c.in, line.String()); wrote <- err }()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the gateway stopped reading the client's calls")
	}
	for seen := 0; seen < n; {
		if m := c.next(); m.Method == "" {
			if m.Error != nil {
				t.Fatalf("call %s: %s", m.ID, m.line)
			}
			seen++
		}
	}
}

// osPipes returns two pipes of the system, as an upstream process has:
// in (gateway → upstream) and out (upstream → gateway).
func osPipes() (inR, inW, outR, outW *os.File, err error) {
	if inR, inW, err = os.Pipe(); err != nil {
		return nil, nil, nil, nil, err
	}
	if outR, outW, err = os.Pipe(); err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, nil, nil, err
	}
	return inR, inW, outR, outW, nil
}

// TestStdioFastNeverWaitsForTheClient: a fast-path answer the client does
// not read leaves the upstream's reading goroutine free: the connection's
// other answers are still read (a raw call made straight on the upstream
// completes), so a client that stops reading cannot make the gateway give
// up a healthy upstream. The answer is written once the client reads.
func TestStdioFastNeverWaitsForTheClient(t *testing.T) {
	up := newScriptedUpstream(t)
	up.echo = "pong"
	gw := newScriptedGateway(t, up)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.ServeStdio(ctx, inR, outW) }()
	br := bufio.NewReader(outR)
	io.WriteString(inW, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`+"\n")
	if l, err := br.ReadString('\n'); err != nil || !strings.Contains(l, `"init"`) {
		t.Fatalf("initialize: %q %v", l, err)
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	// The answer to this call is not read: the output pipe holds nothing.
	io.WriteString(inW, callLine("1", "alpha__echo", `{"message":"x"}`)+"\n")
	waitFor(t, "the fast path served the call", func() bool { return gw.stdioFastServed.Load() == 1 })

	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	if _, err := gw.pool.members["alpha"].up.CallRaw(cctx, "tools/call", []byte(`{"name":"echo","arguments":{}}`)); err != nil {
		t.Errorf("a call on the upstream while the client does not read: %v", err)
	}
	if l, err := br.ReadString('\n'); err != nil || !strings.Contains(l, `"pong"`) {
		t.Errorf("the unread answer, once read: %q %v", l, err)
	}
	cancel()
	inW.Close()
	go io.Copy(io.Discard, br)
	<-served
	outR.Close()
}
