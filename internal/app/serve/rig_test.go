package serve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/runtime/cluster"
)

// startCluster starts every role in process (embedded NATS, a spawned
// redis-server) over the LLM endpoint h serves; both stop when the test
// ends.
func startCluster(ctx context.Context, t *testing.T, h http.Handler, generatorConcurrency, explorerConcurrency int) *cluster.Cluster {
	t.Helper()
	llmSrv := httptest.NewServer(h)
	t.Cleanup(llmSrv.Close)
	cl, err := cluster.Start(ctx, cluster.Config{StateDir: t.TempDir(), Agents: agents.Builtin(), Grace: time.Second,
		LLM:        llm.Config{BaseURL: llmSrv.URL + "/v1", APIKey: "sim", Default: llm.ModelConfig{Name: "gpt-4o"}},
		Generators: 1, GeneratorConcurrency: generatorConcurrency, Explorers: 1, ExplorerConcurrency: explorerConcurrency})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
