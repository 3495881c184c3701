package upstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// methodCounter counts the requests and notifications a server receives or sends, by method.
type methodCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *methodCounter) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		c.mu.Lock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		c.n[method]++
		c.mu.Unlock()
		return next(ctx, method, req)
	}
}

func (c *methodCounter) get(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

func noopTool(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{}, nil
}

func objectTool(name string) *mcp.Tool {
	return &mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}
}

// pagedServer returns a server with n tools, prompts, resources and
// templates, listing three per page.
func pagedServer(n int) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "paged", Version: "v1"}, &mcp.ServerOptions{
		PageSize:     3,
		Instructions: "paged server",
	})
	for i := range n {
		s.AddTool(objectTool(fmt.Sprintf("tool%02d", i)), noopTool)
		s.AddPrompt(&mcp.Prompt{Name: fmt.Sprintf("prompt%02d", i)}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{}, nil
		})
		s.AddResource(&mcp.Resource{Name: fmt.Sprintf("res%02d", i), URI: fmt.Sprintf("test://res/%02d", i)},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{}, nil
			})
		s.AddResourceTemplate(&mcp.ResourceTemplate{Name: fmt.Sprintf("tmpl%02d", i), URITemplate: fmt.Sprintf("test://tmpl%02d/{id}", i)},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{}, nil
			})
	}
	return s
}

func TestCatalogPagination(t *testing.T) {
	checkLeaks(t)
	const n = 10
	srv := pagedServer(n)
	var counter methodCounter
	srv.AddReceivingMiddleware(counter.middleware)
	mem := newMemServer(t, srv)
	u := startUpstream(t, config.Server{Name: "paged"}, mem.options())
	waitReady(t, u, 5*time.Second)

	cat := u.Catalog()
	var got, want struct{ Tools, Prompts, Resources, Templates []string }
	for i := range n {
		want.Tools = append(want.Tools, fmt.Sprintf("tool%02d", i))
		want.Prompts = append(want.Prompts, fmt.Sprintf("prompt%02d", i))
		want.Resources = append(want.Resources, fmt.Sprintf("res%02d", i))
		want.Templates = append(want.Templates, fmt.Sprintf("tmpl%02d", i))
	}
	for _, x := range cat.Tools {
		got.Tools = append(got.Tools, x.Name)
	}
	for _, x := range cat.Prompts {
		got.Prompts = append(got.Prompts, x.Name)
	}
	for _, x := range cat.Resources {
		got.Resources = append(got.Resources, x.Name)
	}
	for _, x := range cat.Templates {
		got.Templates = append(got.Templates, x.Name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("catalog (-want +got):\n%s", diff)
	}
	if cat.Instructions != "paged server" || cat.ServerInfo.Name != "paged" || cat.Capabilities == nil {
		t.Errorf("catalog metadata: instructions %q, server info %+v, capabilities %+v", cat.Instructions, cat.ServerInfo, cat.Capabilities)
	}
	// 10 items at 3 per page is 4 pages of each list.
	for _, m := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
		if c := counter.get(m); c != 4 {
			t.Errorf("%s called %d times, want 4 (one per page)", m, c)
		}
	}
}

// TestCatalogCapabilities checks that only advertised lists are fetched.
func TestCatalogCapabilities(t *testing.T) {
	checkLeaks(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "toolsonly", Version: "v1"}, nil)
	srv.AddTool(objectTool("only"), noopTool)
	var counter methodCounter
	srv.AddReceivingMiddleware(counter.middleware)
	mem := newMemServer(t, srv)
	u := startUpstream(t, config.Server{Name: "toolsonly"}, mem.options())
	waitReady(t, u, 5*time.Second)

	cat := u.Catalog()
	if len(cat.Tools) != 1 || len(cat.Prompts) != 0 || len(cat.Resources) != 0 || len(cat.Templates) != 0 {
		t.Errorf("catalog = %d tools, %d prompts, %d resources, %d templates; want 1, 0, 0, 0",
			len(cat.Tools), len(cat.Prompts), len(cat.Resources), len(cat.Templates))
	}
	for _, m := range []string{"prompts/list", "resources/list", "resources/templates/list"} {
		if c := counter.get(m); c != 0 {
			t.Errorf("%s called %d times for a server without that capability", m, c)
		}
	}
}

