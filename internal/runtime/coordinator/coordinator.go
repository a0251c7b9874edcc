// Package coordinator starts or resumes a run: it routes each example to
// its warehouse, publishes the first round its agent asks for, collects the
// final answers, and writes the outputs — one
// <instance_id>.sql and .csv per answered example in Spider 2.0's submission
// layout, and run.json. Resuming a run skips finished examples and
// re-publishes only what is missing; deduplicated message ids make the rest
// a no-op. With RetryFailed, a resume runs the examples that failed again,
// from scratch.
package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/service"
	"github.com/quorumsql/quorum/internal/version"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/trace"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// Config configures a coordinator.
type Config struct {
	Env *runenv.Env
	// Manifest of a new run; for a resume only Manifest.Run is needed and
	// the stored manifest is used.
	Manifest *runstate.Manifest
	Out      string
	// Progress receives a progress bar (terminal) or log lines.
	Progress io.Writer
	Terminal bool
	// AbortAfter stops the run when this many examples in a row failed
	// on LLM calls (an endpoint failing every call), so a broken endpoint
	// does not burn through the dataset (default 5, -1 never).
	AbortAfter int
	// MaxInFlight is the admission window: at most this many examples are
	// started and unfinished at once, the next admitted in dataset order as
	// one finishes (0: all at once). Examples then finish steadily from the
	// start, and a crash leaves little half-done.
	MaxInFlight int
	// Warnings are said at the run's start (logged) and kept in run.json:
	// a setup that departs from the agent's paper, found where the LLM
	// configuration is resolved.
	Warnings []string
	// Retain is how long the run's Redis keys stay once it finished (its
	// outputs written); an unfinished run's never expire, so it can be
	// resumed. Zero fields take runstate's defaults.
	Retain runstate.Retention
	// RetryFailed runs the examples recorded as failed again on a resume;
	// their new outcome replaces the failure.
	RetryFailed bool
	// RestoreEvery is how often, while it waits for finals, the
	// coordinator checks that Redis still has what it recorded of the
	// run (the manifest, each started example's round) and records it
	// again if Redis lost it (default 10s); it is also how often the
	// session's heartbeat is recorded, the end a killed session keeps.
	RestoreEvery time.Duration
	// StreamReplicas is the --stream-replicas the coordinator was given
	// (0: none). Resuming a run that recorded more is refused: the
	// streams are never lowered, and the flag would say otherwise.
	StreamReplicas int
	// Health, when set, is a clause the progress line adds: the LLM
	// deployments' cooldowns this process heard of.
	Health func() string
	// Limits, when set, are what the limiter learned of the models' real
	// limits, written into run.json at the end.
	Limits func(context.Context) []outputs.LimitLearned
	// LimitChanges, when set, are the quotas set on the running cluster
	// between two times, written into run.json at the end.
	LimitChanges func(ctx context.Context, from, to time.Time) []outputs.LimitChange
	// Sizing, when set (with MaxInFlight the window it gives for
	// TokensPerCall), re-sizes the window once the finished examples' calls
	// show what a call counts toward the TPM quota.
	Sizing *Sizing
	// MaxCost is the run's budget in money at the endpoints' prices (0:
	// none). No example is started once the spend of the finished ones
	// plus an estimate of those in flight and of the next would pass it;
	// the examples in flight finish, and the run ends with *BudgetReached,
	// resumable with a higher budget. The spend is the run's whole, the
	// finals of earlier sessions included.
	MaxCost float64
}

// resumeReplicas gives the streams the replicas the run was created with
// when they have fewer (they were recreated, on a new JetStream cluster),
// and refuses a --stream-replicas below the run's.
func resumeReplicas(ctx context.Context, env *runenv.Env, m *runstate.Manifest, asked int) error {
	if m.StreamReplicas <= 0 {
		return nil // a run created before manifests recorded them
	}
	if asked > 0 && asked < m.StreamReplicas {
		return fmt.Errorf("run %s was created with %d stream replicas; resume it with --stream-replicas %d or without the flag (streams are never lowered)",
			m.Run, m.StreamReplicas, m.StreamReplicas)
	}
	if env.Queue.Config().Replicas >= m.StreamReplicas {
		return nil
	}
	got, err := env.Queue.RaiseReplicas(ctx, m.StreamReplicas)
	if err != nil {
		return fmt.Errorf("run %s: %w", m.Run, err)
	}
	env.Log.Info("streams given the run's replicas", zap.String("run", m.Run), zap.Int("replicas", got))
	return nil
}

// CallSeconds is how long an LLM call is taken to last when sizing the
// admission window: a hosted model's reply to a compressed prompt. A slower
// model (a reasoning one) wants a wider window: --max-in-flight.
const CallSeconds = 5.0

// Window is the admission window for workers holding held tasks at once in
// all (running or waiting), within an LLM quota: twice the examples in
// flight that keep the quota busy (Little's law: the examples the quota
// serves a second times an example's time, Depth calls of CallSeconds),
// no more than the held tasks fit at the examples' widest fan-out, at
// least 4. Without a quota it is what the held tasks fit.
func Window(held int, load agent.Load, rpm, tpm float64) int {
	return Sizing{Held: held, Load: load, RPM: rpm, TPM: tpm}.window(TokensPerCall)
}

// TokensPerCall is what a call is taken to count toward a tokens/min
// quota before any call of the run was measured: about a compressed
// prompt.
const TokensPerCall = 12_000

// Sizing is what the admission window is sized from; given to Run, it
// lets the coordinator size the window again from what the finished
// examples' calls really counted toward a tokens/min quota, instead of
// TokensPerCall. That matters most where cached prompt tokens do not count
// (CachedOutsideTPM): an example's candidates share a prompt, so a call
// may count a tenth of its prompt, and a window sized for whole prompts
// would leave the quota idle.
type Sizing struct {
	// Held is the tasks the generators hold at once in all.
	Held int
	Load agent.Load
	// RPM and TPM are the LLM quota (0: none).
	RPM, TPM float64
	// CachedOutsideTPM: prompt tokens served from the provider's cache do
	// not count toward TPM.
	CachedOutsideTPM bool
}

// sizingSample is how many measured calls re-size the window: enough that
// one example's calls do not decide it.
const sizingSample = 32

