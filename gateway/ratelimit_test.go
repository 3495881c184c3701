package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/fixture"
	"github.com/manifold-mcp/manifold/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRateLimitRefusesOnBothPathsAlike: a call over its limit is refused
// on the raw path and the SDK path with the same answer, a tool error the
// model can act on for tools/call and CodeRateLimited with retryAfter for
// prompts/get and resources/read; each refusal is audited with its rule
// and the upstream never sees it.
func TestRateLimitRefusesOnBothPathsAlike(t *testing.T) {
	sink := newAuditSink(t, config.ArgumentsFull)
	fx := fixture.NewServer(&fixture.Options{Name: "fx"})
	gw := newRawGateway(t, &Options{Audit: sink.log}, func(c *config.Config) {
		c.RateLimits = []config.RateLimit{
			{Tools: []string{"fx__echo"}, Rate: "1/h"},
			{Prompts: []string{"*"}, Rate: "2/h", Burst: 2},
			{Resources: []string{"*"}, Rate: "2/h", Burst: 2},
		}
	}, rawSpec{name: "fx", server: fx})
	c := serveStdioLines(t, gw, legacyVersion, `{}`)
	for _, p := range []struct{ name, method, params string }{
		{"tool", "tools/call", `{"name":"fx__echo","arguments":{"message":"hi"}}`},
		{"prompt", "prompts/get", `{"name":"fx__test_simple_prompt"}`},
		{"read", "resources/read", `{"uri":"manifold://fx/test://static-text"}`},
	} {
		t.Run(p.name, func(t *testing.T) {
			line := func(id string, sdk bool) string {
				prefix := `{"jsonrpc":"2.0"`
				if sdk {
					prefix = `{"x":0,"jsonrpc":"2.0"`
				}
				return prefix + `,"id":` + id + `,"method":"` + p.method + `","params":` + p.params + `}`
			}
			if first := c.call("1", line("1", false)); first.Error != nil || strings.Contains(string(first.Result), "rate limited") {
				t.Fatalf("the first call was refused: %s", first.line)
			}
			if p.method != "tools/call" { // its rule allows two: one more on the SDK path
				if second := c.call("2", line("2", true)); second.Error != nil {
					t.Fatalf("the second call was refused: %s", second.line)
				}
			}
			before := rawCount(gw)
			raw := c.call("3", line("3", false))
			sdk := c.call("4", line("4", true))
			if got := rawCount(gw) - before; got != 1 {
				t.Fatalf("%d raw calls, want 1", got)
			}
			if p.method == "tools/call" {
				var res mcp.CallToolResult
				if raw.Error != nil || json.Unmarshal(raw.Result, &res) != nil || !res.IsError {
					t.Fatalf("raw refusal is not a tool error: %s", raw.line)
				}
				if text := res.Content[0].(*mcp.TextContent).Text; !strings.HasPrefix(text, "rate limited; retry after ") || !strings.HasSuffix(text, " s") {
					t.Fatalf("refusal text %q", text)
				}
			} else {
				var data struct {
					RetryAfter float64 `json:"retryAfter"`
				}
				if raw.Error == nil || raw.Error.Code != CodeRateLimited || json.Unmarshal(raw.Error.Data, &data) != nil || data.RetryAfter <= 0 {
					t.Fatalf("raw refusal: %s", raw.line)
				}
			}
			// The retry hint moves on between the two answers: compare
			// the rest.
			if diff := gocmp.Diff(withoutRetry(raw.line), withoutRetry(sdk.line)); diff != "" {
				t.Errorf("answers differ (-raw +sdk):\n%s", diff)
			}
		})
	}
	recs := sink.records(t)
	limited := 0
	for _, r := range recs {
		if r["rate_limit"] != nil {
			limited++
			if r["decision"] != "allow" || (r["outcome"] != "tool_error" && r["outcome"] != "error") {
				t.Errorf("refusal record %v", r)
			}
		}
	}
	if limited != 6 {
		t.Errorf("%d audit records name a rate limit, want 6: %v", limited, recs)
	}
}

