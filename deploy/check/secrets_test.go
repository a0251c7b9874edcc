package check

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The Secret the deployment reads (created by hand, never committed; see
// deploy/k8s/README.md) and its keys.
const (
	secretName     = "quorum-secrets"
	redisSecretKey = "redis-password"
	natsSecretKey  = "nats-password"
)

// credentialURL is a URL the pods build: user quorum, the password a
// variable taken from the Secret, the address one from quorum-config.
var credentialURL = regexp.MustCompile(`^([a-z+]+)://quorum:\$\(([A-Z_][A-Z0-9_]*)\)@\$\(([A-Z_][A-Z0-9_]*)\)(/[a-z]+)?(/[0-9]+)?(\?sentinel_password=\$\(([A-Z_][A-Z0-9_]*)\))?$`)

// checkRoleCredentials: every quorum container logs in to Redis and NATS
// as quorum, with a password Kubernetes takes from the Secret.
func checkRoleCredentials(t *testing.T, m *manifests) {
	var pods []struct {
		what string
		spec corev1.PodSpec
	}
	for name, d := range m.deployments {
		if d.Spec.Template.Spec.Containers != nil {
			pods = append(pods, struct {
				what string
				spec corev1.PodSpec
			}{"deployment " + name, d.Spec.Template.Spec})
		}
	}
	for _, j := range m.jobs {
		pods = append(pods, struct {
			what string
			spec corev1.PodSpec
		}{"job " + j.Name, j.Spec.Template.Spec})
	}
	config := m.configMaps["quorum-config"]
	for _, p := range pods {
		for _, c := range p.spec.Containers {
			what := p.what + " container " + c.Name
			fromConfig := false
			for _, e := range c.EnvFrom {
				if e.ConfigMapRef != nil && e.ConfigMapRef.Name == "quorum-config" {
					fromConfig = true
				}
			}
			for _, want := range []struct{ env, schemes, key string }{
				{"QUORUM_REDIS_URL", "redis rediss redis+sentinel rediss+sentinel", redisSecretKey},
				{"QUORUM_NATS_URL", "nats tls", natsSecretKey},
			} {
				i := envIndex(c.Env, want.env)
				if i < 0 {
					t.Errorf("%s lacks %s", what, want.env)
					continue
				}
				sm := credentialURL.FindStringSubmatch(c.Env[i].Value)
				if sm == nil || !strings.Contains(" "+want.schemes+" ", " "+sm[1]+" ") {
					t.Errorf("%s: %s = %q, want %s://quorum:$(PASSWORD_VAR)@$(ADDR_VAR)", what, want.env, c.Env[i].Value, strings.Fields(want.schemes)[0])
					continue
				}
				// Kubernetes expands $(NAME) only from variables before it.
				pw := envIndex(c.Env[:i], sm[2])
				if pw < 0 || c.Env[pw].ValueFrom == nil || c.Env[pw].ValueFrom.SecretKeyRef == nil {
					t.Errorf("%s: %s takes its password from $(%s), which is not a Secret reference before it", what, want.env, sm[2])
				} else if ref := c.Env[pw].ValueFrom.SecretKeyRef; ref.Name != secretName || ref.Key != want.key {
					t.Errorf("%s: %s reads Secret %s key %s, want %s key %s", what, sm[2], ref.Name, ref.Key, secretName, want.key)
				}
				if sm[7] != "" && sm[7] != sm[2] {
					t.Errorf("%s: %s logs in to the sentinels with $(%s), want the roles' password $(%s)", what, want.env, sm[7], sm[2])
				}
				if !fromConfig || config == nil || config.Data[sm[3]] == "" {
					t.Errorf("%s: %s takes its address from $(%s), which quorum-config does not give it", what, want.env, sm[3])
				}
			}
		}
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<end>"
}

func envIndex(env []corev1.EnvVar, name string) int {
	for i, e := range env {
		if e.Name == name {
			return i
		}
	}
	return -1
}

// checkRedis: the Redis of base/ runs deploy/redis/start.sh with the
// committed ACL, the password from the Secret, and an append-only file.
func checkRedis(t *testing.T, m *manifests) {
	cm, ok := m.configMaps["quorum-redis"]
	if !ok {
		t.Fatal("no quorum-redis ConfigMap")
	}
	for _, f := range []string{"users.acl", "start.sh", "sentinel.sh"} {
		want, err := os.ReadFile(filepath.Join("..", "redis", f))
		if err != nil {
			t.Fatal(err)
		}
		if got := cm.Data[f]; got != string(want) {
			gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
			i := 0
			for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
				i++
			}
			t.Errorf("ConfigMap quorum-redis %s differs from deploy/redis/%s from line %d (%q, want %q): copy the file into base/redis.yaml",
				f, f, i+1, at(gl, i), at(wl, i))
		}
	}
	s, ok := m.statefulSets["redis"]
	if !ok {
		t.Fatal("no redis StatefulSet")
	}
	if s.Spec.Template.Labels["app.kubernetes.io/name"] != "redis" {
		t.Error("the redis pods lack app.kubernetes.io/name=redis, which the NetworkPolicy protects")
	}
	c := s.Spec.Template.Spec.Containers[0]
	if strings.Join(c.Command, " ") != "sh /etc/quorum/redis/start.sh" {
		t.Errorf("redis runs %v, want sh /etc/quorum/redis/start.sh", c.Command)
	}
	if !strings.Contains(strings.Join(c.Args, " "), "--appendonly yes") {
		t.Errorf("redis args %v lack --appendonly yes", c.Args)
	}
	i := envIndex(c.Env, "QUORUM_REDIS_PASSWORD")
	if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil ||
		c.Env[i].ValueFrom.SecretKeyRef.Name != secretName || c.Env[i].ValueFrom.SecretKeyRef.Key != redisSecretKey {
		t.Errorf("redis must take QUORUM_REDIS_PASSWORD from Secret %s key %s", secretName, redisSecretKey)
	}
	mounted := false
	for _, vm := range c.VolumeMounts {
		for _, v := range s.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name && vm.MountPath == "/etc/quorum/redis" && v.ConfigMap != nil && v.ConfigMap.Name == "quorum-redis" {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Error("redis does not mount ConfigMap quorum-redis at /etc/quorum/redis")
	}
}

// TestNATSHelmValues: the NATS chart's values make clients log in as
// quorum with the password of the Secret, by reference.
func TestNATSHelmValues(t *testing.T) {
	b, err := os.ReadFile("../k8s/helm/nats-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config struct {
			JetStream struct {
				Enabled bool `json:"enabled"`
			} `json:"jetstream"`
			Merge struct {
				Authorization struct {
					User     string `json:"user"`
					Password string `json:"password"`
				} `json:"authorization"`
			} `json:"merge"`
		} `json:"config"`
		Container struct {
			Env map[string]corev1.EnvVar `json:"env"`
		} `json:"container"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if !v.Config.JetStream.Enabled {
		t.Error("JetStream is off")
	}
	auth := v.Config.Merge.Authorization
	ref := regexp.MustCompile(`^<< \$([A-Z_][A-Z0-9_]*) >>$`).FindStringSubmatch(auth.Password)
	if auth.User != "quorum" || ref == nil {
		t.Fatalf("authorization %+v, want user quorum and password << $VAR >>", auth)
	}
	e, ok := v.Container.Env[ref[1]]
	if !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != secretName || e.ValueFrom.SecretKeyRef.Key != natsSecretKey {
		t.Errorf("container.env.%s must come from Secret %s key %s, got %+v", ref[1], secretName, natsSecretKey, e)
	}
}

// secretKey is a setting whose value is a secret; secretURL a URL's
// user and the ':' before its password.
var (
	secretKey = regexp.MustCompile(`(?i)([a-z0-9_.-]*(?:password|passwd|secret|token|api_?key|_auth)[a-z0-9_]*)["']?\s*[:=]`)
	// Settings that name a secret rather than hold one (secretName,
	// secretKeyRef, passwordFile, ...).
	namesSecret = regexp.MustCompile(`(?i)(name|ref|file|path|dir)$`)
	requirePass = regexp.MustCompile(`(?i)requirepass["']?[\s,=]+`)
	secretURL   = regexp.MustCompile(`[a-z][a-z0-9+.-]*://[A-Za-z0-9._~%-]*:`)
	aclPassword = regexp.MustCompile(`(^|\s)([>#<][^\s]+)`)
	// envRef is a value taken from elsewhere: $(VAR) in Kubernetes or
	// $(command) in a shell, $VAR, ${VAR}, ${VAR:?message}, ${VAR:-}, and
	// the NATS chart's << $VAR >>.
	envRef = regexp.MustCompile(`^(\$\([^)]*\)|\$\$?\w+|\$\{\w+(:?\?[^}]*)?\}|\$\{\w+:?-\}|<<\s*\$\w+\s*>>)$`)
)

// placeholders are defaults that are no secret: the simulated LLM takes any
// API key.
var placeholders = map[string]bool{"sk-none": true}

// value is the value that starts s: a quoted string, a ${...}, $(...) or
// << ... >> reference, or a word.
func value(s string) string {
	s = strings.TrimLeft(s, " \t")
	for _, p := range [][2]string{{"${", "}"}, {"$(", ")"}, {"<<", ">>"}} {
		if strings.HasPrefix(s, p[0]) {
			if i := strings.Index(s, p[1]); i > 0 {
				return s[:i+len(p[1])]
			}
		}
	}
	if q := s[:min(1, len(s))]; q == `"` || q == `'` {
		if i := strings.Index(s[1:], q); i >= 0 {
			return strings.TrimSpace(s[1 : i+1])
		}
	}
	end := strings.IndexAny(s, " \t,]}\"'@")
	if end < 0 {
		return s
	}
	return s[:end]
}

// literal reports whether v is a secret written out rather than taken
// from the environment or a Secret.
func literal(v string) bool {
	if v == "" || envRef.MatchString(v) || placeholders[v] {
		return false
	}
	// ${VAR:-default}: the default is written out.
	if d, ok := strings.CutPrefix(v, "${"); ok {
		if _, def, ok := strings.Cut(strings.TrimSuffix(d, "}"), ":-"); ok {
			return literal(def)
		}
		if _, def, ok := strings.Cut(strings.TrimSuffix(d, "}"), "-"); ok && !strings.Contains(d, "?") {
			return literal(def)
		}
	}
	return true
}

// literalSecrets returns the secrets written out on a line of file: a value
// of a password-like setting, requirepass's argument, a URL's password, a
// password in a Redis ACL user. Comments are prose: only URLs and
// requirepass are checked there.
func literalSecrets(file, line string) []string {
	var out []string
	check := func(v string) {
		if literal(v) {
			out = append(out, v)
		}
	}
	// In a quoted string (a YAML or JSON command), \" is a quote.
	line = strings.ReplaceAll(line, `\"`, `"`)
	comment := strings.HasPrefix(strings.TrimSpace(line), "#")
	for pos := 0; !comment; {
		loc := secretKey.FindStringSubmatchIndex(line[pos:])
		if loc == nil {
			break
		}
		key, rest := line[pos+loc[2]:pos+loc[3]], line[pos+loc[1]:]
		v := value(rest)
		// ${PASSWORD:?...} names a variable, not a setting.
		if before := line[:pos+loc[2]]; !strings.HasSuffix(before, "$") && !strings.HasSuffix(before, "${") && !namesSecret.MatchString(key) {
			check(v)
		}
		pos += loc[1] + max(len(v), 1)
		if pos >= len(line) {
			break
		}
	}
	for _, loc := range requirePass.FindAllStringIndex(line, -1) {
		check(value(line[loc[1]:]))
	}
	for _, loc := range secretURL.FindAllStringIndex(line, -1) {
		// Only userinfo: the value must be followed by '@'.
		rest := line[loc[1]:]
		if v := value(rest); v != "" && strings.HasPrefix(rest[len(v):], "@") {
			check(v)
		}
	}
	if rules, ok := strings.CutPrefix(strings.TrimSpace(line), "user "); ok {
		for _, m := range aclPassword.FindAllStringSubmatch(rules, -1) {
			out = append(out, m[2]) // >password, #sha256, <password: all literal
		}
	}
	return out
}

func TestLiteralSecretDetector(t *testing.T) {
	for _, tc := range []struct {
		file, line string
		want       []string
	}{
		{"c.yml", `    command: ["redis-server", "--appendonly", "yes", "--requirepass", "hunter2"]`, []string{"hunter2"}},
		{"r.conf", `requirepass hunter2`, []string{"hunter2"}},
		{"r.conf", `requirepass "hunter 2"`, []string{"hunter 2"}},
		{"c.yml", `    QUORUM_REDIS_URL: redis://:hunter2@redis:6379/0`, []string{"hunter2"}},
		{"c.yml", `    QUORUM_NATS_URL: nats://quorum:s3cret@nats:4222`, []string{"s3cret"}},
		{"k.yaml", `  url: "rediss://quorum:s3cret@redis:6380/0"`, []string{"s3cret"}},
		{"v.yaml", `      password: hunter2`, []string{"hunter2"}},
		{"n.conf", `  password = "hunter2"`, []string{"hunter2"}},
		{"c.yml", `      GF_SECURITY_ADMIN_PASSWORD: ${GRAFANA_ADMIN_PASSWORD:-change-me}`, []string{"${GRAFANA_ADMIN_PASSWORD:-change-me}"}},
		{"c.yml", `      REDIS_PASSWORD: change-me`, []string{"change-me"}},
		{"users.acl", `user quorum on >hunter2 ~quorum:* +@all`, []string{">hunter2"}},
		{"users.acl", `user quorum on #2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b ~*`, []string{"#2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"}},

		{"c.yml", `    QUORUM_REDIS_URL: redis://quorum:${QUORUM_REDIS_PASSWORD:?set QUORUM_REDIS_PASSWORD in .env (openssl rand -hex 32)}@redis:6379/0`, nil},
		{"k.yaml", `              value: redis://quorum:$(QUORUM_REDIS_PASSWORD)@$(REDIS_ADDR)/0`, nil},
		{"v.yaml", `      password: << $QUORUM_NATS_PASSWORD >>`, nil},
		{"n.conf", `  password: $QUORUM_NATS_PASSWORD`, nil},
		{"c.yml", `      GF_SECURITY_ADMIN_PASSWORD: ${GRAFANA_ADMIN_PASSWORD:?set GRAFANA_ADMIN_PASSWORD in .env}`, nil},
		{"c.yml", `      test: ["CMD-SHELL", "REDISCLI_AUTH=\"$$QUORUM_REDIS_PASSWORD\" redis-cli --user quorum ping | grep -q PONG"]`, nil},
		{"c.yml", `    OPENAI_API_KEY: ${LLM_API_KEY:-sk-none}`, nil},
		{"k.yaml", `                  key: redis-password`, nil},
		{"k.yaml", `            secretName: quorum-snowflake-key`, nil},
		{"k.yaml", `                secretKeyRef:`, nil},
		{"k.yaml", `              command: ["sh", "-c", "REDISCLI_AUTH=\"$QUORUM_REDIS_PASSWORD\" redis-cli --user quorum ping | grep -q PONG"]`, nil},
		{"s.sh", `REDISCLI_AUTH=hunter2 redis-cli ping`, []string{"hunter2"}},
		{"k.yaml", `            - name: QUORUM_REDIS_PASSWORD`, nil},
		{"c.yml", `      test: ["CMD", "wget", "-qO-", "http://localhost:8222/healthz?js-enabled-only=true"]`, nil},
		{"users.acl", `user quorum on resetkeys ~quorum:* resetchannels -@all +@read -@dangerous`, nil},
		{"users.acl", `# a comment: no user here`, nil},
		{"s.sh", `conf=$(sed -e "s/^user quorum /user quorum >$pw /" "$acl")`, nil},
		{"s.sh", `pw=${QUORUM_REDIS_PASSWORD:-}`, nil},
		{"c.yml", `#   echo "QUORUM_REDIS_PASSWORD=$(openssl rand -hex 32)" >> .env`, nil},
		{"users.acl", `# The default user is off and has no password: every client must log in`, nil},
		{"c.yml", `# QUORUM_REDIS_URL: redis://quorum:hunter2@redis:6379/0`, []string{"hunter2"}},
	} {
		got := literalSecrets(tc.file, tc.line)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: %q: found %q, want %q", tc.file, tc.line, got, tc.want)
		}
	}
}

// TestNoLiteralSecrets: no deployment file writes a password out: every
// one comes from the environment (.env for compose) or a Secret.
func TestNoLiteralSecrets(t *testing.T) {
	files := []string{"../../docker-compose.yml", "../../docker-compose.cluster.yml"}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "check" {
			return filepath.SkipDir
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".conf", ".acl", ".sh", ".env":
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("only %d files to check: %v", len(files), files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, s := range literalSecrets(f, line) {
				t.Errorf("%s:%d writes out a secret (%s); take it from the environment or a Secret", f, i+1, s)
			}
		}
	}
}
