package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"sigs.k8s.io/yaml"

	"github.com/manifold-mcp/manifold/config"
)

const chartDir = "helm/manifold"

// kubeVersion is the cluster version the chart is rendered for: the chart needs 1.30 for the
// preStop sleep action.
var kubeVersion = chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}

// rendered is one rendered chart: its typed objects by kind, custom resources unstructured.
type rendered struct {
	deployments     []*appsv1.Deployment
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	secrets         []*corev1.Secret
	serviceAccounts []*corev1.ServiceAccount
	pdbs            []*policyv1.PodDisruptionBudget
	hpas            []*autoscalingv2.HorizontalPodAutoscaler
	netpols         []*networkingv1.NetworkPolicy
	custom          []*unstructured.Unstructured
}

// variants are the values the chart is rendered with: the defaults, a production setup with
// API keys from a Secret, metrics and a network policy, and cluster mode with autoscaling.
var variants = []struct {
	name   string
	values string
}{
	{name: "defaults"},
	{
		name: "production",
		values: `
replicaCount: 1
auth:
  apiKeys:
    - {name: ci, secretName: manifold-keys, secretKey: ci, groups: [dev]}
    - {name: ops, secretName: manifold-keys, secretKey: ops}
config:
  mcpServers:
    weather: {url: "https://weather.example.com/mcp", headers: {Authorization: "Bearer ${WEATHER_TOKEN}"}}
  auth:
    operators: [ops]
  policy:
    default: allow
metrics:
  enabled: true
  serviceMonitor: {enabled: true, labels: {release: prometheus}}
networkPolicy:
  enabled: true
  ingressFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress}}}]
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
extraEnv:
  - name: WEATHER_TOKEN
    valueFrom: {secretKeyRef: {name: weather, key: token}}
  - name: MANIFOLD_GATEWAY__LOG__LEVEL
    value: debug
`,
	},
	{
		name: "cluster",
		values: `
cluster:
  enabled: true
  secretName: manifold-cluster
  previousSecretsKey: previous
autoscaling:
  enabled: true
  minReplicas: 3
podDisruptionBudget:
  maxUnavailable: 1
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector: {matchLabels: {app.kubernetes.io/name: manifold}}
`,
	},
}

func TestChartLints(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			linter := lint.AllWithKubeVersion(chartDir, parseValues(t, v.values), "mcp", &kubeVersion)
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %v", m)
				}
			}
		})
	}
}

func TestChartRendersValidObjects(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			r := render(t, v.values)
			if len(r.deployments) != 1 || len(r.configMaps) != 1 {
				t.Fatalf("want one Deployment and one ConfigMap, got %d and %d", len(r.deployments), len(r.configMaps))
			}
			d := r.deployments[0]
			checkDeployment(t, d)
			checkServices(t, d, r.services)
			checkConfig(t, d, r)
			if len(r.pdbs) != 1 || !selects(r.pdbs[0].Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
				t.Errorf("want one PodDisruptionBudget selecting the pods, got %d", len(r.pdbs))
			}
			if sa := d.Spec.Template.Spec.ServiceAccountName; len(r.serviceAccounts) != 1 || r.serviceAccounts[0].Name != sa {
				t.Errorf("service account %q is not rendered", sa)
			}
		})
	}
}

