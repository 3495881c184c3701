package upstream

//lint:file-ignore SA1019 the sampling test drives the deprecated sampling API that the gateway relays

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/envelope"
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
	mcp.AddTool(srv, &mcp.Tool{Name: "big"}, func(_ context.Context, _ *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
		return text(strings.Repeat("x", in.N)), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ args) (*mcp.CallToolResult, any, error) {
		<-ctx.Done()
		f.slowEnded <- struct{}{}
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
	rec := &recordingWriter{ResponseWriter: w}
	if gone {
		http.Error(rec, "session not found", http.StatusNotFound)
	} else {
		f.next.ServeHTTP(rec, r)
	}
	f.mu.Lock()
	f.posts = append(f.posts, rawPost{header: r.Header.Clone(), body: body, answer: rec.buf.Bytes()})
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
// or stateless) and an http Upstream over it.
func startRawHTTP(t testing.TB, jsonAnswers, stateless bool, opts *Options) (*Upstream, *rawHTTPFixture) {
	t.Helper()
	f := &rawHTTPFixture{slowEnded: make(chan struct{}, 4), sampled: make(chan string, 4)}
	srv := f.server()
	f.next = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{JSONResponse: jsonAnswers, Stateless: stateless})
	hs := httptest.NewServer(f)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
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
			posts := f.rawPosts()
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
