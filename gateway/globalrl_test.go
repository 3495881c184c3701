package gateway

import (
	"context"
	"net"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/manifold-mcp/manifold/internal/telemetry"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/redistest"
	"github.com/manifold-mcp/manifold/policy"
)

// newStoreGateway is an alpha gateway in cluster mode whose shared store
// is the redis-server at addr, with limits.
func newStoreGateway(t testing.TB, addr string, limits []config.RateLimit) *Gateway {
	t.Helper()
	return newStoreGatewayOpts(t, addr, limits, nil)
}

func newStoreGatewayOpts(t testing.TB, addr string, limits []config.RateLimit, o *Options) *Gateway {
	t.Helper()
	return newAlphaGateway(t, func(c *config.Config) {
		c.RateLimits = limits
		c.Gateway.Cluster = config.Cluster{Secret: testClusterSecret, Advertise: "127.0.0.1:1", Peers: []string{"127.0.0.1:1"}, Store: "redis://" + addr + "/0"}
		c.Auth.Local = config.Principal{Name: "local", Groups: []string{"dev"}}
	}, o)
}

// stageCall is a resolved call of alpha__echo by the local principal.
func stageCall(t testing.TB, gw *Gateway) *call {
	t.Helper()
	c := &call{kind: policy.Tool, name: "alpha__echo", snap: gw.current(), routes: gw.routes.Load()}
	gw.authenticate(c, caller{local: true})
	if !gw.resolve(context.Background(), c) {
		t.Fatal("alpha__echo does not resolve")
	}
	return c
}

// TestGlobalRateLimitAcrossReplicas: two replicas with one shared store
// admit a global rule's rate once between them; a
// per-principal rule stays per replica.
func TestGlobalRateLimitAcrossReplicas(t *testing.T) {
	addr := redistest.Start(t)
	for _, tc := range []struct {
		name  string
		scope string
		want  int
	}{
		{name: "global", scope: config.ScopeGlobal, want: 3},
		{name: "principal", scope: config.ScopePrincipal, want: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limits := []config.RateLimit{{Tools: []string{"alpha__" + tc.name + "*", "alpha__echo"}, Rate: "3/h", Scope: tc.scope}}
			gws := []*Gateway{newStoreGateway(t, addr, limits), newStoreGateway(t, addr, limits)}
			admitted := 0
			for i := range 10 {
				c := stageCall(t, gws[i%2])
				if gws[i%2].rateLimit(context.Background(), c) == nil {
					admitted++
				}
				c.held.Release()
			}
			if admitted != tc.want {
				t.Errorf("two replicas admitted %d calls of a %s 3/h rule, want %d", admitted, tc.scope, tc.want)
			}
		})
	}
}

// TestGlobalRateLimitStoreDown: with the store unreachable a global rule
// is decided by the replica's own bucket, and the failure is counted
// (manifold_rate_limit_store_fallbacks_total) once per backoff, not per
// call.
func TestGlobalRateLimitStoreDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	tel, err := telemetry.New(context.Background(), &config.Telemetry{Metrics: &config.Metrics{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	gw := newStoreGatewayOpts(t, dead, []config.RateLimit{{Tools: []string{"*"}, Rate: "3/h", Scope: config.ScopeGlobal}}, &Options{Telemetry: tel})
	admitted := 0
	for range 5 {
		c := stageCall(t, gw)
		if gw.rateLimit(context.Background(), c) == nil {
			admitted++
		}
		c.held.Release()
	}
	if admitted != 3 {
		t.Errorf("admitted %d calls with the store down, want the local bucket's 3", admitted)
	}
	if n := gw.current().limits.Fallbacks(); n != 1 {
		t.Errorf("%d fallbacks, want 1 (then the backoff)", n)
	}
	got := scrapeMetrics(t, tel)("manifold_rate_limit_store_fallbacks_total")
	if want := map[string]float64{"manifold_rule=rateLimits[0]": 1}; !gocmp.Equal(got, want) {
		t.Errorf("manifold_rate_limit_store_fallbacks_total = %v, want %v", got, want)
	}
}

// BenchmarkRateLimitStageShared is BenchmarkRateLimitStage's global rule
// counted in a shared store (a local redis-server): one call in 64 asks
// the store for a batch of tokens.
func BenchmarkRateLimitStageShared(b *testing.B) {
	gw := newStoreGateway(b, redistest.Start(b), []config.RateLimit{
		{Tools: []string{"*"}, Rate: "1000000000/s", Scope: config.ScopeGlobal},
	})
	c := stageCall(b, gw)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if gw.rateLimit(ctx, c) != nil {
			b.Fatal("refused")
		}
		c.held.Release()
	}
	b.StopTimer()
	if n := c.snap.limits.Fallbacks(); n != 0 {
		b.Fatalf("%d fallbacks to the local bucket", n)
	}
}
