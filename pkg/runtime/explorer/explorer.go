// Package explorer is the explorer worker: for a low-confidence example it
// runs one column exploration, stores the transcript and publishes the
// regeneration task that uses it.
package explorer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/quorumsql/quorum/pkg/agents/reforce"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/queue"
	"github.com/quorumsql/quorum/pkg/runtime/generator"
	"github.com/quorumsql/quorum/pkg/runtime/runenv"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Config configures an explorer worker.
type Config struct {
	Env         *runenv.Env
	Warehouses  []string
	Concurrency int
	queue.WorkConfig
}

// Run works until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	w := &worker{env: cfg.Env}
	wc := cfg.WorkConfig
	wc.Concurrency, wc.Handler, wc.OnGiveUp = cfg.Concurrency, w.handle, w.giveUp
	return cfg.Env.Serve(ctx, queue.StageExplore, []string{queue.StageExplore}, cfg.Warehouses, wc)
}

type worker struct {
	env *runenv.Env
}

func (w *worker) handle(ctx context.Context, d queue.Delivery) error {
	start := time.Now()
	parts := strings.Split(d.Msg.Subject(), ".")
	defer w.env.Metrics.Begin("explore", parts[len(parts)-1])()
	var t queue.ExploreTask
	if err := queue.Decode(d.Msg.Data(), &t); err != nil {
		return queue.Permanent(err)
	}
	run, e, err := w.env.Example(ctx, t.Run, t.Example)
	if err != nil {
		return err
	}
	prompt, err := w.env.Prompt(ctx, t.InfoRef)
	if err != nil {
		return err
	}
	wh, err := run.Warehouse(ctx, e)
	if err != nil {
		return queue.Permanent(err)
	}
	qctx := warehouse.WithLabels(ctx, map[string]string{"run": t.Run, "example": t.Example, "exploration": fmt.Sprint(t.Index)})
	ex, err := run.Agent.Explore(qctx, wh, reforce.ExploreInput{Example: runenv.Example(e), TableInfo: prompt.TableInfo,
		TableStruct: prompt.TableStruct, Index: t.Index, Seed: int64(t.Seed)})
	if err != nil {
		return err
	}
	w.env.Metrics.ObserveCost("explore", ex.Cost)
	ref, err := w.env.Blobs.PutString(ctx, ex.Transcript)
	if err != nil {
		return err
	}
	meta, err := w.env.State.Meta(ctx, t.Run, t.Example)
	if err != nil {
		return err
	}
	c := ex.Cost
	return generator.PublishGenerate(ctx, w.env.Queue, meta.Warehouse, &queue.GenerateTask{V: queue.Version, Run: t.Run,
		Example: t.Example, Round: 1, Index: t.Votes + t.Index, Seed: t.Seed, InfoRef: t.InfoRef, ExplorationRef: ref,
		Upstream: cost.Ledger{"explore": &c}, UpstreamSeconds: time.Since(start).Seconds()})
}

// giveUp publishes a failed regeneration result so the round can complete.
func (w *worker) giveUp(ctx context.Context, d queue.Delivery, cause error) {
	var t queue.ExploreTask
	if queue.Decode(d.Msg.Data(), &t) != nil {
		return
	}
	_ = generator.PublishResult(ctx, w.env.Queue, &queue.CandidateResult{V: queue.Version, Run: t.Run, Example: t.Example, Round: 1,
		Index: t.Votes + t.Index, Status: "failed", Error: fmt.Sprintf("exploration failed after %d deliveries: %v", d.Attempt, cause), Worker: w.env.Name})
}

// PublishExplore sends an exploration task.
func PublishExplore(ctx context.Context, q *queue.Queue, warehouse string, t *queue.ExploreTask) error {
	id := fmt.Sprintf("%s.%s.explore.%d", t.Run, t.Example, t.Index)
	return q.Publish(ctx, queue.Subject(t.Run, queue.StageExplore, warehouse), id, t)
}
