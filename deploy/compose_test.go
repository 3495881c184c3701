package deploy

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"

	"github.com/manifold-mcp/manifold/config"
)

// TestComposeDemo loads deploy/compose with compose-go, as `docker compose` would (no
// engine runs here), and checks that its parts fit together: every mounted file exists,
// Manifold's config loads, and each address one part gives another names a service and a
// port that service listens on.
func TestComposeDemo(t *testing.T) {
	opts, err := cli.NewProjectOptions([]string{"compose/compose.yaml"},
		cli.WithWorkingDirectory("compose"), cli.WithEnv(nil), cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose-go: %v", err)
	}
	want := []string{"jaeger", "manifold", "otel-collector", "prometheus"}
	if got := p.ServiceNames(); !slices.Equal(sorted(got), want) {
		t.Fatalf("services = %v, want %v", got, want)
	}
	for _, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if fi, err := os.Stat(v.Source); err != nil || fi.IsDir() {
				t.Errorf("%s mounts %s, which is not a file here: %v", s.Name, v.Source, err)
			}
			if !v.ReadOnly {
				t.Errorf("%s mounts %s writable", s.Name, v.Source)
			}
		}
		for _, port := range s.Ports {
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %d on %q: publish on 127.0.0.1 only", s.Name, port.Target, port.HostIP)
			}
		}
		if s.Name != "manifold" && (s.Image == "" || strings.HasSuffix(s.Image, ":latest") || !strings.Contains(s.Image, ":")) {
			t.Errorf("%s: image %q, want a pinned tag", s.Name, s.Image)
		}
	}

	m := p.Services["manifold"]
	root, _ := filepath.Abs("..")
	if m.Build == nil || m.Build.Context != root || m.Build.Dockerfile != "deploy/Dockerfile" {
		t.Errorf("manifold build = %+v, want the repository root with deploy/Dockerfile", m.Build)
	}
	if !m.ReadOnly || !slices.Contains(m.Tmpfs, "/tmp") || !slices.Contains(m.CapDrop, "ALL") {
		t.Errorf("manifold: want a read-only root filesystem, a /tmp tmpfs and no capabilities")
	}

	// Manifold's config, with the service's environment overrides.
	var environ []string
	for k, v := range m.Environment {
		if v != nil {
			environ = append(environ, k+"="+*v)
		}
	}
	data, err := os.ReadFile(mountSource(t, m, "/etc/manifold/config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data, config.FormatYAML, "manifold.yaml", &config.LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }, Environ: environ})
	if err != nil {
		t.Fatalf("manifold.yaml does not load: %v", err)
	}
	if !publishes(m, cfg.Gateway.Listen) {
		t.Errorf("manifold listens on %s, which compose does not publish", cfg.Gateway.Listen)
	}

	// The collector's config: OTLP in on the port Manifold sends to, Jaeger out.
	var col struct {
		Receivers struct {
			OTLP struct {
				Protocols map[string]struct{ Endpoint string }
			}
		}
		Exporters map[string]struct{ Endpoint string }
		Service   struct {
			Pipelines map[string]struct{ Receivers, Exporters []string }
			Telemetry struct {
				Metrics struct {
					Readers []struct {
						Pull struct {
							Exporter struct {
								Prometheus struct{ Port int }
							}
						}
					}
				}
			}
		}
	}
	readYAML(t, mountSource(t, p.Services["otel-collector"], "/etc/otelcol/config.yaml"), &col)
	tu, err := url.Parse(cfg.Telemetry.Traces.Endpoint)
	if err != nil || tu.Hostname() != "otel-collector" || cfg.Telemetry.Traces.Protocol != config.ProtocolGRPC {
		t.Fatalf("traces go to %q over %s, want the otel-collector service over grpc", cfg.Telemetry.Traces.Endpoint, cfg.Telemetry.Traces.Protocol)
	}
	if _, port, _ := net.SplitHostPort(col.Receivers.OTLP.Protocols["grpc"].Endpoint); port != tu.Port() {
		t.Errorf("the collector receives OTLP/gRPC on %q, Manifold sends to port %s", col.Receivers.OTLP.Protocols["grpc"].Endpoint, tu.Port())
	}
	traces := col.Service.Pipelines["traces"]
	if len(traces.Exporters) != 1 || !strings.HasPrefix(col.Exporters[traces.Exporters[0]].Endpoint, "jaeger:4317") {
		t.Errorf("the traces pipeline exports to %v, want Jaeger's OTLP port", traces.Exporters)
	}

	// Prometheus scrapes Manifold's metrics listener and the collector's own metrics.
	var prom struct {
		ScrapeConfigs []struct {
			JobName       string                       `json:"job_name"`
			StaticConfigs []struct{ Targets []string } `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	readYAML(t, mountSource(t, p.Services["prometheus"], "/etc/prometheus/prometheus.yml"), &prom)
	_, metricsPort, _ := net.SplitHostPort(cfg.Telemetry.Metrics.Listen)
	want8888 := ""
	if rs := col.Service.Telemetry.Metrics.Readers; len(rs) > 0 {
		want8888 = "otel-collector:" + strconv.Itoa(rs[0].Pull.Exporter.Prometheus.Port)
	}
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	if !slices.Equal(sorted(targets), sorted([]string{"manifold:" + metricsPort, want8888})) {
		t.Errorf("Prometheus scrapes %v, want manifold:%s and %s", targets, metricsPort, want8888)
	}
}

func mountSource(t *testing.T, s types.ServiceConfig, target string) string {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Target == target {
			return v.Source
		}
	}
	t.Fatalf("%s mounts nothing at %s", s.Name, target)
	return ""
}

func publishes(s types.ServiceConfig, listen string) bool {
	_, port, _ := net.SplitHostPort(listen)
	return slices.ContainsFunc(s.Ports, func(p types.ServicePortConfig) bool { return strconv.Itoa(int(p.Target)) == port })
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
