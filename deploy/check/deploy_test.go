// Package check verifies the deployment files: every Kubernetes manifest
// decodes strictly into the Kubernetes API types (and KEDA's), the compose
// file loads with the compose-spec loader, every metric the Grafana
// dashboard queries is one quorum exports, no file holds a literal password,
// and the Redis ACL and NATS configuration shipped here start real servers
// that let quorum's roles in and keep everyone else out. A typo fails CI. It
// is its own module so that KEDA's and compose-go's dependency graphs stay
// out of quorum's binaries.
package check

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/quorumsql/quorum/internal/metrics"
)

const k8sDir = "../k8s"

// kustomization is the part of kustomize's Kustomization the repository
// uses; unknown fields fail.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Labels     []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors"`
	} `json:"labels,omitempty"`
	Resources []string `json:"resources,omitempty"`
	Images    []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
	Patches []struct {
		Path string `json:"path"`
	} `json:"patches,omitempty"`
}

type manifests struct {
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	scaled       []*kedav1alpha1.ScaledObject
	pdbs         []*policyv1.PodDisruptionBudget
	policies     []*networkingv1.NetworkPolicy
	jobs         []*batchv1.Job
	configMaps   map[string]*corev1.ConfigMap
	services     map[string]*corev1.Service
}

// decode reads one document strictly into the type of its apiVersion/kind.
func decode(t *testing.T, file string, doc []byte, m *manifests) {
	t.Helper()
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		t.Errorf("%s: %v", file, err)
		return
	}
	strict := func(v any) bool {
		if err := yaml.UnmarshalStrict(doc, v); err != nil {
			t.Errorf("%s: %s %s does not decode strictly: %v", file, head.APIVersion, head.Kind, err)
			return false
		}
		return true
	}
	switch head.APIVersion + "/" + head.Kind {
	case "apps/v1/Deployment":
		var d appsv1.Deployment
		if strict(&d) {
			m.deployments[d.Name] = &d
		}
	case "apps/v1/StatefulSet":
		var d appsv1.StatefulSet
		if strict(&d) {
			m.statefulSets[d.Name] = &d
		}
	case "v1/ConfigMap":
		var c corev1.ConfigMap
		if strict(&c) {
			m.configMaps[c.Name] = &c
		}
	case "v1/Service":
		var svc corev1.Service
		if strict(&svc) {
			m.services[svc.Name] = &svc
		}
	case "v1/Secret":
		t.Errorf("%s: Secrets must be referenced, not committed", file)
	case "policy/v1/PodDisruptionBudget":
		var p policyv1.PodDisruptionBudget
		if strict(&p) {
			m.pdbs = append(m.pdbs, &p)
		}
	case "networking.k8s.io/v1/NetworkPolicy":
		var p networkingv1.NetworkPolicy
		if strict(&p) {
			m.policies = append(m.policies, &p)
		}
	case "batch/v1/Job":
		var j batchv1.Job
		if strict(&j) {
			m.jobs = append(m.jobs, &j)
		}
	case "autoscaling/v2/HorizontalPodAutoscaler":
		strict(&autoscalingv2.HorizontalPodAutoscaler{})
	case "keda.sh/v1alpha1/ScaledObject":
		var s kedav1alpha1.ScaledObject
		if strict(&s) {
			m.scaled = append(m.scaled, &s)
		}
	case "keda.sh/v1alpha1/TriggerAuthentication":
		strict(&kedav1alpha1.TriggerAuthentication{})
	default:
		t.Errorf("%s: unexpected %s %s (add it to this check)", file, head.APIVersion, head.Kind)
	}
}

func loadDir(t *testing.T, dir string, m *manifests) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "kustomization.yaml" {
			var k kustomization
			if err := yaml.UnmarshalStrict(data, &k); err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			for _, r := range k.Resources {
				if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
					t.Errorf("%s lists resource %s: %v", path, r, err)
				}
			}
			for _, p := range k.Patches {
				if _, err := os.Stat(filepath.Join(dir, p.Path)); err != nil {
					t.Errorf("%s lists patch %s: %v", path, p.Path, err)
				}
			}
			continue
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			if len(bytes.TrimSpace(doc)) > 0 {
				// The split takes the newline that ends the document's
				// last line, which a block scalar keeps.
				decode(t, path, append(doc, '\n'), m)
			}
		}
	}
}