func (s Sizing) window(tokensPerCall float64) int {
	held, load, rpm, tpm := s.Held, s.Load, s.RPM, s.TPM
	width, calls, depth := max(1, load.Width), max(1, load.Calls), max(1, load.Depth)
	w := (2*held + width - 1) / width
	tokensPerCall = max(1, tokensPerCall)
	rate := rpm
	if tpm > 0 && (rate <= 0 || tpm/tokensPerCall < rate) {
		rate = tpm / tokensPerCall
	}
	if rate > 0 {
		perSecond := rate / 60 / float64(calls)
		w = min(w, int(math.Ceil(2*perSecond*float64(depth)*CallSeconds)))
	}
	return max(4, w)
}

// Run drives the run to its end and returns its report.
func Run(ctx context.Context, cfg Config) (*outputs.Report, error) {
	env := cfg.Env
	if err := queue.CheckToken("run id", cfg.Manifest.Run); err != nil {
		return nil, err
	}
	// The manifest records the streams' replicas (what --stream-replicas
	// made them, or what they had), not the flag: a resume restores them.
	mf := *cfg.Manifest
	mf.StreamReplicas = env.Queue.Config().Replicas
	m, created, err := env.State.CreateManifest(ctx, &mf)
	if err != nil {
		return nil, err
	}
	if !created && cfg.Manifest.Dataset != "" && filepath.Clean(cfg.Manifest.Dataset) != filepath.Clean(m.Dataset) {
		return nil, fmt.Errorf("run %s exists over dataset %s, not %s: resume it with the same dataset or choose another --run-id", m.Run, m.Dataset, cfg.Manifest.Dataset)
	}
	if !created {
		if err := resumeReplicas(ctx, env, m, cfg.StreamReplicas); err != nil {
			return nil, err
		}
	}
	log := env.Log.With(zap.String("run", m.Run))
	if created {
		log.Info("starting run", zap.Int("examples", len(m.Examples)), zap.Int("votes", m.Votes))
	} else {
		log.Info("resuming run", zap.Int("examples", len(m.Examples)))
	}
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	run, err := env.Run(ctx, m.Run)
	if err != nil {
		return nil, err
	}
	w, err := outputs.NewWriter(cfg.Out)
	if err != nil {
		return nil, err
	}
	if cfg.AbortAfter == 0 {
		cfg.AbortAfter = 5
	}
	if cfg.RestoreEvery <= 0 {
		cfg.RestoreEvery = 10 * time.Second
	}
	c := &coord{env: env, run: run, m: m, w: w, log: log, progress: cfg.Progress, terminal: cfg.Terminal, window: cfg.MaxInFlight,
		abortAfter: cfg.AbortAfter, maxCost: cfg.MaxCost, warnings: cfg.Warnings, restoreEvery: cfg.RestoreEvery, sizing: cfg.Sizing, health: cfg.Health, limits: cfg.Limits, limitChanges: cfg.LimitChanges,
		finals: map[string]*message.FinalAnswer{}, ends: map[string]finalEnd{}, flying: map[string]bool{}, began: map[string]time.Time{},
		inRun: make(map[string]bool, len(m.Examples))}
	for _, id := range m.Examples {
		c.inRun[id] = true
	}
	started := time.Now()
	c.started = started
	if err := c.collectKnown(ctx); err != nil {
		return nil, err
	}
	if err := c.retryFailed(ctx, cfg.RetryFailed); err != nil {
		return nil, err
	}
	// Running a finished run's id again only writes its outputs: that is
	// no session of it, and its timings stay those it finished with.
	if !c.done() {
		n, err := env.State.BeginSession(ctx, m.Run, started)
		if err != nil {
			return nil, err
		}
		c.session = n
		defer func() { c.closeSession(context.WithoutCancel(ctx), time.Now()) }()
	}
	if err := c.resumeStarted(ctx); err != nil {
		return nil, err
	}
	c.showResumed()
	if err := c.admit(ctx); err != nil {
		return nil, err
	}
	if err := c.awaitFinals(ctx); err != nil {
		return nil, err
	}
	rep := c.report()
	c.writePages(rep)
	if err := w.Report(rep); err != nil {
		return nil, err
	}
	c.retire(context.WithoutCancel(ctx), cfg.Retain)
	c.retireRetry(context.WithoutCancel(ctx), cfg.Retain)
	return rep, nil
}

// retire starts a finished run's retention: what is left on its subjects
// is purged first (so no late task writes to it), then its keys get their
// expiry. The outputs are written, so a failure is only logged: the keys
// then stay until quorum runs delete removes them.
func (c *coord) retire(ctx context.Context, r runstate.Retention) {
	if _, err := c.env.Queue.PurgeRun(ctx, c.m.Run); err != nil {
		c.log.Warn("purging the finished run's subjects", zap.Error(err))
	}
	r = r.WithDefaults()
	n, err := c.env.State.Retire(ctx, c.m.Run, r)
	if err != nil {
		c.log.Warn("the finished run's keys keep no expiry: remove them with quorum runs delete", zap.Error(err))
		return
	}
	c.log.Info("run finished: its keys expire", zap.Int("keys", n), zap.Duration("state", r.State), zap.Duration("answers", r.Answers))
}

type coord struct {
	env      *runenv.Env
	run      *runenv.Run
	m        *runstate.Manifest
	w        *outputs.Writer
	log      *zap.Logger
	progress io.Writer
	terminal bool
	health   func() string
	limits   func(context.Context) []outputs.LimitLearned
	// limitChanges: Config.LimitChanges.
	limitChanges func(ctx context.Context, from, to time.Time) []outputs.LimitChange

	window       int
	abortAfter   int
	maxCost      float64
	warnings     []string
	restoreEvery time.Duration

	// inRun holds the run's example ids: a final answer is checked
	// against them in constant time (a scan of the manifest for each made
	// a run's finals cost N²).
	inRun map[string]bool

	// retry is the run that re-runs the failed examples in retrying (see
	// retryFailed); nil when none are retried.
	retry    *runenv.Run
	retrying map[string]bool

	mu sync.Mutex
	// llmFailures counts the latest finals in a row that failed on LLM
	// calls; aborted is set when they reach abortAfter.
	llmFailures int
	aborted     error
	finals      map[string]*message.FinalAnswer
	// began is when each example this coordinator started was published:
	// its root span's start.
	began map[string]time.Time
	// ends are when each final answer was recorded, and in which session,
	// this one's or an earlier's (as Redis keeps them with the answer).
	ends map[string]finalEnd
	// flying are the examples started and not final.
	flying map[string]bool

	// session numbers this session of the run (0: none, the run was
	// finished); started is when it started, and closed says its end is
	// recorded.
	session int
	closed  bool

	// progressMu guards the progress line's running totals.
	progressMu                 sync.Mutex
	started                    time.Time
	notAnswered, calls, tokens int
	// rateLimited counts the 429s the finals so far absorbed.
	rateLimited int
	money       float64
	// arrivals counts this session's finals (a resume's known ones came
	// free) and latencies sums their latencies, for the ETA.
	arrivals  int
	latencies time.Duration

	// spent is the money of the finals so far, paid the finals that made
	// LLM calls (the estimate of an example's cost is spent/paid);
	// overBudget is set once admission stopped at MaxCost.
	spent      float64
	paid       int
	overBudget bool

	// sizing re-sizes window from counted, the tokens the finals' calls
	// counted toward the TPM quota, over countedCalls calls (nil: fixed).
	sizing                *Sizing
	counted, countedCalls int

	// admitMu serialises admission; next is the next example to consider.
	admitMu sync.Mutex
	next    int
}

