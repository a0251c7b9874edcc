package cli

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/llm"
)

// azureYAML is docs/models.md's example: gpt-4o in three Azure regions, each
// with its own quota, gpt-4.1 as the fallback.
const azureYAML = `endpoints:
  - name: default
    base_url: https://quorum-eastus.openai.azure.com
    azure_api_version: "2024-10-21"
    api_key_env: AZURE_EASTUS_KEY
  - name: eastus
    base_url: https://quorum-eastus.openai.azure.com
    azure_api_version: "2024-10-21"
    api_key_env: AZURE_EASTUS_KEY
    rpm: 300
    tpm: 300000
  - name: swedencentral
    base_url: https://quorum-sweden.openai.azure.com
    azure_api_version: "2024-10-21"
    api_key_env: AZURE_SWEDEN_KEY
    rpm: 200
    tpm: 200000
  - name: westus3
    base_url: https://quorum-westus3.openai.azure.com
    azure_api_version: "2024-10-21"
    api_key_env: AZURE_WESTUS3_KEY
    rpm: 100
    tpm: 100000
models:
  gpt-4o:
    deployments:
      - endpoint: eastus
      - endpoint: swedencentral
        model: gpt-4o-se
      - endpoint: westus3
        priority: 1
    fallbacks: [gpt-4.1]
  gpt-4.1:
    deployments:
      - endpoint: eastus
roles:
  vote:
    model: gpt-4o
    fallbacks: [gpt-4o-mini]
`

func TestLLMConfigDeploymentsAndFallbacks(t *testing.T) {
	t.Parallel()
	f := &llmFlags{model: "gpt-4o", temperature: 0.5, maxAttempts: 3, configFile: writeFile(t, "azure.yaml", azureYAML),
		getenv: env(map[string]string{"AZURE_EASTUS_KEY": "k1", "AZURE_SWEDEN_KEY": "k2", "AZURE_WESTUS3_KEY": "k3"})}
	cfg, _, stop, err := f.config(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	want := []llm.Deployment{{Endpoint: "eastus"}, {Endpoint: "swedencentral", Name: "gpt-4o-se"}, {Endpoint: "westus3", Priority: 1}}
	if !reflect.DeepEqual(cfg.Default.Deployments, want) {
		t.Errorf("--model gpt-4o's deployments %+v, want %+v", cfg.Default.Deployments, want)
	}
	if len(cfg.Default.Fallbacks) != 1 || cfg.Default.Fallbacks[0].Name != "gpt-4.1" || len(cfg.Default.Fallbacks[0].Deployments) != 1 {
		t.Errorf("fallbacks %+v, want gpt-4.1 on its one deployment", cfg.Default.Fallbacks)
	}
	vote := cfg.Models[llm.RoleVote]
	if len(vote.Deployments) != 3 || len(vote.Fallbacks) != 1 || vote.Fallbacks[0].Name != "gpt-4o-mini" {
		t.Errorf("vote: %d deployments, fallbacks %+v; want 3 and the role's own gpt-4o-mini", len(vote.Deployments), vote.Fallbacks)
	}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatalf("the client refuses the README's config: %v", err)
	}
	c.Close()

	bad := strings.Replace(azureYAML, "      - endpoint: westus3\n", "      - endpoint: nowhere\n", 1)
	f.configFile = writeFile(t, "bad.yaml", bad)
	if _, _, _, err := f.config(nil, io.Discard); err == nil || !strings.Contains(err.Error(), `endpoint "nowhere"`) {
		t.Errorf("a deployment at an undefined endpoint: err %v, want it named", err)
	}
}