func newManifests() *manifests {
	return &manifests{deployments: map[string]*appsv1.Deployment{}, statefulSets: map[string]*appsv1.StatefulSet{},
		configMaps: map[string]*corev1.ConfigMap{}, services: map[string]*corev1.Service{}}
}

func TestKubernetesManifests(t *testing.T) {
	for _, dir := range []string{"base", "overlays/example", "hpa-alternative"} {
		t.Run(dir, func(t *testing.T) {
			m := newManifests()
			loadDir(t, filepath.Join(k8sDir, dir), m)
			if dir == "hpa-alternative" {
				return
			}
			if dir == "overlays/example" {
				// Patches and extra pools; the base supplies the rest.
				loadDir(t, filepath.Join(k8sDir, "base"), m)
			}
			checkDeployments(t, m)
			checkScaledObjects(t, m)
			checkPDBs(t, m)
			checkRoleCredentials(t, m)
			checkStreamReplicas(t, m)
			if dir == "base" {
				checkPolicies(t, m)
				checkConfig(t, m)
				checkRedis(t, m)
			}
		})
	}
}

// TestKubernetesTracing: the optional tracing component (an overlay adds
// it with components: [../../tracing]) runs Jaeger as the other pods run,
// and points every role's OpenTelemetry exporter at a port of its Service
// that the NetworkPolicy lets quorum's pods reach.
func TestKubernetesTracing(t *testing.T) {
	dir := filepath.Join(k8sDir, "tracing")
	k, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kust kustomization
	if err := yaml.UnmarshalStrict(k, &kust); err != nil || kust.Kind != "Component" {
		t.Errorf("tracing/kustomization.yaml: kind %q (%v), want a kustomize Component an overlay can add", kust.Kind, err)
	}
	m := newManifests()
	loadDir(t, dir, m)
	checkDeployments(t, m)
	d, ok := m.deployments["jaeger"]
	if !ok {
		t.Fatal("no jaeger Deployment")
	}
	c := d.Spec.Template.Spec.Containers[0]
	if !strings.HasPrefix(c.Image, "jaegertracing/jaeger:2.") {
		t.Errorf("jaeger image %q, want a pinned jaegertracing/jaeger:2.x", c.Image)
	}
	containerPorts := map[string]int32{}
	for _, p := range c.Ports {
		containerPorts[p.Name] = p.ContainerPort
	}

	config, ok := m.configMaps["quorum-config"]
	if !ok {
		t.Fatal("the tracing component does not patch quorum-config")
	}
	endpoint := config.Data["OTEL_EXPORTER_OTLP_ENDPOINT"]
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "http" {
		t.Fatalf("OTEL_EXPORTER_OTLP_ENDPOINT %q, want http://SERVICE:PORT (%v)", endpoint, err)
	}
	svc, ok := m.services[u.Hostname()]
	if !ok {
		t.Fatalf("OTEL_EXPORTER_OTLP_ENDPOINT %q names no Service here", endpoint)
	}
	var target string
	for _, p := range svc.Spec.Ports {
		if strconv.Itoa(int(p.Port)) == u.Port() {
			target = p.TargetPort.String()
		}
	}
	if target == "" || containerPorts[target] == 0 {
		t.Fatalf("OTEL_EXPORTER_OTLP_ENDPOINT %q: Service %s has no such port onto a named container port (ports %v, container %v)", endpoint, svc.Name, svc.Spec.Ports, containerPorts)
	}
	if containerPorts[target] != 4318 {
		t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %q reaches container port %d, want 4318 (OTLP/HTTP, the SDK's default protocol)", endpoint, containerPorts[target])
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service %s selects %s=%s, which the jaeger pods lack", svc.Name, k, v)
		}
	}
	allowed := false
	for _, p := range m.policies {
		if p.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "jaeger" {
			continue
		}
		for _, in := range p.Spec.Ingress {
			for _, from := range in.From {
				if from.PodSelector == nil || from.PodSelector.MatchLabels["app.kubernetes.io/part-of"] != "quorum" {
					continue
				}
				for _, port := range in.Ports {
					if port.Port != nil && port.Port.IntValue() == int(containerPorts[target]) {
						allowed = true
					}
				}
			}
		}
	}
	if !allowed {
		t.Errorf("no NetworkPolicy lets quorum's pods reach jaeger's OTLP port %d", containerPorts[target])
	}
}

