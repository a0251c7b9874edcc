// Package voter records candidate results in Redis and decides: it records
// each result once (run, example, agent, round, candidate), and when a
// round's expected results are in, or its deadline passed, it hands every
// candidate so far to the agent's decision step and carries out the
// answer — the next round's tasks, or the final answer for the
// coordinator. Its state lives in Redis, so a restarted voter carries on.
package voter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/service"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// Config configures the voter.
type Config struct {
	Env         *runenv.Env
	Concurrency int
	// SweepEvery is how often rounds past their deadline are decided
	// (default 1s).
	SweepEvery time.Duration
	// ReconcileEvery is how often open rounds that made no progress for
	// as long are reconciled with the stream, their lost tasks reissued
	// (default 10s; see reconcile.go).
	ReconcileEvery time.Duration
	queue.WorkConfig
}

// Voter decides rounds. It is a component of three loops, each in its
// own file: the results consumer (here), the sweep of rounds past their
// deadline, which also reconciles open rounds with the stream (sweep.go,
// reconcile.go), and the reader of exhausted tasks' advisories
// (advisory.go). Start starts them; Stop stops the consumer first (its
// in-flight results are recorded within the drain time), then the other
// two, and returns once every one has ended.
type Voter struct {
	env     *runenv.Env
	cfg     Config
	results service.Loop
	loops   service.Group
}

// New returns a voter, not started.
func New(cfg Config) *Voter {
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = time.Second
	}
	if cfg.ReconcileEvery <= 0 {
		cfg.ReconcileEvery = 10 * time.Second
	}
	v := &Voter{env: cfg.Env, cfg: cfg}
	rc := &reconciler{v: v, every: cfg.ReconcileEvery, last: time.Now(), lost: map[string]*sighting{}}
	v.loops = service.Group{&sweeper{v: v, every: cfg.SweepEvery, rc: rc}, &advisories{v: v, base: cfg.WorkConfig}}
	return v
}

// Start starts the voter's loops.
func (v *Voter) Start(ctx context.Context) error {
	if err := v.loops.Start(ctx); err != nil {
		return err
	}
	if err := v.results.Go(ctx, v.consume); err != nil {
		v.loops.Stop()
		return err
	}
	return nil
}

// Stop stops the voter's loops and waits for them.
func (v *Voter) Stop() {
	v.results.Stop()
	v.loops.Stop()
}

// Done is closed when the results consumer ended (stopped, or failed:
// Err says why).
func (v *Voter) Done() <-chan struct{} { return v.results.Done() }

// Err is why the results consumer ended.
func (v *Voter) Err() error { return v.results.Err() }

// Run consumes results until ctx ends (or the consumer fails), then stops
// every loop of the voter.
func Run(ctx context.Context, cfg Config) error {
	v := New(cfg)
	if err := v.Start(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-v.Done():
	}
	v.Stop()
	return v.Err()
}

// consume records results until ctx ends.
func (v *Voter) consume(ctx context.Context) error {
	wc := v.env.Resilient(v.cfg.WorkConfig)
	// A result is never dropped: recording is retried until Redis answers.
	wc.MaxDeliver = -1
	wc.Consumer = "voter"
	wc.Filters = []string{queue.Subject("*", queue.StageResult, "")}
	wc.Concurrency = max(1, v.cfg.Concurrency)
	wc.Handler = v.handle
	wc.Logger = v.env.Log
	return v.env.Queue.Work(ctx, wc)
}

func (v *Voter) handle(ctx context.Context, d queue.Delivery) error {
	var r message.CandidateResult
	if err := queue.Decode(d.Msg.Data(), &r); err != nil {
		return queue.Permanent(err)
	}
	run, err := v.env.Run(ctx, r.Run)
	if errors.Is(err, runstate.ErrNoRun) {
		return queue.Permanent(err)
	}
	if err != nil {
		return err
	}
	added, n, err := v.env.State.AddResult(ctx, &r)
	if err != nil {
		return err
	}
	if !added {
		v.env.Log.Debug("duplicate candidate result ignored", zap.String("run", r.Run), zap.String("example", r.Example),
			zap.String("agent", r.Agent), zap.Int("round", r.Round), zap.Int("candidate", r.Index))
	}
	expect, err := v.env.State.Expected(ctx, r.Run, r.Example, r.Agent, r.Round)
	if err != nil {
		return err
	}
	round := runstate.Round{Run: r.Run, Example: r.Example, Agent: r.Agent, Round: r.Round}
	if expect == 0 || n < expect {
		return v.env.State.Progress(ctx, round, "", v.env.Deadline(run.Manifest))
	}
	return v.Decide(ctx, round)
}

