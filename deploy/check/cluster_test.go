package check

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/quorumsql/quorum/internal/redisconn"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// quorumRoles are the services of the compose files that run quorum's
// roles (and so connect to NATS).
var quorumRoles = []string{"generator", "explorer", "voter", "coordinator", "serve"}

// clusterProject loads docker-compose.cluster.yml as docker compose would.
func clusterProject(t *testing.T) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{"../../docker-compose.cluster.yml"},
		cli.WithEnv([]string{"QUORUM_REDIS_PASSWORD=" + composeRedisPassword, "QUORUM_NATS_PASSWORD=" + composeNATSPassword,
			"QUORUM_REDIS_ADMIN_PASSWORD=" + adminPassword,
			"GRAFANA_ADMIN_PASSWORD=0f1e2d3c4b5a6978", "QUORUM_API_KEYS=app:0123456789abcdef0123"}),
		cli.WithEnvFiles("../../.env.example"), cli.WithDotEnv, cli.WithProfiles([]string{"sim", "run", "observability", "serve"}), cli.WithName("quorum"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker-compose.cluster.yml: %v", err)
	}
	return p
}

// flagValue is the value after flag in a command, or "".
func flagValue(cmd []string, flag string) string {
	if i := slices.Index(cmd, flag); i >= 0 && i+1 < len(cmd) {
		return cmd[i+1]
	}
	return ""
}

// TestComposeClusterR3: the cluster compose file runs three NATS nodes,
// each on the cluster configuration under its own name and store, every
// role waits for all three, is given all three servers and keeps the
// streams on three of them; the NATS configuration routes to exactly
// those three nodes.
func TestComposeClusterR3(t *testing.T) {
	p := clusterProject(t)
	nodes := []string{"nats-1", "nats-2", "nats-3"}
	if _, ok := p.Services["nats"]; ok {
		t.Error("a single nats service is left beside the cluster's nodes")
	}
	for _, n := range nodes {
		s, ok := p.Services[n]
		if !ok {
			t.Fatalf("no service %s", n)
		}
		if got := strings.Join(s.Command, " "); got != "-c /etc/quorum/nats/nats-cluster.conf --name "+n {
			t.Errorf("%s command %q, want the cluster configuration named %s", n, got, n)
		}
		if v := s.Environment["QUORUM_NATS_PASSWORD"]; v == nil || *v != composeNATSPassword {
			t.Errorf("%s QUORUM_NATS_PASSWORD = %v", n, v)
		}
		checkMount(t, s, "deploy/nats", "/etc/quorum/nats")
		if len(s.Volumes) == 0 || s.Volumes[0].Source != n+"-data" {
			t.Errorf("%s stores JetStream in %v, want its own volume %s-data", n, s.Volumes, n)
		}
	}
	wantURL := "nats://quorum:" + composeNATSPassword + "@nats-1:4222,nats://quorum:" + composeNATSPassword + "@nats-2:4222,nats://quorum:" + composeNATSPassword + "@nats-3:4222"
	for _, role := range quorumRoles {
		s := p.Services[role]
		if r := flagValue(s.Command, "--stream-replicas"); r != "3" {
			t.Errorf("%s: --stream-replicas %q, want 3 (command %v)", role, r, s.Command)
		}
		if v := s.Environment["QUORUM_NATS_URL"]; v == nil || *v != wantURL {
			t.Errorf("%s QUORUM_NATS_URL = %v, want the three servers %s", role, v, wantURL)
		}
		for _, n := range nodes {
			if _, ok := s.DependsOn[n]; !ok {
				t.Errorf("%s does not wait for %s", role, n)
			}
		}
	}

	t.Setenv("QUORUM_NATS_PASSWORD", natsPassword)
	opts, err := server.ProcessConfigFile("../nats/nats-cluster.conf")
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, r := range opts.Routes {
		routes = append(routes, r.String())
	}
	if want := []string{"nats://nats-1:6222", "nats://nats-2:6222", "nats://nats-3:6222"}; !slices.Equal(routes, want) {
		t.Errorf("nats-cluster.conf routes %v, want %v", routes, want)
	}
	if opts.Cluster.Name != "quorum" || opts.Cluster.Port != 6222 || !opts.JetStream || opts.Port != 4222 || opts.HTTPPort != 8222 {
		t.Errorf("nats-cluster.conf: cluster %q on %d, JetStream %v, ports %d/%d", opts.Cluster.Name, opts.Cluster.Port, opts.JetStream, opts.Port, opts.HTTPPort)
	}
	if opts.Username != "quorum" || opts.Password != natsPassword {
		t.Errorf("nats-cluster.conf: clients log in as %q, want quorum with QUORUM_NATS_PASSWORD", opts.Username)
	}
}

