package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/runtime/local"
	"github.com/quorumsql/quorum/pkg/trace"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// solveWithSeam runs an agent in this process through the runtime's seam
// (pkg/runtime/local): the same task code as on a cluster, with goroutines
// for workers and memory for Redis.
func solveWithSeam(ctx context.Context, ds *dataset.Dataset, examples []*dataset.Example, def *agent.Definition, ag agent.Agent, opts map[string]string,
	writer *outputs.Writer, seed uint64, atOnce int, queryTimeout time.Duration, level trace.Level, w io.Writer) []outputs.Example {
	set := &sqlite.Set{Base: sqlite.Config{QueryTimeout: queryTimeout}}
	defer set.Close()
	whs := &localdb.Warehouses{DS: ds, SQLite: set}
	return solveEach(examples, atOnce, w, func(e *dataset.Example) outputs.Example {
		return solveExample(ctx, ds, e, def, ag, opts, whs, writer, seed, level)
	})
}

func solveExample(ctx context.Context, ds *dataset.Dataset, e *dataset.Example, def *agent.Definition, ag agent.Agent, opts map[string]string,
	whs *localdb.Warehouses, writer *outputs.Writer, seed uint64, level trace.Level) outputs.Example {
	start := time.Now()
	r := outputs.Example{InstanceID: e.ID, Question: e.Question, Agent: def.Name, Dialect: string(e.Dialect), Database: e.DB, Status: "failed"}
	defer func() { r.LatencySeconds = time.Since(start).Seconds() }()
	if !ds.Runnable(e.ID) {
		var msgs []string
		for _, p := range ds.Problems {
			if p.Instance == e.ID {
				msgs = append(msgs, p.Message)
			}
		}
		r.Error = "not runnable: " + strings.Join(msgs, "; ")
		return r
	}
	out, err := local.Solve(ctx, local.Config{Agent: ag, Def: def, Options: opts, Dataset: ds, Warehouses: whs, Run: "solve", Seed: seed, Trace: level}, e)
	if out != nil && level != trace.None {
		// The trace goes out whatever the example's end, as quorum run's.
		trace.Sort(out.Trace)
		b, jerr := json.Marshal(&trace.Export{Run: "solve", Example: e.ID, Agent: def.Name, Level: level.String(), Entries: out.Trace})
		if jerr == nil {
			jerr = writer.Trace(e.ID, b)
		}
		if jerr != nil {
			r.Error = "writing the trace: " + jerr.Error()
		}
	}
	if out != nil {
		r.CostByStage, r.Cost = out.Cost, out.Cost.Total()
		r.Rounds, r.Tasks, r.Candidates = out.Rounds, out.Tasks, len(out.Candidates)
	}
	if err != nil {
		r.Error = err.Error()
		return r
	}
	d := out.Decision
	r.Confidence, r.Method, r.ValidCandidates, r.AgreedCandidates = d.Confidence, d.Method, d.Valid, d.Agreed
	// Adaptive sampling's verdicts, the example's and its members', as the
	// voter records them for quorum run.
	r.Rule = d.Rule
	if d.Sampling != nil {
		r.StoppedAfter, r.Posterior = d.Sampling.StoppedAfter, d.Sampling.Posterior
	}
	for _, m := range d.Members {
		mm := outputs.Member{Agent: m.Agent, Status: "no_answer", Confidence: m.Confidence, Method: m.Method, Valid: m.Valid, Agrees: m.Agrees}
		if m.Winner != nil {
			mm.Status = "answered"
		}
		if m.Sampling != nil {
			mm.StoppedAfter, mm.Posterior = m.Sampling.StoppedAfter, m.Sampling.Posterior
		}
		r.Members = append(r.Members, mm)
	}
	failed, firstErr := 0, ""
	for _, c := range out.Candidates {
		if c.Status == agent.StatusFailed || c.Status == agent.StatusGaveUp {
			failed++
			if firstErr == "" {
				firstErr = c.Error
			}
		}
	}
	switch {
	case d.Winner != nil:
		r.Status = "answered"
		if err := writer.Answer(e.ID, d.Winner.SQL, d.Winner.CSV); err != nil {
			r.Status, r.Error = "failed", err.Error()
			return r
		}
	case failed > 0 && failed == len(out.Candidates):
		r.Error = fmt.Sprintf("%d of %d candidates failed: %s", failed, len(out.Candidates), firstErr)
		return r
	default:
		r.Status, r.Error = "no_answer", "no candidate produced rows"
	}
	if len(e.Gold.Results) > 0 && ds.GoldDir != "" {
		dir := filepath.Join(ds.GoldDir, "exec_result")
		score := func(c *agent.Candidate) bool {
			if c == nil || c.Status != agent.StatusOK {
				return false
			}
			f, err := eval.ReadCSV([]byte(c.CSV))
			if err != nil {
				return false
			}
			ok, err := eval.ScoreAgainstGold(f, dir, e.ID, e.Gold.Spec)
			return err == nil && ok
		}
		correct := score(d.Winner)
		atK := correct
		for _, c := range out.Candidates {
			atK = atK || score(c)
		}
		r.Correct, r.CorrectAtK = &correct, &atK
		if !correct && d.Winner != nil {
			r.Gold = goldDiff(e, d.Winner.CSV)
		}
	}
	return r
}

// goldDiff sets a wrong answer's result against e's gold tables, for a
// reader (nil when either cannot be read).
func goldDiff(e *dataset.Example, csv string) *outputs.GoldDiff {
	answer, err := eval.ReadCSV([]byte(csv))
	if err != nil {
		return nil
	}
	var golds []*eval.Frame
	for _, f := range e.Gold.Results {
		if g, err := eval.ReadCSVFile(f); err == nil {
			golds = append(golds, g)
		}
	}
	return outputs.NewGoldDiff(answer, golds, e.Gold.SQL)
}
