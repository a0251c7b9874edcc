package raise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/agents/sampling"
	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// RAISE's task kinds: a round's trajectory is one long task on the explore
// pool (its commands hit the warehouse between LLM segments); it continues
// into one final-generation task per model on the generate pool.
const (
	KindAgent = "agent"
	KindFinal = "final"
)

// Options, recorded in the run's manifest.
const (
	OptRounds        = "rounds"
	OptSegmentTokens = "segment-tokens"
	OptTotalTokens   = "total-tokens"
	OptMaxCalls      = "max-agent-calls"
	OptMaxCommands   = "max-agent-commands"
	OptMaxOps        = "max-ops"
	OptRefine        = "refine"
	OptStatic        = "static"
	OptColumns       = "columns"
	OptTransport     = "transport"
	OptThinkTag      = "think-tag"
)

// Definition registers RAISE with the runtime.
func Definition() *agent.Definition {
	d := DefaultConfig()
	def := &agent.Definition{
		Name: "raise",
		Doc:  "RAISE (Granado et al.): a reasoning agent exploring through text commands, three final-generation models, column post-process; 8 rounds voted",
		Options: []agent.Option{
			{Name: OptRounds, Default: strconv.Itoa(d.Rounds), Usage: "independent trajectories, each with its final generations (the paper: 8)", Asker: agent.AskCount()},
			{Name: OptSegmentTokens, Default: strconv.Itoa(d.SegmentTokens), Usage: "tokens without a command before the nudge"},
			{Name: OptTotalTokens, Default: strconv.Itoa(d.TotalTokens), Usage: "generated tokens that end the trajectory"},
			{Name: OptMaxCalls, Default: strconv.Itoa(d.MaxCalls), Usage: "safety cap on the trajectory's LLM calls"},
			{Name: OptMaxCommands, Default: strconv.Itoa(d.MaxCommands), Usage: "safety cap on the trajectory's commands"},
			{Name: OptMaxOps, Default: "0", Usage: "commands given to the final prompt, the first k (0 = all)"},
			{Name: OptRefine, Default: strconv.Itoa(d.Refine), Usage: "final-generation retries after an error or an empty result"},
			{Name: OptStatic, Default: "false", Usage: "the static agent: no run_query", Asker: agent.AskBoolean()},
			{Name: OptColumns, Default: "true", Usage: "add final_b's answer after the column post-process", Asker: agent.AskBoolean()},
			{Name: OptTransport, Default: d.Transport, Usage: "continue (prefill the assistant message: vLLM, DeepSeek) or multiturn (labelled fallback for endpoints without it)"},
			{Name: OptThinkTag, Default: "false", Usage: "open the prefill with <think> (R1-style models)"},
		},
		New: newAgent,
		// A round is one trajectory (about 8 commands, so 9 calls), then
		// three finals at once and the column post-process; the rounds'
		// trajectories run at once, their chains are 11 calls long.
		Load: func(opts map[string]string) agent.Load {
			cfg, _ := ConfigFromOptions(opts)
			return agent.Load{Width: 3 * cfg.Rounds, Calls: 13 * cfg.Rounds, Depth: 11}
		},
	}
	// 0.99, not the shared 0.9: the rule counts a round's 4 finals, which
	// share one trajectory (docs/agents/raise.md, D-R22).
	def.Options = append(def.Options, sampling.OptionsAt("round", DefaultSamplingThreshold)...)
	agent.Register(&def.Kinds, KindAgent, agent.Explorer, "one agent trajectory: LLM segments and the commands they run", (*raise).trajectory)
	agent.Register(&def.Kinds, KindFinal, agent.Generator, "one model's final SQL from the trajectory's commands, refined on errors (and the column post-process for final_b)", (*raise).final)
	return def
}

// DefaultSamplingThreshold is RAISE's adaptive sampling threshold: at the
// shared 0.9 one demo answer of 44 moved, at 0.99 none did.
const DefaultSamplingThreshold = 0.99

