package cli

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// env is a fixed environment for the flags.
func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const goodYAML = `
endpoints:
  - name: fast
    base_url: https://fast.example.com/v1
    api_key_env: FAST_KEY
    organization: org-1
    rpm: 600
    tpm: 200000
    headers: {X-Tenant: acme}
    cache_markers: true
    warm_up: true
  - name: az
    base_url: https://res.openai.azure.com
    api_key_env: AZ_KEY
    azure_api_version: 2024-05-01-preview
    stream: false
roles:
  explore: {endpoint: fast, model: o3, max_tokens: 4000}
  link: {endpoint: az, model: small, temperature: 0}
  vote: {model: gpt-4o-mini}
`

func TestLLMConfigFile(t *testing.T) {
	t.Parallel()
	keys := env(map[string]string{"FAST_KEY": "sk-fast-secret", "AZ_KEY": "az-secret"})
	tests := []struct {
		name, file, text string
		want             string // error substring; "" = valid
	}{
		{"yaml", "llm.yaml", goodYAML, ""},
		{"json", "llm.json", `{"endpoints":[{"name":"fast","base_url":"http://127.0.0.1:8001/v1","rpm":60}],"roles":{"generate":{"endpoint":"fast"}}}`, ""},
		{"empty", "llm.yaml", ``, ""},
		{"unknown top-level key", "llm.yaml", "endpoint: []\n", `unknown field "endpoint"`},
		{"unknown endpoint key", "llm.yaml", "endpoints:\n  - {name: a, base_url: http://h/v1, rmp: 5}\n", `unknown field "rmp"`},
		{"unknown role key", "llm.json", `{"roles":{"explore":{"modle":"o3"}}}`, `unknown field "modle"`},
		{"unknown endpoint referenced", "llm.yaml", "endpoints:\n  - {name: fast, base_url: http://h/v1}\nroles:\n  explore: {endpoint: slow}\n", `role "explore" uses endpoint "slow", which the file does not define (defined: fast)`},
		{"missing base_url", "llm.yaml", "endpoints:\n  - {name: fast, rpm: 5}\n", `endpoint "fast" has no base_url`},
		{"bad base_url", "llm.yaml", "endpoints:\n  - {name: fast, base_url: fast.example.com}\n", `base_url fast.example.com: not an http(s) URL`},
		{"unset key variable", "llm.yaml", "endpoints:\n  - {name: fast, base_url: http://h/v1, api_key_env: NOPE_KEY}\n", `api_key_env NOPE_KEY is not set in the environment; export NOPE_KEY`},
		{"key instead of variable", "llm.yaml", "endpoints:\n  - {name: fast, base_url: http://h/v1, api_key_env: sk-live-123}\n", `api_key_env is not an environment variable name`},
		{"nameless endpoint", "llm.yaml", "endpoints:\n  - {base_url: http://h/v1}\n", `endpoint 1 has no name`},
		{"bad endpoint name", "llm.yaml", "endpoints:\n  - {name: 'a:b', base_url: http://h/v1}\n", `endpoint name "a:b"`},
		{"duplicate endpoint", "llm.yaml", "endpoints:\n  - {name: a, base_url: http://h/v1}\n  - {name: a, base_url: http://i/v1}\n", `endpoint "a" is defined twice`},
		{"negative rpm", "llm.yaml", "endpoints:\n  - {name: a, base_url: http://h/v1, rpm: -1}\n", `rpm and tpm must not be negative`},
		{"stream not a bool", "llm.yaml", "endpoints:\n  - {name: a, base_url: http://h/v1, stream: sometimes}\n", `--llm-config`},
		{"empty role", "llm.json", `{"roles":{"":{"model":"o3"}}}`, `a role name is empty`},
		{"temperature out of range", "llm.yaml", "roles:\n  explore: {temperature: 3}\n", `temperature 3 is outside [0, 2]`},
		{"malformed", "llm.yaml", "endpoints: [\n", `--llm-config`},
	}
	for _, tt := range tests {
		path := writeFile(t, tt.file, tt.text)
		_, err := loadLLMConfig(path, keys)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err %v, want one naming %s and saying %q", tt.name, err, path, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "sk-live-123") {
			t.Errorf("%s: the error shows the key: %v", tt.name, err)
		}
	}

	cfg, err := loadLLMConfig(writeFile(t, "llm.yaml", goodYAML), keys)
	if err != nil {
		t.Fatal(err)
	}
	fast, az := cfg.Endpoints[0], cfg.Endpoints[1]
	if fast.APIKey != "sk-fast-secret" || fast.Quota != (llm.Quota{RequestsPerMinute: 600, TokensPerMinute: 200000}) ||
		fast.Organization != "org-1" || fast.Headers["X-Tenant"] != "acme" || az.AzureAPIVersion != "2024-05-01-preview" || az.APIKey != "az-secret" ||
		fast.NoStream || !az.NoStream || !fast.CacheMarkers || !fast.WarmUp || az.CacheMarkers || az.WarmUp {
		t.Errorf("endpoints %+v", cfg.Endpoints)
	}
	ex, link, vote := cfg.Roles["explore"], cfg.Roles["link"], cfg.Roles["vote"]
	if ex.Endpoint != "fast" || ex.Name != "o3" || ex.MaxCompletionTokens != 4000 || link.Temperature == nil || *link.Temperature != 0 ||
		vote.Endpoint != "" || vote.Name != "gpt-4o-mini" {
		t.Errorf("roles %+v", cfg.Roles)
	}
}