func checkDeployments(t *testing.T, m *manifests) {
	for name, d := range m.deployments {
		if d.Spec.Template.Spec.Containers == nil {
			continue // a patch
		}
		checkPod(t, "deployment "+name, d.Spec.Template.Spec)
		if d.Spec.Template.Labels["app.kubernetes.io/part-of"] != "quorum" {
			t.Errorf("deployment %s pods lack app.kubernetes.io/part-of=quorum, so the NetworkPolicy would block them", name)
		}
	}
	for name, s := range m.statefulSets {
		checkPod(t, "statefulset "+name, s.Spec.Template.Spec)
	}
}

// checkPod: non-root, probes, resources, no secret inline.
func checkPod(t *testing.T, what string, pod corev1.PodSpec) {
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("%s does not run as non-root", what)
	}
	for _, c := range pod.Containers {
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			t.Errorf("%s container %s lacks probes", what, c.Name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s container %s lacks resource requests/limits", what, c.Name)
		}
		for _, e := range c.Env {
			if e.Value != "" && (strings.Contains(strings.ToLower(e.Name), "key") || strings.Contains(strings.ToLower(e.Name), "password")) {
				t.Errorf("%s sets secret %s inline; reference a Secret", what, e.Name)
			}
		}
	}
}

// consumerOf is the JetStream consumer a worker deployment reads, from its
// --warehouses argument.
func consumerOf(d *appsv1.Deployment) string {
	args := d.Spec.Template.Spec.Containers[0].Args
	role := map[string]string{"generator-worker": "generate-", "explorer-worker": "explore-"}[args[0]]
	for i, a := range args {
		if a == "--warehouses" && i+1 < len(args) {
			return role + args[i+1]
		}
	}
	return ""
}

func checkScaledObjects(t *testing.T, m *manifests) {
	if len(m.scaled) == 0 {
		t.Error("no KEDA ScaledObject")
	}
	for _, s := range m.scaled {
		d, ok := m.deployments[s.Spec.ScaleTargetRef.Name]
		if !ok {
			t.Errorf("ScaledObject %s scales %s, which is not a deployment here", s.Name, s.Spec.ScaleTargetRef.Name)
			continue
		}
		// A worker reads its pool's consumer and the pool's urgent lane
		// (quorum serve's questions, "<pool>-now-<warehouse>"): both scale it.
		batch := consumerOf(d)
		pool, wh, _ := strings.Cut(batch, "-")
		want := map[string]bool{batch: false, pool + "-now-" + wh: false}
		for _, tr := range s.Spec.Triggers {
			if tr.Type != "nats-jetstream" {
				t.Errorf("ScaledObject %s trigger %s", s.Name, tr.Type)
			}
			c := tr.Metadata["consumer"]
			if _, ok := want[c]; !ok || tr.Metadata["stream"] != "QUORUM" {
				t.Errorf("ScaledObject %s watches %s/%s, but %s reads consumers %v", s.Name, tr.Metadata["stream"], c, d.Name, want)
			}
			want[c] = true
		}
		for c, seen := range want {
			if !seen {
				t.Errorf("ScaledObject %s does not watch %s", s.Name, c)
			}
		}
	}
}

func checkPDBs(t *testing.T, m *manifests) {
	for _, p := range m.pdbs {
		found := false
		for _, d := range m.deployments {
			if d.Spec.Selector != nil && d.Spec.Selector.MatchLabels["app.kubernetes.io/name"] == p.Spec.Selector.MatchLabels["app.kubernetes.io/name"] {
				found = true
			}
		}
		if !found {
			t.Errorf("PodDisruptionBudget %s selects no deployment", p.Name)
		}
	}
}

func checkPolicies(t *testing.T, m *manifests) {
	protected := map[string]bool{}
	for _, p := range m.policies {
		name := p.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"]
		protected[name] = true
		for _, in := range p.Spec.Ingress {
			for _, from := range in.From {
				if from.PodSelector == nil && from.NamespaceSelector == nil {
					t.Errorf("NetworkPolicy %s allows everyone", p.Name)
				}
			}
		}
	}
	if !protected["nats"] || !protected["redis"] {
		t.Errorf("NATS and Redis must both be protected, got %v", protected)
	}
}