// ConfigFromOptions reads the agent's options.
func ConfigFromOptions(opts map[string]string) (Config, error) {
	cfg := DefaultConfig()
	r := &agent.OptionReader{Agent: "raise", Opts: opts}
	r.Int(OptRounds, &cfg.Rounds, 1)
	r.Int(OptSegmentTokens, &cfg.SegmentTokens, 16)
	r.Int(OptTotalTokens, &cfg.TotalTokens, 16)
	r.Int(OptMaxCalls, &cfg.MaxCalls, 1)
	r.Int(OptMaxCommands, &cfg.MaxCommands, 1)
	r.Int(OptMaxOps, &cfg.MaxOps, 0)
	r.Int(OptRefine, &cfg.Refine, 0)
	r.Bool(OptStatic, &cfg.Static)
	r.Bool(OptColumns, &cfg.Columns)
	r.Bool(OptThinkTag, &cfg.ThinkTag)
	err := r.Err()
	if v, ok := opts[OptTransport]; ok {
		if v != TransportContinue && v != TransportMultiTurn {
			err = errors.Join(err, fmt.Errorf("raise option transport=%q: use continue or multiturn", v))
		}
		cfg.Transport = v
	}
	return cfg, err
}

type raise struct {
	samp  sampling.Config
	steps *Steps
	infos *dbinfo.InfoCache
}

func newAgent(c agent.Config) (agent.Agent, error) {
	cfg, err := ConfigFromOptions(c.Options)
	if err != nil {
		return nil, err
	}
	samp, err := sampling.FromOptions(c.Options)
	if err != nil {
		return nil, err
	}
	return &raise{samp: samp, steps: &Steps{cfg: cfg, llm: c.LLM}, infos: &dbinfo.InfoCache{Options: dbinfo.DefaultOptions()}}, nil
}

// perRound is the candidate slots of a round: the three finals, and the
// post-processed final_b when Columns is on (D-R8).
func (a *raise) perRound() int {
	if a.steps.cfg.Columns {
		return 4
	}
	return 3
}

// slot is a final's candidate index: final_a, final_b, [final_b after
// the column post-process], final_c.
func (a *raise) slot(round int, role llm.Role) int {
	base := round * a.perRound()
	switch role {
	case RoleFinalA:
		return base
	case RoleFinalB:
		return base + 1
	case RoleColumns:
		return base + 2
	}
	return base + a.perRound() - 1
}

func (a *raise) info(ctx context.Context, c *agent.Context) (*dbinfo.Info, error) {
	return a.infos.For(ctx, c.Dataset, c.Example, c.Schema)
}

type payload struct {
	Round  int      `json:"round"`
	Role   llm.Role `json:"role,omitempty"`
	OpsRef string   `json:"ops_ref,omitempty"`
}

// Start opens the rounds (under adaptive sampling, the first wave's): one
// trajectory task each, owing the round's slots.
func (a *raise) Start(ctx context.Context, c *agent.Context) (*agent.Dispatch, error) {
	if _, err := a.info(ctx, c); err != nil {
		return nil, agent.Unrunnable(fmt.Errorf("database information: %w", err))
	}
	return a.rounds(0, 0, a.waves()[0])
}

// waves are the rounds' waves: every round at once under fixed sampling.
// A wave is a runtime round (the runtime decides once per round), apart
// from RAISE's own round number (payload.Round), which alone names a
// round's seeds, slots and stored values, so round r is the same round
// under either policy.
func (a *raise) waves() []int { return a.samp.Waves(a.steps.cfg.Rounds) }

// rounds opens n of RAISE's rounds from round from, in runtime round
// wave.
func (a *raise) rounds(wave, from, n int) (*agent.Dispatch, error) {
	per := a.perRound()
	d := &agent.Dispatch{Round: wave, Expect: n * per}
	for r := from; r < from+n; r++ {
		t, err := agent.NewTask(KindAgent, fmt.Sprintf("r%d.agent", r), wave, agent.Range(r*per, per), payload{Round: r})
		if err != nil {
			return nil, err
		}
		d.Tasks = append(d.Tasks, t)
	}
	return d, nil
}