// Decide decides a round once; deciding again (a restarted voter, two
// voters) publishes the same deduplicated messages.
func (v *Voter) Decide(ctx context.Context, r runstate.Round) error {
	done, err := v.env.State.Decided(ctx, r)
	if err != nil {
		return err
	}
	if done != "" {
		// Decided already (a late result, a second voter): make sure its
		// deadline is gone, never reopen it.
		return v.env.State.CloseRound(ctx, r)
	}
	// A cancelled run's decision would be carried out for nobody: its
	// coordinator stopped, and serve settles and purges its subjects, so a
	// final or a round published now would sit in the stream for no
	// reader (and the agent's decision step may cost). Its results stay
	// recorded (serve charges what they cost); the round is only closed,
	// so no sweep decides it again.
	cancelled, err := v.env.State.Cancelled(ctx, r.Run)
	if err != nil {
		return fmt.Errorf("reading whether run %s is cancelled: %w", r.Run, err)
	}
	if cancelled {
		v.env.Log.Debug("round of a cancelled run closed undecided", zap.String("run", r.Run), zap.String("example", r.Example), zap.Int("round", r.Round))
		return v.env.State.CloseRound(ctx, r)
	}
	run, e, err := v.env.Example(ctx, r.Run, r.Example)
	if err != nil {
		return err
	}
	_, ag, err := run.AgentFor(r.Agent)
	if err != nil {
		return err
	}
	var results []*message.CandidateResult
	for round := 0; round <= r.Round; round++ {
		rs, err := v.env.State.Results(ctx, r.Run, r.Example, r.Agent, round)
		if err != nil {
			return err
		}
		results = append(results, rs...)
	}
	cands, err := v.candidates(ctx, results)
	if err != nil {
		return err
	}
	ac := v.env.Context(run, e, r.Agent)
	d, err := ag.Decide(run.Priority(ctx), ac, r.Round, cands)
	if err != nil {
		return fmt.Errorf("agent %s deciding round %d of %s: %w", r.Agent, r.Round, r.Example, err)
	}
	if v.env.Metrics != nil {
		v.env.Metrics.Decisions.WithLabelValues(strconv.Itoa(r.Round), d.Confidence, d.Method).Inc()
	}
	// The decision's span parents the tasks and the answer it publishes.
	ctx = v.traceDecision(ctx, run, r, d, cands)
	outcome := runstate.OutcomeFinal
	if d.Next != nil {
		meta, err := v.env.State.Meta(ctx, r.Run, r.Example)
		if err != nil {
			return err
		}
		if d.Next.Round <= r.Round {
			return fmt.Errorf("agent %s: round %d of %s dispatched round %d; a decision must open a later round", r.Agent, r.Round, r.Example, d.Next.Round)
		}
		if err := v.env.Open(ctx, run, r.Example, r.Agent, meta.Warehouse, d.Next); err != nil {
			return err
		}
		outcome = runstate.OutcomeNext
		ac.Log.Info("round decided: next round", zap.Int("round", r.Round), zap.String("confidence", d.Confidence),
			zap.Int("valid", d.Valid), zap.Int("tasks", len(d.Next.Tasks)))
	} else {
		f := final(run.Manifest, r, d, cands, results)
		v.traceFinal(ctx, run, f)
		if err := v.env.PublishFinal(ctx, f); err != nil {
			return err
		}
	}
	if err := v.env.State.MarkDecided(ctx, r, outcome); err != nil {
		return err
	}
	return v.env.State.CloseRound(ctx, r)
}

// candidates rebuilds the candidates from recorded results, with their
// result tables from the blob store.
func (v *Voter) candidates(ctx context.Context, results []*message.CandidateResult) ([]*agent.Candidate, error) {
	out := make([]*agent.Candidate, len(results))
	for i, r := range results {
		c := &agent.Candidate{Round: r.Round, Index: r.Index, SQL: r.SQL, Status: r.Status, Error: r.Error, Rows: r.Rows,
			Payload: r.Payload, Worker: r.Worker}
		if r.CSVRef != "" {
			csv, err := v.env.Blobs.GetString(ctx, r.CSVRef)
			if err != nil {
				return nil, err
			}
			c.CSV = csv
		}
		out[i] = c
	}
	return out, nil
}

