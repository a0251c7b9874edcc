package pexa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/agents/sampling"
	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// PExA's task kinds: a pass is a chain of planner turns; a turn that
// generates test cases fans out into probe tasks on the explore pool and
// joins again (the last probe in continues the pass); a proposer task runs
// between turns when the planner asks for it.
const (
	KindPlan    = "plan"
	KindProbe   = "probe"
	KindPropose = "propose"
)

// Options, recorded in the run's manifest.
const (
	OptPasses           = "passes"
	OptMaxPlannerSteps  = "max-planner-steps"
	OptMaxTestcaseSteps = "max-testcase-steps"
	OptMaxProposerSteps = "max-proposer-steps"
	OptMaxProbes        = "max-probes-per-plan"
	OptMaxSQLs          = "max-sqls-per-testcase"
	OptNoVerifier       = "no-verifier"
	OptSequentialPlan   = "sequential-plan"
	OptNoProposer       = "no-proposer"
	OptLinkBudget       = "link-budget"
)

// Definition registers PExA with the runtime.
func Definition() *agent.Definition {
	d := DefaultConfig()
	def := &agent.Definition{
		Name: "pexa",
		Doc:  "PExA (Parekh et al.): planner, parallel SQL test-case probes, proposer with a semantic verifier, majority over 4 passes",
		Options: []agent.Option{
			{Name: OptPasses, Default: strconv.Itoa(d.Passes), Usage: "independent passes voted on (the paper: 4)", Asker: agent.AskCount()},
			{Name: OptMaxPlannerSteps, Default: strconv.Itoa(d.MaxPlannerSteps), Usage: "planner step limit (LLM turns and tool executions)"},
			{Name: OptMaxTestcaseSteps, Default: strconv.Itoa(d.MaxTestcaseSteps), Usage: "step limit per test case"},
			{Name: OptMaxProposerSteps, Default: strconv.Itoa(d.MaxProposerSteps), Usage: "proposer step limit"},
			{Name: OptMaxProbes, Default: "0", Usage: "probes per plan, the rest dropped (0 = no cap; Table 4)"},
			{Name: OptMaxSQLs, Default: "0", Usage: "SQLs per test case, the rest dropped (0 = no cap; 1 = the single-path ablation)"},
			{Name: OptNoVerifier, Default: "false", Usage: "no semantic verifier tool (ablation)", Asker: agent.AskBoolean()},
			{Name: OptSequentialPlan, Default: "false", Usage: "the planner plans one probe per turn, each run before the next is planned (ablation)", Asker: agent.AskBoolean()},
			{Name: OptNoProposer, Default: "false", Usage: "no proposer: the planner writes, checks and submits the final SQL itself (ablation)", Asker: agent.AskBoolean()},
			{Name: OptLinkBudget, Default: strconv.Itoa(dbinfo.DefaultLinkBudget), Usage: "prompts of this many bytes or more get table-level schema linking (as ReFoRCE)"},
		},
		New: newAgent,
		// A pass fans out to about four probes at once and makes about 15
		// calls (Table 10: 16.74 per datapoint), about 8 of them one after
		// another (planner turns, a probe's calls, the proposer); the
		// passes run at once.
		Load: func(opts map[string]string) agent.Load {
			cfg, _, _ := ConfigFromOptions(opts)
			if cfg.SequentialPlan {
				return agent.Load{Width: cfg.Passes, Calls: 15 * cfg.Passes, Depth: 15} // one probe at a time (D-P22)
			}
			return agent.Load{Width: 4 * cfg.Passes, Calls: 15 * cfg.Passes, Depth: 8}
		},
	}
	def.Options = append(def.Options, sampling.Options("pass")...)
	agent.Register(&def.Kinds, KindPlan, agent.Generator, "one planner turn of a pass: probes, the proposer (with no-proposer, its own SQL checks), or the pass's answer", (*pexa).plan)
	agent.Register(&def.Kinds, KindProbe, agent.Explorer, "one test case: several SQLs written and executed at once", (*pexa).probe)
	agent.Register(&def.Kinds, KindPropose, agent.Generator, "the proposer (with its executor and semantic verifier) over the pass's evidence", (*pexa).propose)
	return def
}

