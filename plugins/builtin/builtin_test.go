package builtin

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/plugins/sdk"
)

func TestRegistryIsWhatConfigAccepts(t *testing.T) {
	var names []string
	for n := range Registry {
		names = append(names, n)
	}
	slices.Sort(names)
	want := slices.Sorted(slices.Values(config.BuiltinPlugins))
	if !slices.Equal(names, want) {
		t.Errorf("Registry has %v; config.BuiltinPlugins %v", names, want)
	}
}

func TestAdapters(t *testing.T) {
	ctx := context.Background()
	r := Redact()
	if err := r.Configure(ctx, json.RawMessage(`{"detectors":["pii"]}`)); err != nil {
		t.Fatal(err)
	}
	res, err := r.ToolPostCall(ctx, &sdk.Context{}, json.RawMessage(`{"content":[{"type":"text","text":"mail a@example.com"}]}`))
	if err != nil || res.Action != sdk.Modify || res.Counts["email"] != 1 || strings.Contains(string(res.Payload), "a@example.com") {
		t.Errorf("redact post = %+v (%s), %v", res, res.Payload, err)
	}
	if res, _ := r.ToolPreCall(ctx, &sdk.Context{}, json.RawMessage(`{"m":"a@example.com"}`)); res.Action != sdk.Continue {
		t.Errorf("redact pre without arguments: true = %+v; want continue", res)
	}
	if err := r.Configure(ctx, json.RawMessage(`{"nope":1}`)); err == nil {
		t.Error("redact accepted an unknown key")
	}

	g := Guard()
	if err := g.Configure(ctx, json.RawMessage(`{"rules":[{"name":"t","tools":["fs__*"],"pathTraversal":true,"message":"no traversal"}]}`)); err != nil {
		t.Fatal(err)
	}
	res, err = g.ToolPreCall(ctx, &sdk.Context{Name: "fs__read"}, json.RawMessage(`{"path":"../../etc/passwd"}`))
	if err != nil || res.Action != sdk.Block || res.Reason != "no traversal" || res.Rule != "t" {
		t.Errorf("guard = %+v, %v", res, err)
	}
	if res, _ := g.ToolPreCall(ctx, &sdk.Context{Name: "other__read"}, json.RawMessage(`{"path":"../../etc/passwd"}`)); res.Action != sdk.Continue {
		t.Errorf("guard on an uncovered tool = %+v", res)
	}
}