func TestListAll(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name    string
		pages   map[string]page // by cursor
		cancel  bool            // ctx cancelled before listing
		want    []int
		wantErr string
		wantIs  error
	}{
		{
			name:  "single page",
			pages: map[string]page{"": {items: []int{1, 2}}},
			want:  []int{1, 2},
		},
		{
			name:  "empty",
			pages: map[string]page{"": {}},
			want:  nil,
		},
		{
			name: "three pages",
			pages: map[string]page{
				"":  {items: []int{1}, next: "a"},
				"a": {items: []int{2, 3}, next: "b"},
				"b": {items: []int{4}},
			},
			want: []int{1, 2, 3, 4},
		},
		{
			name: "cursor repeated at once",
			pages: map[string]page{
				"":  {items: []int{1}, next: "a"},
				"a": {items: []int{2}, next: "a"},
			},
			wantErr: `things/list: server repeated cursor "a"`,
		},
		{
			name: "cursor cycle",
			pages: map[string]page{
				"":  {items: []int{1}, next: "a"},
				"a": {items: []int{2}, next: "b"},
				"b": {items: []int{3}, next: "a"},
			},
			wantErr: `repeated cursor "a"`,
		},
		{
			name: "page error",
			pages: map[string]page{
				"":  {items: []int{1}, next: "a"},
				"a": {err: errBoom},
			},
			wantErr: "things/list: boom",
			wantIs:  errBoom,
		},
		{
			name:    "cancelled",
			pages:   map[string]page{"": {items: []int{1}, next: "a"}, "a": {items: []int{2}}},
			cancel:  true,
			wantIs:  context.Canceled,
			wantErr: "canceled",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				cancel()
			}
			calls := 0
			got, err := listAll(ctx, "things/list", func(cursor string) ([]int, string, error) {
				calls++
				if calls > 100 {
					t.Fatal("listAll keeps asking for pages")
				}
				p, ok := tt.pages[cursor]
				if !ok {
					t.Fatalf("unexpected cursor %q", cursor)
				}
				return p.items, p.next, p.err
			})
			if tt.wantErr != "" || tt.wantIs != nil {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("err = %v, want errors.Is %v", err, tt.wantIs)
				}
				if got != nil {
					t.Errorf("items = %v on error, want nil", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("items (-want +got):\n%s", diff)
			}
		})
	}
}

type page struct {
	items []int
	next  string
	err   error
}

func TestListAllMaxPages(t *testing.T) {
	calls := 0
	_, err := listAll(context.Background(), "things/list", func(cursor string) ([]int, string, error) {
		calls++
		return []int{calls}, "c" + strconv.Itoa(calls), nil // always a new cursor
	})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d pages", maxPages)) {
		t.Errorf("err = %v, want a page limit error", err)
	}
	if calls != maxPages {
		t.Errorf("fetched %d pages, want %d", calls, maxPages)
	}
}

