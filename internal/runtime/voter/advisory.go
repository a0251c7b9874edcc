package voter

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/service"
)

// Republishes is how many times a task whose last delivery died with its
// worker is published again after it has run (runstate's Ran) its
// deliveries' worth each time, before it is recorded failed: a killed
// worker is not the task's fault, but a task that kills every worker that
// takes it must end. Deliveries that never started the task (each worker
// killed while it waited for a dead holder's lease) do not count, up to
// MaxGenerations publications in all.
const Republishes = 2

// MaxGenerations bounds the publications of a task whose deliveries keep
// dying before they start it.
const MaxGenerations = 10

// advisories accounts for the tasks whose deliveries ran out while their
// last holder died (no worker was left to give them up), from JetStream's
// max-deliveries advisories: published again as a new generation, up to
// Republishes times, then recorded failed in each slot, so their rounds
// complete. It reads from Start until Stop.
type advisories struct {
	v    *Voter
	base queue.WorkConfig
	service.Loop
}

func (a *advisories) Start(ctx context.Context) error { return a.Go(ctx, a.run) }

func (a *advisories) run(ctx context.Context) error {
	v := a.v
	wc := v.env.Resilient(a.base)
	wc.Concurrency, wc.Logger = 1, v.env.Log
	err := v.env.Queue.WorkExhausted(ctx, wc, v.exhausted)
	if err != nil && ctx.Err() == nil {
		v.env.Log.Error("watching for exhausted tasks stopped", zap.Error(err))
	}
	return err
}

// exhausted accounts for one task whose deliveries ran out.
func (v *Voter) exhausted(ctx context.Context, m queue.Exhausted) error {
	var t message.Task
	if err := queue.Decode(m.Data, &t); err != nil {
		return nil // not a task: nothing to account for
	}
	done, err := v.env.State.Done(ctx, t.Run, t.Example, t.Agent, t.Task.ID)
	if err != nil || done {
		return err
	}
	log := v.env.Log.With(zap.String("run", t.Run), zap.String("example", t.Example), zap.String("task", t.Task.ID),
		zap.String("consumer", m.Consumer), zap.Int("generation", t.Generation))
	runs, err := v.env.State.TaskRuns(ctx, t.Run, t.Example, t.Agent, t.Task.ID)
	if err != nil {
		return err
	}
	log = log.With(zap.Int("runs", runs))
	if v.republish(t.Generation, runs) {
		run, err := v.env.Run(ctx, t.Run)
		if err != nil {
			return err
		}
		t.Generation++
		log.Warn("a task's last delivery died with its worker: publishing it again")
		if v.env.Metrics != nil {
			v.env.Metrics.Tasks.WithLabelValues("voter", t.Warehouse, "republished").Inc()
		}
		// The new generation is queued, not taken, until a worker takes
		// it: forgotten before it is published (a worker taking it marks
		// it again), so the round's deadline holds off while it waits.
		if err := v.env.State.Untake(ctx, t.Run, t.Example, t.Agent, false, t.Task.ID); err != nil {
			return err
		}
		if err := v.env.PublishTasks(ctx, run, []*message.Task{&t}); err != nil {
			return err
		}
		r := runstate.Round{Run: t.Run, Example: t.Example, Agent: t.Agent, Round: t.Task.Round}
		return v.env.State.Progress(ctx, r, "", v.env.Deadline(run.Manifest))
	}
	log.Warn("a task's last delivery died with its worker again: recording it failed")
	return v.env.GiveUp(ctx, &t, fmt.Sprintf("the %s task's deliveries ran out %d times with its worker dying (%d runs)", t.Task.Kind, t.Generation+1, runs))
}

// republish says whether a task whose deliveries ran out in generation
// gen, after runs runs in all, is published again: while its runs are
// within Republishes+1 generations of the queue's deliveries (every
// generation, when deliveries are not limited), and gen is below
// MaxGenerations.
func (v *Voter) republish(gen, runs int) bool {
	if gen+1 >= MaxGenerations {
		return false
	}
	per := v.env.Queue.Config().MaxDeliver
	if per <= 0 {
		return gen < Republishes
	}
	return runs < per*(Republishes+1)
}