func TestLLMFlagsResolveRoles(t *testing.T) {
	t.Parallel()
	// The file also defines the default endpoint, with credentials in its
	// URL that no label may show.
	file := writeFile(t, "llm.yaml", strings.Replace(goodYAML, "roles:", `  - name: default
    base_url: https://user:pw@gateway.example.com/v1?key=sk-in-query
    api_key_env: GW_KEY
    stream: false
roles:`, 1))
	f := &llmFlags{model: "gpt-4o", temperature: 0.5, maxAttempts: 3, configFile: file,
		getenv:        env(map[string]string{"FAST_KEY": "sk-fast-secret", "AZ_KEY": "az-secret", "GW_KEY": "sk-gw-secret", "LOCAL_KEY": "sk-local-secret"}),
		roleModels:    []string{"explore=o4-mini", "plan=gpt-4.1"},
		roleEndpoints: []string{"vote=fast", "plan=http://127.0.0.1:8001/v1", "verify=http://127.0.0.1:8001/v1", "link=default"},
		roleKeys:      []string{"plan=LOCAL_KEY"},
	}
	cfg, label, stop, err := f.config(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if cfg.APIKey != "sk-gw-secret" || !strings.HasPrefix(cfg.BaseURL, "https://user:pw@gateway") || !cfg.NoStream {
		t.Errorf("default endpoint from the file: %s (no stream %v)", cfg.BaseURL, cfg.NoStream)
	}
	names := map[string]llm.Endpoint{}
	for _, e := range cfg.Endpoints {
		names[e.Name] = e
	}
	m := cfg.Models
	checks := []struct {
		what string
		ok   bool
	}{
		{"--role-model overrides the file's model, keeps its endpoint", m["explore"].Name == "o4-mini" && m["explore"].Endpoint == "fast" && m["explore"].MaxCompletionTokens == 4000},
		{"--role-endpoint NAME overrides the file's endpoint", m["vote"].Endpoint == "fast" && m["vote"].Name == "gpt-4o-mini"},
		{"--role-endpoint default", m["link"].Endpoint == "" && m["link"].Name == "small"},
		{"--role-endpoint URL with --role-api-key", m["plan"].Endpoint == "127.0.0.1-8001" && names["127.0.0.1-8001"].APIKey == "sk-local-secret"},
		{"a URL without --role-api-key gets no key", m["verify"].Endpoint == "127.0.0.1-8001-2" && names["127.0.0.1-8001-2"].APIKey == ""},
		{"roles without a model use the default", m["verify"].Name == ""},
		{"the file's rpm reaches the endpoint", names["fast"].Quota.RequestsPerMinute == 600},
		{"--temperature is the role default", *m["plan"].Temperature == 0.5 && *m["explore"].Temperature == 0.5 && *m["link"].Temperature == 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: models %+v endpoints %v", c.what, m, cfg.Endpoints)
		}
	}
	for _, secret := range []string{"sk-", "secret", "pw@", "user:"} {
		if strings.Contains(label, secret) {
			t.Errorf("label leaks %q: %s", secret, label)
		}
	}
	if !strings.Contains(label, "gpt-4o at https://***@gateway.example.com/v1") || !strings.Contains(label, "explore=o4-mini at fast (https://fast.example.com/v1)") {
		t.Errorf("label %s", label)
	}

	// Flags override the file's default endpoint.
	f.baseURL, f.apiKey = "http://other.example/v1", "sk-flag"
	cfg, _, _, err = f.config(nil, io.Discard)
	if err != nil || cfg.BaseURL != "http://other.example/v1" || cfg.APIKey != "sk-flag" {
		t.Errorf("flags over the file: %v %s", err, cfg.BaseURL)
	}
	if _, err := llm.New(cfg); err != nil {
		t.Errorf("the resolved configuration does not build a client: %v", err)
	}
}

func TestLLMFlagErrors(t *testing.T) {
	t.Parallel()
	e := env(map[string]string{"OPENAI_API_KEY": "sk-default", "SET_KEY": "k"})
	tests := []struct {
		name              string
		models, eps, keys []string
		want, mustNotLeak string
	}{
		{"empty role in --role-model", []string{"=o3"}, nil, nil, `--role-model "=o3": use ROLE=VALUE with a non-empty role`, ""},
		{"blank role in --role-model", []string{" =o3"}, nil, nil, `non-empty role`, ""},
		{"no model", []string{"explore="}, nil, nil, `--role-model "explore="`, ""},
		{"empty role in --role-endpoint", nil, []string{"=https://u:pw@h/v1"}, nil, `--role-endpoint "=https://***@h/v1": use ROLE=VALUE`, "pw"},
		{"bad URL", nil, []string{"explore=ftp://h/v1"}, nil, `--role-endpoint explore=ftp://h/v1: not an http(s) URL`, ""},
		{"unknown endpoint name", nil, []string{"explore=fast"}, nil, `no endpoint "fast" is defined; pass a URL`, ""},
		{"key without endpoint", nil, nil, []string{"explore=SET_KEY"}, `role explore has no --role-endpoint URL`, ""},
		{"key variable unset", nil, []string{"explore=http://h/v1"}, []string{"explore=UNSET_KEY"}, `UNSET_KEY is not set in the environment`, ""},
		{"key instead of a variable", nil, []string{"explore=http://h/v1"}, []string{"explore=sk-live-999"}, `not an environment variable name`, "sk-live-999"},
		{"key without role", nil, nil, []string{"sk-live-999"}, `--role-api-key: use ROLE=VALUE`, "sk-live-999"},
	}
	for _, tt := range tests {
		f := &llmFlags{model: "gpt-4o", getenv: e, roleModels: tt.models, roleEndpoints: tt.eps, roleKeys: tt.keys}
		_, _, _, err := f.config(nil, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
		if tt.mustNotLeak != "" && err != nil && strings.Contains(err.Error(), tt.mustNotLeak) {
			t.Errorf("%s: error shows %q: %v", tt.name, tt.mustNotLeak, err)
		}
	}
}

// TestRoleEndpointReachesItsServer: the flags build a client whose role
// calls go to the role's server, the others to the default one.
func TestRoleEndpointReachesItsServer(t *testing.T) {
	t.Parallel()
	ds, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	servers := make([]*llmsim.Server, 2)
	urls := make([]string, 2)
	for i := range servers {
		s, err := llmsim.New(llmsim.Config{Dataset: ds})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(s)
		t.Cleanup(ts.Close)
		servers[i], urls[i] = s, ts.URL+"/v1"
	}
	file := writeFile(t, "llm.json", `{"endpoints":[{"name":"side","base_url":"`+urls[1]+`","rpm":600}],"roles":{"format":{"endpoint":"side"}}}`)
	f := &llmFlags{model: "gpt-4o", baseURL: urls[0], maxAttempts: 1, configFile: file, getenv: env(nil)}
	c, label, stop, err := f.client(nil, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	q := ds.Examples[0].Question
	for _, r := range []llm.Role{llm.RoleFormat, llm.RoleGenerate, llm.RoleGenerate} {
		if _, err := c.Chat(context.Background(), llm.Request{Role: r, Messages: []llm.Message{llm.User("Task: " + q + "\n" + llmsim.MarkerFormat)}}); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := servers[0].Stats().Requests, servers[1].Stats().Requests; a != 2 || b != 1 {
		t.Errorf("default server got %d calls, the format role's %d; want 2 and 1", a, b)
	}
	if !strings.Contains(label, "format=gpt-4o at side") {
		t.Errorf("label %s", label)
	}
}

// TestSimulatedLabelNamesThePersona: a run on the simulator under a
// persona or a difficulty mix says so in its LLM label (run.json, the
// report, quorum compare), so two runs that differ only there do not read
// as the same setup.
func TestSimulatedLabelNamesThePersona(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	if log, err := run(t, "solve", "--dataset", demo, "--examples", "1", "--votes", "1", "--sim-persona", "truncating",
		"--sim-difficulty", "default", "--out", out); err != nil {
		t.Fatalf("solve: %v\n%s", err, log)
	}
	rep, err := outputs.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.LLM, "SIMULATED") || !strings.Contains(rep.LLM, "persona truncating") || !strings.Contains(rep.LLM, "difficulty default") {
		t.Errorf("run.json's llm %q: want the simulator, its persona and its difficulty named", rep.LLM)
	}
}