// withoutRetry returns an answer line with its id and the number of its
// retry hint blanked.
func withoutRetry(line string) string {
	var m map[string]any
	json.Unmarshal([]byte(line), &m)
	delete(m, "id")
	b, _ := json.Marshal(m)
	s := string(b)
	if i := strings.Index(s, "retry after "); i >= 0 {
		j := strings.Index(s[i:], " s")
		s = s[:i] + "retry after N" + s[i+j:]
	}
	if i := strings.Index(s, `"retryAfter":`); i >= 0 {
		j := strings.IndexAny(s[i+13:], ",}")
		s = s[:i] + `"retryAfter":N` + s[i+13+j:]
	}
	return s
}

// TestRateLimitReloadKeepsBuckets: a reload that keeps a limit keeps its
// bucket (no refill), and one that removes it lets calls through at once.
func TestRateLimitReloadKeepsBuckets(t *testing.T) {
	limits := []config.RateLimit{{Tools: []string{"*"}, Rate: "1/h"}}
	var next *config.Config
	gw := newRawGateway(t, &Options{LoadConfig: func() (*config.Config, error) { return next, nil }}, func(c *config.Config) {
		c.RateLimits = limits
		c.Hash, c.Auth.Local.Name = "sha256:1", "local"
		cp := *c
		next = &cp
	}, rawSpec{name: "fx", server: fixture.NewServer(&fixture.Options{Name: "fx"})})
	c := serveStdioLines(t, gw, legacyVersion, `{}`)
	limited := func(id string) bool {
		m := c.call(id, callLine(id, "fx__echo", `{"message":"hi"}`))
		return strings.Contains(m.line, "rate limited")
	}
	if limited("1") || !limited("2") {
		t.Fatal("the limit does not hold before the reload")
	}
	next.Hash = "sha256:2" // same limits, another document
	if _, err := gw.Reload(context.Background(), TriggerAPI); err != nil {
		t.Fatal(err)
	}
	if !limited("3") {
		t.Fatal("a reload that keeps the limit refilled its bucket")
	}
	cp := *next
	cp.RateLimits, cp.Hash = nil, "sha256:3"
	next = &cp
	if _, err := gw.Reload(context.Background(), TriggerAPI); err != nil {
		t.Fatal(err)
	}
	if limited("4") {
		t.Fatal("a reload that removes the limit left it in force")
	}
}

// BenchmarkRateLimitStage is the rate limit stage on the call path as the
// pipeline runs it (rateLimit, then the release of its slots), for a call
// of a principal under limits that let it through: a per-principal rate,
// a global rate with a concurrency cap, and a rule that does not match; and
// with no limits configured.
func BenchmarkRateLimitStage(b *testing.B) {
	for _, bc := range []struct {
		name   string
		limits []config.RateLimit
	}{
		{name: "none"},
		{name: "three rules", limits: []config.RateLimit{
			{Principals: []string{"group:dev"}, Tools: []string{"alpha__*"}, Rate: "1000000000/s"},
			{Tools: []string{"*"}, Rate: "1000000000/s", Scope: config.ScopeGlobal, MaxConcurrent: 1 << 30},
			{Tools: []string{"github__*"}, Rate: "1/h"},
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			gw := newAlphaGateway(b, func(c *config.Config) {
				c.RateLimits = bc.limits
				c.Auth.Local = config.Principal{Name: "local", Groups: []string{"dev"}}
			}, nil)
			c := call{kind: policy.Tool, name: "alpha__echo", snap: gw.current(), routes: gw.routes.Load()}
			gw.authenticate(&c, caller{local: true})
			if !gw.resolve(context.Background(), &c) {
				b.Fatal("alpha__echo does not resolve")
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if gw.rateLimit(ctx, &c) != nil {
					b.Fatal("refused")
				}
				c.held.Release()
			}
		})
	}
}