// spend adds a final's money to the run's spend; c.mu is held.
func (c *coord) spend(f *message.FinalAnswer) {
	t := f.Cost.Total()
	c.spent += t.Money()
	if t.LLMCalls > 0 {
		c.paid++
	}
	c.resize(t)
}

// resize sizes the admission window again from the tokens the finals'
// calls counted toward the TPM quota; c.mu is held.
func (c *coord) resize(t cost.Cost) {
	if c.sizing == nil || c.sizing.TPM <= 0 || t.LLMCalls == 0 {
		return
	}
	counted := t.LLM.PromptTokens + t.LLM.CompletionTokens
	if c.sizing.CachedOutsideTPM {
		counted -= t.LLM.CachedTokens
	}
	c.counted += counted
	c.countedCalls += t.LLMCalls
	if c.countedCalls < sizingSample {
		return
	}
	perCall := float64(c.counted) / float64(c.countedCalls)
	if w := c.sizing.window(perCall); w != c.window {
		c.log.Info("admission window re-sized from the tokens calls count toward the quota",
			zap.Int("from", c.window), zap.Int("to", w), zap.Float64("tokens_per_call", perCall))
		c.window = w
	}
}

// affordable reports whether one more example fits the budget: what the
// finished examples cost, plus the examples in flight and the next at
// their mean cost. Before any example finished the mean is unknown, so
// one example runs alone to learn it. c.mu is held.
func (c *coord) affordable() bool {
	if c.maxCost <= 0 {
		return true
	}
	if c.spent >= c.maxCost {
		return false
	}
	if c.paid == 0 {
		return len(c.flying) == 0
	}
	mean := c.spent / float64(c.paid)
	return c.spent+float64(len(c.flying)+1)*mean <= c.maxCost
}

// budgetStop returns *BudgetReached when admission stopped at the budget
// and nothing is in flight: the run can go no further this session.
func (c *coord) budgetStop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.overBudget || len(c.flying) > 0 || len(c.finals) >= len(c.m.Examples) {
		return nil
	}
	return &BudgetReached{Run: c.m.Run, Spent: c.spent, Budget: c.maxCost, Final: len(c.finals), Examples: len(c.m.Examples)}
}

// BudgetReached is a run stopped at its --max-cost: every example it
// started is final and paid for, the rest were not started. It resumes
// with a higher budget.
type BudgetReached struct {
	Run             string
	Spent, Budget   float64
	Final, Examples int
}

func (b *BudgetReached) Error() string {
	return fmt.Sprintf("run %s stopped at its budget: spent %.4f of --max-cost %.4f at the endpoints' prices, with %d of %d examples final; no new example was started, since the next would pass the budget. Resume with a higher --max-cost and the same --run-id, --out and --dataset",
		b.Run, b.Spent, b.Budget, b.Final, b.Examples)
}

// collectKnown loads finals recorded before a resume and makes sure their
// outputs exist.
func (c *coord) collectKnown(ctx context.Context) error {
	known, err := c.env.State.RecordedFinals(ctx, c.m.Run)
	if err != nil {
		return err
	}
	for id, r := range known {
		f := r.FinalAnswer
		if err := c.writeAnswer(ctx, f); err != nil {
			return err
		}
		c.finals[id] = f
		if !r.At.IsZero() {
			c.ends[id] = finalEnd{at: r.At, session: r.Session}
		}
		c.spend(f)
	}
	return nil
}

// retryRunID names the n-th retry of a run's failed examples.
func retryRunID(run string, n int) string { return fmt.Sprintf("%s_retry%d", run, n) }