// ConfigFromOptions reads the agent's options.
func ConfigFromOptions(opts map[string]string) (Config, int, error) {
	cfg := DefaultConfig()
	r := &agent.OptionReader{Agent: "pexa", Opts: opts}
	r.Int(OptPasses, &cfg.Passes, 1)
	r.Int(OptMaxPlannerSteps, &cfg.MaxPlannerSteps, 2)
	r.Int(OptMaxTestcaseSteps, &cfg.MaxTestcaseSteps, 2)
	r.Int(OptMaxProposerSteps, &cfg.MaxProposerSteps, 2)
	r.Int(OptMaxProbes, &cfg.MaxProbesPerPlan, 0)
	r.Int(OptMaxSQLs, &cfg.MaxSQLsPerTestCase, 0)
	r.Bool(OptNoVerifier, &cfg.NoVerifier)
	r.Bool(OptSequentialPlan, &cfg.SequentialPlan)
	r.Bool(OptNoProposer, &cfg.NoProposer)
	budget := dbinfo.DefaultLinkBudget
	r.Int(OptLinkBudget, &budget, 1)
	return cfg, budget, r.Err()
}

type pexa struct {
	samp   sampling.Config
	steps  *Steps
	linker *dbinfo.Linker
	infos  *dbinfo.InfoCache // compressed once per database
}

func newAgent(c agent.Config) (agent.Agent, error) {
	cfg, budget, err := ConfigFromOptions(c.Options)
	if err != nil {
		return nil, err
	}
	samp, err := sampling.FromOptions(c.Options)
	if err != nil {
		return nil, err
	}
	return &pexa{samp: samp, steps: &Steps{cfg: cfg, llm: c.LLM}, infos: &dbinfo.InfoCache{Options: dbinfo.DefaultOptions()},
		linker: &dbinfo.Linker{LLM: c.LLM, Budget: budget, Cache: &dbinfo.MemoryLinkCache{}}}, nil
}

// payload is what PExA's tasks carry.
type payload struct {
	Pass int `json:"pass"`
	Turn int `json:"turn"`
	// StateRef is the planner state blob after turn Turn-1 (plan, propose);
	// ProposalRef the proposal the next turn answers with.
	StateRef    string `json:"state_ref,omitempty"`
	ProposalRef string `json:"proposal_ref,omitempty"`
	// Probes (by index in the batch) a probe task runs.
	Probes  []string `json:"probes,omitempty"`
	Indices []int    `json:"indices,omitempty"`
}

// tableInfo is the example's compressed database information, stored once
// for every probe (the only place PExA shows it, B.1 L311).
type tableInfo struct {
	Tables    string `json:"tables"`
	Structure string `json:"structure"`
}

const infoKey = "info"

func (a *pexa) info(ctx context.Context, c *agent.Context) (*dbinfo.Info, error) {
	return a.infos.For(ctx, c.Dataset, c.Example, c.Schema)
}

// Start opens the passes: one planner task each (under adaptive
// sampling, the first wave's). The database is compressed here so an
// example that cannot be described fails at once.
func (a *pexa) Start(ctx context.Context, c *agent.Context) (*agent.Dispatch, error) {
	if _, err := a.info(ctx, c); err != nil {
		return nil, agent.Unrunnable(fmt.Errorf("database information: %w", err))
	}
	return a.passes(0, 0, a.waves()[0])
}

// waves are the passes' waves: every pass at once under fixed sampling.
// A wave is a runtime round (the runtime decides once per round); a
// pass's seeds and stored names take its pass number only, so pass p is
// the same pass under either policy.
func (a *pexa) waves() []int { return a.samp.Waves(a.steps.cfg.Passes) }

