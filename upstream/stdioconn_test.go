package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeStdio is a byte-level stdio upstream: it sits on the pipes of the
// connection under test and passes every line to a real SDK server behind
// it, except what its hooks take: raw calls (string ids) go to onRaw,
// and the lines it is told to watch are recorded.
type fakeStdio struct {
	toGW   *io.PipeWriter // what the connection reads
	fromGW *io.PipeReader // what the connection writes
	srvIn  *io.PipeWriter
	ss     *mcp.ServerSession

	writeMu sync.Mutex
	// onRaw answers a raw call (its request line); nil passes it to the server.
	onRaw func(f *fakeStdio, req []byte)
	// answerCalls answers every tools/call itself with a canned result, so
	// that benchmarks measure the client.
	answerCalls bool
	seen        chan []byte // lines from the connection that are not for the server
	done        chan struct{}
}

// newFakeStdio starts a fake with srv behind it; pipe is for Options.Pipe.
func newFakeStdio(t testing.TB, srv *mcp.Server, setup func(*fakeStdio)) (f *fakeStdio, pipe func() (io.ReadCloser, io.WriteCloser, error)) {
	gwR, toGW := io.Pipe()
	fromGW, gwW := io.Pipe()
	srvInR, srvIn := io.Pipe()
	srvOut, srvOutW := io.Pipe()
	f = &fakeStdio{toGW: toGW, fromGW: fromGW, srvIn: srvIn, seen: make(chan []byte, 64), done: make(chan struct{})}
	if setup != nil {
		setup(f)
	}
	ss, err := srv.Connect(context.Background(), &mcp.IOTransport{Reader: srvInR, Writer: srvOutW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.ss = ss
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // server → connection
		defer wg.Done()
		sc := bufio.NewScanner(srvOut)
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			f.send(sc.Bytes())
		}
	}()
	go func() { // connection → server, or the hooks
		defer wg.Done()
		defer close(f.done)
		sc := bufio.NewScanner(fromGW)
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			f.route(bytes.Clone(sc.Bytes()))
		}
	}()
	t.Cleanup(func() {
		f.cut()
		ss.Close()
		srvOut.Close()
		wg.Wait()
	})
	return f, func() (io.ReadCloser, io.WriteCloser, error) { return gwR, gwW, nil }
}

func (f *fakeStdio) route(line []byte) {
	e, err := envelope.Scan(line)
	method := ""
	if err == nil && e.Method.Present() {
		method = string(envelope.Text(e.Method.In(line)))
	}
	rawID := err == nil && e.ID.Present() && bytes.HasPrefix(e.ID.In(line), []byte(`"`+rawIDPrefix))
	switch {
	case f.answerCalls && method == "tools/call":
		f.send([]byte(`{"jsonrpc":"2.0","id":` + string(e.ID.In(line)) + `,"result":{"content":[{"type":"text","text":"canned"}]}}`))
	case rawID && e.Method.Present() && f.onRaw != nil:
		f.onRaw(f, line)
	case method == "notifications/cancelled" && bytes.Contains(line, []byte(rawIDPrefix)),
		bytes.HasPrefix(line, []byte("[")),
		err == nil && e.IsResponse() && f.watching(e.ID.In(line)):
		f.seen <- line
	default:
		f.srvIn.Write(append(line, '\n'))
	}
}

// watching: responses to the fake's own requests (ids starting at 9000).
func (f *fakeStdio) watching(id []byte) bool { return bytes.HasPrefix(id, []byte("900")) }

func (f *fakeStdio) send(line []byte) {
	f.writeMu.Lock()
	defer f.writeMu.Unlock()
	f.toGW.Write(append(bytes.Clone(line), '\n'))
}

// cut breaks the pipes, as a crashed server would.
func (f *fakeStdio) cut() {
	f.toGW.CloseWithError(io.ErrClosedPipe)
	f.fromGW.CloseWithError(io.ErrClosedPipe)
	f.srvIn.Close()
}

