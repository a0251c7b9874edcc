// Package generator is the generator worker: it takes schema-linking and
// generation tasks for the warehouses it serves, runs one candidate per
// generation task (format restriction once per example, then
// self-refinement) and publishes exactly one candidate result per task —
// success, empty, error, gave up, or failed — so the voter can count.
package generator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/agents/reforce"
	"github.com/quorumsql/quorum/pkg/agents/reforce/dbinfo"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/queue"
	"github.com/quorumsql/quorum/pkg/runtime/runenv"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Config configures a generator worker.
type Config struct {
	Env *runenv.Env
	// Warehouses this worker serves (subject tokens, e.g. sqlite).
	Warehouses  []string
	Concurrency int
	queue.WorkConfig
}

// Run works until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	w := &worker{env: cfg.Env}
	wc := cfg.WorkConfig
	wc.Concurrency, wc.Handler, wc.OnGiveUp = cfg.Concurrency, w.handle, w.giveUp
	return cfg.Env.Serve(ctx, queue.StageGenerate, []string{queue.StageGenerate, queue.StageLink}, cfg.Warehouses, wc)
}

type worker struct {
	env *runenv.Env
}

func stageOf(subject string) string {
	p := strings.Split(subject, ".")
	if len(p) >= 3 {
		return p[2]
	}
	return ""
}

func (w *worker) handle(ctx context.Context, d queue.Delivery) error {
	parts := strings.Split(d.Msg.Subject(), ".")
	defer w.env.Metrics.Begin(stageOf(d.Msg.Subject()), parts[len(parts)-1])()
	if stageOf(d.Msg.Subject()) == queue.StageLink {
		var t queue.LinkTask
		if err := queue.Decode(d.Msg.Data(), &t); err != nil {
			return queue.Permanent(err)
		}
		return w.link(ctx, &t)
	}
	var t queue.GenerateTask
	if err := queue.Decode(d.Msg.Data(), &t); err != nil {
		return queue.Permanent(err)
	}
	return w.generate(ctx, &t)
}

func (w *worker) generate(ctx context.Context, t *queue.GenerateTask) error {
	start := time.Now()
	log := w.env.Log.With(zap.String("run", t.Run), zap.String("example", t.Example), zap.Int("round", t.Round), zap.Int("candidate", t.Index))
	run, e, err := w.env.Example(ctx, t.Run, t.Example)
	if err != nil {
		return err
	}
	prompt, err := w.env.Prompt(ctx, t.InfoRef)
	if err != nil {
		return err
	}
	exploration, err := w.env.Blobs.GetString(ctx, t.ExplorationRef)
	if err != nil {
		return err
	}
	wh, err := run.Warehouse(ctx, e)
	if err != nil {
		return queue.Permanent(err)
	}
	ledger := cost.Ledger{}
	ledger.Merge(t.Upstream)
	format := ""
	if run.Manifest.FormatRestriction {
		// Once per example across the cluster; the worker that computes it
		// accounts for the call.
		format, err = w.env.State.Once(ctx, t.Run, t.Example, "format", func(ctx context.Context) (string, error) {
			f, c, err := run.Agent.Format(ctx, runenv.Example(e), reforce.Seed(t.Seed, t.Example, 0, 0, "format"))
			ledger.Stage("format").Add(c)
			return f, err
		})
		if err != nil {
			return err
		}
	}
	in := reforce.CandidateInput{Example: runenv.Example(e), TableInfo: prompt.TableInfo, TableStruct: prompt.TableStruct,
		Format: format, Exploration: exploration, Round: t.Round, Index: t.Index, Seed: int64(t.Seed)}
	qctx := warehouse.WithLabels(ctx, map[string]string{"run": t.Run, "example": t.Example,
		"round": fmt.Sprint(t.Round), "candidate": fmt.Sprint(t.Index)})
	cand, err := run.Agent.Candidate(qctx, wh, in)
	if err != nil {
		return err // infrastructure: redeliver
	}
	stage := "generate"
	if t.Round > 0 {
		stage = "regenerate"
	}
	ledger.Stage(stage).Add(cand.Cost)
	w.env.Metrics.ObserveCost(stage, cand.Cost)
	total := ledger.Total()
	res := &queue.CandidateResult{V: queue.Version, Run: t.Run, Example: t.Example, Round: t.Round, Index: t.Index,
		SQL: cand.SQL, Status: string(cand.Status), Error: cand.Error, Rows: cand.Rows, Cost: ledger, Worker: w.env.Name,
		ElapsedSeconds: time.Since(start).Seconds() + t.UpstreamSeconds,
		ChainSeconds:   (total.LLM.Latency + total.QueryTime).Seconds(), Started: start}
	if cand.Status == reforce.StatusOK {
		if res.CSVRef, err = w.env.Blobs.PutString(ctx, cand.CSV); err != nil {
			return err
		}
	}
	log.Debug("candidate done", zap.String("status", res.Status), zap.Int("llm_calls", cand.Cost.LLMCalls))
	return PublishResult(ctx, w.env.Queue, res)
}