// final builds the final answer of a decision: what it cost, how long its
// chains took, and its status — answered, failed when every candidate's
// task failed (or none arrived), no_answer otherwise.
func final(m *runstate.Manifest, r runstate.Round, d *agent.Decision, cands []*agent.Candidate, results []*message.CandidateResult) *message.FinalAnswer {
	f := &message.FinalAnswer{V: message.Version, Run: m.Run, Example: r.Example, Agent: r.Agent, Confidence: d.Confidence,
		Method: d.Method, Rounds: r.Round + 1, Candidates: len(results), Valid: d.Valid, Agreed: d.Agreed, Cost: cost.Ledger{}}
	failed := 0
	var reasons []string
	slowest := map[int]float64{}
	var first time.Time
	for i, res := range results {
		if !res.Started.IsZero() && (first.IsZero() || res.Started.Before(first)) {
			first = res.Started
		}
		f.Cost.Merge(res.Cost)
		f.TaskSeconds += res.ElapsedSeconds
		f.Tasks++
		slowest[res.Round] = max(slowest[res.Round], res.ChainSeconds)
		if res.Status == agent.StatusFailed {
			failed++
			reasons = append(reasons, res.Error)
		}
		if res.CSVRef != "" && res.Status == agent.StatusOK {
			f.CandidateRefs = append(f.CandidateRefs, res.CSVRef)
		}
		if candidateStatus[res.Status] && strings.TrimSpace(res.SQL) != "" {
			c := message.CandidateSQL{Round: res.Round, Index: res.Index, Status: res.Status, SQL: res.SQL}
			if res.Status == agent.StatusOK {
				c.CSVRef = res.CSVRef
			}
			f.CandidateSQL = append(f.CandidateSQL, c)
		}
		if d.Winner == cands[i] {
			f.CSVRef = res.CSVRef
		}
	}
	f.Rule = d.Rule
	if d.Sampling != nil {
		f.StoppedAfter, f.Posterior = d.Sampling.StoppedAfter, d.Sampling.Posterior
	}
	for _, m := range d.Members {
		a := message.MemberAnswer{Agent: m.Agent, Status: "no_answer", Confidence: m.Confidence, Method: m.Method, Valid: m.Valid, Agrees: m.Agrees}
		if m.Sampling != nil {
			a.StoppedAfter, a.Posterior = m.Sampling.StoppedAfter, m.Sampling.Posterior
		}
		for i, res := range results {
			if m.Winner != nil && m.Winner == cands[i] {
				a.Status, a.SQL, a.CSVRef = "answered", res.SQL, res.CSVRef
			}
		}
		f.Members = append(f.Members, a)
	}
	for _, s := range slowest {
		f.CriticalPathSeconds += s
	}
	if !first.IsZero() {
		// Worker and voter clocks differ by their NTP skew at most.
		f.ServiceSeconds = max(0, time.Since(first).Seconds())
	}
	switch {
	case d.Winner != nil:
		f.Status, f.SQL = "answered", d.Winner.SQL
	case failed > 0 && failed == len(results) || len(results) == 0:
		f.Status = "failed"
		f.Error = fmt.Sprintf("%d of %d candidates failed", failed, len(results))
		if len(results) == 0 {
			f.Error = "no candidate result arrived before the round's deadline"
		} else if len(reasons) > 0 {
			f.Error += ": " + reasons[0]
		}
	default:
		f.Status = "no_answer"
		f.Error = "no candidate produced rows"
		if reason, all := commonError(results); all {
			// Nothing was ever run: the pipeline failed (an LLM endpoint
			// failing every call, say), not the model's answers.
			f.Status = "failed"
			f.Error = fmt.Sprintf("all %d candidates gave up: %s", len(results), reason)
		} else if reason != "" {
			f.Error += "; the most common error: " + reason
		}
	}
	return f
}

// candidateStatus are the statuses of candidates proper; an agent's own
// records (ReFoRCE's "vote" repeats the SQL it chose) are not candidates.
var candidateStatus = map[string]bool{agent.StatusOK: true, agent.StatusEmpty: true, agent.StatusError: true,
	agent.StatusGaveUp: true, agent.StatusFailed: true}

// commonError is the most frequent error among the candidates, and whether
// every candidate gave up or failed (none ran a query to the end).
func commonError(results []*message.CandidateResult) (string, bool) {
	counts := map[string]int{}
	best, all := "", len(results) > 0
	for _, r := range results {
		if r.Status != agent.StatusGaveUp && r.Status != agent.StatusFailed {
			all = false
		}
		if r.Error == "" {
			continue
		}
		counts[r.Error]++
		if counts[r.Error] > counts[best] || (counts[r.Error] == counts[best] && r.Error < best) {
			best = r.Error
		}
	}
	return best, all && best != ""
}
