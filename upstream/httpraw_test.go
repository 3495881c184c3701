package upstream

//lint:file-ignore SA1019 the sampling test drives the deprecated sampling API that the gateway relays

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/envelope"
	"github.com/manifold-mcp/manifold/internal/h1client"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawPost is one POST the raw HTTP fixture received, and its answer.
type rawPost struct {
	header http.Header
	body   []byte
	answer []byte
}

// rawHTTPFixture is a go-sdk streamable server behind a handler that
// records the POSTs, can forget sessions (404 to raw calls carrying them)
// and tells when tools are cancelled.
type rawHTTPFixture struct {
	next http.Handler

	mu        sync.Mutex
	posts     []rawPost
	forgotten string // 404 to raw calls with this session id

	slowEnded chan struct{} // the slow tool's ctx ended
	stop      chan struct{} // closed when the test ends
	sampled   chan string   // what sampling/createMessage answered
}

// rawTestServer is the upstream of the raw HTTP tests: echo, slow (until
// cancelled), big (a result of n bytes), progress (notifies, then
// answers), sample (asks the client to sample, then answers with it).
func (f *rawHTTPFixture) server() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "raw-http", Version: "v1"}, nil)
	type args struct {
		Message string `json:"message,omitempty"`
		N       int    `json:"n,omitempty"`
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
		return text(in.Message), nil, nil
	})
	// region mirrors two arguments into Mcp-Param-* headers (2026-07-28).
	srv.AddTool(&mcp.Tool{Name: "region", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
		"where": map[string]any{"type": "object", "properties": map[string]any{
			"zone": map[string]any{"type": "integer", "x-mcp-header": "Zone"}}},
	}}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("routed"), nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "big"}, func(_ context.Context, _ *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
		return text(strings.Repeat("x", in.N)), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ args) (*mcp.CallToolResult, any, error) {
		select {
		case <-ctx.Done():
			f.slowEnded <- struct{}{}
		case <-f.stop:
		}
		return nil, nil, ctx.Err()
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "progress"}, func(ctx context.Context, req *mcp.CallToolRequest, _ args) (*mcp.CallToolResult, any, error) {
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2, Message: "half"})
		return text("done"), nil, err
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "sample"}, func(ctx context.Context, req *mcp.CallToolRequest, _ args) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		if err != nil {
			return nil, nil, err
		}
		got := res.Content.(*mcp.TextContent).Text
		f.sampled <- got
		return text("sampled " + got), nil, nil
	})
	return srv
}

func (f *rawHTTPFixture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		f.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	f.mu.Lock()
	gone := f.forgotten != "" && r.Header.Get("Mcp-Session-Id") == f.forgotten && bytes.Contains(body, []byte(`"id":"manifold-`))
	f.mu.Unlock()
	f.mu.Lock()
	i := len(f.posts)
	f.posts = append(f.posts, rawPost{header: r.Header.Clone(), body: body})
	next := f.next
	f.mu.Unlock()
	rec := &recordingWriter{ResponseWriter: w}
	if gone {
		http.Error(rec, "session not found", http.StatusNotFound)
	} else {
		next.ServeHTTP(rec, r)
	}
	f.mu.Lock()
	f.posts[i].answer = rec.buf.Bytes()
	f.mu.Unlock()
}

// rawPosts returns the POSTs of raw calls and notifications about them.
func (f *rawHTTPFixture) rawPosts() []rawPost {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []rawPost
	for _, p := range f.posts {
		if bytes.Contains(p.body, []byte(`"manifold-`)) {
			out = append(out, p)
		}
	}
	return out
}

// recordingWriter keeps a copy of what the handler writes.
type recordingWriter struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	return w.ResponseWriter.Write(p)
}