// idOf returns the raw id of a request line.
func idOf(t testing.TB, line []byte) string {
	e, err := envelope.Scan(line)
	if err != nil {
		t.Errorf("request %q: %v", line, err)
		return "null"
	}
	return string(e.ID.In(line))
}

func echoServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "fake"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Message string `json:"message"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	})
	return srv
}

// rawUpstream starts an Upstream over a fake; the fake of each connection
// attempt is sent on the returned channel.
func rawUpstream(t *testing.T, opts *Options, setup func(*fakeStdio)) (*Upstream, chan *fakeStdio) {
	t.Helper()
	fakes := make(chan *fakeStdio, 8)
	if opts == nil {
		opts = fastOptions()
	}
	opts.Pipe = func() (io.ReadCloser, io.WriteCloser, error) {
		f, pipe := newFakeStdio(t, echoServer(), setup)
		fakes <- f
		return pipe()
	}
	u := startUpstream(t, config.Server{Name: "raw", Type: "stdio"}, opts)
	waitReady(t, u, 10*time.Second)
	return u, fakes
}

func rawEcho(ctx context.Context, u *Upstream, msg string) ([]byte, error) {
	params, _ := json.Marshal(map[string]any{"name": "echo", "arguments": map[string]any{"message": msg}})
	return u.CallRaw(ctx, "tools/call", params)
}

// TestCallRawExactBytes: the result of a raw call is the upstream's bytes,
// spacing and escapes included; an error answer keeps its code.
func TestCallRawExactBytes(t *testing.T) {
	checkLeaks(t)
	const result = `{ "content" : [ {"type":"text","text":"h\u00e9\n"} ], "x":1.50 }`
	u, _ := rawUpstream(t, nil, func(f *fakeStdio) {
		f.onRaw = func(f *fakeStdio, req []byte) {
			if bytes.Contains(req, []byte(`"fail"`)) {
				f.send([]byte(`{"jsonrpc":"2.0","id":` + idOf(t, req) + `,"error":{"code":-32602,"message":"bad"}}`))
				return
			}
			f.send([]byte(`{"jsonrpc":"2.0","result":` + result + `,"id":` + idOf(t, req) + `}`))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"x"}`))
	if err != nil || string(got) != result {
		t.Fatalf("CallRaw = %s, %v; want %s", got, err, result)
	}
	_, err = u.CallRaw(ctx, "tools/call", []byte(`{"name":"fail"}`))
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != -32602 || err.Error() != `upstream "raw": calling "tools/call": bad` {
		t.Fatalf("error answer: %v", err)
	}
}

// TestCallRawRealProcess: a raw call through a real stdio server process.
func TestCallRawRealProcess(t *testing.T) {
	checkLeaks(t)
	u := startUpstream(t, childConfig("proc", "demo", nil), fastOptions())
	st := waitReady(t, u, 10*time.Second)
	killGroupOnCleanup(t, st.PID)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := rawEcho(ctx, u, "hello")
	if err != nil || !bytes.Contains(got, []byte(`"text":"hello"`)) {
		t.Fatalf("raw echo = %s, %v", got, err)
	}
}

