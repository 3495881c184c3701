package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/fixture"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
)

// TestOversizedAnswer: an answer over MaxMessageBytes from an http upstream
// (a JSON body, an SSE stream answering the POST) or a legacy sse upstream
// (the one GET stream) fails that call with ErrTooLarge, naming the server
// and the limit; the session stays up and serves the next calls.
func TestOversizedAnswer(t *testing.T) {
	const limit = 64 << 10
	tests := []struct {
		name, typ, path string
		handler         func(*mcp.Server) http.Handler
	}{
		{name: "http json", typ: "http", path: "/mcp", handler: func(s *mcp.Server) http.Handler {
			return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: true})
		}},
		{name: "http event stream", typ: "http", path: "/mcp", handler: func(s *mcp.Server) http.Handler {
			return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		}},
		{name: "legacy sse", typ: "sse", path: "/sse", handler: func(s *mcp.Server) http.Handler {
			return mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			srv := startHTTPServer(t, tt.handler(fixture.NewServer(nil)), false)
			opts := fastOptions()
			opts.MaxMessageBytes = limit
			u := startUpstream(t, config.Server{Name: "web", Type: tt.typ, URL: srv.URL + tt.path}, opts)
			waitReady(t, u, 10*time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			for _, n := range []int{limit / 2, 1 << 20, 4 * limit} {
				_, err := u.CallTool(ctx, &mcp.CallToolParams{Name: fixture.PayloadTool, Arguments: map[string]any{"bytes": n}})
				if n < limit {
					if err != nil {
						t.Fatalf("payload(%d) under the limit: %v", n, err)
					}
					continue
				}
				want := fmt.Sprintf(`upstream "web": response exceeds maxMessageBytes (%d bytes)`, limit)
				if !errors.Is(err, ErrTooLarge) || err.Error() != want {
					t.Fatalf("payload(%d) = %v, want %q", n, err, want)
				}
				if got, err := echo(ctx, u, "after"); err != nil || got != "after" {
					t.Fatalf("echo after an oversized answer = %q, %v", got, err)
				}
			}
			if st := u.Status(); st.State != StateReady || st.Restarts != 0 {
				t.Errorf("status %+v: the session did not survive", st)
			}
		})
	}
}

// countingBody counts what is read of it.
type countingBody struct {
	r      io.Reader
	read   int
	closed bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func (b *countingBody) Close() error { b.closed = true; return nil }

// cannedTransport answers every request with its status, content type and
// body.
type cannedTransport struct {
	status int
	ctype  string
	length int64
	body   *countingBody
}

func (c cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: c.status, Header: http.Header{"Content-Type": {c.ctype}}, Body: c.body, ContentLength: c.length, Request: req}, nil
}

func sseEvent(data string) string { return "event: message\ndata: " + data + "\n\n" }