func (w *recordingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// rawHTTPRelay records what reaches the Relay and answers sampling.
type rawHTTPRelay struct {
	updates
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
}

func (r *rawHTTPRelay) Progress(_ *Upstream, p *mcp.ProgressNotificationParams) {
	r.mu.Lock()
	r.progress = append(r.progress, p)
	r.mu.Unlock()
}

func (r *rawHTTPRelay) CreateMessage(context.Context, *Upstream, *mcpx.CreateMessageWithToolsParams) (*mcpx.CreateMessageWithToolsResult, error) {
	return &mcpx.CreateMessageWithToolsResult{Model: "m", Role: "assistant", Content: []mcp.Content{&mcp.TextContent{Text: "from the relay"}}}, nil
}

// startRawHTTP starts the fixture (JSON answers or event streams; stateful
// or stateless), behind wrap if given, and an http Upstream over it.
func startRawHTTP(t testing.TB, jsonAnswers, stateless bool, opts *Options, wrap ...func(http.Handler) http.Handler) (*Upstream, *rawHTTPFixture) {
	t.Helper()
	f := &rawHTTPFixture{slowEnded: make(chan struct{}, 4), sampled: make(chan string, 4), stop: make(chan struct{})}
	srv := f.server()
	f.next = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{JSONResponse: jsonAnswers, Stateless: stateless})
	var h http.Handler = f
	for _, w := range wrap {
		h = w(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	t.Cleanup(func() { close(f.stop) })
	if opts == nil {
		opts = fastOptions()
	}
	opts.KeepAlive = -1
	cfg := config.Server{Name: "web", Type: "http", URL: hs.URL + "/mcp", Headers: map[string]string{"X-Team": "a"}}
	u := New(cfg, opts)
	u.Start(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := u.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for u.Status().State != StateReady {
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %+v", u.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return u, f
}

// resultIn returns the result of the last message in an answer as the
// server wrote it: the body of a JSON answer, the last data line of a
// stream.
func resultIn(t *testing.T, answer []byte) []byte {
	t.Helper()
	msg := answer
	if i := bytes.LastIndex(answer, []byte("data: ")); i >= 0 {
		msg, _, _ = bytes.Cut(answer[i+len("data: "):], []byte("\n"))
	}
	env, err := envelope.ScanResponse(bytes.TrimSpace(msg))
	if err != nil {
		t.Fatalf("answer %q: %v", answer, err)
	}
	return env.Result.In(bytes.TrimSpace(msg))
}

func answerModes() []struct {
	name string
	json bool
} {
	return []struct {
		name string
		json bool
	}{{name: "json", json: true}, {name: "sse", json: false}}
}

// TestCallRawHTTP: a raw call to a streamable HTTP upstream returns the
// result bytes the server wrote, in a POST carrying the configured
// headers and the session's, with a string id; an error answer keeps its
// code.
func TestCallRawHTTP(t *testing.T) {
	for _, mode := range answerModes() {
		t.Run(mode.name, func(t *testing.T) {
			checkLeaks(t)
			u, f := startRawHTTP(t, mode.json, false, nil)
			if !u.TakesRaw() {
				t.Fatal("TakesRaw = false for a streamable HTTP upstream")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			got, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"echo","arguments":{"message":"h\u00e9\n"}}`))
			if err != nil {
				t.Fatalf("CallRaw: %v", err)
			}
			var posts []rawPost
			waitFor(t, 5*time.Second, "the answer to be recorded", func() bool {
				posts = f.rawPosts()
				return len(posts) > 0 && posts[0].answer != nil
			})
			if len(posts) != 1 {
				t.Fatalf("%d raw POSTs, want 1", len(posts))
			}
			p := posts[0]
			if want := resultIn(t, p.answer); !bytes.Equal(got, want) {
				t.Errorf("result = %s, want the server's bytes %s", got, want)
			}
			if !bytes.Contains(p.body, []byte(`"id":"manifold-`)) {
				t.Errorf("request %s: want a string id", p.body)
			}
			for k, want := range map[string]string{
				"X-Team":               "a",
				"Content-Type":         "application/json",
				"Accept":               "application/json, text/event-stream",
				"Mcp-Protocol-Version": u.Catalog().ProtocolVersion,
			} {
				if v := p.header.Get(k); v != want {
					t.Errorf("header %s = %q, want %q", k, v, want)
				}
			}
			if p.header.Get("Mcp-Session-Id") == "" {
				t.Error("no Mcp-Session-Id")
			}

			_, err = u.CallRaw(ctx, "tools/call", []byte(`{"name":"nosuch"}`))
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("unknown tool: %v, want a JSON-RPC error with code %d", err, jsonrpc.CodeInvalidParams)
			}
		})
	}
}

// TestCallRawHTTPServerMessages: on a raw call's event stream, the
// server's progress notification reaches Relay.Progress with the
// upstream's token, and its sampling request is answered through
// Relay.CreateMessage, the answer reaching the server.
func TestCallRawHTTPServerMessages(t *testing.T) {
	checkLeaks(t)
	relay := &rawHTTPRelay{}
	opts := fastOptions()
	opts.Relay = relay
	opts.Capabilities = &mcp.ClientCapabilities{}
	mcpx.SetSampling(opts.Capabilities, &mcpx.SamplingCapabilities{})
	u, f := startRawHTTP(t, false, false, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	got, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"progress","_meta":{"progressToken":"up-7"}}`))
	if err != nil || !bytes.Contains(got, []byte(`"done"`)) {
		t.Fatalf("progress call = %s, %v", got, err)
	}
	relay.mu.Lock()
	progress := relay.progress
	relay.mu.Unlock()
	if len(progress) != 1 || progress[0].ProgressToken != "up-7" || progress[0].Message != "half" {
		t.Errorf("relayed progress = %+v, want one with token up-7", progress)
	}

	got, err = u.CallRaw(ctx, "tools/call", []byte(`{"name":"sample"}`))
	if err != nil || !bytes.Contains(got, []byte(`"sampled from the relay"`)) {
		t.Fatalf("sample call = %s, %v", got, err)
	}
	if s := <-f.sampled; s != "from the relay" {
		t.Errorf("the server got %q", s)
	}
}

// TestCallRawHTTPTooLarge: an answer over maxMessageBytes is ErrTooLarge,
// as a JSON body and as a stream event; the session stays up.
func TestCallRawHTTPTooLarge(t *testing.T) {
	for _, mode := range answerModes() {
		t.Run(mode.name, func(t *testing.T) {
			checkLeaks(t)
			opts := fastOptions()
			opts.MaxMessageBytes = 8 << 10
			u, _ := startRawHTTP(t, mode.json, false, opts)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"big","arguments":{"n":20000}}`))
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("CallRaw = %v, want ErrTooLarge", err)
			}
			if got, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"big","arguments":{"n":100}}`)); err != nil || len(got) < 100 {
				t.Fatalf("after: %s, %v", got, err)
			}
		})
	}
}

// cancelledNotice waits for the notifications/cancelled of a raw call.
func cancelledNotice(t *testing.T, f *rawHTTPFixture) rawPost {
	t.Helper()
	var found rawPost
	waitFor(t, 5*time.Second, "notifications/cancelled", func() bool {
		for _, p := range f.rawPosts() {
			if bytes.Contains(p.body, []byte(`"notifications/cancelled"`)) {
				found = p
				return true
			}
		}
		return false
	})
	return found
}

// TestCallRawHTTPCancel: when the caller's ctx ends, or the call times
// out, the upstream is sent notifications/cancelled for the raw id (with
// the session's headers) and its handler ends.
func TestCallRawHTTPCancel(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // the call timeout; 0: the caller cancels
		want    error
	}{
		{name: "caller cancels", want: context.Canceled},
		{name: "call timeout", timeout: 100 * time.Millisecond, want: ErrTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			opts := fastOptions()
			if tt.timeout > 0 {
				opts.CallTimeout = tt.timeout
			}
			u, f := startRawHTTP(t, false, false, opts)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"slow"}`))
				done <- err
			}()
			if tt.timeout == 0 {
				waitFor(t, 5*time.Second, "the call to be sent", func() bool { return len(f.rawPosts()) > 0 })
				cancel()
			}
			if err := <-done; !errors.Is(err, tt.want) {
				t.Fatalf("CallRaw = %v, want %v", err, tt.want)
			}
			p := cancelledNotice(t, f)
			id := string(bytes.TrimSpace(resultIDOf(t, f.rawPosts()[0].body)))
			if !bytes.Contains(p.body, []byte(`"requestId":`+id)) {
				t.Errorf("cancellation %s does not name %s", p.body, id)
			}
			if p.header.Get("Mcp-Session-Id") == "" {
				t.Error("cancellation without the session id")
			}
			<-f.slowEnded
		})
	}
}