// TestChartVariants checks what each variant turns on.
func TestChartVariants(t *testing.T) {
	def := render(t, "")
	if len(def.secrets) != 1 || def.secrets[0].Name != "gw-manifold-api-key" || len(def.secrets[0].Data["key"]) < 32 {
		t.Errorf("defaults: want the generated API key Secret gw-manifold-api-key, got %v", def.secrets)
	}
	if len(def.hpas)+len(def.netpols)+len(def.custom) != 0 {
		t.Errorf("defaults: HPA, NetworkPolicy and ServiceMonitor must be off")
	}
	if r := def.deployments[0].Spec.Replicas; r == nil || *r != 1 {
		t.Errorf("defaults: replicas = %v, want 1", r)
	}

	prod := render(t, variants[1].values)
	if len(prod.secrets) != 0 {
		t.Errorf("production: the chart must not generate a key when API keys are given")
	}
	if len(prod.custom) != 1 || prod.custom[0].GetKind() != "ServiceMonitor" {
		t.Fatalf("production: want a ServiceMonitor, got %v", prod.custom)
	}
	sm := prod.custom[0]
	if sm.GetLabels()["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels = %v", sm.GetLabels())
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" {
		t.Errorf("ServiceMonitor endpoints = %v, want the metrics port", endpoints)
	}
	if !servicePortNamed(prod.services, "gw-manifold", "metrics") {
		t.Errorf("production: the Service has no metrics port for the ServiceMonitor")
	}
	if len(prod.netpols) != 1 || len(prod.netpols[0].Spec.Ingress) != 3 {
		t.Errorf("production: want a NetworkPolicy with client, peer and metrics rules")
	}

	cl := render(t, variants[2].values)
	d := cl.deployments[0]
	if d.Spec.Replicas != nil {
		t.Errorf("cluster: replicas must be left to the HPA, got %d", *d.Spec.Replicas)
	}
	if len(cl.hpas) != 1 || cl.hpas[0].Spec.ScaleTargetRef.Name != d.Name || *cl.hpas[0].Spec.MinReplicas != 3 {
		t.Errorf("cluster: want an HPA scaling the Deployment from 3")
	}
	env := envOf(d.Spec.Template.Spec.Containers[0])
	if e := env["MANIFOLD_GATEWAY__CLUSTER__ADVERTISE"]; e.Value != "$(POD_IP):8080" || env["POD_IP"].ValueFrom == nil {
		t.Errorf("cluster: advertise = %q, want the pod IP and port", e.Value)
	}
	if e := env["MANIFOLD_GATEWAY__CLUSTER__PREVIOUSSECRETS"]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != "manifold-cluster" || e.ValueFrom.SecretKeyRef.Key != "previous" {
		t.Errorf("cluster: previous secrets must come from the cluster Secret, got %+v", e)
	}
	if e := env["MANIFOLD_GATEWAY__CLUSTER__PEERSDNS"]; !strings.HasPrefix(e.Value, d.Name+"-peers.") || !strings.HasSuffix(e.Value, ".svc.cluster.local:8080") {
		t.Errorf("cluster: peersDNS = %q, want the headless Service's name and port", e.Value)
	}
	secretPath := env["MANIFOLD_GATEWAY__CLUSTER__SECRETFILE"].Value
	if got := secretVolumeFile(d, secretPath); got != "manifold-cluster/secret" {
		t.Errorf("cluster: secretFile %q is not the cluster Secret's key (got %q)", secretPath, got)
	}
}

func TestChartRefusesUnsafeValues(t *testing.T) {
	for _, tt := range []struct{ name, values, want string }{
		{"replicas without cluster mode", "replicaCount: 3", "needs cluster.enabled"},
		{"autoscaling without cluster mode", "autoscaling: {enabled: true}", "needs cluster.enabled"},
		{"cluster mode without a secret", "cluster: {enabled: true}\nreplicaCount: 2", "needs cluster.secretName"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderFiles(t, tt.values)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("render error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func checkDeployment(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("the selector %v does not select the pod labels %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	if ru := d.Spec.Strategy.RollingUpdate; d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("strategy = %+v, want a rolling update with maxUnavailable 0", d.Spec.Strategy)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(spec.Containers))
	}
	c := spec.Containers[0]
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz", c.StartupProbe: "/healthz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "http" {
			t.Errorf("probe %+v, want GET %s on the http port", probe, path)
		}
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "http" && p.ContainerPort == 8080 }) {
		t.Errorf("ports = %v, want http 8080", c.Ports)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds <= 0 {
		t.Errorf("want a preStop sleep so that endpoints drop the pod before it drains")
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g <= c.Lifecycle.PreStop.Sleep.Seconds+20 {
		t.Errorf("terminationGracePeriodSeconds %v leaves no room for the 20s drain after the preStop sleep", g)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources = %+v, want CPU requests and a memory limit", c.Resources)
	}
	sc, psc := c.SecurityContext, spec.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext = %+v, want a read-only root filesystem and no privilege escalation", sc)
	}
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext = %+v, want a non-root user", psc)
	}
	if len(c.Args) != 3 || c.Args[0] != "serve" || c.Args[2] != "/etc/manifold/config.yaml" {
		t.Errorf("args = %q", c.Args)
	}
}