// TestCallRawInterleaved: raw and typed calls share the pipe concurrently,
// each getting its own answer.
func TestCallRawInterleaved(t *testing.T) {
	checkLeaks(t)
	u, _ := rawUpstream(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				msg := fmt.Sprintf("g%d-%d", g, i)
				if g%2 == 0 {
					got, err := rawEcho(ctx, u, msg)
					if err != nil || !bytes.Contains(got, []byte(`"text":"`+msg+`"`)) {
						errs <- fmt.Errorf("raw %s = %s, %v", msg, got, err)
						return
					}
					continue
				}
				got, err := echo(ctx, u, msg)
				if err != nil || got != msg {
					errs <- fmt.Errorf("typed %s = %s, %v", msg, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestCallRawServerTraffic: a server request and a notification sent
// during a raw call reach the SDK session (the ping is answered, the
// list_changed re-lists) before the raw call is answered.
func TestCallRawServerTraffic(t *testing.T) {
	checkLeaks(t)
	u, _ := rawUpstream(t, nil, func(f *fakeStdio) {
		f.onRaw = func(f *fakeStdio, req []byte) {
			go func() {
				f.send([]byte(`{"jsonrpc":"2.0","id":9001,"method":"ping"}`))
				f.send([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
				select {
				case line := <-f.seen:
					if !bytes.Contains(line, []byte(`"result":{}`)) {
						t.Errorf("answer to the server's ping: %s", line)
					}
				case <-time.After(5 * time.Second):
					t.Error("the server's ping was not answered during the raw call")
				}
				f.send([]byte(`{"jsonrpc":"2.0","id":` + idOf(t, req) + `,"result":{"ok":true}}`))
			}()
		}
	})
	before := u.Catalog()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"x"}`))
	if err != nil || string(got) != `{"ok":true}` {
		t.Fatalf("CallRaw = %s, %v", got, err)
	}
	waitFor(t, 5*time.Second, "the re-listing after list_changed", func() bool { return u.Catalog() != before })
}

// TestCallRawOversized: an answer over MaxMessageBytes fails the raw call
// at once with ErrTooLarge and the connection (as for typed calls), which
// restarts.
func TestCallRawOversized(t *testing.T) {
	checkLeaks(t)
	opts := fastOptions()
	opts.MaxMessageBytes = 4 << 10
	u, fakes := rawUpstream(t, opts, func(f *fakeStdio) {
		f.onRaw = func(f *fakeStdio, req []byte) {
			f.send([]byte(`{"jsonrpc":"2.0","id":` + idOf(t, req) + `,"result":{"t":"` + strings.Repeat("x", 8<<10) + `"}}`))
		}
	})
	<-fakes
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"x"}`))
	want := `upstream "raw": response exceeds maxMessageBytes (4096 bytes)`
	if !errors.Is(err, ErrTooLarge) || err.Error() != want {
		t.Fatalf("CallRaw = %v, want %s", err, want)
	}
	waitFor(t, 5*time.Second, "a restart", func() bool { st := u.Status(); return st.State == StateReady && st.Restarts >= 1 })
}

// TestCallRawPipeBroken: when the pipe breaks mid-call the raw call fails
// at once with ErrUnavailable, not at its timeout; later calls fail the
// same way until the connection is back.
func TestCallRawPipeBroken(t *testing.T) {
	checkLeaks(t)
	opts := fastOptions()
	opts.CallTimeout = time.Minute
	got := make(chan struct{}, 1)
	u, fakes := rawUpstream(t, opts, func(f *fakeStdio) {
		f.onRaw = func(f *fakeStdio, req []byte) { got <- struct{}{} }
	})
	f := <-fakes
	go func() {
		<-got
		f.cut()
	}()
	start := time.Now()
	_, err := u.CallRaw(context.Background(), "tools/call", []byte(`{"name":"x"}`))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("CallRaw across a cut = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the call failed after %s: it waited for its timeout", d)
	}
}

// TestCallRawCancel: a raw call whose context ends sends
// notifications/cancelled with the id of the request it cancels; a call
// past its timeout does too, and reports ErrTimeout.
func TestCallRawCancel(t *testing.T) {
	checkLeaks(t)
	opts := fastOptions()
	opts.CallTimeout = 300 * time.Millisecond
	ids := make(chan string, 2)
	u, fakes := rawUpstream(t, opts, func(f *fakeStdio) {
		f.onRaw = func(f *fakeStdio, req []byte) { ids <- idOf(t, req) } // never answers
	})
	f := <-fakes
	check := func(what string) {
		t.Helper()
		expectCancelled(t, f, <-ids, what)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if _, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"x"}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled CallRaw = %v", err)
	}
	check("cancelled")
	if _, err := u.CallRaw(context.Background(), "tools/call", []byte(`{"name":"x"}`)); !errors.Is(err, ErrTimeout) {
		t.Errorf("CallRaw past its timeout = %v, want ErrTimeout", err)
	}
	check("timed out")
}

// TestCallRawUnsupported: an upstream on an SDK transport refuses raw
// calls before sending anything.
func TestCallRawUnsupported(t *testing.T) {
	checkLeaks(t)
	m := newMemServer(t, echoServer())
	u := startUpstream(t, config.Server{Name: "mem"}, m.options())
	waitReady(t, u, 10*time.Second)
	if u.TakesRaw() {
		t.Error("TakesRaw on an in-memory transport")
	}
	if _, err := u.CallRaw(context.Background(), "tools/call", []byte(`{}`)); !errors.Is(err, ErrRawUnsupported) {
		t.Errorf("CallRaw = %v, want ErrRawUnsupported", err)
	}
}

// TestCallRawFraming: the connection reads what the SDK's own stdio
// transport reads: blank lines, a value spread over several lines, CRLF,
// and batches (whose server requests are answered in one batch, and whose
// response to a raw call reaches it).
func TestCallRawFraming(t *testing.T) {
	checkLeaks(t)
	u, _ := rawUpstream(t, nil, func(f *fakeStdio) {
		f.onRaw = func(f *fakeStdio, req []byte) {
			id := idOf(t, req)
			switch {
			case bytes.Contains(req, []byte(`"lines"`)):
				f.send([]byte("\r\n  \n{\n  \"jsonrpc\": \"2.0\",\n  \"id\": " + id + ",\n  \"result\": {\"a\":\n 1}\n}\r"))
			case bytes.Contains(req, []byte(`"batch"`)):
				go func() {
					f.send([]byte(`[{"jsonrpc":"2.0","id":9002,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/tools/list_changed"},{"jsonrpc":"2.0","id":9003,"method":"ping"}]`))
					select {
					case line := <-f.seen:
						var answers []struct {
							ID     int             `json:"id"`
							Result json.RawMessage `json:"result"`
						}
						if err := json.Unmarshal(line, &answers); err != nil || len(answers) != 2 || answers[0].ID != 9002 || answers[1].ID != 9003 {
							t.Errorf("answer to a batch of two pings: %s (%v)", line, err)
						}
					case <-time.After(5 * time.Second):
						t.Error("the batch of pings was not answered")
					}
					f.send([]byte(`[{"jsonrpc":"2.0","id":` + id + `,"result":{"b":2}}]`))
				}()
			default: // the typed call after, which goes raw too
				f.srvIn.Write(append(bytes.Clone(req), '\n'))
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"lines"}`)); err != nil || string(got) != "{\"a\":\n 1}" {
		t.Errorf("multi-line answer: %q, %v", got, err)
	}
	if got, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"batch"}`)); err != nil || string(got) != `{"b":2}` {
		t.Errorf("answer in a batch: %s, %v", got, err)
	}
	if got, err := echo(ctx, u, "still"); err != nil || got != "still" {
		t.Errorf("typed call after: %q, %v", got, err)
	}
}

// brokenWriter fails every write, as a pipe whose reader exited does.
type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, syscall.EPIPE }
func (brokenWriter) Close() error              { return nil }

// TestStdioConnWriteFails: a raw call whose request cannot be written fails
// with the write's error, and the connection closes, also when the reader
// has not yet seen the end; a later Close returns at once.
func TestStdioConnWriteFails(t *testing.T) {
	r, _ := io.Pipe() // never written: the reader does not see the end
	c := newStdioConn(r, brokenWriter{}, 1<<20)
	done := make(chan error, 1)
	go func() {
		_, _, err := c.call(context.Background(), time.Time{}, "tools/call", []byte(`{"name":"echo"}`))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.EPIPE) {
			t.Errorf("call: %v, want the write's broken pipe", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a raw call whose write failed did not return")
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close after a failed write did not return")
	}
	if _, err := c.Read(context.Background()); err != io.EOF {
		t.Errorf("Read after close: %v, want io.EOF", err)
	}
}

// TestStdioConnUndecodableLineEndsRawCalls: a line the SDK cannot decode
// ends the connection (the SDK stops reading at any Read error), so a
// pending raw call fails at once instead of waiting for its timeout.
func TestStdioConnUndecodableLineEndsRawCalls(t *testing.T) {
	r, w := io.Pipe()
	c := newStdioConn(r, nopWriteCloser{io.Discard}, 1<<20)
	t.Cleanup(func() { c.Close() })
	done := make(chan error, 1)
	go func() {
		_, _, err := c.call(context.Background(), time.Time{}, "tools/call", []byte(`{"name":"echo"}`))
		done <- err
	}()
	read := make(chan error, 1)
	go func() {
		_, err := c.Read(context.Background())
		read <- err
	}()
	if _, err := w.Write([]byte(`{"jsonrpc":"2.0","id":true,"result":{}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err == nil {
		t.Fatal("Read of an undecodable message succeeded")
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("the pending raw call succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the pending raw call did not fail when the connection ended")
	}
}

// TestStdioConnLongLines: a line longer than the read buffer arrives whole
// and exact, at the limit too; one byte over is refused.
func TestStdioConnLongLines(t *testing.T) {
	const max = 5*stdioReadBuffer + 123
	for _, tc := range []struct {
		name    string
		size    int // of the line, without its newline
		tooLong bool
	}{
		{name: "several buffers", size: 3*stdioReadBuffer + 7},
		{name: "exactly the limit", size: max},
		{name: "one byte over", size: max + 1, tooLong: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`
			suffix := `"}}`
			line := prefix + strings.Repeat("x", tc.size-len(prefix)-len(suffix)) + suffix
			c := newStdioConn(io.NopCloser(strings.NewReader(line+"\n")), nopWriteCloser{io.Discard}, max)
			msg, err := c.Read(context.Background())
			if tc.tooLong {
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("Read: %v, want ErrTooLarge", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := jsonrpc.EncodeMessage(msg)
			if err != nil {
				t.Fatal(err)
			}
			var want, have any
			if json.Unmarshal([]byte(line), &want) != nil || json.Unmarshal(got, &have) != nil || fmt.Sprint(want) != fmt.Sprint(have) {
				t.Errorf("the %d-byte line did not arrive whole", tc.size)
			}
		})
	}
}

// TestStdioConnBoundCountsTheJoiningNewline: a value continued over lines
// is bounded with the line breaks that join it, as written: at max bytes
// it is read, at max+1 it is too large.
func TestStdioConnBoundCountsTheJoiningNewline(t *testing.T) {
	const max = 80
	value := func(n int) string { // a notification over two lines, n bytes in all
		head, tail := `{"jsonrpc":"2.0",`+"\n"+`"method":"notifications/x","params":{"a":"`, `"}}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	for _, tc := range []struct {
		n        int
		tooLarge bool
	}{{max, false}, {max + 1, true}} {
		v := value(tc.n)
		if len(v) != tc.n {
			t.Fatalf("value of %d bytes, want %d", len(v), tc.n)
		}
		c := newStdioConn(io.NopCloser(strings.NewReader(v+"\n")), nopWriteCloser{io.Discard}, max)
		_, err := c.Read(context.Background())
		if got := errors.Is(err, ErrTooLarge); got != tc.tooLarge || !tc.tooLarge && err != nil {
			t.Errorf("a %d-byte value under a %d-byte bound: %v, want too large: %v", tc.n, max, err, tc.tooLarge)
		}
	}
}