// resultIDOf returns the raw id of a request body.
func resultIDOf(t *testing.T, body []byte) []byte {
	env, err := envelope.Scan(body)
	if err != nil {
		t.Fatalf("request %s: %v", body, err)
	}
	return env.ID.In(body)
}

// TestCallRawHTTPSessionLost: a 404 to the session id is ErrUnavailable,
// and the Upstream reconnects with a new session that takes raw calls.
func TestCallRawHTTPSessionLost(t *testing.T) {
	checkLeaks(t)
	u, f := startRawHTTP(t, false, false, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"echo"}`)); err != nil {
		t.Fatal(err)
	}
	old := f.rawPosts()[0].header.Get("Mcp-Session-Id")
	f.mu.Lock()
	f.forgotten = old
	f.mu.Unlock()
	if _, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"echo"}`)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("CallRaw on a lost session = %v, want ErrUnavailable", err)
	}
	waitFor(t, 5*time.Second, "a reconnect", func() bool {
		st := u.Status()
		return st.Restarts > 0 && st.State == StateReady
	})
	got, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"echo","arguments":{"message":"again"}}`))
	if err != nil || !bytes.Contains(got, []byte(`"again"`)) {
		t.Fatalf("after the reconnect: %s, %v", got, err)
	}
	for _, p := range f.rawPosts() {
		if s := p.header.Get("Mcp-Session-Id"); bytes.Contains(p.body, []byte(`"again"`)) && (s == "" || s == old) {
			t.Errorf("session after the reconnect = %q, want a new one", s)
		}
	}
}

// TestCallRawHTTPStateless: a stateless 2026-07-28 upstream takes raw
// calls without a session id, with the Mcp-Method and Mcp-Name headers and
// the per-request _meta that version requires.
func TestCallRawHTTPStateless(t *testing.T) {
	for _, mode := range answerModes() {
		t.Run(mode.name, func(t *testing.T) {
			checkLeaks(t)
			u, f := startRawHTTP(t, mode.json, true, nil)
			if v := u.Catalog().ProtocolVersion; !mcpx.Stateless(v) {
				t.Fatalf("negotiated %q; this test covers the stateless protocol", v)
			}
			if !u.TakesRaw() {
				t.Fatal("TakesRaw = false")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for _, params := range []string{
				`{"name":"echo","arguments":{"message":"plain"}}`,
				`{"_meta":{"progressToken":1},"name":"echo","arguments":{"message":"meta"}}`,
				`{"name":"echo","arguments":{"message":"ours"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18"}}`,
			} {
				got, err := u.CallRaw(ctx, "tools/call", []byte(params))
				if err != nil || !bytes.Contains(got, []byte(`"text":"`)) {
					t.Fatalf("CallRaw(%s) = %s, %v", params, got, err)
				}
			}
			p := f.rawPosts()[0]
			for k, want := range map[string]string{
				"Mcp-Method":           "tools/call",
				"Mcp-Name":             "echo",
				"Mcp-Protocol-Version": u.Catalog().ProtocolVersion,
				"Mcp-Session-Id":       "",
			} {
				if v := p.header.Get(k); v != want {
					t.Errorf("header %s = %q, want %q", k, v, want)
				}
			}
		})
	}
}