func checkServices(t *testing.T, d *appsv1.Deployment, services []*corev1.Service) {
	t.Helper()
	var headless int
	for _, s := range services {
		if !selects(s.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("Service %s selects %v, not the pods", s.Name, s.Spec.Selector)
		}
		for _, p := range s.Spec.Ports {
			if !containerPortNamed(d, p.TargetPort.String()) {
				t.Errorf("Service %s targets port %q, which the container does not have", s.Name, p.TargetPort.String())
			}
		}
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			headless++
			if s.Spec.PublishNotReadyAddresses {
				t.Errorf("the headless Service must list ready replicas only")
			}
		}
	}
	if len(services) != 2 || headless != 1 {
		t.Errorf("want a Service and a headless Service, got %d services (%d headless)", len(services), headless)
	}
}

// checkConfig loads the ConfigMap's config with the gateway's own loader, with the secret
// files the Deployment mounts written where it mounts them (under a temporary directory), and
// the environment overrides the Deployment sets.
func checkConfig(t *testing.T, d *appsv1.Deployment, r *rendered) {
	t.Helper()
	text, ok := r.configMaps[0].Data["config.yaml"]
	if !ok {
		t.Fatalf("the ConfigMap has no config.yaml")
	}
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/manifold" && m.ReadOnly }) {
		t.Errorf("the config volume is not mounted read-only at /etc/manifold")
	}
	// Mount the ConfigMap as a directory, not with subPath: a subPath mount never sees the
	// kubelet's ..data swap, so hot reload would not work.
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" {
			t.Errorf("volume %s is mounted with subPath, which hides updates", m.Name)
		}
	}
	root := t.TempDir()
	for _, m := range c.VolumeMounts {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			for _, it := range v.Secret.Items {
				writeFile(t, filepath.Join(root, m.MountPath, it.Path), "0123456789abcdef0123456789abcdef-"+v.Secret.SecretName+"/"+it.Key)
			}
			if v.Secret.Items == nil && v.Secret.SecretName == d.Name+"-api-key" {
				writeFile(t, filepath.Join(root, m.MountPath, "key"), "generated-0123456789abcdef0123456789abcdef")
			}
		}
	}
	text = strings.ReplaceAll(text, "/var/run/secrets/", filepath.Join(root, "/var/run/secrets")+"/")
	var environ []string
	for _, e := range c.Env {
		// Kubernetes expands $(POD_IP) when it starts the container; the secret paths are
		// the mounted files materialised above.
		if strings.HasPrefix(e.Name, "MANIFOLD_") && e.ValueFrom == nil {
			v := strings.ReplaceAll(e.Value, "$(POD_IP)", "10.1.2.3")
			v = strings.ReplaceAll(v, "/var/run/secrets/", filepath.Join(root, "/var/run/secrets")+"/")
			environ = append(environ, e.Name+"="+v)
		}
	}
	cfg, err := config.Parse([]byte(text), config.FormatYAML, "configmap:config.yaml", &config.LoadOptions{
		LookupEnv: func(k string) (string, bool) { return "value-of-" + k, true },
		Environ:   environ,
	})
	if err != nil {
		t.Fatalf("the rendered config does not load:\n%v\n---\n%s", err, text)
	}
	if cfg.Gateway.Listen != "0.0.0.0:8080" || !cfg.Auth.Enabled() {
		t.Errorf("listen %q, auth on %v: want 0.0.0.0:8080 with authentication", cfg.Gateway.Listen, cfg.Auth.Enabled())
	}
	if _, clustered := envOf(c)["MANIFOLD_GATEWAY__CLUSTER__SECRETFILE"]; clustered {
		cl := cfg.Gateway.Cluster
		if cl.Advertise != "10.1.2.3:8080" || cl.PeersDNS == "" || cl.SecretFile == "" {
			t.Errorf("cluster mode from the environment: advertise %q, peersDNS %q, secretFile %q", cl.Advertise, cl.PeersDNS, cl.SecretFile)
		}
		if secret, _, err := cl.Secrets(); err != nil || len(secret) < 32 {
			t.Errorf("the cluster secret was not read from its mounted Secret: %v", err)
		}
	}
	for i, k := range cfg.Auth.APIKeys {
		if !strings.Contains(k.Key, "0123456789abcdef") {
			t.Errorf("auth.apiKeys[%d] (%s) was not read from its mounted Secret", i, k.Name)
		}
	}
}

