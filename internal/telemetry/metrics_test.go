package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"

	"github.com/manifold-mcp/manifold/config"
	"github.com/manifold-mcp/manifold/internal/testutil"
)

func newMetricsTelemetry(t *testing.T) *Telemetry {
	t.Helper()
	tel, err := New(context.Background(), &config.Telemetry{Metrics: &config.Metrics{Listen: "127.0.0.1:0"}}, &Options{ServiceVersion: "9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	return tel
}

// scrape fetches and parses the metrics in the Prometheus text format.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d", rec.Code)
	}
	return testutil.ParseMetrics(t, rec.Body)
}

var series = testutil.Series

func TestMetrics(t *testing.T) {
	tel := newMetricsTelemetry(t)
	m := tel.Metrics()
	ctx := context.Background()

	m.ServerOp(ctx, "tools/call", "weather", "", 20*time.Millisecond)
	m.ServerOp(ctx, "tools/call", "weather", "", 40*time.Millisecond)
	m.ServerOp(ctx, "tools/call", "weather", ErrorTypeToolError, time.Second)
	m.ServerOp(ctx, "tools/list", "", "", 5*time.Millisecond)
	m.ClientOp(ctx, "tools/call", "weather", "-32602", 30*time.Millisecond)
	for range 3 {
		m.SessionOpened(ctx)
	}
	m.SessionClosed(ctx, time.Minute)
	m.Inflight(ctx, "weather", 1)
	m.Inflight(ctx, "weather", 1)
	m.Inflight(ctx, "docs", 1)
	m.Inflight(ctx, "weather", -1)
	m.PolicyDenied(ctx, "tool", "weather")
	m.PolicyDenied(ctx, "tool", "weather")
	m.PolicyDenied(ctx, "resource", "")
	m.Reload(ctx, true)
	m.Reload(ctx, false)
	m.Reload(ctx, false)
	stopUp := m.ObserveUpstreams(func() []UpstreamState {
		return []UpstreamState{{Name: "weather", State: "ready", Restarts: 2}, {Name: "docs", State: "backoff", Restarts: 5}}
	})
	stopAudit := m.ObserveAuditDropped(func() uint64 { return 7 })

	families := scrape(t, tel.MetricsHandler())
	tests := []struct {
		name string
		want map[string]float64
	}{
		{"mcp_server_operation_duration_seconds", map[string]float64{
			"manifold_server=weather,mcp_method_name=tools/call":                       2,
			"error_type=tool_error,manifold_server=weather,mcp_method_name=tools/call": 1,
			"mcp_method_name=tools/list":                                               1,
		}},
		{"mcp_client_operation_duration_seconds", map[string]float64{
			"error_type=-32602,manifold_server=weather,mcp_method_name=tools/call": 1,
		}},
		{"mcp_server_session_duration_seconds", map[string]float64{"": 1}},
		{"manifold_sessions_active", map[string]float64{"": 2}},
		{"manifold_calls_inflight", map[string]float64{"manifold_server=weather": 1, "manifold_server=docs": 1}},
		{"manifold_policy_denials_total", map[string]float64{
			"manifold_kind=tool,manifold_server=weather": 2,
			"manifold_kind=resource,manifold_server=":    1,
		}},
		{"manifold_config_reloads_total", map[string]float64{"manifold_result=ok": 1, "manifold_result=rejected": 2}},
		{"manifold_upstream_state", map[string]float64{
			"manifold_server=weather,manifold_state=ready": 1,
			"manifold_server=docs,manifold_state=backoff":  1,
		}},
		{"manifold_upstream_restarts_total", map[string]float64{"manifold_server=weather": 2, "manifold_server=docs": 5}},
		{"manifold_audit_dropped_total", map[string]float64{"": 7}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, series(families, tt.name)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	sum := families["mcp_server_operation_duration_seconds"]
	for _, s := range sum.Metric {
		if len(s.Label) == 2 && s.Histogram.GetSampleSum() != 0.06 {
			t.Errorf("sum of ok tools/call = %v, want 0.06", s.Histogram.GetSampleSum())
		}
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "target_info"} {
		if families[name] == nil {
			t.Errorf("%s is missing", name)
		}
	}
	if got := series(families, "target_info"); len(got) != 1 || !strings.Contains(firstKey(got), "service_name=manifold") ||
		!strings.Contains(firstKey(got), "service_version=9.9.9") {
		t.Errorf("target_info = %v", got)
	}

	stopUp()
	stopAudit()
	stopAudit() // twice is fine
	families = scrape(t, tel.MetricsHandler())
	for _, name := range []string{"manifold_upstream_state", "manifold_upstream_restarts_total", "manifold_audit_dropped_total"} {
		if got := series(families, name); len(got) != 0 {
			t.Errorf("%s after stop = %v, want nothing", name, got)
		}
	}
}

func firstKey(m map[string]float64) string {
	for k := range m {
		return k
	}
	return ""
}

func TestMetricsConcurrent(t *testing.T) {
	tel := newMetricsTelemetry(t)
	m := tel.Metrics()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				m.ServerOp(context.Background(), "tools/call", fmt.Sprintf("s%d", i%10), "", time.Millisecond)
				m.Inflight(context.Background(), fmt.Sprintf("s%d", g), 1)
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			scrape(t, tel.MetricsHandler())
		}
	})
	wg.Wait()
	var total float64
	for _, v := range series(scrape(t, tel.MetricsHandler()), "mcp_server_operation_duration_seconds") {
		total += v
	}
	if total != 8000 {
		t.Errorf("recorded %v operations, want 8000", total)
	}
}