// TestCallRawHTTPParamHeaders: a stateless upstream's tool whose
// parameters carry x-mcp-header annotations gets them mirrored into
// Mcp-Param-* headers (Base64 when not plain ASCII), which the server
// checks against the body.
func TestCallRawHTTPParamHeaders(t *testing.T) {
	checkLeaks(t)
	u, f := startRawHTTP(t, true, true, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"region","arguments":{"region":"Zürich ","where":{"zone":7}}}`))
	if err != nil || !bytes.Contains(got, []byte(`"routed"`)) {
		t.Fatalf("CallRaw = %s, %v", got, err)
	}
	p := f.rawPosts()[0]
	if r, z := p.header.Get("Mcp-Param-Region"), p.header.Get("Mcp-Param-Zone"); r != "=?base64?WsO8cmljaCA=?=" || z != "7" {
		t.Errorf("Mcp-Param-Region = %q, Mcp-Param-Zone = %q", r, z)
	}
}

// TestHTTPRawRequest: the request line of a raw call to a stateless
// upstream carries our _meta members, whatever the params hold; Mcp-Name
// is the name or URI.
func TestHTTPRawRequest(t *testing.T) {
	h := &httpRaw{meta: []byte(`"io.modelcontextprotocol/protocolVersion":"V"`)}
	tests := []struct {
		name, params, want, mcpName string
	}{
		{name: "no params", want: `{"_meta":{"io.modelcontextprotocol/protocolVersion":"V"}}`},
		{name: "empty", params: `{}`, want: `{"_meta":{"io.modelcontextprotocol/protocolVersion":"V"}}`},
		{name: "no meta", params: `{"name":"a"}`, want: `{"_meta":{"io.modelcontextprotocol/protocolVersion":"V"},"name":"a"}`, mcpName: "a"},
		{name: "meta", params: `{"uri":"f:/x","_meta":{"k":1}}`, want: `{"uri":"f:/x","_meta":{"io.modelcontextprotocol/protocolVersion":"V","k":1}}`, mcpName: "f:/x"},
		{name: "empty meta", params: `{"name":"a","_meta":{ }}`, want: `{"name":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"V" }}`, mcpName: "a"},
		{name: "ours replaced", params: `{"name":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"old","k":1}}`,
			want: `{"_meta":{"io.modelcontextprotocol/protocolVersion":"V","k":1},"name":"a"}`, mcpName: "a"},
		{name: "not simple", params: `{"name":"a","name":"b"}`, want: `{"_meta":{"io.modelcontextprotocol/protocolVersion":"V"},"name":"b"}`, mcpName: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var params []byte
			if tt.params != "" {
				params = []byte(tt.params)
			}
			line, name, err := appendRequest(nil, 3, "tools/call", params, h.meta)
			want := `{"jsonrpc":"2.0","id":"manifold-3","method":"tools/call","params":` + tt.want + `}`
			if err != nil || string(line) != want || name != tt.mcpName {
				t.Errorf("appendRequest = %s, %q, %v\nwant %s, %q", line, name, err, want, tt.mcpName)
			}
		})
	}
}

// TestCallRawHTTPStatus: an HTTP error answer that is no JSON-RPC message
// is an error naming the status, the URL's secrets redacted.
func TestCallRawHTTPStatus(t *testing.T) {
	checkLeaks(t)
	u, f := startRawHTTP(t, true, false, nil)
	f.mu.Lock()
	inner := f.next
	f.next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Method") == "" && strings.Contains(r.Header.Get("Accept"), "json") {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"manifold-`)) {
				http.Error(w, "nope", http.StatusBadGateway)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		inner.ServeHTTP(w, r)
	})
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"echo"}`))
	if err == nil || !strings.Contains(err.Error(), "HTTP 502 Bad Gateway") || errors.Is(err, ErrUnavailable) {
		t.Fatalf("CallRaw = %v, want an error naming HTTP 502", err)
	}
}

// TestCallRawSSEUnsupported: legacy SSE upstreams take no raw calls.
func TestCallRawSSEUnsupported(t *testing.T) {
	checkLeaks(t)
	srv := startHTTPServer(t, mcpHandler("sse", "web"), false)
	u := startUpstream(t, config.Server{Name: "web", Type: "sse", URL: srv.URL + "/sse"}, fastOptions())
	waitReady(t, u, 5*time.Second)
	if u.TakesRaw() {
		t.Error("TakesRaw = true for an sse upstream")
	}
	if _, err := u.CallRaw(context.Background(), "tools/call", []byte(`{"name":"echo"}`)); !errors.Is(err, ErrRawUnsupported) {
		t.Errorf("CallRaw = %v, want ErrRawUnsupported", err)
	}
}

// TestHeaderValue: the spec's encoding examples.
func TestHeaderValue(t *testing.T) {
	tests := []struct{ in, want string }{
		{in: "us-west1", want: "us-west1"},
		{in: "Hello, 世界", want: "=?base64?SGVsbG8sIOS4lueVjA==?="},
		{in: " padded ", want: "=?base64?IHBhZGRlZCA=?="},
		{in: "line1\nline2", want: "=?base64?bGluZTEKbGluZTI=?="},
		{in: "=?base64?literal?=", want: "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
		{in: "file:///a b", want: "file:///a b"},
		{in: "", want: ""},
	}
	for _, tt := range tests {
		if got := headerValue(tt.in); got != tt.want {
			t.Errorf("headerValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestCallRawHTTPResumesItsStream: an upstream before 2026-07-28 that ends
// a raw call's answer stream before the answer, having named its events,
// gets the call back with Last-Event-ID after the retry interval it set,
// and the answer on the resumed stream is the call's.
func TestCallRawHTTPResumesItsStream(t *testing.T) {
	checkLeaks(t)
	u, f := startRawHTTP(t, false, false, nil)
	var (
		mu      sync.Mutex
		id      []byte
		ended   time.Time
		resumed time.Duration
		lastID  string
	)
	f.mu.Lock()
	inner := f.next
	f.next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"manifold-`)) && bytes.Contains(body, []byte(`"tools/call"`)) {
				mu.Lock()
				id = resultIDOf(t, body)
				ended = time.Now()
				mu.Unlock()
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "id: s_1\nretry: 200\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n")
				return // the stream ends before the answer
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "":
			mu.Lock()
			resumed, lastID = time.Since(ended), r.Header.Get("Last-Event-ID")
			answer := `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[],"resumed":true}}`
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "id: s_2\ndata: "+answer+"\n\n")
			return
		}
		inner.ServeHTTP(w, r)
	})
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"echo"}`))
	if err != nil || string(res) != `{"content":[],"resumed":true}` {
		t.Fatalf("CallRaw = %s, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if lastID != "s_1" || resumed < 200*time.Millisecond {
		t.Errorf("resumed after %v with Last-Event-ID %q, want after the 200ms retry with s_1", resumed, lastID)
	}
}

// TestCallRawHTTPReusesItsConnection: raw calls answered as event streams
// read each stream to its end, so that one connection serves them all
// rather than one connection per call.
func TestCallRawHTTPReusesItsConnection(t *testing.T) {
	checkLeaks(t)
	var mu sync.Mutex
	conns := map[string]bool{}
	u, _ := startRawHTTP(t, false, false, nil, func(next http.Handler) http.Handler {
		return rawCallsTo(t, next, func(w http.ResponseWriter, r *http.Request, body []byte) {
			mu.Lock()
			conns[r.RemoteAddr] = true
			mu.Unlock()
			// The answer, then the stream's end a little later, as a
			// server finishing its handler does.
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `event: message`+"\n"+`data: {"jsonrpc":"2.0","id":`+string(resultIDOf(t, body))+`,"result":{"content":[]}}`+"\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(5 * time.Millisecond)
		})
	})
	mu.Lock()
	clear(conns) // those of the handshake
	mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 20 {
		if _, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"echo","arguments":{"message":"m"}}`)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) > 2 {
		t.Errorf("20 calls in a row used %d connections", len(conns))
	}
}