// passes opens n passes from pass from in round.
func (a *pexa) passes(round, from, n int) (*agent.Dispatch, error) {
	d := &agent.Dispatch{Round: round, Expect: n}
	for p := from; p < from+n; p++ {
		t, err := agent.NewTask(KindPlan, fmt.Sprintf("p%d.t0.plan", p), round, []int{p}, payload{Pass: p})
		if err != nil {
			return nil, err
		}
		d.Tasks = append(d.Tasks, t)
	}
	return d, nil
}

// ready refuses a task in a process without an LLM client (the
// coordinator's and the voter's agents make no calls).
func (a *pexa) ready() error {
	if a.steps.llm == nil {
		return errors.New("pexa: this process has no LLM client")
	}
	return nil
}

func (a *pexa) seed(c *agent.Context, pass int, step string) func(int) int64 {
	return func(i int) int64 {
		return agent.Seed(c.Seed, c.Example.ID, 0, pass, fmt.Sprintf("pexa/p%d/%s/s%d", pass, step, i))
	}
}

func putJSON(ctx context.Context, c *agent.Context, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return c.Store.PutBlob(ctx, b)
}

func getJSON(ctx context.Context, c *agent.Context, ref string, v any) error {
	b, err := c.Store.GetBlob(ctx, ref)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("pexa blob %s: %w", ref, err)
	}
	return nil
}

// group names a turn's probe batch.
func group(pass, turn int) string { return fmt.Sprintf("p%d.t%d", pass, turn) }

// turnResult is a planner turn as computed once across the cluster.
type turnResult struct {
	Action   Action `json:"action"`
	StateRef string `json:"state_ref"`
}

// plan runs one planner turn, once across the cluster: it answers the
// previous turn's calls (the batch's outcomes, the proposal) and asks the
// model until it wants work done or finishes.
func (a *pexa) plan(ctx context.Context, c *agent.Context, t agent.Task, p payload) (*agent.Outcome, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("p%d.t%d", p.Pass, p.Turn)
	v, err := c.Store.Once(ctx, name, func(ctx context.Context) (string, error) {
		st := a.steps.OpenPass(c.Example.Question)
		// A turn an earlier delivery left midway continues from its
		// checkpoint (docs/agents/pexa.md, D-P25): the batch's outcomes
		// are already in its state.
		resumed, err := agent.LoadCheckpoint(ctx, c.Store, name, st)
		if err != nil {
			return "", err
		}
		if p.StateRef != "" && !resumed {
			if err := getJSON(ctx, c, p.StateRef, st); err != nil {
				return "", err
			}
		}
		if len(st.Pending) > 0 {
			outcomes, err := a.outcomes(ctx, c, p.Pass, p.Turn-1, len(st.Probes))
			if err != nil {
				return "", err
			}
			var prop *Proposal
			if p.ProposalRef != "" {
				prop = &Proposal{}
				if err := getJSON(ctx, c, p.ProposalRef, prop); err != nil {
					return "", err
				}
			}
			st.Resolve(outcomes, prop)
		}
		var env *PlanEnv
		if a.steps.cfg.NoProposer {
			// The Planner runs its own SQL and verifier (D-P21).
			wh, err := c.Warehouse(ctx)
			if err != nil {
				return "", agent.Permanent(err)
			}
			env = &PlanEnv{Warehouse: wh, Question: c.Example.Question, Verify: c.Ledger.Stage("verify")}
		}
		save := func(ctx context.Context, st *PlanState) error { return agent.SaveCheckpoint(ctx, c.Store, name, st) }
		act, err := a.steps.ResumePlanTurn(ctx, st, env, a.seed(c, p.Pass, fmt.Sprintf("plan/t%d", p.Turn)), c.Ledger.Stage("plan"), save)
		if err != nil {
			return "", err
		}
		ref, err := putJSON(ctx, c, st)
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(turnResult{Action: *act, StateRef: ref})
		return string(b), err
	})
	if err != nil {
		return nil, err
	}
	// The turn is stored (Once): its checkpoint is of no more use.
	if err := c.Store.DropCheckpoint(ctx, name); err != nil {
		return nil, err
	}
	var tr turnResult
	if err := json.Unmarshal([]byte(v), &tr); err != nil {
		return nil, agent.Permanent(fmt.Errorf("pexa turn %d of pass %d: %w", p.Turn, p.Pass, err))
	}
	act := tr.Action
	next := payload{Pass: p.Pass, Turn: p.Turn + 1, StateRef: tr.StateRef}
	switch {
	case act.Finish || act.Stop != "":
		st := &PlanState{}
		if err := getJSON(ctx, c, tr.StateRef, st); err != nil {
			return nil, err
		}
		return &agent.Outcome{Results: []agent.Result{passResult(p.Pass, p.Turn, st, act.Stop)}}, nil
	case len(act.Probes) > 0:
		// The probes fan out; the last one in continues the pass, with
		// the proposer first when this turn also asked for it (D-P2).
		then, err := a.after(t.Round, p, next, act.Propose && !a.steps.cfg.NoProposer)
		if err != nil {
			return nil, err
		}
		return &agent.Outcome{Next: a.probeTasks(t.Round, p, act.Probes, then)}, nil
	default:
		// Only the proposer is asked for (never with no-proposer).
		then, err := a.after(t.Round, p, next, act.Propose && !a.steps.cfg.NoProposer)
		return &agent.Outcome{Next: []agent.Task{then}}, err
	}
}