// retryFailed prepares, when retry is set, a new run of the examples that
// failed. A failed example's tasks, results and final answer are recorded
// under message ids and keys of its run, which a second attempt would
// collide with (a duplicate publish is dropped), so the retry runs in a
// run of its own, <run>_retry<n>, with the same manifest (seed, agent,
// options); its finals are taken as this run's. Earlier retries are
// cancelled whether or not this one retries: an interrupted one's queued
// tasks would otherwise still be run by workers, for nobody.
func (c *coord) retryFailed(ctx context.Context, retry bool) error {
	n := 1
	for ; ; n++ {
		id := retryRunID(c.m.Run, n)
		_, err := c.env.State.Manifest(ctx, id)
		if errors.Is(err, runstate.ErrNoRun) {
			break
		}
		if err != nil {
			return fmt.Errorf("retry run %s: %w", id, err)
		}
		if err := c.env.State.Cancel(ctx, id, "superseded: run "+c.m.Run+" resumed"); err != nil {
			return fmt.Errorf("cancel retry run %s: %w", id, err)
		}
	}
	if !retry {
		return nil
	}
	var failed []string
	for _, id := range c.m.Examples {
		if f, ok := c.finals[id]; ok && f.Status == "failed" {
			failed = append(failed, id)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	m := *c.m
	m.Run, m.Examples, m.Created = retryRunID(c.m.Run, n), failed, time.Now()
	if _, _, err := c.env.State.CreateManifest(ctx, &m); err != nil {
		return fmt.Errorf("retry run %s: %w", m.Run, err)
	}
	run, err := c.env.Run(ctx, m.Run)
	if err != nil {
		return fmt.Errorf("retry run %s: %w", m.Run, err)
	}
	c.log.Info("retrying failed examples", zap.Int("examples", len(failed)), zap.String("retry_run", m.Run))
	c.retry, c.retrying = run, map[string]bool{}
	for _, id := range failed {
		c.retrying[id] = true
		delete(c.finals, id)
		delete(c.ends, id)
	}
	return nil
}

// retireRetry retires the retry run as retire does this one.
func (c *coord) retireRetry(ctx context.Context, r runstate.Retention) {
	if c.retry == nil {
		return
	}
	id := c.retry.Manifest.Run
	if _, err := c.env.Queue.PurgeRun(ctx, id); err != nil {
		c.log.Warn("purging the finished retry run's subjects", zap.String("retry_run", id), zap.Error(err))
	}
	if _, err := c.env.State.Retire(ctx, id, r.WithDefaults()); err != nil {
		c.log.Warn("the finished retry run's keys keep no expiry", zap.String("retry_run", id), zap.Error(err))
	}
}

// runOf is the run an example's work goes to: the retry run for a
// retried example, else this run.
func (c *coord) runOf(id string) *runenv.Run {
	if c.retrying[id] {
		return c.retry
	}
	return c.run
}

// resumeStarted publishes again the unfinished tasks of every example
// started before a crash and not final (message ids make those still
// queued a no-op; finished tasks are skipped). They count against the
// admission window.
func (c *coord) resumeStarted(ctx context.Context) error {
	agentName := c.run.Def.Name
	var open []string
	for _, id := range c.m.Examples {
		if _, done := c.finals[id]; done || c.retrying[id] {
			continue // a retried example starts afresh in its own run
		}
		open = append(open, id)
	}
	currents, err := c.env.State.Currents(ctx, c.m.Run, agentName, open)
	if err != nil {
		return err
	}
	for _, id := range open {
		current := currents[id]
		if current < 0 {
			continue
		}
		meta, err := c.env.State.Meta(ctx, c.m.Run, id)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.flying[id] = true
		c.mu.Unlock()
		if err := c.republish(ctx, id, agentName, current, meta.Warehouse); err != nil {
			return err
		}
	}
	return nil
}

// showResumed says, on a resume, what is already done and why the first
// finals may be a while: a task the last session's workers held is
// delivered again only once its ack wait, then its lease, has passed.
func (c *coord) showResumed() {
	c.mu.Lock()
	final, running := len(c.finals), len(c.flying)
	c.mu.Unlock()
	if c.progress == nil || final+running == 0 {
		return
	}
	line := fmt.Sprintf("Resumed: %d of %d examples already final", final, len(c.m.Examples))
	if running > 0 {
		lease := c.env.TaskLeaseTTL
		if lease <= 0 {
			lease = rdb.TaskLeaseTTL
		}
		line += fmt.Sprintf("; %d were running when the last session stopped and go on where they were. A task the last session's workers still held is delivered again once its ack wait and lease pass (up to %s): finals may not come for that long, and nothing is lost",
			running, (c.env.Queue.Config().AckWait + lease).Round(time.Second))
	}
	fmt.Fprintln(c.progress, line+".")
}

// admit starts examples in dataset order while the admission window has
// room: each gets its warehouse and its agent's first round.
func (c *coord) admit(ctx context.Context) error {
	c.admitMu.Lock()
	defer c.admitMu.Unlock()
	for c.next < len(c.m.Examples) {
		c.mu.Lock()
		id := c.m.Examples[c.next]
		_, final := c.finals[id]
		full := c.window > 0 && len(c.flying) >= c.window
		skip := final || c.flying[id]
		broke := !skip && !full && !c.affordable()
		if broke && !c.overBudget {
			c.overBudget = true
			c.log.Warn("the run's budget admits no new example", zap.Float64("spent", c.spent), zap.Float64("max_cost", c.maxCost), zap.Int("in_flight", len(c.flying)))
		}
		c.mu.Unlock()
		if (full || broke) && !skip {
			return nil
		}
		if skip {
			c.next++
			continue
		}
		// next moves past id only once it started: a start that failed
		// (Redis or NATS away) is tried again by the next admission (the
		// final answer that called it is redelivered), not skipped.
		if err := c.start(ctx, id); err != nil {
			return err
		}
		c.next++
	}
	return nil
}

// start routes an example to its warehouse and publishes the first round
// its agent asks for; an example that cannot run ends failed.
func (c *coord) start(ctx context.Context, id string) error {
	run := c.runOf(id)
	ds := run.DS
	agentName := run.Def.Name
	e, ok := ds.Example(id)
	if !ok || !ds.Runnable(id) {
		reason := "not in the dataset"
		if ok {
			reason = problems(ds, id)
		}
		return c.fail(ctx, id, "not runnable: "+reason)
	}
	whName, err := run.Route(e)
	if err != nil {
		return c.fail(ctx, id, err.Error())
	}
	meta := &runstate.ExampleMeta{Warehouse: whName, Published: time.Now()}
	if err := c.env.State.SetMeta(ctx, run.Manifest.Run, id, *meta); err != nil {
		return err
	}
	// The first round's tasks are children of the example's root span,
	// which accept emits once the example ends.
	ctx = trace.ExampleContext(ctx, run.Manifest.Run, id, run.Manifest.TraceParent)
	rec := c.env.Recorder(run)
	d, err := run.Agent.Start(trace.With(ctx, rec), c.env.Context(run, e, agentName))
	if agent.IsUnrunnable(err) {
		return c.fail(ctx, id, err.Error())
	}
	if err != nil {
		return fmt.Errorf("agent %s starting %s: %w", agentName, id, err)
	}
	ts := &trace.Start{Warehouse: meta.Warehouse, Round: d.Round, Expect: d.Expect, Steps: rec.Steps()}
	for _, t := range d.Tasks {
		ts.Tasks = append(ts.Tasks, t.ID)
	}
	c.env.WriteTrace(ctx, run, id, &trace.Entry{Type: trace.TypeStart, Agent: agentName, Process: c.env.Name,
		At: meta.Published, End: time.Now(), Start: ts})
	if err := c.env.Open(ctx, run, id, agentName, meta.Warehouse, d); err != nil {
		return err
	}
	// In flight only once its round is recorded and published: a start
	// that failed before is done again whole. Its final answer may
	// already be in (a fast agent).
	c.mu.Lock()
	if _, final := c.finals[id]; !final {
		c.flying[id] = true
		c.began[id] = meta.Published
	}
	c.mu.Unlock()
	return nil
}

// republish publishes the current round's tasks that have not finished and
// whose results are not all recorded.
func (c *coord) republish(ctx context.Context, id, agentName string, round int, wh string) error {
	st := c.env.State
	r := runstate.Round{Run: c.m.Run, Example: id, Agent: agentName, Round: round}
	if outcome, err := st.Decided(ctx, r); err != nil || outcome != "" {
		return err // decided: the final answer or the next round is on its way
	}
	results, err := st.Results(ctx, c.m.Run, id, agentName, round)
	if err != nil {
		return err
	}
	have := map[int]bool{}
	for _, res := range results {
		have[res.Index] = true
	}
	tasks, err := st.Tasks(ctx, c.m.Run, id, agentName)
	if err != nil {
		return err
	}
	if err := st.OpenDeadline(ctx, r, c.env.Deadline(c.m)); err != nil {
		return err
	}
	var missing []*message.Task
	for _, t := range tasks {
		if t.Task.Round != round || allIn(t.Task.Slots, have) {
			continue
		}
		done, err := st.Done(ctx, c.m.Run, id, agentName, t.Task.ID)
		if err != nil {
			return err
		}
		if !done {
			missing = append(missing, t)
		}
	}
	for _, t := range missing {
		t.Warehouse = wh // the example's route, as the task was first published
	}
	return c.env.PublishTasks(ctx, c.run, missing)
}

func allIn(slots []int, have map[int]bool) bool {
	for _, s := range slots {
		if !have[s] {
			return false
		}
	}
	return len(slots) > 0
}

func problems(ds *dataset.Dataset, id string) string {
	var msgs []string
	for _, p := range ds.Problems {
		if p.Instance == id {
			msgs = append(msgs, p.Message)
		}
	}
	return strings.Join(msgs, "; ")
}

// fail records an example that cannot run; the run goes on.
func (c *coord) fail(ctx context.Context, id, reason string) error {
	f := &message.FinalAnswer{V: message.Version, Run: c.m.Run, Example: id, Status: "failed", Error: reason}
	c.log.Warn("example failed", zap.String("example", id), zap.String("reason", reason))
	return c.accept(ctx, f)
}

// accept records a final answer once and writes its outputs.
func (c *coord) accept(ctx context.Context, f *message.FinalAnswer) error {
	c.mu.Lock()
	_, dup := c.finals[f.Example]
	c.mu.Unlock()
	if dup {
		return nil
	}
	if err := c.writeAnswer(ctx, f); err != nil {
		return err
	}
	// Its time is kept with it: a later session reports the example's
	// latency from it.
	at := time.Now()
	if err := c.env.State.RecordFinal(ctx, f, at, c.session); err != nil {
		return err
	}
	c.exportTrace(ctx, f.Example)
	c.mu.Lock()
	c.finals[f.Example] = f
	c.spend(f)
	delete(c.flying, f.Example)
	// A call that failed while another route of its model was up
	// (llm.RoutesUpNote) is no outage: only every route down counts.
	if f.Status == "failed" && strings.Contains(f.Error, "llm") && !strings.Contains(f.Error, llm.RoutesUpNote) {
		c.llmFailures++
		if c.abortAfter > 0 && c.llmFailures >= c.abortAfter && c.aborted == nil {
			c.aborted = &Aborted{Run: c.m.Run, Reason: fmt.Sprintf("%d examples in a row failed on LLM calls; the last: %s", c.llmFailures, f.Error)}
		}
	} else {
		c.llmFailures = 0
	}
	c.ends[f.Example] = finalEnd{at: at, session: c.session}
	n, inFlight := len(c.finals), len(c.flying)
	began, ok := c.began[f.Example]
	delete(c.began, f.Example)
	c.mu.Unlock()
	if !ok { // started by an earlier coordinator of the run
		began = time.Now().Add(-time.Duration(f.ServiceSeconds * float64(time.Second)))
	}
	trace.EmitExample(ctx, c.env.Exporter.Tracer(), c.m.Run, f.Example, c.m.TraceParent, began, time.Now(),
		attribute.String("quorum.agent", f.Agent), attribute.String("quorum.status", f.Status),
		attribute.String("quorum.confidence", f.Confidence), attribute.Int("quorum.rounds", f.Rounds))
	if c.env.Metrics != nil {
		c.env.Metrics.FinalAnswers.WithLabelValues(f.Status).Inc()
		if !c.m.Interactive { // a question's run would add series per question
			c.env.Metrics.ExamplesTotal.WithLabelValues(c.m.Run, "final").Set(float64(n))
		}
	}
	c.showProgress(n, f, time.Since(began), inFlight)
	return nil
}

// showProgress prints the progress line for the n-th final, f, which took
// latency, with inFlight examples still running.
func (c *coord) showProgress(n int, f *message.FinalAnswer, latency time.Duration, inFlight int) {
	if c.progress == nil {
		return
	}
	c.progressMu.Lock()
	defer c.progressMu.Unlock()
	total := len(c.m.Examples)
	if f.Status != "answered" {
		c.notAnswered++
	}
	t := f.Cost.Total()
	c.calls += t.LLMCalls
	c.tokens += t.Tokens()
	c.rateLimited += t.LLM.RateLimited
	c.arrivals++
	c.latencies += latency
	eta := "0s"
	if n < total {
		eta = etaOf(total-n, inFlight, c.arrivals, time.Since(c.started), c.latencies/time.Duration(c.arrivals)).Round(time.Second).String()
	}
	c.money += t.Money()
	spend := ""
	if c.money > 0 {
		spend = fmt.Sprintf(", %.2f spent", c.money)
	}
	if c.rateLimited > 0 {
		// Absorbed, not lost: but a run slower than its quota says why.
		spend += fmt.Sprintf(", %d × 429 retried", c.rateLimited)
	}
	if c.health != nil {
		if h := c.health(); h != "" {
			spend += ", " + h
		}
	}
	stats := fmt.Sprintf("%d not answered, %d LLM calls, %.1fM tokens%s, ETA %s", c.notAnswered, c.calls, float64(c.tokens)/1e6, spend, eta)
	if c.terminal {
		width := 30
		filled := width * n / max(1, total)
		fmt.Fprintf(c.progress, "\r[%s%s] %d/%d %s   ", strings.Repeat("#", filled), strings.Repeat(".", width-filled), n, total, stats)
		if n == total {
			fmt.Fprintln(c.progress)
		}
		return
	}
	fmt.Fprintf(c.progress, "[%d/%d] %s: %s %s %s (%s)\n", n, total, f.Example, f.Status, f.Confidence, f.Method, stats)
}

// etaOf estimates the time left for remaining examples, inFlight of them
// running, after arrivals finals in elapsed whose mean latency is mean.
// Early, the rate of finals so far says little (the first wave of the
// window finishes together): the window's throughput, inFlight examples
// per mean latency (Little's law), does. Late, that rate overstates what
// is left of examples already running, and the observed rate is the
// better of the two: the smaller estimate is taken.
func etaOf(remaining, inFlight, arrivals int, elapsed, mean time.Duration) time.Duration {
	observed := time.Duration(float64(elapsed) / float64(max(arrivals, 1)) * float64(remaining))
	little := time.Duration(float64(mean) * float64(remaining) / float64(max(min(inFlight, remaining), 1)))
	return min(observed, little)
}

func (c *coord) writeAnswer(ctx context.Context, f *message.FinalAnswer) error {
	for _, cand := range f.CandidateSQL {
		var csv *string
		if cand.CSVRef != "" {
			text, err := c.env.Blobs.GetString(ctx, cand.CSVRef)
			if err != nil {
				return err
			}
			csv = &text
		}
		if err := c.w.Candidate(f.Example, outputs.CandidateName(cand.Round, cand.Index), cand.SQL, csv); err != nil {
			return err
		}
	}
	for _, m := range f.Members {
		if m.Status != "answered" {
			continue
		}
		csv, err := c.env.Blobs.GetString(ctx, m.CSVRef)
		if err != nil {
			return err
		}
		mw, err := c.w.Member(m.Agent)
		if err != nil {
			return err
		}
		if err := mw.Answer(f.Example, m.SQL, csv); err != nil {
			return err
		}
	}
	if f.Status != "answered" {
		return nil
	}
	csv, err := c.env.Blobs.GetString(ctx, f.CSVRef)
	if err != nil {
		return err
	}
	return c.w.Answer(f.Example, f.SQL, csv)
}

// exportTrace writes an example's trace, texts included, into the output
// folder (traces/<id>.json), where quorum trace --out and the report's
// example pages read it. A trace that cannot be exported is logged: the
// answer is written, and the trace stays in Redis.
func (c *coord) exportTrace(ctx context.Context, id string) {
	if c.env.Traces == nil || c.run.TraceLevel() == trace.None || c.m.Interactive {
		return
	}
	x, err := c.env.Traces.Export(ctx, c.m.Run, id)
	if err == nil {
		x.Agent, x.Level = c.m.Agent, c.m.Trace
		var b []byte
		if b, err = json.Marshal(x); err == nil {
			err = c.w.Trace(id, b)
		}
	}
	if err != nil {
		c.log.Warn("exporting the trace", zap.String("example", id), zap.Error(err))
	}
}

// writePages writes the trace pages of the examples the report lists by
// name (trace.WritePages); one that cannot be written is logged.
func (c *coord) writePages(rep *outputs.Report) {
	if c.run.TraceLevel() == trace.None || c.m.Interactive {
		return
	}
	question := func(id string) string {
		if e, ok := c.run.DS.Example(id); ok {
			return e.Question
		}
		return ""
	}
	trace.WritePages(c.w, rep, question, func(id string, err error) {
		c.log.Warn("writing the trace page", zap.String("example", id), zap.Error(err))
	})
}

// awaitFinals consumes this run's final answers until every example has one.
func (c *coord) awaitFinals(ctx context.Context) error {
	if c.env.Metrics != nil && !c.m.Interactive {
		c.env.Metrics.ExamplesTotal.WithLabelValues(c.m.Run, "total").Set(float64(len(c.m.Examples)))
	}
	if c.done() {
		return nil
	}
	if err := c.budgetStop(); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	restorer := &service.Func{Run: c.restoreLoop}
	if err := restorer.Start(wctx); err != nil {
		return err
	}
	defer restorer.Stop()
	filters := []string{queue.Subject(c.m.Run, queue.StageFinal, "")}
	if c.retry != nil {
		filters = append(filters, queue.Subject(c.retry.Manifest.Run, queue.StageFinal, ""))
	}
	err := c.env.Queue.Work(wctx, c.env.Resilient(queue.WorkConfig{
		Consumer: ConsumerName(c.m.Run), Filters: filters, Concurrency: 4,
		Logger: c.env.Log, DrainTimeout: 5 * time.Second, MaxDeliver: -1,
		Handler: func(ctx context.Context, d queue.Delivery) error {
			var f message.FinalAnswer
			if err := queue.Decode(d.Msg.Data(), &f); err != nil {
				return queue.Permanent(err)
			}
			if c.retry != nil && f.Run == c.retry.Manifest.Run && c.retrying[f.Example] {
				f.Run = c.m.Run // the retry's answer is this run's
			}
			if f.Run != c.m.Run || !c.inRun[f.Example] {
				// Not this run's: a forged or stray message names no
				// output file and counts for nothing.
				c.env.Log.Warn("final answer for no example of this run: dropped", zap.String("run", f.Run), zap.String("example", f.Example))
				return queue.Permanent(fmt.Errorf("final answer for %q, not an example of run %s", f.Example, c.m.Run))
			}
			if err := c.accept(ctx, &f); err != nil {
				return err
			}
			if c.abortedErr() != nil {
				cancel()
				return nil
			}
			if err := c.admit(ctx); err != nil {
				return err
			}
			if c.done() || c.budgetStop() != nil {
				cancel()
			}
			return nil
		}}))
	if err != nil {
		return err
	}
	if err := c.abortedErr(); err != nil {
		return err
	}
	if err := c.budgetStop(); err != nil {
		return err
	}
	if !c.done() {
		c.releaseCancelled(context.WithoutCancel(ctx))
		cause := ctx.Err()
		if cause == nil {
			cause = context.Canceled
		}
		return fmt.Errorf("run %s interrupted with %d of %d examples final: resume it with --run-id %s and the same --out and --dataset: %w",
			c.m.Run, len(c.finals), len(c.m.Examples), c.m.Run, cause)
	}
	if err := DeleteConsumer(context.WithoutCancel(ctx), c.env, c.m.Run); err != nil {
		c.log.Warn("deleting the finished run's consumer", zap.Error(err))
	}
	return nil
}

// ConsumerName is the durable consumer through which run's coordinator
// reads its final answers. It lives across the run's sessions (a resume
// reads on where the last stopped) and goes once the run is finished or
// cancelled: each one left behind keeps its state, and its goroutines, in
// every NATS server holding the stream.
func ConsumerName(run string) string { return "coordinator-" + run }

// DeleteConsumer deletes run's coordinator consumer; one already gone is
// no error. Call it only once no coordinator of the run reads from it:
// one reading would fail its fetches until it stopped.
func DeleteConsumer(ctx context.Context, env *runenv.Env, run string) error {
	if err := env.Queue.DeleteConsumer(ctx, ConsumerName(run)); err != nil {
		return fmt.Errorf("deleting the consumer of run %s: %w", run, err)
	}
	return nil
}

// releaseCancelled deletes the consumer of a run stopped because it was
// cancelled: a cancelled run is never resumed, so nothing would ever read
// from it again. Any other interruption (a shutdown, a lost lease) keeps
// it for the coordinator that resumes the run.
func (c *coord) releaseCancelled(ctx context.Context) {
	cancelled, err := c.env.State.Cancelled(ctx, c.m.Run)
	if err != nil || !cancelled {
		return
	}
	if err := DeleteConsumer(ctx, c.env, c.m.Run); err != nil {
		c.log.Warn("deleting the cancelled run's consumer", zap.Error(err))
	}
}

// restoreLoop runs restore every restoreEvery until ctx ends.
func (c *coord) restoreLoop(ctx context.Context) error {
	t := time.NewTicker(c.restoreEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		c.heartbeat(ctx)
		if err := c.restore(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("checking the run's state in Redis", zap.Error(err))
		}
	}
}

// restore records again what Redis lost of the run since the coordinator
// wrote it (Redis restarted from an older snapshot, a lagging replica
// promoted): the manifest, and the first round of a started example that
// Redis has no round of. Its tasks are published under their first ids,
// which JetStream may drop as duplicates: the voter's reconcile then finds
// them neither finished nor in the stream and reissues them. Later
// rounds are the voter's: a decision Redis lost is taken again by it.
func (c *coord) restore(ctx context.Context) error {
	if _, err := c.env.State.Manifest(ctx, c.m.Run); errors.Is(err, runstate.ErrNoRun) {
		c.log.Warn("Redis lost the run's manifest: recording it again")
		if _, _, err := c.env.State.CreateManifest(ctx, c.m); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	c.mu.Lock()
	var started []string
	for id := range c.flying {
		started = append(started, id)
	}
	c.mu.Unlock()
	slices.Sort(started)
	for _, id := range started {
		run := c.runOf(id)
		current, err := c.env.State.Current(ctx, run.Manifest.Run, id, run.Def.Name)
		if err != nil {
			return err
		}
		if current >= 0 || c.isFinal(id) {
			continue
		}
		c.log.Warn("Redis lost a started example's first round: opening it again", zap.String("example", id))
		if err := c.start(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

func (c *coord) isFinal(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.finals[id]
	return ok
}

func (c *coord) abortedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.aborted
}

// Aborted is a run stopped because an LLM endpoint fails persistently; it
// can be resumed once the endpoint works.
type Aborted struct {
	Run, Reason string
}

func (a *Aborted) Error() string {
	return fmt.Sprintf("run %s aborted: %s. Fix the endpoint, then resume with --run-id %s (the same --out and --dataset) to run the examples not yet started, and add --retry-failed to run the failed ones again", a.Run, a.Reason, a.Run)
}

func (c *coord) done() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.finals) >= len(c.m.Examples)
}

// report builds run.json, scoring answers against gold where it exists:
// Spider 2.0's gold result CSVs, else (BIRD, Spider 1) the gold SQL run on
// the example's SQLite database. It closes this session: the run's timings
// span every session, each example's from its own recorded end.
func (c *coord) report() *outputs.Report {
	ctx := context.Background()
	now := time.Now()
	c.closeSession(ctx, now)
	rep := &outputs.Report{RunID: c.m.Run, Dataset: c.m.Dataset, Agent: c.m.Agent, AgentOptions: c.m.AgentOptions,
		Seed: c.m.Seed, Votes: c.m.Votes, LLM: c.m.LLM, Skipped: c.m.Skipped, Warnings: c.warnings,
		Started: c.started, Finished: now, Sessions: c.sessions(ctx, now),
		QuorumVersion: version.Version, Revision: version.Revision(), DatasetFingerprint: c.run.DS.Fingerprint(c.m.Examples)}
	for i, s := range rep.Sessions {
		if i == 0 || s.Started.Before(rep.Started) {
			rep.Started = s.Started
		}
		if i == 0 || s.Finished.After(rep.Finished) {
			rep.Finished = s.Finished
		}
	}
	if c.limits != nil {
		rep.Limits = c.limits(ctx)
	}
	if c.limitChanges != nil {
		rep.LimitChanges = c.limitChanges(ctx, rep.Started, rep.Finished)
	}
	bird, closeBird := c.birdGold()
	defer closeBird()
	metas := c.metas(ctx)
	for _, id := range c.m.Examples {
		f := c.finals[id]
		e, _ := c.run.DS.Example(id)
		r := outputs.Example{InstanceID: id, Agent: f.Agent, AgreedCandidates: f.Agreed, Status: f.Status, Confidence: f.Confidence, Method: f.Method, Rounds: f.Rounds,
			Candidates: f.Candidates, ValidCandidates: f.Valid, Cost: f.Cost.Total(), CostByStage: f.Cost, Error: f.Error,
			CriticalPathSeconds: f.CriticalPathSeconds, TaskSeconds: f.TaskSeconds, Tasks: f.Tasks,
			ServiceSeconds: f.ServiceSeconds, Rule: f.Rule, StoppedAfter: f.StoppedAfter, Posterior: f.Posterior}
		for _, m := range f.Members {
			r.Members = append(r.Members, outputs.Member{Agent: m.Agent, Status: m.Status, Confidence: m.Confidence, Method: m.Method,
				Valid: m.Valid, Agrees: m.Agrees, StoppedAfter: m.StoppedAfter, Posterior: m.Posterior})
		}
		end, ended := c.ends[id]
		if ended {
			r.FinishedSeconds, r.Session = end.at.Sub(rep.Started).Seconds(), end.session
		}
		if e != nil {
			r.Dialect, r.Database, r.Question = string(e.Dialect), e.DB, e.Question
			if meta, ok := metas[c.runOf(id).Manifest.Run][id]; ok && ended {
				r.LatencySeconds = end.at.Sub(meta.Published).Seconds()
			}
			c.scoreExample(ctx, bird, e, f, &r)
		}
		rep.Examples = append(rep.Examples, r)
	}
	rep.Summarize()
	return rep
}

// metas reads every example's meta, by run (this one and the retry run),
// in batches; an example whose meta cannot be read gets no latency.
func (c *coord) metas(ctx context.Context) map[string]map[string]*runstate.ExampleMeta {
	byRun := map[string][]string{}
	for _, id := range c.m.Examples {
		run := c.runOf(id).Manifest.Run
		byRun[run] = append(byRun[run], id)
	}
	out := map[string]map[string]*runstate.ExampleMeta{}
	for run, ids := range byRun {
		m, err := c.env.State.Metas(ctx, run, ids)
		if err != nil {
			c.log.Warn("run.json without latencies: the examples' metas cannot be read", zap.String("run", run), zap.Error(err))
			continue
		}
		out[run] = m
	}
	return out
}

// birdGold runs gold SQL for the examples that have no gold result CSVs,
// read-only on their SQLite files, within the run's query timeout.
func (c *coord) birdGold() (*eval.BirdGold, func()) {
	set := &sqlite.Set{Base: sqlite.Config{QueryTimeout: c.m.QueryTimeout}}
	whs := &localdb.Warehouses{DS: c.run.DS, SQLite: set, Limits: eval.ResultLimits}
	return &eval.BirdGold{Runner: whs, ResultLimits: whs.Limits}, func() { _ = set.Close() }
}

// scoreExample sets r's Correct and CorrectAtK (and its members') when e
// has gold: against the gold CSVs by Spider 2.0's rules, or, with gold SQL
// alone on SQLite, by BIRD's execution accuracy. A gold query that fails
// leaves the example unscored rather than wrong.
func (c *coord) scoreExample(ctx context.Context, bird *eval.BirdGold, e *dataset.Example, f *message.FinalAnswer, r *outputs.Example) {
	var one func(ref string) bool
	emptyRight := false
	switch {
	case len(e.Gold.Results) > 0 && c.run.DS.GoldDir != "":
		r.Metric = "spider2"
		// The gold tables are read at the first result to score, once.
		var golds []*eval.Frame
		var goldErr error
		one = func(ref string) bool {
			if ref == "" {
				return false
			}
			if golds == nil && goldErr == nil {
				golds, goldErr = goldFrames(e)
			}
			return goldErr == nil && c.scoreRef(ctx, e, golds, ref)
		}
	case strings.TrimSpace(e.Gold.SQL) != "" && e.Dialect == warehouse.SQLite:
		defer bird.Forget(e.ID)
		gold, err := bird.Result(ctx, e.ID, e.Gold.SQL)
		if err != nil {
			c.log.Warn("example not scored: its gold SQL failed", zap.String("example", e.ID), zap.Error(err))
			return
		}
		r.Metric = "bird"
		// BIRD compares row sets: a candidate that returned no rows is
		// right when the gold returns none.
		emptyRight = len(gold.Rows) == 0
		one = func(ref string) bool {
			if ref == "" {
				return false
			}
			csv, err := c.env.Blobs.GetString(ctx, ref)
			if err != nil {
				return false
			}
			ok, err := bird.ScoreCSV(ctx, e.ID, e.Gold.SQL, csv)
			return err == nil && ok
		}
	default:
		return
	}
	correct, atK := score(f, one, emptyRight)
	r.Correct, r.CorrectAtK = &correct, &atK
	if !correct && f.Status == "answered" {
		var golds []*eval.Frame
		if r.Metric == "spider2" {
			golds, _ = goldFrames(e)
		} else if g, err := bird.Frame(ctx, e.ID, e.Gold.SQL); err == nil {
			golds = []*eval.Frame{g}
		}
		r.Gold = c.goldDiff(ctx, e, golds, f.CSVRef)
	}
	for i, m := range f.Members {
		ok := m.Status == "answered" && one(m.CSVRef)
		r.Members[i].Correct = &ok
	}
}

// goldDiff sets the answer stored at ref against gold, for a reader (nil
// when either cannot be read).
func (c *coord) goldDiff(ctx context.Context, e *dataset.Example, golds []*eval.Frame, ref string) *outputs.GoldDiff {
	csv, err := c.env.Blobs.GetString(ctx, ref)
	if err != nil {
		return nil
	}
	answer, err := eval.ReadCSV([]byte(csv))
	if err != nil {
		return nil
	}
	return outputs.NewGoldDiff(answer, golds, e.Gold.SQL)
}

// goldFrames reads e's gold result tables, once for all its candidates:
// the files the dataset listed when it loaded (listing the gold folder
// again for each candidate cost a listing of every example's files).
func goldFrames(e *dataset.Example) ([]*eval.Frame, error) {
	golds := make([]*eval.Frame, len(e.Gold.Results))
	for i, f := range e.Gold.Results {
		g, err := eval.ReadCSVFile(f)
		if err != nil {
			return nil, fmt.Errorf("gold %w", err)
		}
		golds[i] = g
	}
	return golds, nil
}

// scoreRef scores one stored result against the example's gold tables.
func (c *coord) scoreRef(ctx context.Context, e *dataset.Example, golds []*eval.Frame, ref string) bool {
	if ref == "" {
		return false
	}
	csv, err := c.env.Blobs.GetString(ctx, ref)
	if err != nil {
		return false
	}
	fr, err := eval.ReadCSV([]byte(csv))
	if err != nil {
		return false
	}
	ok, err := eval.CompareGold(fr, golds, e.Gold.Single, e.Gold.Spec.ConditionCols, e.Gold.Spec.IgnoreOrder)
	return err == nil && ok
}

// score judges the final answer and every candidate with one: whether the
// final is right, and whether any is (EX@k, Best-of-N). emptyRight counts
// a candidate that returned no rows as right.
func score(f *message.FinalAnswer, one func(ref string) bool, emptyRight bool) (correct, atK bool) {
	correct = f.Status == "answered" && one(f.CSVRef)
	atK = correct
	for _, ref := range f.CandidateRefs {
		if atK {
			break
		}
		atK = one(ref)
	}
	for _, cand := range f.CandidateSQL {
		if atK || !emptyRight {
			break
		}
		atK = cand.Status == agent.StatusEmpty
	}
	return correct, atK
}

// IsTerminal reports whether f is a terminal (for the progress bar).
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
