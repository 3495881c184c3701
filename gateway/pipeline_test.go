package gateway

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPipelineStagesInOrder: the call pipeline's stages, in the order the
// docs show them; the table in pipeline.go's comment and the calls in
// serveCall and roundTrip follow the same order.
func TestPipelineStagesInOrder(t *testing.T) {
	want := []string{"observe", "authenticate", "resolve", "policy", "rate limit", "upstream session", "pre-hooks", "forward", "rewrite", "post-hooks"}
	if diff := cmp.Diff(want, callStages[:]); diff != "" {
		t.Fatalf("callStages (-want +got):\n%s", diff)
	}

	src, err := os.ReadFile("pipeline.go")
	if err != nil {
		t.Fatal(err)
	}
	var table []string // the first column of the comment's table
	for _, line := range strings.Split(string(src), "\n") {
		if cell, ok := strings.CutPrefix(line, "//\t"); ok && cell != "" && cell[0] != ' ' {
			name, _, _ := strings.Cut(cell, "  ")
			table = append(table, name)
		}
	}
	if diff := cmp.Diff(want, table); diff != "" {
		t.Errorf("the table in pipeline.go's comment (-want +got):\n%s", diff)
	}

	// The function each stage after observe runs, as serveCall and
	// roundTrip call them.
	stageFuncs := map[string]string{
		"authenticate": "authenticate", "resolve": "resolve", "policy": "permit", "rate limit": "rateLimit",
		"upstream session": "upstreamSession", "forward": "forward", "rewrite": "rewrite",
		"pre-hooks": "pluginPre", "post-hooks": "pluginPost",
	}
	f, err := parser.ParseFile(token.NewFileSet(), "pipeline.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string][]string{}
	for _, fn := range []string{"serveCall", "roundTrip"} {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn {
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					if c, ok := n.(*ast.CallExpr); ok {
						switch fun := c.Fun.(type) {
						case *ast.Ident:
							calls[fn] = append(calls[fn], fun.Name)
						case *ast.SelectorExpr:
							calls[fn] = append(calls[fn], fun.Sel.Name)
						case *ast.IndexListExpr: // pluginPre[Q, R]
							if id, ok := fun.X.(*ast.Ident); ok {
								calls[fn] = append(calls[fn], id.Name)
							}
						}
					}
					return true
				})
			}
		}
	}
	// forward runs roundTrip: its calls stand where forward is called.
	called := calls["serveCall"]
	if i := slices.Index(called, "forward"); i >= 0 {
		called = slices.Insert(called, i+1, calls["roundTrip"]...)
	}
	at := -1
	for _, stage := range want[1:] {
		i := slices.Index(called, stageFuncs[stage])
		if i < 0 || i < at {
			t.Errorf("stage %s (%s) is not called in order: calls %v", stage, stageFuncs[stage], called)
		}
		at = i
	}
}

// TestReloadMidCallAuditsUnderTheDecidingSnapshot: a reload while a call is
// at its upstream does not reach the call: its audit record names the
// principal and groups of the snapshot whose policy decided it, not those
// of the snapshot applied meanwhile.
func TestReloadMidCallAuditsUnderTheDecidingSnapshot(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "alpha"}, nil)
	srv.AddTool(&mcp.Tool{Name: "slow", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	rc := &reloadingConfig{tool: "alpha__slow", rule: "dev-slow"}
	sink := newAuditSink(t, config.ArgumentsFull)
	h := newHarnessOpts(t, &Options{Audit: sink.log, LoadConfig: rc.load}, rc.first, upstreamSpec{name: "alpha", server: srv})

	done := make(chan error, 1)
	go func() {
		_, err := h.client.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha__slow", Arguments: map[string]any{}})
		done <- err
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the call never reached the upstream")
	}
	rc.moveToOps()
	if res, err := h.gw.Reload(context.Background(), TriggerSignal); err != nil || res.Result != ReloadApplied {
		t.Fatalf("Reload: %+v, %v", res, err)
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the call allowed under version 1 failed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not return")
	}

	var got map[string]any
	for _, r := range sink.records(t) {
		if r["name"] == "alpha__slow" {
			got = r
		}
	}
	if got == nil {
		t.Fatal("no audit record of the call")
	}
	want := map[string]any{"decision": "allow", "rule": "dev-slow", "principal": "local", "groups": []any{"dev"}}
	for k, v := range want {
		if !cmp.Equal(got[k], v) {
			t.Errorf("record %s = %v, want %v (the record: %v)", k, got[k], v, got)
		}
	}
}

// TestRawPipelineStagesInOrder: the raw path (rawcall.go) calls the same
// stage functions as serveCall, in the same order, and its own forward
// and rewrite after them.
func TestRawPipelineStagesInOrder(t *testing.T) {
	want := []string{"authenticate", "resolve", "permit", "upstreamSession", "forwardRaw"}
	var called []string
	for _, file := range []string{"rawcall.go", "rawforward.go"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || (fd.Name.Name != "rawStages" && fd.Name.Name != "forwardRaw") {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
						called = append(called, sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
	at := -1
	for _, stage := range append(want, "rewriteRaw") {
		i := slices.Index(called, stage)
		if i < 0 || i < at {
			t.Errorf("stage %s is not called in order: calls %v", stage, called)
		}
		at = i
	}
}

// reloadingConfig is the config of the reload-mid-call tests, in two
// versions: in the first, the local principal is in group dev, which a
// rule allows tool; moveToOps makes the next load the second, where
// it is in group ops.
type reloadingConfig struct {
	tool, rule string
	base       *config.Config
	next       chan *config.Config
}

func (rc *reloadingConfig) version(c *config.Config, group, hash string) {
	c.Source, c.Hash = "pipeline.yaml", hash
	c.Auth.Local.Name = "local"
	c.Auth.Local.Groups = []string{group}
	c.Policy = &config.Policy{Default: config.Deny, Rules: []config.Rule{
		{Name: rc.rule, Effect: config.Allow, Match: config.Match{Tools: []string{rc.tool}}, Principals: []string{"group:dev"}},
	}}
}

// first edits c into the first version, and keeps it for the loads.
func (rc *reloadingConfig) first(c *config.Config) {
	rc.version(c, "dev", "sha256:1")
	cp := *c
	rc.base = &cp
	rc.next = make(chan *config.Config, 1)
}

// moveToOps makes the next load return the second version.
func (rc *reloadingConfig) moveToOps() {
	v2 := *rc.base
	rc.version(&v2, "ops", "sha256:2")
	rc.next <- &v2
}

// load is the gateway's LoadConfig.
func (rc *reloadingConfig) load() (*config.Config, error) {
	select {
	case c := <-rc.next:
		return c, nil
	default:
		return rc.base, nil
	}
}