// render renders the chart with values (YAML) over the defaults and decodes every object
// strictly: an unknown or duplicated field in a template fails the test.
func render(t *testing.T, values string) *rendered {
	t.Helper()
	files, err := renderFiles(t, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, corev1.AddToScheme, policyv1.AddToScheme, autoscalingv2.AddToScheme, networkingv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	strict := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Yaml: true, Strict: true})
	r := &rendered{}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if filepath.Ext(name) != ".yaml" {
			continue // NOTES.txt, helpers
		}
		for _, doc := range releaseutil.SplitManifests(files[name]) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			gvk := schema.FromAPIVersionAndKind(meta.APIVersion, meta.Kind)
			if !scheme.Recognizes(gvk) {
				u := &unstructured.Unstructured{}
				j, err := yaml.YAMLToJSONStrict([]byte(doc))
				if err == nil {
					err = u.UnmarshalJSON(j)
				}
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				r.custom = append(r.custom, u)
				continue
			}
			obj, _, err := strict.Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("%s: strict decoding into %s: %v\n%s", name, gvk, err, doc)
			}
			switch o := obj.(type) {
			case *appsv1.Deployment:
				r.deployments = append(r.deployments, o)
			case *corev1.Service:
				r.services = append(r.services, o)
			case *corev1.ConfigMap:
				r.configMaps = append(r.configMaps, o)
			case *corev1.Secret:
				r.secrets = append(r.secrets, o)
			case *corev1.ServiceAccount:
				r.serviceAccounts = append(r.serviceAccounts, o)
			case *policyv1.PodDisruptionBudget:
				r.pdbs = append(r.pdbs, o)
			case *autoscalingv2.HorizontalPodAutoscaler:
				r.hpas = append(r.hpas, o)
			case *networkingv1.NetworkPolicy:
				r.netpols = append(r.netpols, o)
			default:
				t.Fatalf("%s: unexpected %T", name, obj)
			}
			if m, ok := obj.(interface{ GetName() string }); ok && m.GetName() == "" {
				t.Errorf("%s: an object without a name", name)
			}
		}
	}
	return r
}

// renderFiles renders the chart as `helm install gw deploy/helm/manifold -n mcp -f values`
// would, offline (lookup finds nothing).
func renderFiles(t *testing.T, values string) (map[string]string, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = kubeVersion
	vals, err := chartutil.ToRenderValues(chrt, parseValues(t, values), chartutil.ReleaseOptions{
		Name: "gw", Namespace: "mcp", Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, err
	}
	return engine.Engine{Strict: false}.Render(chrt, vals)
}

func parseValues(t *testing.T, values string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	return v.AsMap()
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func containerPortNamed(d *appsv1.Deployment, name string) bool {
	return slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == name })
}

func servicePortNamed(services []*corev1.Service, service, port string) bool {
	for _, s := range services {
		if s.Name == service && slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == port }) {
			return true
		}
	}
	return false
}

// secretVolumeFile returns "<secret>/<key>" for the file at path inside a Secret volume of d.
func secretVolumeFile(d *appsv1.Deployment, path string) string {
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		rel, ok := strings.CutPrefix(path, m.MountPath+"/")
		if !ok {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				for _, it := range v.Secret.Items {
					if it.Path == rel {
						return v.Secret.SecretName + "/" + it.Key
					}
				}
			}
		}
	}
	return ""
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestChartConfigChangeKeepsPods checks that changing the config changes the ConfigMap but
// not the pod template: the change is hot-reloaded, where a changed template would make
// Kubernetes restart every pod.
func TestChartConfigChangeKeepsPods(t *testing.T) {
	a := render(t, "")
	b := render(t, "config: {gateway: {log: {level: debug}}}")
	if a.configMaps[0].Data["config.yaml"] == b.configMaps[0].Data["config.yaml"] {
		t.Fatalf("the config change did not reach the ConfigMap")
	}
	if !equality.Semantic.DeepEqual(a.deployments[0].Spec.Template, b.deployments[0].Spec.Template) {
		t.Errorf("a config change changes the pod template, which restarts the pods")
	}
}

// envOf returns c's environment variables by name.
func envOf(c corev1.Container) map[string]corev1.EnvVar {
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	return env
}
