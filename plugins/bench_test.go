package plugins

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manifold-mcp/manifold/config"
)

// BenchmarkHookCall is one tool_pre_call through go-plugin (gRPC over a
// Unix socket, mutual TLS) to the test plugin with a 1 KiB payload, as the
// pipeline's pre-hook stage makes it. It reports the median as p50-µs.
func BenchmarkHookCall(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			h := New(&Options{Executable: "", GuardPath: ""})
			defer h.Close(context.Background())
			p := config.Plugin{Name: "p", Command: []string{os.Args[0]}, SHA256: selfSum(b), Mode: config.PluginEnforce,
				OnError: config.PluginFailClosed, Timeout: 5 * time.Second}
			h.Apply(context.Background(), []config.Plugin{p}, 4<<20)
			c := h.Chain()
			payload := []byte(`{"data":"` + strings.Repeat("x", size-len(`{"data":""}`)) + `"}`)
			ctx := context.Background()
			if _, err := c.Pre(ctx, toolTarget, payload); err != nil {
				b.Fatal(err)
			}
			d := make([]time.Duration, 0, b.N)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				if _, err := c.Pre(ctx, toolTarget, payload); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(d)
			b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
		})
	}
}

// BenchmarkCoversMiss is the cost the plugin stages add to a call no
// plugin matches, with three plugins configured: one walk over their
// compiled matches, no allocation.
func BenchmarkCoversMiss(b *testing.B) {
	list := []config.Plugin{
		{Name: "a", Match: config.PluginMatch{Servers: []string{"shell"}}},
		{Name: "b", Match: config.PluginMatch{Tools: []string{"github__*_issue", "jira__*"}}},
		{Name: "c", Match: config.PluginMatch{Principals: []string{"group:contractor"}}},
	}
	c := newChain(list, map[string]*instance{}, nil)
	b.ReportAllocs()
	for range b.N {
		if c.Covers(toolTarget) {
			b.Fatal("covered")
		}
	}
}