func (a *raise) seed(c *agent.Context, round int, step string) func(int) int64 {
	return func(i int) int64 {
		return agent.Seed(c.Seed, c.Example.ID, 0, round, fmt.Sprintf("raise/r%d/%s/%d", round, step, i))
	}
}

// ready refuses a task in a process without an LLM client (the
// coordinator's and the voter's agents make no calls).
func (a *raise) ready() error {
	if a.steps.llm == nil {
		return errors.New("raise: this process has no LLM client")
	}
	return nil
}

// trajectory runs a round's agent once across the cluster (a redelivery
// reuses the stored command log) and continues into the final tasks. The
// trajectory is checkpointed after each step, so a redelivery after its
// worker died continues from the last step instead of from the start
// (docs/agents/raise.md, D-R20).
func (a *raise) trajectory(ctx context.Context, c *agent.Context, t agent.Task, p payload) (*agent.Outcome, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("r%d.agent", p.Round)
	ref, err := c.Store.Once(ctx, name, func(ctx context.Context) (string, error) {
		info, err := a.info(ctx, c)
		if err != nil {
			return "", err
		}
		wh, err := c.Warehouse(ctx)
		if err != nil {
			return "", agent.Permanent(err)
		}
		stage := c.Ledger.Stage("agent")
		tools := &Tools{Info: info, WH: wh, Static: a.steps.cfg.Static, Cost: stage}
		var from *Progress
		var saved Progress
		if ok, err := agent.LoadCheckpoint(ctx, c.Store, name, &saved); err != nil {
			return "", err
		} else if ok {
			from = &saved
			c.Log.Info("raise trajectory resumed", zap.String("task", name), zap.Int("calls", saved.Trajectory.Calls))
		}
		save := func(ctx context.Context, pr *Progress) error { return agent.SaveCheckpoint(ctx, c.Store, name, pr) }
		tr, err := a.steps.Resume(ctx, tools, c.Example.Dialect, c.Example.Question, c.Example.ExternalKnowledge, a.seed(c, p.Round, "agent"), stage, from, save)
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(tr)
		if err != nil {
			return "", err
		}
		return c.Store.PutBlob(ctx, b)
	})
	if err != nil {
		return nil, err
	}
	// The trajectory is stored (Once): its checkpoint is of no more use.
	if err := c.Store.DropCheckpoint(ctx, name); err != nil {
		return nil, err
	}
	out := &agent.Outcome{}
	for _, role := range FinalRoles {
		slots := []int{a.slot(p.Round, role)}
		if role == RoleFinalB && a.steps.cfg.Columns {
			slots = append(slots, a.slot(p.Round, RoleColumns))
		}
		next, err := agent.NewTask(KindFinal, fmt.Sprintf("r%d.%s", p.Round, role), t.Round, slots, payload{Round: p.Round, Role: role, OpsRef: ref})
		if err != nil {
			return nil, err
		}
		out.Next = append(out.Next, next)
	}
	return out, nil
}

// record is the agent's own record of a candidate.
type record struct {
	Round     int      `json:"round"`
	Role      llm.Role `json:"role"`
	Model     string   `json:"model,omitempty"`
	Attempts  int      `json:"attempts,omitempty"`
	Ops       int      `json:"ops"`
	End       string   `json:"trajectory_end"`
	Columns   bool     `json:"columns,omitempty"`
	Selection string   `json:"selection"`
}