func checkConfig(t *testing.T, m *manifests) {
	c, ok := m.configMaps["quorum-config"]
	if !ok {
		t.Fatal("no quorum-config ConfigMap")
	}
	for _, k := range []string{"NATS_ADDR", "REDIS_ADDR", "RUN_ID", "DATASET", "warehouses.yaml"} {
		if c.Data[k] == "" {
			t.Errorf("quorum-config lacks %s", k)
		}
	}
	// The URLs carry passwords: the pods build them (checkRoleCredentials).
	for _, k := range []string{"QUORUM_NATS_URL", "QUORUM_REDIS_URL"} {
		if _, ok := c.Data[k]; ok {
			t.Errorf("quorum-config sets %s; URLs with credentials are built in the pods from the Secret", k)
		}
	}
}

// Passwords the compose tests set; the shape openssl rand -hex makes.
const (
	composeRedisPassword = "5f0c2e9a4b7d1e3f8a6c0b2d4e6f8a1c"
	composeNATSPassword  = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
)

// composeProject loads docker-compose.yml as docker compose would, with
// .env.example as .env and env (NAME=value) set on top of it.
func composeProject(env ...string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions([]string{"../../docker-compose.yml"}, cli.WithEnv(env),
		cli.WithEnvFiles("../../.env.example"), cli.WithDotEnv, cli.WithProfiles([]string{"sim", "run", "observability", "serve", "tracing"}), cli.WithName("quorum"))
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(context.Background())
}

func TestComposeFileLoads(t *testing.T) {
	p, err := composeProject("QUORUM_REDIS_PASSWORD="+composeRedisPassword, "QUORUM_NATS_PASSWORD="+composeNATSPassword, "GRAFANA_ADMIN_PASSWORD=0f1e2d3c4b5a6978",
		"QUORUM_API_KEYS=app:0123456789abcdef0123")
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	var names []string
	for n := range p.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	want := []string{"coordinator", "explorer", "generator", "grafana", "jaeger", "llmsim", "nats", "prometheus", "redis", "serve", "voter"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("services %v, want %v", names, want)
	}
	if _, ok := p.Volumes["nats-data"]; !ok {
		t.Error("NATS has no volume")
	}

	// Redis: AOF, the ACL of deploy/redis through start.sh, the password
	// from the environment only.
	redis := p.Services["redis"]
	if strings.Join(redis.Entrypoint, " ") != "sh /etc/quorum/redis/start.sh" {
		t.Errorf("redis entrypoint %v, want deploy/redis/start.sh", redis.Entrypoint)
	}
	if !strings.Contains(strings.Join(redis.Command, " "), "--appendonly yes") {
		t.Errorf("redis must persist (AOF): %v", redis.Command)
	}
	if strings.Contains(strings.Join(redis.Command, " "), composeRedisPassword) || strings.Contains(strings.Join(redis.Entrypoint, " "), composeRedisPassword) {
		t.Error("the Redis password is on redis-server's command line")
	}
	if v := redis.Environment["QUORUM_REDIS_PASSWORD"]; v == nil || *v != composeRedisPassword {
		t.Errorf("redis QUORUM_REDIS_PASSWORD = %v", v)
	}
	if redis.User == "" || redis.User == "root" {
		t.Errorf("redis runs as %q", redis.User)
	}
	checkMount(t, redis, "deploy/redis", "/etc/quorum/redis")

	nats := p.Services["nats"]
	if strings.Join(nats.Command, " ") != "-c /etc/quorum/nats/nats.conf" {
		t.Errorf("nats command %v, want the configuration of deploy/nats", nats.Command)
	}
	if v := nats.Environment["QUORUM_NATS_PASSWORD"]; v == nil || *v != composeNATSPassword {
		t.Errorf("nats QUORUM_NATS_PASSWORD = %v", v)
	}
	checkMount(t, nats, "deploy/nats", "/etc/quorum/nats")

	// Every role logs in to both, as quorum.
	for _, role := range []string{"generator", "explorer", "voter", "coordinator"} {
		env := p.Services[role].Environment
		for k, want := range map[string]string{
			"QUORUM_REDIS_URL": "redis://quorum:" + composeRedisPassword + "@redis:6379/0",
			"QUORUM_NATS_URL":  "nats://quorum:" + composeNATSPassword + "@nats:4222",
		} {
			if v := env[k]; v == nil || *v != want {
				t.Errorf("%s %s = %v, want %s", role, k, v, want)
			}
		}
	}
}