// TestLimitTransport: what limitTransport passes on of each kind of
// answer, and how much it reads of an oversized one.
func TestLimitTransport(t *testing.T) {
	const limit = 1000
	big := `{"jsonrpc":"2.0","id":7,"result":{"x":"` + strings.Repeat("y", 100*limit) + `"}}`
	bigLast := `{"jsonrpc":"2.0","result":{"x":"` + strings.Repeat("y", 100*limit) + `"},"id":"s-1"}` // the TypeScript SDK's order
	note := `{"jsonrpc":"2.0","method":"notifications/message","params":{"x":"` + strings.Repeat("y", 100*limit) + `"}}`
	small := `{"jsonrpc":"2.0","id":8,"result":{}}`
	errFor := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32603,"message":"response exceeds maxMessageBytes","data":"manifold:maxMessageBytes"}}`
	}
	request := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}`
	tests := []struct {
		name     string
		method   string
		status   int
		ctype    string
		length   int64
		body     string
		want     string
		maxRead  int // at most this much of the body is read
		wantRead int // at least this much (all of it, when the stream goes on)
	}{
		{name: "json under the limit", method: "POST", status: 200, ctype: "application/json", length: -1, body: small, want: small, wantRead: len(small)},
		{name: "json over, length unknown", method: "POST", status: 200, ctype: "application/json", length: -1, body: big, want: errFor("7"), maxRead: limit + 1 + 512},
		{name: "json over, length known", method: "POST", status: 200, ctype: "application/json", length: int64(len(big)), body: big, want: errFor("7"), maxRead: 0},
		{name: "error body cut", method: "POST", status: 400, ctype: "application/json", length: -1, body: big, want: big[:limit], maxRead: limit},
		{
			name: "event stream of a call", method: "POST", status: 200, ctype: "text/event-stream; charset=utf-8", length: -1,
			body: sseEvent(small) + sseEvent(big) + sseEvent(small), want: sseEvent(small) + sseEvent(errFor("7")), maxRead: len(sseEvent(small)) + limit + sseFraming + 4096,
		},
		{
			name: "GET stream: an answer is replaced, a notification dropped, the stream goes on", method: "GET", status: 200, ctype: "text/event-stream", length: -1,
			body: sseEvent(small) + sseEvent(big) + ": comment\r\nid: 3\r\ndata: " + bigLast[:50] + "\r\ndata: " + bigLast[50:] + "\r\n\r\n" + sseEvent(note) + sseEvent(small),
			want: sseEvent(small) + sseEvent(errFor("7")) + sseEvent(errFor(`"s-1"`)) + sseEvent(small),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &countingBody{r: strings.NewReader(tt.body)}
			lt := &limitTransport{base: cannedTransport{status: tt.status, ctype: tt.ctype, length: tt.length, body: body}, server: "web", max: limit, framing: sseFraming, log: zap.NewNop()}
			req, err := http.NewRequest(tt.method, "http://127.0.0.1:1/mcp", strings.NewReader(request))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := lt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			resp.Body.Close()
			if !jsonEqual(string(got), tt.want) {
				if diff := cmp.Diff(tt.want, string(got)); len(diff) < 2000 {
					t.Errorf("passed on (-want +got):\n%s", diff)
				} else {
					t.Errorf("passed on %d bytes, want %d", len(got), len(tt.want))
				}
			}
			if tt.wantRead == 0 && tt.maxRead == 0 && tt.length < 0 {
				tt.wantRead = len(tt.body)
			}
			if tt.maxRead > 0 && body.read > tt.maxRead || tt.length >= 0 && body.read > tt.maxRead {
				t.Errorf("read %d bytes of %d, want at most %d", body.read, len(tt.body), tt.maxRead)
			}
			if body.read < tt.wantRead {
				t.Errorf("read %d bytes, want %d", body.read, tt.wantRead)
			}
			if !body.closed {
				t.Error("the body was not closed")
			}
		})
	}
}

// jsonEqual compares a and b, where JSON error bodies compare as JSON.
func jsonEqual(a, b string) bool {
	if a == b {
		return true
	}
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && cmp.Equal(x, y)
}

