// Package voter aggregates candidate results in Redis and decides: it
// records each result once (run, example, round, candidate), decides when a
// round is complete (all expected results in, or the round's deadline
// passed), publishes the final answer (high confidence) or the exploration
// tasks (low confidence), and after the last round falls back as ReFoRCE
// does. Its state lives in Redis, so a restarted voter carries on.
package voter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/agents/reforce"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/queue"
	"github.com/quorumsql/quorum/pkg/runtime/explorer"
	"github.com/quorumsql/quorum/pkg/runtime/generator"
	"github.com/quorumsql/quorum/pkg/runtime/runenv"
	"github.com/quorumsql/quorum/pkg/runtime/runstate"
)

// Config configures the voter.
type Config struct {
	Env         *runenv.Env
	Concurrency int
	// SweepEvery is how often rounds past their deadline are decided
	// (default 1s).
	SweepEvery time.Duration
	queue.WorkConfig
}

// Run consumes results until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	v := &Voter{env: cfg.Env}
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = time.Second
	}
	go v.sweep(ctx, cfg.SweepEvery)
	wc := cfg.WorkConfig
	wc.Consumer = "voter"
	wc.Filters = []string{queue.Subject("*", queue.StageResult, "")}
	wc.Concurrency = max(1, cfg.Concurrency)
	wc.Handler = v.handle
	wc.Logger = cfg.Env.Log
	return cfg.Env.Queue.Work(ctx, wc)
}

// Voter decides rounds.
type Voter struct {
	env *runenv.Env
}

func (v *Voter) handle(ctx context.Context, d queue.Delivery) error {
	var r queue.CandidateResult
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
			zap.Int("round", r.Round), zap.Int("candidate", r.Index))
	}
	if n < run.Manifest.Votes {
		return v.env.State.OpenRound(ctx, r.Run, r.Example, r.Round, time.Now().Add(run.Manifest.RoundTimeout))
	}
	return v.Decide(ctx, r.Run, r.Example, r.Round)
}

// sweep decides rounds whose deadline passed with results missing (a
// candidate lost beyond its deliveries, a worker that never came back).
func (v *Voter) sweep(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due, err := v.env.State.DueRounds(ctx, time.Now())
		if err != nil {
			continue
		}
		for _, r := range due {
			if err := v.Decide(ctx, r.Run, r.Example, r.Round); err != nil {
				v.env.Log.Warn("deciding a round past its deadline failed", zap.String("run", r.Run), zap.String("example", r.Example), zap.Error(err))
			}
		}
	}
}