// TestComposeTracing: the tracing profile's Jaeger is pinned, receives
// OTLP and serves its UI on loopback only, and every role exports to the
// endpoint .env names, and to none when it names none.
func TestComposeTracing(t *testing.T) {
	const endpoint = "http://jaeger:4318"
	base := []string{"QUORUM_REDIS_PASSWORD=" + composeRedisPassword, "QUORUM_NATS_PASSWORD=" + composeNATSPassword,
		"GRAFANA_ADMIN_PASSWORD=0f1e2d3c4b5a6978", "QUORUM_API_KEYS=app:0123456789abcdef0123"}
	p, err := composeProject(append(base, "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint)...)
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	j, ok := p.Services["jaeger"]
	if !ok {
		t.Fatal("no jaeger service")
	}
	if !strings.HasPrefix(j.Image, "jaegertracing/jaeger:2.") || strings.HasSuffix(j.Image, ":latest") {
		t.Errorf("jaeger image %q, want a pinned jaegertracing/jaeger:2.x", j.Image)
	}
	if strings.Join(j.Profiles, ",") != "tracing" {
		t.Errorf("jaeger profiles %v, want only tracing (optional)", j.Profiles)
	}
	published := map[string]string{}
	for _, port := range j.Ports {
		published[port.Published] = port.HostIP
		if port.Target != mustAtoi(t, port.Published) {
			t.Errorf("jaeger publishes %s on %s; want the same port", port.Published, port.HostIP)
		}
	}
	for _, port := range []string{"4317", "4318", "16686"} {
		if ip, ok := published[port]; !ok || ip != "127.0.0.1" {
			t.Errorf("jaeger port %s published on %q (published %v), want 127.0.0.1: the UI has no login", port, ip, ok)
		}
	}
	for _, role := range []string{"generator", "explorer", "voter", "coordinator", "serve"} {
		if v := p.Services[role].Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]; v == nil || *v != endpoint {
			t.Errorf("%s OTEL_EXPORTER_OTLP_ENDPOINT = %v, want %s", role, v, endpoint)
		}
	}

	// Without it (.env.example leaves it empty) no role exports: the
	// OpenTelemetry SDK reads an empty value as unset.
	p, err = composeProject(base...)
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, role := range []string{"generator", "explorer", "voter", "coordinator", "serve"} {
		if v := p.Services[role].Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]; v != nil && *v != "" {
			t.Errorf("%s OTEL_EXPORTER_OTLP_ENDPOINT = %q without tracing asked for, want empty", role, *v)
		}
	}
}

func mustAtoi(t *testing.T, s string) uint32 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		t.Fatalf("port %q: %v", s, err)
	}
	return uint32(n)
}

func checkMount(t *testing.T, s types.ServiceConfig, dir, target string) {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Target == target {
			if !strings.HasSuffix(filepath.ToSlash(v.Source), dir) || !v.ReadOnly {
				t.Errorf("%s mounts %s at %s (read-only %v), want ./%s read-only", s.Name, v.Source, target, v.ReadOnly, dir)
			}
			return
		}
	}
	t.Errorf("%s does not mount ./%s at %s", s.Name, dir, target)
}

// TestComposeRequiresPasswords: without either password docker compose
// refuses to start, naming it, instead of running Redis or NATS open.
func TestComposeRequiresPasswords(t *testing.T) {
	for _, tc := range []struct{ missing, other string }{
		{"QUORUM_REDIS_PASSWORD", "QUORUM_NATS_PASSWORD=" + composeNATSPassword},
		{"QUORUM_NATS_PASSWORD", "QUORUM_REDIS_PASSWORD=" + composeRedisPassword},
	} {
		for _, env := range [][]string{{tc.other}, {tc.other, tc.missing + "="}} {
			_, err := composeProject(env...)
			if err == nil || !strings.Contains(err.Error(), tc.missing) {
				t.Errorf("with %v: %v, want an error naming %s", env, err, tc.missing)
			}
		}
	}
}

var metricName = regexp.MustCompile(`\bquorum_[a-z_]+\b`)

func TestDashboardQueriesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("../grafana/dashboards/quorum.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, role := range []string{"generator", "explorer", "voter", "coordinator"} {
		for _, n := range metrics.New(role).Names() {
			exported[n] = true
		}
	}
	used := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range metricName.FindAllString(tg.Expr, -1) {
				used++
				if !exported[n] {
					t.Errorf("panel %q queries %s, which quorum does not export", p.Title, n)
				}
			}
		}
	}
	if used < 10 {
		t.Errorf("the dashboard queries only %d quorum metrics", used)
	}
}