// after is the task that continues a turn once its batch is in: the
// proposer (which then continues into the next turn) or the next turn,
// in the pass's round.
func (a *pexa) after(round int, p, next payload, propose bool) (agent.Task, error) {
	if propose {
		return agent.NewTask(KindPropose, fmt.Sprintf("p%d.t%d.propose", p.Pass, p.Turn), round, []int{p.Pass},
			payload{Pass: p.Pass, Turn: p.Turn, StateRef: next.StateRef})
	}
	return agent.NewTask(KindPlan, fmt.Sprintf("p%d.t%d.plan", p.Pass, next.Turn), round, []int{p.Pass}, next)
}

// probeTasks are a batch's probe tasks, one per probe, all published at
// once (with SequentialPlan a batch is one probe, D-P22).
func (a *pexa) probeTasks(round int, p payload, probes []string, then agent.Task) []agent.Task {
	parts := make([][]int, len(probes))
	for i := range probes {
		parts[i] = []int{i}
	}
	out := make([]agent.Task, len(parts))
	for k, idx := range parts {
		texts := make([]string, len(idx))
		for j, i := range idx {
			texts[j] = probes[i]
		}
		b, _ := json.Marshal(payload{Pass: p.Pass, Turn: p.Turn, Probes: texts, Indices: idx})
		out[k] = agent.Task{Kind: KindProbe, ID: fmt.Sprintf("p%d.t%d.probe%d", p.Pass, p.Turn, k), Round: round, Slots: []int{p.Pass}, Payload: b,
			Join: &agent.Join{Group: group(p.Pass, p.Turn), Part: k, Of: len(parts), Then: then}}
	}
	return out
}

// indexed is one probe's outcome in its batch.
type indexed struct {
	Index   int           `json:"index"`
	Outcome *ProbeOutcome `json:"outcome"`
}

// outcomes gathers a batch's outcomes by probe index; a lost probe's is
// nil.
func (a *pexa) outcomes(ctx context.Context, c *agent.Context, pass, turn, n int) ([]*ProbeOutcome, error) {
	out := make([]*ProbeOutcome, n)
	if n == 0 {
		return out, nil
	}
	parts, err := c.Store.Parts(ctx, group(pass, turn))
	if err != nil {
		return nil, err
	}
	for _, part := range parts {
		if part.Lost != "" {
			c.Log.Warn("probe lost")
			continue
		}
		var got []indexed
		if err := json.Unmarshal(part.Value, &got); err != nil {
			return nil, fmt.Errorf("pexa batch %s part %d: %w", group(pass, turn), part.Index, err)
		}
		for _, g := range got {
			if g.Index >= 0 && g.Index < n {
				out[g.Index] = g.Outcome
			}
		}
	}
	return out, nil
}