// PublishResult sends a candidate result to the voter; its message id makes
// a redelivered task's result a duplicate.
func PublishResult(ctx context.Context, q *queue.Queue, r *queue.CandidateResult) error {
	id := fmt.Sprintf("%s.%s.%d.%d.result", r.Run, r.Example, r.Round, r.Index)
	return q.Publish(ctx, queue.Subject(r.Run, queue.StageResult, ""), id, r)
}

// PublishGenerate sends a generation task.
func PublishGenerate(ctx context.Context, q *queue.Queue, warehouse string, t *queue.GenerateTask) error {
	id := fmt.Sprintf("%s.%s.%d.%d.generate", t.Run, t.Example, t.Round, t.Index)
	return q.Publish(ctx, queue.Subject(t.Run, queue.StageGenerate, warehouse), id, t)
}

// link runs table-level schema linking for one example, stores the linked
// prompt and publishes the example's first-round generation tasks.
func (w *worker) link(ctx context.Context, t *queue.LinkTask) error {
	run, e, err := w.env.Example(ctx, t.Run, t.Example)
	if err != nil {
		return err
	}
	info, err := dbinfo.ForExample(ctx, run.DS, e, run.Warehouses(), dbinfo.DefaultOptions())
	if err != nil {
		return queue.Permanent(err)
	}
	linker := w.env.Linker
	if linker == nil {
		return queue.Permanent(errors.New("this worker has no schema linker configured"))
	}
	linked, _, c, err := linker.Link(ctx, info, dbinfo.LinkQuestion{ID: e.ID, Question: e.Question, ExternalKnowledge: e.ExternalKnowledge,
		Seed: reforce.Seed(t.Seed, e.ID, 0, 0, "link")})
	if err != nil {
		return err
	}
	w.env.Metrics.ObserveCost("link", c)
	ref, err := w.env.PutPrompt(ctx, linked, e.ExternalKnowledge)
	if err != nil {
		return err
	}
	meta, err := w.env.State.Meta(ctx, t.Run, t.Example)
	if err != nil {
		return err
	}
	meta.InfoRef, meta.Linking = ref, false
	if err := w.env.State.SetMeta(ctx, t.Run, t.Example, *meta); err != nil {
		return err
	}
	for i := 0; i < t.Votes; i++ {
		g := &queue.GenerateTask{V: queue.Version, Run: t.Run, Example: t.Example, Index: i, Seed: t.Seed, InfoRef: ref}
		if i == 0 {
			g.Upstream = cost.Ledger{"link": &c} // accounted once, with the first candidate
		}
		if err := PublishGenerate(ctx, w.env.Queue, meta.Warehouse, g); err != nil {
			return err
		}
	}
	return nil
}

// giveUp records a task that will not run again: a failed candidate for a
// generation task (the voter counts it), a failed example for a link task.
func (w *worker) giveUp(ctx context.Context, d queue.Delivery, cause error) {
	if stageOf(d.Msg.Subject()) == queue.StageLink {
		var t queue.LinkTask
		if queue.Decode(d.Msg.Data(), &t) == nil {
			_ = PublishFinal(ctx, w.env.Queue, &queue.FinalAnswer{V: queue.Version, Run: t.Run, Example: t.Example, Status: "failed",
				Error: fmt.Sprintf("schema linking failed after %d deliveries: %v", d.Attempt, cause)})
		}
		return
	}
	var t queue.GenerateTask
	if queue.Decode(d.Msg.Data(), &t) != nil {
		return
	}
	_ = PublishResult(ctx, w.env.Queue, &queue.CandidateResult{V: queue.Version, Run: t.Run, Example: t.Example, Round: t.Round,
		Index: t.Index, Status: "failed", Error: fmt.Sprintf("the task failed after %d deliveries: %v", d.Attempt, cause), Worker: w.env.Name})
}

// PublishFinal sends an example's final answer to its coordinator.
func PublishFinal(ctx context.Context, q *queue.Queue, f *queue.FinalAnswer) error {
	return q.Publish(ctx, queue.Subject(f.Run, queue.StageFinal, ""), f.Run+"."+f.Example+".final", f)
}
