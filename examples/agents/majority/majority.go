// Package majority is the smallest agent worth running, the one
// docs/agents/writing-an-agent.md writes: each example asks the model for
// several queries at once, runs each on the example's database, and
// answers with the result most of them agree on. The runtime does the
// rest (delivery, retries, quotas, cost, resume), in process or on a
// cluster.
package majority

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Definition declares the agent to the runtime: its name, its option,
// its constructor and its one task kind.
func Definition() *agent.Definition {
	d := &agent.Definition{Name: "majority", Doc: "asks for several queries and answers with the result most agree on",
		Options: []agent.Option{{Name: agent.OptVotes, Default: "3", Usage: "queries asked per example"}},
		New:     New,
		Load: func(opts map[string]string) agent.Load {
			v, _ := agent.OptionInt(opts, agent.OptVotes)
			return agent.Load{Width: max(1, v), Calls: max(1, v)}
		}}
	agent.Register(&d.Kinds, "answer", agent.Generator, "ask the model for one query and run it", (*Agent).answer)
	return d
}

// Agent is the agent a run builds from its options.
type Agent struct {
	llm   llm.Client
	votes int
}

// New builds the agent (in every role: the LLM is nil where no calls are
// made).
func New(c agent.Config) (agent.Agent, error) {
	a := &Agent{llm: c.LLM, votes: 3}
	r := agent.OptionReader{Agent: "majority", Opts: c.Options}
	r.Int(agent.OptVotes, &a.votes, 1)
	return a, r.Err()
}

// ask is an answer task's payload; the runtime decodes it for answer.
type ask struct {
	Prompt string `json:"prompt"`
}

// Start opens an example's one round: an answer task per candidate slot.
func (a *Agent) Start(_ context.Context, c *agent.Context) (*agent.Dispatch, error) {
	p := ask{Prompt: fmt.Sprintf("Write one %s query that answers this question, in a ```sql block.\n\n%s",
		c.Example.Dialect, c.Example.Question)}
	d := &agent.Dispatch{Round: 0, Expect: a.votes}
	for slot := range a.votes {
		t, err := agent.NewTask("answer", fmt.Sprintf("answer.%d", slot), 0, []int{slot}, p)
		if err != nil {
			return nil, err
		}
		d.Tasks = append(d.Tasks, t)
	}
	return d, nil
}

// answer asks for one query, reads it in whatever shape the model wrote
// it, runs it and records the candidate of its slot.
func (a *Agent) answer(ctx context.Context, c *agent.Context, t agent.Task, p ask) (*agent.Outcome, error) {
	slot, spent := t.Slots[0], c.Ledger.Stage("answer")
	result := func(r agent.Result) (*agent.Outcome, error) {
		r.Index = slot
		return &agent.Outcome{Results: []agent.Result{r}}, nil
	}
	seed := agent.Seed(c.Seed, c.Example.ID, t.Round, slot, "answer")
	resp, err := a.llm.Chat(ctx, llm.Request{Role: llm.RoleGenerate, Messages: []llm.Message{llm.User(p.Prompt)}, Seed: &seed})
	if err != nil {
		var ce *llm.CallError
		if !errors.As(err, &ce) {
			return nil, err // not the model's: the runtime delivers the task again
		}
		spent.Call(ce.Usage, true)
		return result(agent.Result{Status: agent.StatusGaveUp, Error: err.Error()})
	}
	spent.Call(resp.Usage, false)
	sql, err := reply.SQL(resp.Text, resp.FinishReason)
	if err != nil {
		return result(agent.Result{Status: agent.StatusGaveUp, Error: err.Error()})
	}
	wh, err := c.Warehouse(ctx)
	if err != nil {
		return nil, agent.Permanent(err) // no delivery can open it
	}
	start := time.Now()
	res, err := wh.Query(ctx, sql, warehouse.Limits{MaxRows: 10000})
	spent.Query(time.Since(start), err != nil)
	switch {
	case err != nil:
		return result(agent.Result{SQL: sql, Status: agent.StatusError, Error: err.Error()})
	case res.RowCount() == 0:
		return result(agent.Result{SQL: sql, Status: agent.StatusEmpty})
	}
	return result(agent.Result{SQL: sql, Status: agent.StatusOK, Rows: res.RowCount(), CSV: res.CSV()})
}

// Decide answers with the result most candidates agree on (a seeded pick
// among tied ones).
func (a *Agent) Decide(_ context.Context, c *agent.Context, round int, cands []*agent.Candidate) (*agent.Decision, error) {
	return vote.Once(cands, agent.Seed(c.Seed, c.Example.ID, round, 0, "tie")), nil
}