// probe runs a probe task's test cases, each once across the cluster.
func (a *pexa) probe(ctx context.Context, c *agent.Context, t agent.Task, p payload) (*agent.Outcome, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	ti, err := a.tableInfo(ctx, c)
	if err != nil {
		return nil, err
	}
	wh, err := c.Warehouse(ctx)
	if err != nil {
		return nil, agent.Permanent(err)
	}
	var got []indexed
	for j, i := range p.Indices {
		v, err := c.Store.Once(ctx, fmt.Sprintf("p%d.t%d.probe%d", p.Pass, p.Turn, i), func(ctx context.Context) (string, error) {
			in := TestcaseInput{Dialect: c.Example.Dialect, TableInfo: ti.Tables, Structure: ti.Structure,
				ExternalKnowledge: c.Example.ExternalKnowledge, Probe: p.Probes[j]}
			o, err := a.steps.Probe(ctx, wh, in, a.seed(c, p.Pass, fmt.Sprintf("b%d/probe%d", p.Turn, i)), c.Ledger.Stage("probe"))
			if err != nil {
				return "", err
			}
			b, err := json.Marshal(o)
			return string(b), err
		})
		if err != nil {
			return nil, err
		}
		var o ProbeOutcome
		if err := json.Unmarshal([]byte(v), &o); err != nil {
			return nil, agent.Permanent(err)
		}
		got = append(got, indexed{Index: i, Outcome: &o})
	}
	b, err := json.Marshal(got)
	return &agent.Outcome{Part: b}, err
}

// tableInfo is the example's table information, linked (once across the
// cluster) when the prompt is over budget (D-P9).
func (a *pexa) tableInfo(ctx context.Context, c *agent.Context) (*tableInfo, error) {
	v, err := c.Store.Once(ctx, infoKey, func(ctx context.Context) (string, error) {
		info, err := a.info(ctx, c)
		if err != nil {
			return "", err
		}
		e := c.Example
		if a.linker.NeedsLinking(info, e.ExternalKnowledge) {
			linked, _, lc, err := a.linker.Link(ctx, info, dbinfo.LinkQuestion{ID: e.ID, Question: e.Question, ExternalKnowledge: e.ExternalKnowledge,
				Seed: agent.Seed(c.Seed, e.ID, 0, 0, "pexa/link")})
			c.Ledger.Stage("link").Add(lc)
			if err != nil {
				return "", err
			}
			info = linked
		}
		b, err := json.Marshal(tableInfo{Tables: info.Tables, Structure: info.Structure()})
		return string(b), err
	})
	if err != nil {
		return nil, err
	}
	var ti tableInfo
	return &ti, json.Unmarshal([]byte(v), &ti)
}

// propose runs the proposer over the pass's evidence (every batch so far
// and this turn's), once across the cluster, and continues the pass.
func (a *pexa) propose(ctx context.Context, c *agent.Context, t agent.Task, p payload) (*agent.Outcome, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("p%d.t%d.propose", p.Pass, p.Turn)
	ref, err := c.Store.Once(ctx, name, func(ctx context.Context) (string, error) {
		st := &PlanState{}
		if err := getJSON(ctx, c, p.StateRef, st); err != nil {
			return "", err
		}
		outcomes, err := a.outcomes(ctx, c, p.Pass, p.Turn, len(st.Probes))
		if err != nil {
			return "", err
		}
		evidence := append([]Record(nil), st.Evidence...)
		for _, o := range outcomes {
			if o != nil {
				evidence = append(evidence, o.Records...)
			}
		}
		wh, err := c.Warehouse(ctx)
		if err != nil {
			return "", agent.Permanent(err)
		}
		// The Proposer is checkpointed after each step; a redelivery
		// continues it (D-P25).
		var saved ProposeProgress
		var from *ProposeProgress
		if ok, err := agent.LoadCheckpoint(ctx, c.Store, name, &saved); err != nil {
			return "", err
		} else if ok {
			from = &saved
		}
		save := func(ctx context.Context, pr *ProposeProgress) error {
			return agent.SaveCheckpoint(ctx, c.Store, name, pr)
		}
		prop, err := a.steps.ResumePropose(ctx, wh, c.Example.Question, c.Example.Dialect, evidence,
			a.seed(c, p.Pass, fmt.Sprintf("propose%d", p.Turn)), c.Ledger.Stage("propose"), c.Ledger.Stage("verify"), from, save)
		if err != nil {
			return "", err
		}
		return putJSON(ctx, c, prop)
	})
	if err != nil {
		return nil, err
	}
	if err := c.Store.DropCheckpoint(ctx, name); err != nil {
		return nil, err
	}
	next, err := agent.NewTask(KindPlan, fmt.Sprintf("p%d.t%d.plan", p.Pass, p.Turn+1), t.Round, []int{p.Pass},
		payload{Pass: p.Pass, Turn: p.Turn + 1, StateRef: p.StateRef, ProposalRef: ref})
	return &agent.Outcome{Next: []agent.Task{next}}, err
}