// Decide decides a round once; deciding again (a restarted voter, two
// voters) publishes the same deduplicated messages.
func (v *Voter) Decide(ctx context.Context, runID, ex string, round int) error {
	done, err := v.env.State.Decided(ctx, runID, ex, round)
	if err != nil || done != "" {
		return err
	}
	run, err := v.env.Run(ctx, runID)
	if err != nil {
		return err
	}
	m := run.Manifest
	results, err := v.env.State.Results(ctx, runID, ex, round)
	if err != nil {
		return err
	}
	cands, err := v.candidates(ctx, results)
	if err != nil {
		return err
	}
	all := cands
	var allResults []*queue.CandidateResult
	if round == 1 {
		first, err := v.env.State.Results(ctx, runID, ex, 0)
		if err != nil {
			return err
		}
		firstCands, err := v.candidates(ctx, first)
		if err != nil {
			return err
		}
		all = append(firstCands, cands...)
		allResults = append(first, results...)
	} else {
		allResults = results
	}
	log := v.env.Log.With(zap.String("run", runID), zap.String("example", ex), zap.Int("round", round))
	outcome := runstate.OutcomeFinal
	if round == 0 {
		d := reforce.Vote(cands)
		v.observe(round, d)
		switch {
		case allFailed(results):
			// Every task exhausted its deliveries: exploring would fail the
			// same way, so the example ends failed with the reason.
			if err := v.final(ctx, m, ex, 1, d, all, allResults); err != nil {
				return err
			}
		case d.Confidence == reforce.High:
			if err := v.final(ctx, m, ex, 1, d, all, allResults); err != nil {
				return err
			}
		case m.NoExploration:
			if err := v.final(ctx, m, ex, 1, reforce.Decide(all, reforce.Seed(m.Seed, ex, 2, 0, "tie")), all, allResults); err != nil {
				return err
			}
		default:
			meta, err := v.env.State.Meta(ctx, runID, ex)
			if err != nil {
				return err
			}
			if err := v.env.State.OpenRound(ctx, runID, ex, 1, time.Now().Add(2*m.RoundTimeout)); err != nil {
				return err
			}
			for i := 0; i < m.Votes; i++ {
				t := &queue.ExploreTask{V: queue.Version, Run: runID, Example: ex, Index: i, Votes: m.Votes, Seed: m.Seed, InfoRef: meta.InfoRef}
				if err := explorer.PublishExplore(ctx, v.env.Queue, meta.Warehouse, t); err != nil {
					return err
				}
			}
			outcome = runstate.OutcomeExplore
			log.Info("low confidence: exploring", zap.Int("clusters", len(d.Clusters)), zap.Int("valid", d.Valid))
		}
	} else {
		d := reforce.Decide(all, reforce.Seed(m.Seed, ex, 2, 0, "tie"))
		d.Confidence = reforce.Low
		v.observe(round, d)
		if err := v.final(ctx, m, ex, 2, d, all, allResults); err != nil {
			return err
		}
	}
	if err := v.env.State.MarkDecided(ctx, runID, ex, round, outcome); err != nil {
		return err
	}
	return v.env.State.CloseRound(ctx, runstate.Round{Run: runID, Example: ex, Round: round})
}

func (v *Voter) observe(round int, d reforce.Decision) {
	if v.env.Metrics != nil {
		v.env.Metrics.Decisions.WithLabelValues(strconv.Itoa(round), string(d.Confidence), string(d.Method)).Inc()
	}
}

// candidates rebuilds the agent's candidates from recorded results, with
// their result tables from the blob store.
func (v *Voter) candidates(ctx context.Context, results []*queue.CandidateResult) ([]*reforce.Candidate, error) {
	out := make([]*reforce.Candidate, len(results))
	for i, r := range results {
		c := &reforce.Candidate{Round: r.Round, Index: r.Index, SQL: r.SQL, Status: reforce.Status(r.Status), Error: r.Error, Rows: r.Rows}
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

func (v *Voter) final(ctx context.Context, m *runstate.Manifest, ex string, rounds int, d reforce.Decision,
	cands []*reforce.Candidate, results []*queue.CandidateResult) error {
	f := &queue.FinalAnswer{V: queue.Version, Run: m.Run, Example: ex, Confidence: string(d.Confidence), Method: string(d.Method),
		Rounds: rounds, Candidates: len(results), Valid: d.Valid, Cost: cost.Ledger{}}
	failed := 0
	var reasons []string
	slowest := map[int]float64{}
	var first time.Time
	for i, r := range results {
		if !r.Started.IsZero() && (first.IsZero() || r.Started.Before(first)) {
			first = r.Started
		}
		f.Cost.Merge(r.Cost)
		f.TaskSeconds += r.ElapsedSeconds
		f.Tasks++
		slowest[r.Round] = max(slowest[r.Round], r.ChainSeconds)
		if r.Status == "failed" {
			failed++
			reasons = append(reasons, r.Error)
		}
		if r.CSVRef != "" && cands[i].Status == reforce.StatusOK {
			f.CandidateRefs = append(f.CandidateRefs, r.CSVRef)
		}
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
		for i, c := range cands {
			if c == d.Winner {
				f.CSVRef = results[i].CSVRef
			}
		}
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
	}
	return generator.PublishFinal(ctx, v.env.Queue, f)
}

func allFailed(results []*queue.CandidateResult) bool {
	for _, r := range results {
		if r.Status != "failed" {
			return false
		}
	}
	return len(results) > 0
}