// FuzzIDScanner: in any JSON object, fed in any pieces, idScanner finds
// what encoding/json finds: the top-level "id" (string or number) and
// whether there is a "method".
func FuzzIDScanner(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"result":{"id":2,"x":[{"id":3}]},"jsonrpc":"2.0","id":"a\"b,}"}`,
		`{"method":"m","id":-1.5e3,"params":{"method":"x"}}`,
		`{"id":null}`, `{"id":{"a":1}}`, `{"\u0069d":4}`, `[{"id":1}]`, `{"id" : "x" , "id": 9}`,
	} {
		f.Add([]byte(seed), uint8(3))
	}
	f.Fuzz(func(t *testing.T, msg []byte, chunk uint8) {
		var s idScanner
		step := int(chunk%16) + 1
		for i := 0; i < len(msg); i += step {
			s.write(msg[min(i, len(msg)):min(i+step, len(msg))])
		}
		got := s.response()
		if got != nil && !json.Valid(got) {
			t.Fatalf("id %q is not JSON", got)
		}
		var m map[string]json.RawMessage
		if bytes.Contains(msg, []byte(`\`)) || json.Unmarshal(msg, &m) != nil {
			return // escaped keys are not recognised
		}
		want := m["id"]
		_, method := m["method"]
		if method || len(want) == 0 || !(want[0] == '"' || want[0] == '-' || '0' <= want[0] && want[0] <= '9') || len(want) > maxIDBytes {
			want = nil
		}
		if string(got) != string(want) {
			t.Fatalf("%s: id %q, want %q", msg, got, want)
		}
	})
}

// FuzzSSEBody: on any stream, the SSE limiter ends, passes no event over
// its budget (but the errors replacing them), and passes a stream whose
// events are all within it as it is.
func FuzzSSEBody(f *testing.F) {
	f.Add([]byte(sseEvent(`{"id":1,"result":{}}`)+"data: x\r\n\r\n\n"), uint16(40), true)
	f.Add([]byte("data: {\"id\":2,\"result\":\"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\"}\n\ndata: z"), uint16(8), false)
	f.Add([]byte(":c\rdata:1\r\r\n\r\ndata:{\"result\":1,\"id\":\"q\"}\n\n"), uint16(1), false)
	f.Fuzz(func(t *testing.T, stream []byte, limit uint16, onCall bool) {
		max := int(limit%512) + 1
		lt := &limitTransport{server: "web", max: max, framing: int(limit >> 12), log: zap.NewNop()}
		budget := max + lt.framing
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"ping"}`))
		// A small bufio.Reader so that long lines come in pieces.
		rc := io.NopCloser(bytes.NewReader(stream))
		b := &sseBody{t: lt, req: req, rc: rc, br: bufio.NewReaderSize(rc, 16), onCall: onCall}
		out, err := io.ReadAll(io.LimitReader(b, int64(2*len(stream)+1024)))
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		fits := true
		for _, ev := range splitEvents(stream) {
			if len(ev) > budget {
				fits = false
			}
		}
		if fits && !bytes.Equal(out, stream) {
			t.Fatalf("a stream within the limit changed: %q -> %q", stream, out)
		}
		for _, ev := range splitEvents(out) {
			if len(ev) > budget && !bytes.Contains(ev, tooLargeMarker) { // not a replacement
				t.Fatalf("passed an event of %d bytes, budget %d", len(ev), budget)
			}
		}
	})
}

// splitEvents splits an SSE stream into its events as the SDK reads them:
// lines end at '\n', an event ends at a line of nothing but '\r'.
func splitEvents(stream []byte) [][]byte {
	var events [][]byte
	start := 0
	for i := 0; i < len(stream); {
		j := bytes.IndexByte(stream[i:], '\n')
		if j < 0 {
			break
		}
		line := stream[i : i+j]
		i += j + 1
		if len(bytes.Trim(line, "\r")) == 0 {
			events = append(events, stream[start:i])
			start = i
		}
	}
	if start < len(stream) {
		events = append(events, stream[start:])
	}
	return events
}

// BenchmarkSSEBody: the limiter's cost on the hot path, a stream of 1 KiB
// message events passed on whole.
func BenchmarkSSEBody(b *testing.B) {
	var stream bytes.Buffer
	for range 64 {
		stream.WriteString(sseEvent(`{"jsonrpc":"2.0","id":1,"result":{"x":"` + strings.Repeat("y", 1000) + `"}}`))
	}
	lt := &limitTransport{server: "web", max: 4 << 20, framing: sseFraming, log: zap.NewNop()}
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/mcp", nil)
	r := bytes.NewReader(stream.Bytes())
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(stream.Len()))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(stream.Bytes())
		rc := io.NopCloser(r)
		body := &sseBody{t: lt, req: req, rc: rc, br: bufio.NewReader(rc)}
		if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{body}, buf); err != nil {
			b.Fatal(err)
		}
	}
}