// passRecord is the agent's own record of a pass's candidate: with how
// its probes' Finals were chosen (D-P24) and how many probes sequential
// planning dropped (D-P22).
type passRecord struct {
	Turns         int    `json:"turns"`
	Stop          string `json:"stop,omitempty"`
	Verdict       string `json:"verdict,omitempty"`
	FinalsChosen  int    `json:"finals_chosen,omitempty"`
	FinalsFirst   int    `json:"finals_first,omitempty"`
	ProbesDropped int    `json:"probes_dropped,omitempty"`
}

// passResult is a pass's answer: its last proposal (D-P13).
func passResult(pass, turns int, st *PlanState, stop string) agent.Result {
	rec := passRecord{Turns: turns + 1, Stop: stop, FinalsChosen: st.FinalsChosen, FinalsFirst: st.FinalsFirst, ProbesDropped: st.ProbesDropped}
	prop := st.Proposal
	r := agent.Result{Index: pass}
	switch {
	case prop == nil || prop.SQL == "":
		r.Status, r.Error = agent.StatusGaveUp, "the pass ended without a proposal"
		if stop != "" {
			r.Error += " (" + stop + ")"
		}
	case prop.OK:
		r.SQL, r.Status, r.Rows, r.CSV = prop.SQL, agent.StatusOK, prop.Rows, prop.CSV
		rec.Verdict = prop.Verdict
	case prop.Feedback == nullError:
		r.SQL, r.Status = prop.SQL, agent.StatusEmpty
	default:
		r.SQL, r.Status, r.Error = prop.SQL, agent.StatusError, prop.Feedback
	}
	if prop != nil && prop.Stop != "" && rec.Stop == "" {
		rec.Stop = prop.Stop
	}
	r.Payload, _ = json.Marshal(rec)
	return r
}

// Decide is the majority over the passes (§4.1 L138) with ReFoRCE's vote
// and fallbacks for ties (D-P12).
//
// Under adaptive sampling the passes come in waves, one round each:
// after each, the stopping rule judges the result clusters of every pass
// so far (sampling.Config.Settle); settled, the example is decided as
// the vote's high-confidence majority and the remaining passes are never
// published; else the next wave is opened, and after the last the vote
// above decides as under fixed sampling.
func (a *pexa) Decide(_ context.Context, c *agent.Context, round int, cands []*agent.Candidate) (*agent.Decision, error) {
	waves := a.waves()
	if len(waves) == 1 {
		return vote.Once(cands, agent.Seed(c.Seed, c.Example.ID, 0, 0, "pexa/tie")), nil
	}
	out, err := a.samp.AfterWave(waves, round, cands, a.passes)
	if out == nil && err == nil {
		out = vote.Once(cands, agent.Seed(c.Seed, c.Example.ID, 0, 0, "pexa/tie"))
		j, _ := a.samp.Settle(cands, 0)
		out.Sampling = &agent.Sampling{Posterior: j.Confidence}
	}
	return out, err
}
