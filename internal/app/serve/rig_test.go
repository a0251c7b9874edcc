package serve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// startCluster starts every role in process (embedded NATS, a spawned
// redis-server) over the LLM endpoint h serves; both stop when the test
// ends.
func startCluster(ctx context.Context, t *testing.T, h http.Handler, generatorConcurrency, explorerConcurrency int) *cluster.Cluster {
	t.Helper()
	tier.Servers(t, "a cluster")
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

// demoSim loads the demo dataset (the API's: openAPIDemo) and an llmsim
// answering it at seed 1.
func demoSim(t *testing.T) (*dataset.Dataset, *llmsim.Server) {
	t.Helper()
	ds, err := dataset.Load(openAPIDemo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return ds, sim
}

// runServer runs s until the test ends and returns its handler. Its
// cleanup is registered after startCluster's, so the server stops before
// the cluster does.
func runServer(ctx context.Context, t *testing.T, s *Server) http.Handler {
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(rctx) }()
	t.Cleanup(func() { stop(); <-done })
	return s.Handler()
}