// TestCallRawHTTPUsesH1Client: on Linux the live connection's raw calls
// to a plain-http upstream go through h1client (on the caller's
// goroutine), under the session client's layers.
func TestCallRawHTTPUsesH1Client(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("h1client serves raw calls on Linux only")
	}
	u, _ := startRawHTTP(t, true, false, nil)
	u.mu.Lock()
	hr, _ := u.raw.(*httpRaw)
	u.mu.Unlock()
	if hr == nil {
		t.Fatal("the live connection takes no raw HTTP calls")
	}
	bottom := hr.client.Transport.(*limitTransport).base.(*headerTransport).base
	if _, ok := bottom.(*h1client.Transport); !ok {
		t.Errorf("raw calls go through %T, want *h1client.Transport", bottom)
	}
	if _, err := u.CallRaw(context.Background(), "tools/call", []byte(`{"name":"echo","arguments":{"message":"m"}}`)); err != nil {
		t.Fatal(err)
	}
}

// rawCallsTo is a handler that passes raw calls (POSTs with the gateway's
// string ids), their body read, to serve, and every other request to next.
func rawCallsTo(t *testing.T, next http.Handler, serve func(w http.ResponseWriter, r *http.Request, body []byte)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"manifold-`)) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return
		}
		serve(w, r, body)
	})
}