// final writes one model's candidate (and, for final_b, the column
// post-process's).
func (a *raise) final(ctx context.Context, c *agent.Context, t agent.Task, p payload) (*agent.Outcome, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	b, err := c.Store.GetBlob(ctx, p.OpsRef)
	if err != nil {
		return nil, err
	}
	var tr Trajectory
	if err := json.Unmarshal(b, &tr); err != nil {
		return nil, agent.Permanent(fmt.Errorf("raise trajectory %s: %w", p.OpsRef, err))
	}
	ops := tr.Ops
	if k := a.steps.cfg.MaxOps; k > 0 && len(ops) > k {
		ops = ops[:k]
	}
	wh, err := c.Warehouse(ctx)
	if err != nil {
		return nil, agent.Permanent(err)
	}
	e := c.Example
	stage := c.Ledger.Stage("final")
	cand, err := a.steps.Final(ctx, wh, p.Role, e.Dialect, e.Question, e.ExternalKnowledge, ops, a.seed(c, p.Round, string(p.Role)), stage, stage)
	if err != nil {
		return nil, err
	}
	rec := record{Round: p.Round, Role: p.Role, Model: cand.Model, Attempts: cand.Attempts, Ops: len(ops), End: tr.End, Selection: "quorum-majority"}
	out := &agent.Outcome{Results: []agent.Result{result(a.slot(p.Round, p.Role), cand, rec)}}
	if p.Role != RoleFinalB || !a.steps.cfg.Columns {
		return out, nil
	}
	slot := a.slot(p.Round, RoleColumns)
	rec.Columns, rec.Role = true, RoleColumns
	if cand.Status != "ok" {
		out.Results = append(out.Results, agent.Result{Index: slot, Status: agent.StatusGaveUp, Error: "no final SQL to post-process"})
		return out, nil
	}
	col, why, err := a.steps.Columns(ctx, wh, e.Dialect, e.Question, cand.SQL, a.seed(c, p.Round, "columns")(0), c.Ledger.Stage("columns"))
	if err != nil {
		return nil, err
	}
	if col == nil {
		out.Results = append(out.Results, agent.Result{Index: slot, Status: agent.StatusGaveUp, Error: why})
		return out, nil
	}
	rec.Model, rec.Attempts = col.Model, 1
	out.Results = append(out.Results, result(slot, col, rec))
	return out, nil
}

func result(index int, c *Candidate, rec record) agent.Result {
	r := agent.Result{Index: index, SQL: c.SQL, Error: c.Error, Rows: c.Rows, CSV: c.CSV}
	switch c.Status {
	case "ok":
		r.Status = agent.StatusOK
	case "empty":
		r.Status = agent.StatusEmpty
	case "gave_up":
		r.Status = agent.StatusGaveUp
	default:
		r.Status = agent.StatusError
	}
	r.Payload, _ = json.Marshal(rec)
	return r
}

// Decide votes over every candidate of every round with ReFoRCE's rule.
// The paper has no final selection (it reports best-of-N, §6 L427-L431):
// this is quorum's addition, so its majority is labelled quorum_majority
// (D-R11); compare only EX@k with the paper.
//
// Under adaptive sampling the rounds come in waves, one runtime round
// each: after each, the stopping rule judges the result clusters of every
// final so far (sampling.Config.Settle); settled, the example is decided
// as the vote's high-confidence majority and the remaining rounds are
// never published; else the next wave is opened, and after the last the
// vote above decides as under fixed sampling.
func (a *raise) Decide(_ context.Context, c *agent.Context, round int, cands []*agent.Candidate) (*agent.Decision, error) {
	waves := a.waves()
	var d *agent.Decision
	if len(waves) > 1 {
		var err error
		if d, err = a.samp.AfterWave(waves, round, cands, a.rounds); err != nil || (d != nil && d.Next != nil) {
			return d, err
		}
	}
	if d == nil {
		d = vote.Once(cands, agent.Seed(c.Seed, c.Example.ID, 0, 0, "raise/tie"))
		if len(waves) > 1 {
			j, _ := a.samp.Settle(cands, 0)
			d.Sampling = &agent.Sampling{Posterior: j.Confidence}
		}
	}
	if d.Method == string(vote.MethodMajority) {
		d.Method = "quorum_majority"
	}
	return d, nil
}