// checkStreamReplicas: every role container (Deployments and the
// coordinator Job) passes --stream-replicas from the ConfigMap, and the
// ConfigMap asks for as many replicas as the NATS chart runs servers.
func checkStreamReplicas(t *testing.T, m *manifests) {
	t.Helper()
	roles := map[string]bool{"coordinator": true, "generator-worker": true, "explorer-worker": true, "voter": true, "serve": true}
	var pods []corev1.PodSpec
	var names []string
	for name, d := range m.deployments {
		pods, names = append(pods, d.Spec.Template.Spec), append(names, "deployment "+name)
	}
	for _, j := range m.jobs {
		pods, names = append(pods, j.Spec.Template.Spec), append(names, "job "+j.Name)
	}
	seen := 0
	for i, pod := range pods {
		for _, c := range pod.Containers {
			if len(c.Args) == 0 || !roles[c.Args[0]] {
				continue
			}
			seen++
			if r := flagValue(c.Args, "--stream-replicas"); r != "$(STREAM_REPLICAS)" {
				t.Errorf("%s: --stream-replicas %q, want $(STREAM_REPLICAS) of the ConfigMap (args %v)", names[i], r, c.Args)
			}
			if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool {
				return e.ConfigMapRef != nil && e.ConfigMapRef.Name == "quorum-config"
			}) {
				t.Errorf("%s does not take its environment from quorum-config, where STREAM_REPLICAS is", names[i])
			}
		}
	}
	if seen < 4 {
		t.Errorf("only %d role containers found", seen)
	}
	cm, ok := m.configMaps["quorum-config"]
	if !ok {
		return // an overlay's patches; the base is checked on its own
	}
	b, err := os.ReadFile("../k8s/helm/nats-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config struct {
			Cluster struct {
				Enabled  bool `json:"enabled"`
				Replicas int  `json:"replicas"`
			} `json:"cluster"`
		} `json:"config"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if !v.Config.Cluster.Enabled || v.Config.Cluster.Replicas != 3 {
		t.Errorf("the NATS chart runs %d servers (cluster enabled %v), want a cluster of 3", v.Config.Cluster.Replicas, v.Config.Cluster.Enabled)
	}
	if got := cm.Data["STREAM_REPLICAS"]; got != strconv.Itoa(v.Config.Cluster.Replicas) {
		t.Errorf("quorum-config STREAM_REPLICAS = %q, want %d, the NATS chart's servers", got, v.Config.Cluster.Replicas)
	}
}

// TestComposeClusterSentinel: the cluster compose file runs Redis as
// deploy/check's failover test does: two servers by start.sh (each named
// as itself, redis-1 first), three sentinels by sentinel.sh, each given
// only variables its script reads; every role waits for the sentinels and
// reaches the primary through them with its own password.
func TestComposeClusterSentinel(t *testing.T) {
	p := clusterProject(t)
	if _, ok := p.Services["redis"]; ok {
		t.Error("a single redis service is left beside the failover set-up")
	}
	sentinels := []string{"redis-sentinel-1:26379", "redis-sentinel-2:26379", "redis-sentinel-3:26379"}
	env := func(s types.ServiceConfig, name string) string {
		if v := s.Environment[name]; v != nil {
			return *v
		}
		return ""
	}
	for _, c := range []struct {
		service, script string
		want            map[string]string
	}{
		{"redis-1", "start.sh", map[string]string{"QUORUM_REDIS_SELF": "redis-1:6379", "QUORUM_REDIS_REPLICAOF": "redis-1 6379", "QUORUM_REDIS_SENTINELS": strings.Join(sentinels, ",")}},
		{"redis-2", "start.sh", map[string]string{"QUORUM_REDIS_SELF": "redis-2:6379", "QUORUM_REDIS_REPLICAOF": "redis-1 6379", "QUORUM_REDIS_SENTINELS": strings.Join(sentinels, ",")}},
		{"redis-sentinel-1", "sentinel.sh", map[string]string{"QUORUM_REDIS_PRIMARY": "redis-1 6379", "QUORUM_SENTINEL_ANNOUNCE": "redis-sentinel-1"}},
		{"redis-sentinel-2", "sentinel.sh", map[string]string{"QUORUM_REDIS_PRIMARY": "redis-1 6379", "QUORUM_SENTINEL_ANNOUNCE": "redis-sentinel-2"}},
		{"redis-sentinel-3", "sentinel.sh", map[string]string{"QUORUM_REDIS_PRIMARY": "redis-1 6379", "QUORUM_SENTINEL_ANNOUNCE": "redis-sentinel-3"}},
	} {
		s, ok := p.Services[c.service]
		if !ok {
			t.Errorf("no service %s", c.service)
			continue
		}
		if got := strings.Join(s.Entrypoint, " "); got != "sh /etc/quorum/redis/"+c.script {
			t.Errorf("%s runs %q, want sh /etc/quorum/redis/%s", c.service, got, c.script)
		}
		checkMount(t, s, "deploy/redis", "/etc/quorum/redis")
		reads := scriptEnv(t, c.script)
		for name := range s.Environment {
			if strings.HasPrefix(name, "QUORUM_") && !slices.Contains(reads, name) {
				t.Errorf("%s sets %s, which %s does not read", c.service, name, c.script)
			}
		}
		c.want["QUORUM_REDIS_PASSWORD"] = composeRedisPassword
		c.want["QUORUM_REDIS_ADMIN_PASSWORD"] = adminPassword
		for name, want := range c.want {
			if got := env(s, name); got != want {
				t.Errorf("%s: %s = %q, want %q", c.service, name, got, want)
			}
		}
	}
	for _, role := range quorumRoles {
		s := p.Services[role]
		o, err := redisconn.Parse(env(s, "QUORUM_REDIS_URL"))
		if err != nil {
			t.Errorf("%s: QUORUM_REDIS_URL: %v", role, err)
			continue
		}
		if o.Sentinel == nil || o.Sentinel.Master != "quorum" || !slices.Equal(o.Sentinel.Addrs, sentinels) ||
			o.Sentinel.Password != composeRedisPassword || o.Username != "quorum" || o.Password != composeRedisPassword {
			t.Errorf("%s: QUORUM_REDIS_URL reaches %s as %q, want the primary quorum of %v with the roles' password", role, o.Where(), o.Username, sentinels)
		}
		for _, sn := range sentinels {
			if _, ok := s.DependsOn[strings.TrimSuffix(sn, ":26379")]; !ok {
				t.Errorf("%s does not wait for %s", role, sn)
			}
		}
	}
}
