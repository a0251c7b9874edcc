// Package toyagent is a test-only agent that proves the runtime carries
// any agent, not only ReFoRCE: a "count" task on the explore pool counts a
// table's rows and continues into one "answer" task per slot on the
// generate pool, which runs the SQL; one decision step picks the answer
// most candidates agree on.
package toyagent

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Config shapes the toy's behaviour for a test.
type Config struct {
	// Hold is how long an answer task runs, so that a worker can be killed
	// inside one.
	Hold time.Duration
	// FailExample's answer tasks fail permanently.
	FailExample string
	// Executions, when set, counts the tasks executed.
	Executions *atomic.Int64
	// FanOut, when set, makes each slot's answer gather FanOut "probe"
	// tasks on the explore pool first (a join); probe LoseProbe fails for
	// good when LoseProbe > 0.
	FanOut, LoseProbe int
}

// Definition returns the toy agent's definition.
func Definition(cfg Config) *agent.Definition {
	d := &agent.Definition{Name: "toy", Doc: "test agent: count, then answer",
		Options: []agent.Option{{Name: agent.OptVotes, Default: "3", Usage: "answers per example"}},
		New: func(c agent.Config) (agent.Agent, error) {
			votes, err := agent.OptionInt(c.Options, agent.OptVotes)
			if err != nil {
				return nil, err
			}
			return &toy{cfg: cfg, votes: max(1, votes)}, nil
		},
		Load: func(opts map[string]string) agent.Load {
			v, _ := agent.OptionInt(opts, agent.OptVotes)
			return agent.Load{Width: max(1, v), Calls: 2 * max(1, v)}
		}}
	agent.Register(&d.Kinds, "count", agent.Explorer, "count a table's rows, then one answer per slot", (*toy).count)
	agent.Register(&d.Kinds, "answer", agent.Generator, "run the count as the slot's answer", (*toy).answer)
	agent.Register(&d.Kinds, "probe", agent.Explorer, "one part of a slot's fan-out", (*toy).probe)
	return d
}

type toy struct {
	cfg   Config
	votes int
}

type payload struct {
	Table string `json:"table"`
}

func (a *toy) Start(_ context.Context, c *agent.Context) (*agent.Dispatch, error) {
	t, err := agent.NewTask("count", "count", 0, agent.Range(0, a.votes), payload{Table: "customers"})
	return &agent.Dispatch{Round: 0, Expect: a.votes, Tasks: []agent.Task{t}}, err
}

// query is every task's work: count the payload's table.
func (a *toy) query(ctx context.Context, c *agent.Context, t agent.Task, p payload) (string, *warehouse.Result, error) {
	if a.cfg.Executions != nil {
		a.cfg.Executions.Add(1)
	}
	wh, err := c.Warehouse(ctx)
	if err != nil {
		return "", nil, agent.Permanent(err)
	}
	sql := "SELECT COUNT(*) AS n FROM " + p.Table
	start := time.Now()
	res, err := wh.Query(ctx, sql, warehouse.Limits{MaxRows: 10})
	c.Ledger.Stage(t.Kind).Query(time.Since(start), err != nil)
	return sql, res, err
}

// count continues into one answer task per slot, each after a fan-out of
// probes when FanOut is set.
func (a *toy) count(ctx context.Context, c *agent.Context, t agent.Task, p payload) (*agent.Outcome, error) {
	if _, _, err := a.query(ctx, c, t, p); err != nil {
		return nil, err
	}
	out := &agent.Outcome{}
	for _, slot := range t.Slots {
		n, err := agent.NewTask("answer", fmt.Sprintf("answer.%d", slot), 0, []int{slot}, p)
		if err != nil {
			return nil, err
		}
		if a.cfg.FanOut == 0 {
			out.Next = append(out.Next, n)
			continue
		}
		for i := range a.cfg.FanOut {
			pt, err := agent.NewTask("probe", fmt.Sprintf("probe.%d.%d", slot, i), 0, []int{slot}, p)
			if err != nil {
				return nil, err
			}
			pt.Join = &agent.Join{Group: fmt.Sprintf("slot%d", slot), Part: i, Of: a.cfg.FanOut, Then: n}
			out.Next = append(out.Next, pt)
		}
	}
	return out, nil
}

// probe is one part of a slot's fan-out; part LoseProbe fails for good.
func (a *toy) probe(ctx context.Context, c *agent.Context, t agent.Task, p payload) (*agent.Outcome, error) {
	if a.cfg.LoseProbe > 0 && t.Join.Part == a.cfg.LoseProbe {
		if a.cfg.Executions != nil {
			a.cfg.Executions.Add(1)
		}
		return nil, agent.Permanent(fmt.Errorf("toy: probe %d always fails", t.Join.Part))
	}
	_, res, err := a.query(ctx, c, t, p)
	if err != nil {
		return nil, err
	}
	return &agent.Outcome{Part: json.RawMessage(fmt.Sprintf(`{"rows":%d}`, res.RowCount()))}, nil
}

// answer records the count as the slot's candidate, with what its
// fan-out gathered, after holding the worker for Hold.
func (a *toy) answer(ctx context.Context, c *agent.Context, t agent.Task, p payload) (*agent.Outcome, error) {
	if c.Example.ID == a.cfg.FailExample {
		if a.cfg.Executions != nil {
			a.cfg.Executions.Add(1)
		}
		return nil, agent.Permanent(fmt.Errorf("toy: %s always fails", c.Example.ID))
	}
	sql, res, err := a.query(ctx, c, t, p)
	if err != nil {
		return nil, err
	}
	gathered := ""
	if a.cfg.FanOut > 0 {
		parts, err := c.Store.Parts(ctx, fmt.Sprintf("slot%d", t.Slots[0]))
		if err != nil {
			return nil, err
		}
		lost := 0
		for _, p := range parts {
			if p.Lost != "" {
				lost++
			}
		}
		gathered = fmt.Sprintf(`,"parts":%d,"lost":%d`, len(parts), lost)
	}
	// Tell a test this worker is inside an answer task, then hold it.
	if err := c.Store.Set(ctx, "running:"+c.Worker, t.ID); err != nil {
		return nil, err
	}
	select {
	case <-time.After(a.cfg.Hold):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &agent.Outcome{Results: []agent.Result{{Index: t.Slots[0], SQL: sql, Status: agent.StatusOK, Rows: res.RowCount(),
		CSV: res.CSV(), Payload: json.RawMessage(`{"worker":"` + c.Worker + `"` + gathered + `}`)}}}, nil
}

// Decide picks the answer most candidates agree on; high confidence when
// two or more do.
func (a *toy) Decide(_ context.Context, _ *agent.Context, _ int, cands []*agent.Candidate) (*agent.Decision, error) {
	votes := map[string][]int{}
	best := ""
	for _, c := range cands {
		if c.Status != agent.StatusOK {
			continue
		}
		votes[c.CSV] = append(votes[c.CSV], c.Index)
		if len(votes[c.CSV]) > len(votes[best]) {
			best = c.CSV
		}
	}
	d := &agent.Decision{Confidence: "low", Method: "toy_majority", Agreed: votes[best]}
	for _, c := range cands {
		if c.Status != agent.StatusOK {
			continue
		}
		d.Valid++
		if d.Winner == nil && c.CSV == best {
			d.Winner = c
		}
	}
	if len(votes[best]) >= 2 {
		d.Confidence = "high"
	}
	return d, nil
}