func TestNilMetrics(t *testing.T) {
	var m *Metrics
	ctx := context.Background()
	m.ServerOp(ctx, "a", "b", "", time.Second)
	m.ClientOp(ctx, "a", "b", "", time.Second)
	m.SessionOpened(ctx)
	m.SessionClosed(ctx, time.Second)
	m.Inflight(ctx, "a", 1)
	m.PolicyDenied(ctx, "tool", "a")
	m.Reload(ctx, true)
	m.ObserveUpstreams(func() []UpstreamState { return nil })()
	m.ObserveAuditDropped(func() uint64 { return 0 })()
}

func TestSetCacheBound(t *testing.T) {
	tel := newMetricsTelemetry(t)
	m := tel.Metrics()
	for i := range maxCachedSets + 10 {
		m.ServerOp(context.Background(), "tools/call", fmt.Sprint(i), "", time.Millisecond)
	}
	for i := range maxCachedSets + 10 { // hits promote the dirty map
		m.ServerOp(context.Background(), "tools/call", fmt.Sprint(i), "", time.Millisecond)
	}
	if got := len(*m.opSets.read.Load()); got != maxCachedSets {
		t.Errorf("cache holds %d sets, want the bound %d", got, maxCachedSets)
	}
	m.ServerOp(context.Background(), "tools/call", fmt.Sprint(maxCachedSets+5), "", time.Millisecond) // uncached: still recorded
	var total float64
	for _, v := range series(scrape(t, tel.MetricsHandler()), "mcp_server_operation_duration_seconds") {
		total += v
	}
	if total != 2*(maxCachedSets+10)+1 {
		t.Errorf("recorded %v, want %d", total, 2*(maxCachedSets+10)+1)
	}
}

func TestServeMetrics(t *testing.T) {
	tel := newMetricsTelemetry(t)
	tel.Metrics().Reload(context.Background(), true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- tel.ServeMetrics(ctx, ln, nil) }()

	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(base + MetricsPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `manifold_config_reloads_total{manifold_result="ok"} 1`) {
		t.Fatalf("GET /metrics = %d\n%s", resp.StatusCode, body)
	}
	// The metrics listener has no authentication: it serves nothing else, and never the
	// operator console or the gateway's own endpoints.
	for _, p := range []string{"/", "/ui/", "/status"} {
		resp, err = client.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
		}
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("ServeMetrics = %v, want nil after cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeMetrics did not return after cancel")
	}
	if _, err := client.Get(base + MetricsPath); err == nil {
		t.Error("the listener still answers after ServeMetrics returned")
	}
}

// TestServeMetricsWrap: ServeOptions.Wrap sees every request before the
// metrics handler, and may refuse it.
func TestServeMetricsWrap(t *testing.T) {
	tel := newMetricsTelemetry(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	refuse := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Host != ln.Addr().String() {
				http.Error(w, "host refused", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	go func() { served <- tel.ServeMetrics(ctx, ln, &ServeOptions{Wrap: refuse}) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ServeMetrics = %v", err)
		}
	}()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for host, want := range map[string]int{ln.Addr().String(): http.StatusOK, "evil.example": http.StatusForbidden} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+MetricsPath, nil)
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: GET /metrics = %d, want %d", host, resp.StatusCode, want)
		}
	}
}

func TestServeMetricsOff(t *testing.T) {
	tel, err := New(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := tel.ServeMetrics(context.Background(), ln, nil); !errors.Is(err, ErrMetricsOff) {
		t.Fatalf("ServeMetrics = %v, want ErrMetricsOff", err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Error("the listener is still open")
	}
}

func TestResourceFromEnvironment(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "gateway-eu")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod,broken")
	tel := newMetricsTelemetry(t) // a malformed entry is logged, not fatal
	got := series(scrape(t, tel.MetricsHandler()), "target_info")
	if k := firstKey(got); !strings.Contains(k, "service_name=gateway-eu") || !strings.Contains(k, "deployment_environment=prod") {
		t.Errorf("target_info = %v", got)
	}
}
