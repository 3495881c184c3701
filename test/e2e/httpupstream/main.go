// Command httpupstream is the e2e tests' HTTP upstream: an MCP server with
// the tools echo and big (the fixture's payload tool: {"bytes": n} answers
// n bytes of text), built
// without the race detector so that a result of tens of MiB is quick. It
// listens on 127.0.0.1, prints its base URL ("http://127.0.0.1:PORT") on
// stdout, and serves until SIGTERM:
//
//	/mcp       streamable HTTP, answers as SSE streams
//	/json/mcp  streamable HTTP, answers as JSON bodies
//	/sse       the legacy HTTP+SSE transport
//	/cut/mcp   streamable HTTP that drops the connection of every tools/call
//	/tokens    the token query parameters received so far (JSON)
//	/grow/mcp  streamable HTTP, another server: its tool grow adds a tool
//	           grown-N (N = 1, 2, …), whose list_changed reaches every session
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/manifold-mcp/manifold/internal/fixture"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpupstream:", err)
		os.Exit(1)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	srv := &http.Server{Handler: handler()}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "httpupstream:", err)
		os.Exit(1)
	}
}

func handler() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "e2e-http"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Message string `json:"message"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	})
	s.AddTool(&mcp.Tool{Name: "big", InputSchema: fixture.PayloadSchema}, fixture.Payload)
	get := func(*http.Request) *mcp.Server { return s }
	streamable := mcp.NewStreamableHTTPHandler(get, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", streamable)
	mux.Handle("/json/mcp", mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	mux.Handle("/sse", mcp.NewSSEHandler(get, nil))
	mux.HandleFunc("/cut/mcp", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		streamable.ServeHTTP(w, r)
	})
	var (
		mu     sync.Mutex
		tokens = []string{}
	)
	mux.Handle("/grow/mcp", mcp.NewStreamableHTTPHandler(growing(), nil))
	mux.HandleFunc("/tokens", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		json.NewEncoder(w).Encode(tokens)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok := r.URL.Query().Get("token"); tok != "" {
			mu.Lock()
			tokens = append(tokens, tok)
			mu.Unlock()
		}
		mux.ServeHTTP(w, r)
	})
}

// growing returns the getServer of /grow/mcp: one server whose tool grow
// adds a tool to it.
func growing() func(*http.Request) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "e2e-grow"}, nil)
	var (
		mu sync.Mutex
		n  int
	)
	mcp.AddTool(s, &mcp.Tool{Name: "grow"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		mu.Lock()
		n++
		name := fmt.Sprintf("grown-%d", n)
		mu.Unlock()
		mcp.AddTool(s, &mcp.Tool{Name: name}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil, nil
		})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil, nil
	})
	return func(*http.Request) *mcp.Server { return s }
}
