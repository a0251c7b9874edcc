package check

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/quorumsql/quorum/internal/redisconn"
)

// build renders a kustomization directory as kubectl apply -k would and
// decodes what it makes.
func build(t *testing.T, dir string) *manifests {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(k8sDir, dir))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := rm.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	m := newManifests()
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) > 0 {
			decode(t, dir, append(doc, '\n'), m)
		}
	}
	return m
}

// TestKustomizeBuilds: every overlay builds with kustomize itself, and
// what it makes passes the checks the files pass one by one.
func TestKustomizeBuilds(t *testing.T) {
	for _, dir := range []string{"base", "overlays/example", "overlays/ha"} {
		t.Run(dir, func(t *testing.T) {
			m := build(t, dir)
			checkDeployments(t, m)
			checkRoleCredentials(t, m)
			checkStreamReplicas(t, m)
			checkRedis(t, m)
		})
	}
}

// expand does what Kubernetes does to an env value: $(NAME) becomes the
// value of a variable defined before it or of the ConfigMap; the Secret's
// values are given.
func expand(t *testing.T, env []corev1.EnvVar, i int, config map[string]string, secrets map[string]string) string {
	t.Helper()
	vars := map[string]string{}
	for k, v := range config {
		vars[k] = v
	}
	for _, e := range env[:i] {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			vars[e.Name] = secrets[e.ValueFrom.SecretKeyRef.Key]
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			vars[e.Name] = "pod-0"
		default:
			vars[e.Name] = e.Value
		}
	}
	return regexp.MustCompile(`\$\(([A-Z_][A-Z0-9_]*)\)`).ReplaceAllStringFunc(env[i].Value, func(s string) string {
		v, ok := vars[s[2:len(s)-1]]
		if !ok {
			t.Errorf("%s = %q: Kubernetes cannot expand %s", env[i].Name, env[i].Value, s)
		}
		return v
	})
}

// scriptEnv is every QUORUM_* variable a deploy/redis script reads.
func scriptEnv(t *testing.T, script string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "redis", script))
	if err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`QUORUM_[A-Z_]+`).FindAllString(string(b), -1)
}

