package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/mcpx"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// teeWriter records the lines written through it that contain match.
type teeWriter struct {
	io.WriteCloser
	match string
	mu    sync.Mutex
	lines [][]byte
}

func (w *teeWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(w.match)) {
		w.mu.Lock()
		w.lines = append(w.lines, bytes.Clone(p))
		w.mu.Unlock()
	}
	return w.WriteCloser.Write(p)
}

// TestRawCallMetaMatchesTheSDK: a raw call to a 2026-07-28 stdio upstream
// carries the per-request _meta members the SDK puts on its own requests
// on the same connection (the client's own keys kept), and an older
// upstream gets none from either.
func TestRawCallMetaMatchesTheSDK(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			checkLeaks(t)
			opts := fastOptions()
			opts.ClientInfo = &mcp.Implementation{Name: "manifold", Version: "v9"}
			opts.Capabilities = &mcp.ClientCapabilities{
				Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}},
			}
			mcpx.SetRootsV2(opts.Capabilities, &mcpx.RootCapabilities{ListChanged: true})
			mcpx.SetSampling(opts.Capabilities, &mcpx.SamplingCapabilities{})
			tee := &teeWriter{match: `"tools/call"`}
			opts.Pipe = func() (io.ReadCloser, io.WriteCloser, error) {
				srv := mcp.NewServer(&mcp.Implementation{Name: "fake"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{version}})
				mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{}, nil, nil
				})
				_, pipe := newFakeStdio(t, srv, nil)
				r, w, err := pipe()
				tee.WriteCloser = w
				return r, tee, err
			}
			u := startUpstream(t, config.Server{Name: "meta", Type: "stdio"}, opts)
			waitReady(t, u, 10*time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "echo"}); err != nil {
				t.Fatal(err)
			}
			if _, err := u.CallRaw(ctx, "tools/call", []byte(`{"name":"echo","_meta":{"progressToken":"p"}}`)); err != nil {
				t.Fatal(err)
			}
			tee.mu.Lock()
			defer tee.mu.Unlock()
			if len(tee.lines) != 2 {
				t.Fatalf("saw %d tools/call lines, want 2", len(tee.lines))
			}
			var metas [2]map[string]any
			for i, line := range tee.lines {
				var sent struct {
					Params struct {
						Meta map[string]any `json:"_meta"`
					} `json:"params"`
				}
				if err := json.Unmarshal(line, &sent); err != nil {
					t.Fatal(err)
				}
				metas[i] = map[string]any{}
				for k, v := range sent.Params.Meta {
					if strings.HasPrefix(k, "io.modelcontextprotocol/") {
						metas[i][k] = v
					}
				}
			}
			if !bytes.Contains(tee.lines[1], []byte(`"progressToken":"p"`)) {
				t.Errorf("the raw call lost its own _meta: %s", tee.lines[1])
			}
			sdk, raw := metas[0], metas[1]
			if version < "2026-07-28" {
				if len(raw) != 0 || len(sdk) != 0 {
					t.Fatalf("raw call sent %v, the SDK %v; want neither", raw, sdk)
				}
				return
			}
			if len(sdk) == 0 || !reflect.DeepEqual(raw, sdk) {
				t.Fatalf("the raw call sent %v\nthe SDK sent      %v", raw, sdk)
			}
		})
	}
}