// TestListChanged: tools added or removed on the server reach the catalog
// after a list_changed notification, and a burst of notifications causes
// few re-listings.
func TestListChanged(t *testing.T) {
	checkLeaks(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "live", Version: "v1"}, &mcp.ServerOptions{PageSize: 3})
	srv.AddTool(objectTool("first"), noopTool)
	srv.AddPrompt(&mcp.Prompt{Name: "p"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	var received, sent methodCounter
	srv.AddReceivingMiddleware(received.middleware)
	srv.AddSendingMiddleware(sent.middleware)
	mem := newMemServer(t, srv)

	var changes atomic.Int32
	opts := mem.options()
	opts.OnChange = func(*Upstream) { changes.Add(1) }
	u := startUpstream(t, config.Server{Name: "live"}, opts)
	waitReady(t, u, 5*time.Second)

	toolNames := func() []string {
		var names []string
		for _, tool := range u.Catalog().Tools {
			names = append(names, tool.Name)
		}
		return names
	}
	waitTools := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		want = slices.Sorted(slices.Values(want)) // the SDK lists by name
		for !cmp.Equal(toolNames(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("catalog tools = %v after 2s, want %v", toolNames(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	prompts := u.Catalog().Prompts

	before := changes.Load()
	srv.AddTool(objectTool("second"), noopTool)
	waitTools("first", "second")
	if changes.Load() == before {
		t.Error("OnChange not called after the tools changed")
	}
	srv.RemoveTools("first")
	waitTools("second")
	if got := u.Catalog().Prompts; len(got) != 1 || got[0] != prompts[0] {
		t.Errorf("prompts = %v after a tools-only refresh, want the previous list kept", got)
	}

	// A burst: 20 changes 20ms apart, each past the SDK's own 10ms batching,
	// so the upstream sees a notification for most of them.
	listsBefore := received.get("tools/list")
	notesBefore := sent.get("notifications/tools/list_changed")
	var want []string
	want = append(want, "second")
	for i := range 20 {
		name := fmt.Sprintf("burst%02d", i)
		srv.AddTool(objectTool(name), noopTool)
		want = append(want, name)
		time.Sleep(20 * time.Millisecond)
	}
	waitTools(want...)
	notes := sent.get("notifications/tools/list_changed") - notesBefore
	// Let a trailing refresh, if any, happen before counting.
	time.Sleep(3 * refreshDelay)
	lists := received.get("tools/list") - listsBefore
	t.Logf("%d list_changed notifications caused %d tools/list requests", notes, lists)
	if notes < 10 {
		t.Errorf("only %d notifications sent; the burst did not test the debounce", notes)
	}
	// Each refresh of 21 tools at 3 per page is 7 requests.
	if refreshes := (lists + 6) / 7; refreshes >= 5 {
		t.Errorf("%d refreshes (%d tools/list requests) for a burst of 20 changes, want fewer than 5", refreshes, lists)
	}
}

// TestReconnectInMemory: the upstream reconnects after the server dropped
// the session, and keeps following changes on the new connection.
func TestReconnectInMemory(t *testing.T) {
	checkLeaks(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "flaky", Version: "v1"}, nil)
	srv.AddTool(objectTool("a"), noopTool)
	mem := newMemServer(t, srv)
	u := startUpstream(t, config.Server{Name: "flaky"}, mem.options())
	waitReady(t, u, 5*time.Second)

	mem.dropAll()
	waitFor(t, 5*time.Second, "a reconnect", func() bool {
		st := u.Status()
		return st.State == StateReady && st.Restarts >= 1 && mem.dialCount() >= 2
	})
	srv.AddTool(objectTool("b"), noopTool)
	waitFor(t, 2*time.Second, "tool b in the catalog", func() bool { return len(u.Catalog().Tools) == 2 })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := u.CallTool(ctx, &mcp.CallToolParams{Name: "b"}); err != nil {
		t.Errorf("call after reconnect: %v", err)
	}
}

// TestTransportError: Options.Transport failing is retried like any dial error.
func TestTransportError(t *testing.T) {
	checkLeaks(t)
	opts := fastOptions()
	opts.Transport = func() (mcp.Transport, error) { return nil, errors.New("no transport today") }
	u := startUpstream(t, config.Server{Name: "notransport"}, opts)
	waitFor(t, 5*time.Second, "retries", func() bool { return u.Status().Restarts >= 2 })
	var st Status
	waitFor(t, 5*time.Second, "a failed state", func() bool {
		st = u.Status()
		return st.State == StateFailed
	})
	if !strings.Contains(st.Error, "no transport today") {
		t.Errorf("status error = %q", st.Error)
	}
}