// TestKubernetesSentinel: the ha overlay (base + the sentinel component)
// runs two Redis servers and three sentinels by deploy/redis's scripts,
// each given only variables its script reads; every role's URL, expanded
// as Kubernetes expands it, is a redis+sentinel URL naming the three
// sentinels by DNS names their headless Service gives; the NetworkPolicies
// let the roles, the servers and the sentinels reach what they must.
func TestKubernetesSentinel(t *testing.T) {
	m := build(t, "overlays/ha")
	config := m.configMaps["quorum-config"].Data
	secrets := map[string]string{redisSecretKey: redisPassword, "redis-admin-password": adminPassword}

	redisSts, sentinelSts := m.statefulSets["redis"], m.statefulSets["redis-sentinel"]
	if redisSts == nil || sentinelSts == nil {
		t.Fatalf("StatefulSets redis %v, redis-sentinel %v: want both", redisSts != nil, sentinelSts != nil)
	}
	if r := *redisSts.Spec.Replicas; r != 2 {
		t.Errorf("redis runs %d servers, want a primary and a replica", r)
	}
	if r := *sentinelSts.Spec.Replicas; r != 3 {
		t.Errorf("%d sentinels, want 3 (two must agree)", r)
	}
	// DNS names: <pod>.<headless service>.quorum.svc.cluster.local.
	podName := func(sts string, i int) string {
		s := m.statefulSets[sts]
		svc, ok := m.services[s.Spec.ServiceName]
		if !ok || svc.Spec.ClusterIP != "None" || !svc.Spec.PublishNotReadyAddresses {
			t.Errorf("StatefulSet %s's service %q is not a headless Service publishing pods before they are ready", sts, s.Spec.ServiceName)
		}
		return sts + "-" + string(rune('0'+i)) + "." + s.Spec.ServiceName + ".quorum.svc.cluster.local"
	}
	var sentinels []string
	for i := range 3 {
		sentinels = append(sentinels, podName("redis-sentinel", i)+":26379")
	}
	primary := podName("redis", 0) + " 6379"

	for _, c := range []struct {
		sts, script string
		want        map[string]string
	}{
		{"redis", "start.sh", map[string]string{
			"QUORUM_REDIS_SELF":      strings.Replace(podName("redis", 0), "redis-0", "pod-0", 1) + ":6379",
			"QUORUM_REDIS_REPLICAOF": primary,
			"QUORUM_REDIS_SENTINELS": strings.Join(sentinels, ","),
		}},
		{"redis-sentinel", "sentinel.sh", map[string]string{
			"QUORUM_REDIS_PRIMARY":     primary,
			"QUORUM_SENTINEL_ANNOUNCE": strings.Replace(podName("redis-sentinel", 0), "redis-sentinel-0", "pod-0", 1),
		}},
	} {
		ctr := m.statefulSets[c.sts].Spec.Template.Spec.Containers[0]
		if got := strings.Join(ctr.Command, " "); got != "sh /etc/quorum/redis/"+c.script {
			t.Errorf("%s runs %q, want sh /etc/quorum/redis/%s", c.sts, got, c.script)
		}
		reads := scriptEnv(t, c.script)
		for i, e := range ctr.Env {
			if strings.HasPrefix(e.Name, "QUORUM_") && !slices.Contains(reads, e.Name) {
				t.Errorf("%s sets %s, which %s does not read", c.sts, e.Name, c.script)
			}
			if want, ok := c.want[e.Name]; ok {
				if got := expand(t, ctr.Env, i, config, secrets); got != want {
					t.Errorf("%s: %s = %q, want %q", c.sts, e.Name, got, want)
				}
				delete(c.want, e.Name)
			}
		}
		for _, name := range []string{"QUORUM_REDIS_PASSWORD", "QUORUM_REDIS_ADMIN_PASSWORD"} {
			i := envIndex(ctr.Env, name)
			if i < 0 || ctr.Env[i].ValueFrom == nil || ctr.Env[i].ValueFrom.SecretKeyRef == nil {
				t.Errorf("%s: %s is not read from the Secret", c.sts, name)
			}
		}
		for name := range c.want {
			t.Errorf("%s lacks %s", c.sts, name)
		}
	}

	// Every role: the URL Kubernetes makes parses and names the sentinels.
	roles := 0
	for name, d := range m.deployments {
		for _, ctr := range d.Spec.Template.Spec.Containers {
			if i := envIndex(ctr.Env, "QUORUM_REDIS_URL"); i >= 0 {
				roles++
				checkSentinelURL(t, "deployment "+name, expand(t, ctr.Env, i, config, secrets), sentinels)
			}
		}
	}
	for _, j := range m.jobs {
		ctr := j.Spec.Template.Spec.Containers[0]
		roles++
		checkSentinelURL(t, "job "+j.Name, expand(t, ctr.Env, envIndex(ctr.Env, "QUORUM_REDIS_URL"), config, secrets), sentinels)
	}
	if roles < 5 {
		t.Errorf("%d roles have a Redis URL, want every role of the base (5)", roles)
	}

	// Who may reach whom.
	admits := func(target, from string, port int32) bool {
		for _, p := range m.policies {
			if p.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != target {
				continue
			}
			for _, in := range p.Spec.Ingress {
				portOK := false
				for _, pp := range in.Ports {
					portOK = portOK || pp.Port.IntVal == port
				}
				for _, f := range in.From {
					if f.PodSelector != nil && portOK && (f.PodSelector.MatchLabels["app.kubernetes.io/name"] == from ||
						from == "quorum" && f.PodSelector.MatchLabels["app.kubernetes.io/part-of"] == "quorum") {
						return true
					}
				}
			}
		}
		return false
	}
	for _, c := range []struct {
		target, from string
		port         int32
	}{
		{"redis", "quorum", 6379}, {"redis", "redis", 6379}, {"redis", "redis-sentinel", 6379},
		{"redis-sentinel", "quorum", 26379}, {"redis-sentinel", "redis-sentinel", 26379}, {"redis-sentinel", "redis", 26379},
	} {
		if !admits(c.target, c.from, c.port) {
			t.Errorf("no NetworkPolicy lets %s pods reach %s on %d", c.from, c.target, c.port)
		}
	}
}

// checkSentinelURL: raw parses as a redis+sentinel URL for the primary
// quorum, logging in as quorum to it and to the sentinels.
func checkSentinelURL(t *testing.T, what, raw string, sentinels []string) {
	t.Helper()
	o, err := redisconn.Parse(raw)
	if err != nil {
		t.Errorf("%s: QUORUM_REDIS_URL: %v", what, err)
		return
	}
	if o.Sentinel == nil || o.Sentinel.Master != "quorum" || !slices.Equal(o.Sentinel.Addrs, sentinels) ||
		o.Sentinel.Password != redisPassword || o.Username != "quorum" || o.Password != redisPassword {
		t.Errorf("%s: QUORUM_REDIS_URL reaches %s as %q, want the primary quorum of %v with the roles' password", what, o.Where(), o.Username, sentinels)
	}
}