// TestCallRawHTTPStreamLeftOpen: a server that keeps a call's answer
// stream open after the response does not hold the call: the drain of the
// stream is bounded (the sweep ends it), the call returns its result, and
// the next call works too (the held connection is not reused).
func TestCallRawHTTPStreamLeftOpen(t *testing.T) {
	checkLeaks(t)
	u, _ := startRawHTTP(t, false, false, nil, func(next http.Handler) http.Handler {
		return rawCallsTo(t, next, func(w http.ResponseWriter, r *http.Request, body []byte) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"jsonrpc":"2.0","id":`+string(resultIDOf(t, body))+`,"result":{"content":[]}}`+"\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done() // the stream stays open until the client leaves
		})
	})
	for i := range 2 {
		// Far below the call timeout: only the drain's bound can end it.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"echo"}`))
		ended := ctx.Err()
		cancel()
		if err != nil || string(res) != `{"content":[]}` {
			t.Fatalf("call %d = %s, %v", i, res, err)
		}
		if ended != nil {
			t.Fatalf("call %d returned only when its context ended: the drain was not bounded", i)
		}
	}
}

// TestTypedCallsGoRaw: the typed calls (CallTool, GetPrompt,
// ReadResource) go as raw calls when the connection takes them, so the
// notifications of their streams are relayed before they return, however
// slow the relay: on the SDK's own connection they would reach its
// handlers after the answer. Without a progress token none are sent.
func TestTypedCallsGoRaw(t *testing.T) {
	checkLeaks(t)
	relay := &noteLog{delay: 20 * time.Millisecond}
	opts := fastOptions()
	opts.Relay = relay
	u, f := startRawHTTP(t, false, false, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params := &mcp.CallToolParams{Name: "progress"}
	params.SetProgressToken("typed-1")
	res, err := u.CallTool(ctx, params)
	if err != nil || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "done" {
		t.Fatalf("CallTool = %+v, %v", res, err)
	}
	if seen := relay.seen(); !slices.Equal(seen, []string{"progress 1"}) {
		t.Errorf("relayed by the time CallTool returned: %q, want the progress", seen)
	}
	posts := f.rawPosts()
	if len(posts) != 1 || !bytes.Contains(posts[0].body, []byte(`"arguments":{}`)) {
		t.Errorf("raw POSTs: %d, want the call's, with empty arguments (not null)", len(posts))
	}
	if _, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "nope"}); !strings.Contains(fmt.Sprint(err), "nope") {
		t.Errorf("unknown tool: %v, want the server's error naming it", err)
	}
	// Without params the SDK sends the call, filling them in.
	before := len(f.rawPosts())
	if _, err := u.CallTool(ctx, nil); err == nil {
		t.Error("a call of no tool succeeded")
	}
	if n := len(f.rawPosts()); n != before {
		t.Errorf("a call without params went raw (%d raw POSTs, want %d)", n, before)
	}
}
