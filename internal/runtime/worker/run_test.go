package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/envtest"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
)

// startRun records run's manifest for agentName over a one-question
// dataset and returns the run, with a watch on its results.
func startRun(t *testing.T, env *runenv.Env, run, agentName string) (*runenv.Run, <-chan *message.CandidateResult) {
	t.Helper()
	root := agenttest.NewDataset(t, "shop", "CREATE TABLE t (id INTEGER);", agenttest.Question{ID: "local001", Question: "How many?"}).Dataset.Root
	ctx := context.Background()
	m := &runstate.Manifest{Run: run, Dataset: root, Seed: 1, Examples: []string{"local001"}, Agent: agentName, RoundTimeout: time.Minute, Created: time.Now()}
	if _, _, err := env.State.CreateManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	r, err := env.Run(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	return r, envtest.Watch[message.CandidateResult](t, env, "results-"+run, queue.Subject(run, queue.StageResult, ""))
}
