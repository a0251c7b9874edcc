package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/pkg/llm"
)

// fakeEnv holds the keys the configurations name.
func fakeEnv(key string) string {
	return map[string]string{"OPENAI_API_KEY": "sk-openai", "ANTHROPIC_API_KEY": "sk-ant"}[key]
}

// llmConfigFrom resolves an LLM configuration from command-line flags as
// quorum run does.
func llmConfigFrom(t *testing.T, args ...string) llm.Config {
	t.Helper()
	var lf llmFlags
	cmd := &cobra.Command{Use: "x"}
	lf.register(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
	lf.getenv = fakeEnv
	cfg, _, stop, err := lf.config(nil, os.Stderr)
	if err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
	stop()
	return cfg
}

// TestRAISEDocThreeProviders: the three-provider setup in
// docs/agents/raise.md, as a --llm-config file and as flags, is valid and
// sends each role to the paper's model on its provider, with no warning.
func TestRAISEDocThreeProviders(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/agents/raise.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Three providers for the final roles\n")
	if !ok {
		t.Fatal("docs/agents/raise.md has no section \"Three providers for the final roles\"")
	}
	yamlBlock := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindStringSubmatch(section)
	flagsText := regexp.MustCompile("(?s)The same with flags only:\n?\\s*`([^`]*)`").FindStringSubmatch(section)
	if yamlBlock == nil || flagsText == nil {
		t.Fatalf("the section lacks its yaml block (%v) or its flags (%v)", yamlBlock != nil, flagsText != nil)
	}
	file := filepath.Join(t.TempDir(), "llm.yaml")
	if err := os.WriteFile(file, []byte(yamlBlock[1]), 0o644); err != nil {
		t.Fatal(err)
	}
	const r1 = "deepseek-ai/DeepSeek-R1-Distill-Llama-70B"
	want := map[llm.Role][2]string{ // model, URL
		"agent":   {r1, "http://vllm.internal:8000/v1"},
		"final_a": {r1, "http://vllm.internal:8000/v1"},
		"final_b": {"o3-mini", "https://api.openai.com/v1"},
		"columns": {"o3-mini", "https://api.openai.com/v1"},
		"final_c": {"claude-3-7-sonnet-20250219", "https://api.anthropic.com/v1/"},
	}
	for name, cfg := range map[string]llm.Config{
		"--llm-config": llmConfigFrom(t, "--llm-config", file),
		"flags":        llmConfigFrom(t, strings.Fields(flagsText[1])...),
	} {
		for role, w := range want {
			model, _, url := roleModel(cfg, role)
			if model != w[0] || url != w[1] {
				t.Errorf("%s: role %s resolves to %s at %s, want %s at %s", name, role, model, url, w[0], w[1])
			}
		}
		if ws := raiseWarnings("raise", nil, cfg); len(ws) != 0 {
			t.Errorf("%s: warnings %q for three different final models", name, ws)
		}
		if _, err := llm.New(cfg); err != nil {
			t.Errorf("%s: the client refuses the configuration: %v", name, err)
		}
	}
}

// TestRAISEFinalModelsWarning: a RAISE run (or an ensemble with RAISE)
// whose final roles share a model is warned, naming the roles, model and
// endpoint; three models, or no RAISE, get no warning.
func TestRAISEFinalModelsWarning(t *testing.T) {
	t.Parallel()
	three := []string{"--role-model", "final_a=r1", "--role-model", "final_b=o3-mini", "--role-model", "final_c=claude"}
	tests := []struct {
		name  string
		agent string
		opts  map[string]string
		flags []string
		want  []string // substrings of the one warning; nil: none
	}{
		{"defaults", "raise", nil, []string{"--llm-base-url", "http://h:1/v1"},
			[]string{"raise: final_a, final_b and final_c all resolve to model gpt-4o at endpoint default (http://h:1/v1)", "three different models"}},
		{"one role moved", "raise", nil, []string{"--llm-base-url", "http://h:1/v1", "--role-model", "final_c=claude"},
			[]string{"raise: final_a and final_b both resolve to model gpt-4o at endpoint default"}},
		{"one model on two endpoints", "raise", nil, []string{"--llm-base-url", "http://h:1/v1", "--role-model", "final_a=m", "--role-model", "final_b=m",
			"--role-endpoint", "final_b=http://other:2/v1", "--role-model", "final_c=claude"},
			[]string{"final_a and final_b both resolve to model m at endpoints default (http://h:1/v1), other-2 (http://other:2/v1)"}},
		{"three models", "raise", nil, append([]string{"--llm-base-url", "http://h:1/v1"}, three...), nil},
		{"three models by a default and two roles", "raise", nil, []string{"--llm-base-url", "http://h:1/v1", "--model", "r1",
			"--role-model", "final_b=o3-mini", "--role-model", "final_c=claude"}, nil},
		{"reforce", "reforce", nil, []string{"--llm-base-url", "http://h:1/v1"}, nil},
		{"ensemble with raise by default", "ensemble", nil, []string{"--llm-base-url", "http://h:1/v1"},
			[]string{"final_a, final_b and final_c all resolve to model gpt-4o"}},
		{"ensemble without raise", "ensemble", map[string]string{"members": "reforce,pexa"}, []string{"--llm-base-url", "http://h:1/v1"}, nil},
		{"ensemble naming raise", "ensemble", map[string]string{"members": "pexa, raise"}, []string{"--llm-base-url", "http://h:1/v1"},
			[]string{"all resolve to model gpt-4o"}},
	}
	for _, tt := range tests {
		got := raiseWarnings(tt.agent, tt.opts, llmConfigFrom(t, tt.flags...))
		if tt.want == nil {
			if len(got) != 0 {
				t.Errorf("%s: warnings %q, want none", tt.name, got)
			}
			continue
		}
		if len(got) != 1 {
			t.Errorf("%s: warnings %q, want one", tt.name, got)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(got[0], w) {
				t.Errorf("%s: warning %q lacks %q", tt.name, got[0], w)
			}
		}
	}
}

// TestRoleModelAsTheClient: roleModel resolves every role to the model and
// endpoint the LLM client itself sends it to.
func TestRoleModelAsTheClient(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "llm.yaml")
	yaml := `endpoints:
  - {name: default, base_url: "http://d:1/v1"}
  - {name: second, base_url: "http://s:2/v1"}
roles:
  final_a: {endpoint: second}
  final_b: {model: o3-mini}
  final_c: {endpoint: second, model: claude}
  columns: {temperature: 0.5}
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, flags := range [][]string{
		{"--llm-config", file},
		{"--llm-config", file, "--model", "base", "--role-model", "final_a=x", "--role-endpoint", "agent=second"},
		{"--llm-base-url", "http://d:1/v1", "--role-endpoint", "final_b=http://t:3/v1"},
	} {
		cfg := llmConfigFrom(t, flags...)
		client, err := llm.New(cfg)
		if err != nil {
			t.Fatalf("%v: %v", flags, err)
		}
		for _, role := range []llm.Role{"agent", "final_a", "final_b", "final_c", "columns", "generate"} {
			model, ep, _ := roleModel(cfg, role)
			mc := client.Model(role)
			if model != mc.Name || ep != firstSet(mc.Endpoint, llm.DefaultEndpoint) {
				t.Errorf("%v: role %s: roleModel says %s at %s, the client %s at %q", flags, role, model, ep, mc.Name, mc.Endpoint)
			}
		}
	}
}
