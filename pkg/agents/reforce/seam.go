package reforce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/agents/sampling"
	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// ReFoRCE's task kinds on the runtime.
const (
	KindLink     = "link"     // table-level schema linking, then the first round's generation tasks
	KindGenerate = "generate" // one candidate (round 0) or one regeneration from an exploration (round 1)
	KindExplore  = "explore"  // one column exploration, then its regeneration task
	KindVote     = "vote"     // the model breaks a tie of the final vote (model-vote)
)

// Options of the agent, as recorded in a run's manifest.
const (
	// OptVotes is the candidates per round, the run's --votes.
	OptVotes             = agent.OptVotes
	OptNoExploration     = "no-exploration"
	OptFormatRestriction = "format-restriction"
	OptSelfConsistency   = "self-consistency"
	OptCTERefine         = "cte-refine"
	OptModelVote         = "model-vote"
	OptPoolRounds        = "pool-rounds"
	OptLinkBudget        = "link-budget"
	// The ablations of the paper's v2 Tables 3 and 4, and the compression
	// mode.
	OptExploreAll        = "explore-all"
	OptNoVote            = "no-vote"
	OptNoRandomSelection = "no-random-selection"
	OptNoCompression     = "no-compression"
	OptGoldTables        = agent.OptGoldTables // the runtime hands gold only under these two
	OptGoldSchema        = agent.OptGoldSchema
	OptCompression       = "compression"
)

// Definition registers ReFoRCE with the runtime: round 0 is Votes
// candidates (after schema linking when the prompt is over budget); a
// low-confidence vote opens round 1, one exploration and regeneration per
// vote; the final vote is over round 1 (DecideFinal). With model-vote, a
// tie of the final vote opens one more round: a vote task on the generate
// pool, whose choice the next decision applies. Under adaptive sampling
// (package sampling) round 0 is drawn in waves, each a round of its own,
// and the exploration and vote rounds come after the last wave
// (distributed.rounds).
func Definition() *agent.Definition {
	d := &agent.Definition{
		Name: "reforce",
		Doc:  "ReFoRCE (Deng et al.): compression and schema linking, self-refined candidates, majority vote, column exploration for low confidence",
		Options: []agent.Option{
			{Name: OptVotes, Default: strconv.Itoa(defaultVotes), Usage: "candidates per round (a run's --votes sets it)", Asker: agent.AskCount()},
			{Name: OptNoExploration, Default: "false", Usage: "skip column exploration for low-confidence examples", Asker: agent.AskBoolean()},
			{Name: OptFormatRestriction, Default: "false", Usage: "ask for the expected answer format first (v1 option)", Asker: agent.AskBoolean()},
			{Name: OptSelfConsistency, Default: "false", Usage: "a candidate is the first answer seen twice (v1 option)", Asker: agent.AskBoolean()},
			{Name: OptCTERefine, Default: "false", Usage: "CTE-based refinement (v1 option)", Asker: agent.AskBoolean()},
			{Name: OptModelVote, Default: "false", Usage: "the model breaks ties of the final vote (v1 option)", Asker: agent.AskBoolean()},
			{Name: OptPoolRounds, Default: "false", Usage: "the final vote pools the first round's candidates with the exploration round's (the paper votes over the exploration round alone)", Asker: agent.AskBoolean()},
			{Name: OptLinkBudget, Default: fmt.Sprint(dbinfo.DefaultLinkBudget), Usage: "prompts of at least this many bytes get table-level schema linking"},
			{Name: OptExploreAll, Default: "false", Usage: "ablation \"column exploration only\": every example starts with column exploration (no first round or first vote)", Asker: agent.AskBoolean()},
			{Name: OptNoVote, Default: "false", Usage: "ablation \"w/o majority voting\": one candidate per example, taken as the answer", Asker: agent.AskBoolean()},
			{Name: OptNoRandomSelection, Default: "false", Usage: "ablation \"w/o random selection\": a tie of the final vote is left unanswered", Asker: agent.AskBoolean()},
			{Name: OptNoCompression, Default: "false", Usage: "ablation \"w/o DB info compression\": no table grouping and no oversize rules"},
			{Name: OptGoldTables, Default: "false", Usage: "ablation \"w/ gold table\": only the tables the example's gold SQL names"},
			{Name: OptGoldSchema, Default: "false", Usage: "ablation \"w/ gold schema\": only the tables and columns the example's gold SQL names"},
			{Name: OptCompression, Default: dbinfo.CompressionPaper, Usage: "compression mode: paper (the digit-family rule and oversize rules) or structural (also groups tables of identical columns and collapses prompts to under the link budget)", Asker: agent.AskOneOf(dbinfo.CompressionPaper, dbinfo.CompressionStructural)},
		},
		New: newDistributed,
		// Round 0 is votes candidates at once, of about two calls each;
		// linking, a candidate's refinement and an exploration round
		// come one after another.
		Load: func(opts map[string]string) agent.Load {
			cfg, _, _ := ConfigFromOptions(opts)
			cfg.defaults()
			return agent.Load{Width: cfg.Votes, Calls: 2 * cfg.Votes, Depth: 4}
		},
	}
	d.Options = append(d.Options, sampling.Options("candidate")...)
	agent.Register(&d.Kinds, KindLink, agent.Generator, "link the tables of a prompt over budget, then publish the candidates", (*distributed).link)
	agent.Register(&d.Kinds, KindGenerate, agent.Generator, "one self-refined candidate", (*distributed).generate)
	agent.Register(&d.Kinds, KindExplore, agent.Explorer, "one column exploration, then its regeneration", (*distributed).explore)
	agent.Register(&d.Kinds, KindVote, agent.Generator, "the model chooses among the tied answers of the final vote (model-vote)", (*distributed).vote)
	return d
}

// ConfigFromOptions reads the agent's options.
func ConfigFromOptions(opts map[string]string) (Config, int, error) {
	var cfg Config
	r := &agent.OptionReader{Agent: "reforce", Opts: opts}
	r.Int(OptVotes, &cfg.Votes, 1)
	r.Bool(OptNoExploration, &cfg.NoExploration)
	r.Bool(OptFormatRestriction, &cfg.FormatRestriction)
	r.Bool(OptSelfConsistency, &cfg.SelfConsistency)
	r.Bool(OptCTERefine, &cfg.CTERefine)
	r.Bool(OptModelVote, &cfg.ModelVote)
	r.Bool(OptPoolRounds, &cfg.PoolRounds)
	r.Bool(OptExploreAll, &cfg.ExploreAll)
	r.Bool(OptNoVote, &cfg.NoVote)
	r.Bool(OptNoRandomSelection, &cfg.NoRandomSelection)
	r.Bool(OptNoCompression, &cfg.NoCompression)
	r.Bool(OptGoldTables, &cfg.GoldTables)
	r.Bool(OptGoldSchema, &cfg.GoldSchema)
	budget := 0 // the linker's default
	r.Int(OptLinkBudget, &budget, 1)
	err := r.Err()
	cfg.Compression = opts[OptCompression]
	if _, e := dbinfo.ModeOptions(cfg.Compression); e != nil {
		err = errors.Join(err, fmt.Errorf("option %s: %w", OptCompression, e))
	}
	if cfg.NoCompression && cfg.Compression == dbinfo.CompressionStructural {
		err = errors.Join(err, fmt.Errorf("options %s and %s=%s contradict each other", OptNoCompression, OptCompression, dbinfo.CompressionStructural))
	}
	return cfg, budget, err
}

type distributed struct {
	cfg  Config
	samp sampling.Config
	// steps is nil in roles without an LLM (coordinator, voter).
	steps  *Agent
	linker *dbinfo.Linker

	mu    sync.Mutex
	infos map[string]*dbinfo.Info // compressed once per database
}

func newDistributed(c agent.Config) (agent.Agent, error) {
	cfg, budget, err := ConfigFromOptions(c.Options)
	if err != nil {
		return nil, err
	}
	samp, err := sampling.FromOptions(c.Options)
	if err != nil {
		return nil, err
	}
	d := &distributed{cfg: cfg, samp: samp, infos: map[string]*dbinfo.Info{},
		linker: &dbinfo.Linker{LLM: c.LLM, Budget: budget, Cache: &dbinfo.MemoryLinkCache{}}}
	if c.Cache != nil {
		d.linker.Cache = linkCache{c.Cache}
	}
	if c.LLM != nil {
		if d.steps, err = New(cfg, c.LLM); err != nil {
			return nil, err
		}
		d.cfg = d.steps.Config()
	} else {
		d.cfg.defaults()
	}
	return d, nil
}

// linkCache keeps linking answers in the runtime's shared cache.
type linkCache struct{ c agent.Cache }

func (l linkCache) Get(ctx context.Context, key string) (dbinfo.LinkAnswer, bool, error) {
	v, ok, err := l.c.Get(ctx, "link:"+key)
	if err != nil || !ok {
		return dbinfo.LinkAnswer{}, false, err
	}
	var a dbinfo.LinkAnswer
	if err := json.Unmarshal([]byte(v), &a); err != nil {
		return dbinfo.LinkAnswer{}, false, err
	}
	return a, true, nil
}

func (l linkCache) Put(ctx context.Context, key string, a dbinfo.LinkAnswer) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return l.c.Set(ctx, "link:"+key, string(b))
}

// taskPayload is what ReFoRCE's tasks carry: blob references to the
// example's table information and, for regeneration, its exploration.
type taskPayload struct {
	InfoRef        string `json:"info_ref"`
	ExplorationRef string `json:"exploration_ref,omitempty"`
	// Exploration is the index of an explore task's exploration.
	Exploration int `json:"exploration,omitempty"`
	// TiedRef is a vote task's tied candidates (a blob of []votedCandidate).
	TiedRef string `json:"tied_ref,omitempty"`
}

// votedCandidate is what the model vote shows of a tied candidate: its
// SQL and the start of its result (VotePrompt shows 5,000 characters).
type votedCandidate struct {
	Round int    `json:"round"`
	Index int    `json:"index"`
	SQL   string `json:"sql"`
	CSV   string `json:"csv"`
}

// voteRecord is a vote task's result payload: the index of the chosen
// candidate, -1 when the model named none.
type voteRecord struct {
	Chosen int `json:"chosen"`
}

// prompt is an example's table information as stored for the workers.
type prompt struct {
	TableInfo   string `json:"table_info"`
	TableStruct string `json:"table_struct"`
}

// infoKey is the agent's value holding the example's (linked) prompt ref.
const infoKey = "info"

func (d *distributed) info(ctx context.Context, c *agent.Context) (*dbinfo.Info, error) {
	db, _ := c.Dataset.Database(c.Example)
	d.mu.Lock()
	defer d.mu.Unlock()
	if i, ok := d.infos[db.Key()]; ok {
		return i, nil
	}
	opt, err := d.cfg.DBInfoOptions()
	if err != nil {
		return nil, err
	}
	i, err := dbinfo.ForExample(ctx, c.Dataset, c.Example, c.Schema, opt)
	if err != nil {
		return nil, err
	}
	d.infos[db.Key()] = i
	return i, nil
}

// exampleInfo is the database's information with the gold ablations of
// the example applied.
func (d *distributed) exampleInfo(ctx context.Context, c *agent.Context) (*dbinfo.Info, error) {
	i, err := d.info(ctx, c)
	if err != nil {
		return nil, err
	}
	// The runtime passes only the gold SQL's identifiers (and only under a
	// gold ablation); joined, they read as the same identifiers.
	i, _ = d.cfg.Restrict(i, strings.Join(c.GoldIdentifiers, " "))
	return i, nil
}

func putPrompt(ctx context.Context, c *agent.Context, info *dbinfo.Info) (string, error) {
	b, _ := json.Marshal(prompt{TableInfo: info.Prompt(c.Example.ExternalKnowledge), TableStruct: info.TableStruct()})
	return c.Store.PutBlob(ctx, b)
}

func loadPrompt(ctx context.Context, c *agent.Context, ref string) (*prompt, error) {
	b, err := c.Store.GetBlob(ctx, ref)
	if err != nil {
		return nil, err
	}
	var p prompt
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("prompt %s: %w", ref, err)
	}
	return &p, nil
}

func exampleOf(e *dataset.Example) Example {
	return Example{ID: e.ID, Question: e.Question, Dialect: e.Dialect, ExternalKnowledge: e.ExternalKnowledge}
}

// Start compresses the database information (once per database), stores
// the example's prompt, and opens round 0: Votes generation tasks, or one
// linking task owing all of them when the prompt is over budget.
func (d *distributed) Start(ctx context.Context, c *agent.Context) (*agent.Dispatch, error) {
	info, err := d.exampleInfo(ctx, c)
	if err != nil {
		return nil, agent.Unrunnable(fmt.Errorf("database information: %w", err))
	}
	ref, err := putPrompt(ctx, c, info)
	if err != nil {
		return nil, err
	}
	if err := c.Store.Set(ctx, infoKey, ref); err != nil {
		return nil, err
	}
	// The first wave: every candidate under fixed sampling.
	v := d.waves()[0]
	// Column exploration only (explore-all) starts at the exploration
	// round.
	round, from := 0, 0
	if d.cfg.ExploreAll {
		round, from = d.exploreRound(), v
	}
	if d.linker.NeedsLinking(info, c.Example.ExternalKnowledge) {
		t, err := agent.NewTask(KindLink, "link", round, agent.Range(from, from+v), taskPayload{InfoRef: ref})
		return &agent.Dispatch{Round: round, Expect: v, Tasks: []agent.Task{t}}, err
	}
	if d.cfg.ExploreAll {
		tasks, err := exploreTasks(round, v, ref)
		return &agent.Dispatch{Round: round, Expect: v, Tasks: tasks}, err
	}
	tasks, err := generateTasks(0, 0, v, taskPayload{InfoRef: ref})
	return &agent.Dispatch{Round: 0, Expect: v, Tasks: tasks}, err
}

// waves are the sizes of round 0's waves: all Votes candidates at once
// under fixed sampling, and always when there is no first vote to stop
// (explore-all, no-vote).
func (d *distributed) waves() []int {
	if d.cfg.ExploreAll || d.cfg.NoVote {
		return []int{d.cfg.Votes}
	}
	return d.samp.Waves(d.cfg.Votes)
}

// exploreRound is the runtime round of column exploration: after the
// waves of round 0 (1 under fixed sampling, the paper's round 1); the
// model vote's round follows it. A wave is a round because the runtime
// decides once per round.
func (d *distributed) exploreRound() int { return len(d.waves()) }

// paperRound is the paper's round of a runtime round: 0 for a wave of
// the first round, 1 for exploration, 2 for the model vote. Candidates'
// seeds take it, so candidate i is the same candidate under either
// sampling policy.
func (d *distributed) paperRound(round int) int {
	return max(0, round-d.exploreRound()+1)
}

// exploreTasks are the exploration round's tasks: exploration i fills
// slot n+i.
func exploreTasks(round, n int, ref string) ([]agent.Task, error) {
	var out []agent.Task
	for i := 0; i < n; i++ {
		t, err := agent.NewTask(KindExplore, fmt.Sprintf("r1.explore.%d", i), round, []int{n + i}, taskPayload{InfoRef: ref, Exploration: i})
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func generateTasks(round, from, n int, p taskPayload) ([]agent.Task, error) {
	var out []agent.Task
	for i := from; i < from+n; i++ {
		t, err := agent.NewTask(KindGenerate, fmt.Sprintf("r%d.generate.%d", round, i), round, []int{i}, p)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// ready refuses a task in a process without an LLM client (the
// coordinator's and the voter's agents make no calls).
func (d *distributed) ready() error {
	if d.steps == nil {
		return errors.New("reforce: this process has no LLM client")
	}
	return nil
}

// link runs table-level schema linking, stores the linked prompt for every
// later task, and continues into the round's generation tasks.
func (d *distributed) link(ctx context.Context, c *agent.Context, t agent.Task, _ taskPayload) (*agent.Outcome, error) {
	if err := d.ready(); err != nil {
		return nil, err
	}
	info, err := d.exampleInfo(ctx, c)
	if err != nil {
		return nil, agent.Permanent(err)
	}
	e := c.Example
	linked, _, lc, err := d.linker.Link(ctx, info, dbinfo.LinkQuestion{ID: e.ID, Question: e.Question, ExternalKnowledge: e.ExternalKnowledge,
		Seed: agent.Seed(c.Seed, e.ID, 0, 0, "link")})
	c.Ledger.Stage("link").Add(lc)
	if err != nil {
		return nil, err
	}
	ref, err := putPrompt(ctx, c, linked)
	if err != nil {
		return nil, err
	}
	if err := c.Store.Set(ctx, infoKey, ref); err != nil {
		return nil, err
	}
	if d.cfg.ExploreAll {
		tasks, err := exploreTasks(t.Round, len(t.Slots), ref)
		return &agent.Outcome{Next: tasks}, err
	}
	tasks, err := generateTasks(0, 0, len(t.Slots), taskPayload{InfoRef: ref})
	return &agent.Outcome{Next: tasks}, err
}

func (d *distributed) generate(ctx context.Context, c *agent.Context, t agent.Task, p taskPayload) (*agent.Outcome, error) {
	if err := d.ready(); err != nil {
		return nil, err
	}
	pr, err := loadPrompt(ctx, c, p.InfoRef)
	if err != nil {
		return nil, err
	}
	exploration := ""
	if p.ExplorationRef != "" {
		b, err := c.Store.GetBlob(ctx, p.ExplorationRef)
		if err != nil {
			return nil, err
		}
		exploration = string(b)
	}
	wh, err := c.Warehouse(ctx)
	if err != nil {
		return nil, agent.Permanent(err)
	}
	ex := exampleOf(c.Example)
	format := ""
	if d.cfg.FormatRestriction {
		// Once per example across the cluster; the worker that computes it
		// accounts for the call.
		format, err = c.Store.Once(ctx, "format", func(ctx context.Context) (string, error) {
			f, fc, err := d.steps.Format(ctx, ex, agent.Seed(c.Seed, ex.ID, 0, 0, "format"))
			c.Ledger.Stage("format").Add(fc)
			return f, err
		})
		if err != nil {
			return nil, err
		}
	}
	index := t.Slots[0]
	in := CandidateInput{Example: ex, TableInfo: pr.TableInfo, TableStruct: pr.TableStruct, Format: format,
		Exploration: exploration, Round: d.paperRound(t.Round), Index: index, Seed: int64(c.Seed)}
	qctx := warehouse.WithLabels(ctx, map[string]string{"run": c.Run, "example": ex.ID,
		"round": fmt.Sprint(t.Round), "candidate": fmt.Sprint(index)})
	cand, err := d.steps.Candidate(qctx, wh, in)
	if err != nil {
		return nil, err // infrastructure: redeliver
	}
	stage := "generate"
	if d.paperRound(t.Round) > 0 {
		stage = "regenerate"
	}
	c.Ledger.Stage(stage).Add(cand.Cost)
	return &agent.Outcome{Results: []agent.Result{{Index: index, SQL: cand.SQL, Status: string(cand.Status), Error: cand.Error,
		Rows: cand.Rows, CSV: cand.CSV}}}, nil
}

// explore runs one column exploration and continues into the regeneration
// of its vote from the transcript.
func (d *distributed) explore(ctx context.Context, c *agent.Context, t agent.Task, p taskPayload) (*agent.Outcome, error) {
	if err := d.ready(); err != nil {
		return nil, err
	}
	pr, err := loadPrompt(ctx, c, p.InfoRef)
	if err != nil {
		return nil, err
	}
	wh, err := c.Warehouse(ctx)
	if err != nil {
		return nil, agent.Permanent(err)
	}
	ex := exampleOf(c.Example)
	qctx := warehouse.WithLabels(ctx, map[string]string{"run": c.Run, "example": ex.ID, "exploration": fmt.Sprint(p.Exploration)})
	e, err := d.steps.Explore(qctx, wh, ExploreInput{Example: ex, TableInfo: pr.TableInfo, TableStruct: pr.TableStruct,
		Index: p.Exploration, Seed: int64(c.Seed)})
	if err != nil {
		return nil, err
	}
	c.Ledger.Stage("explore").Add(e.Cost)
	if slot := e.Slot(1, t.Slots[0]); slot != nil {
		// Abandoned (or its LLM calls failed): the vote has no candidate.
		return &agent.Outcome{Results: []agent.Result{{Index: slot.Index, Status: string(slot.Status), Error: slot.Error}}}, nil
	}
	ref, err := c.Store.PutBlob(ctx, []byte(e.Transcript))
	if err != nil {
		return nil, err
	}
	next, err := agent.NewTask(KindGenerate, fmt.Sprintf("r1.generate.%d", t.Slots[0]), t.Round, t.Slots,
		taskPayload{InfoRef: p.InfoRef, ExplorationRef: ref})
	return &agent.Outcome{Next: []agent.Task{next}}, err
}

// vote asks the model to choose among the tied candidates of the final
// vote (model-vote), and records its choice as the round's result.
func (d *distributed) vote(ctx context.Context, c *agent.Context, t agent.Task, p taskPayload) (*agent.Outcome, error) {
	if err := d.ready(); err != nil {
		return nil, err
	}
	pr, err := loadPrompt(ctx, c, p.InfoRef)
	if err != nil {
		return nil, err
	}
	b, err := c.Store.GetBlob(ctx, p.TiedRef)
	if err != nil {
		return nil, err
	}
	var vcs []votedCandidate
	if err := json.Unmarshal(b, &vcs); err != nil {
		return nil, agent.Permanent(fmt.Errorf("tied candidates %s: %w", p.TiedRef, err))
	}
	tied := make([]*Candidate, len(vcs))
	for i, v := range vcs {
		tied[i] = &Candidate{Round: v.Round, Index: v.Index, SQL: v.SQL, CSV: v.CSV, Status: StatusOK}
	}
	ex := exampleOf(c.Example)
	var vc cost.Cost
	w, err := d.steps.modelVote(ctx, tied, CandidateInput{Example: ex, TableInfo: pr.TableInfo, TableStruct: pr.TableStruct},
		agent.Seed(c.Seed, ex.ID, 2, 0, "tie"), &vc)
	c.Ledger.Stage("vote").Add(vc)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r := agent.Result{Index: t.Slots[0], Status: string(StatusVote)}
	rec := voteRecord{Chosen: -1}
	if w != nil {
		rec.Chosen, r.SQL = w.Index, w.SQL
	} else {
		// The seeded pick decides, as when Agent.Decide's model vote fails.
		r.Error = "model vote: " + err.Error()
	}
	r.Payload, _ = json.Marshal(rec)
	return &agent.Outcome{Results: []agent.Result{r}}, nil
}

// Decide is ReFoRCE's vote: after round 0 a unique largest cluster of two
// or more wins with high confidence; every candidate failing ends the
// example; otherwise round 1 explores (or, without exploration, the final
// vote decides round 0). After round 1 the final vote is over the
// exploration round (DecideFinal). With model-vote, a tie of the final
// vote opens one more round with a vote task, and the decision after it
// applies the model's choice (or, if it named none, the seeded pick).
//
// Under adaptive sampling round 0 comes in waves: after each, the
// stopping rule judges the result clusters of every wave so far; settled
// (and a unique largest cluster of two or more), the example is decided
// as round 0's high-confidence vote and the remaining slots are never
// drawn; else the next wave is dispatched, and after the last the paper's
// round-0 vote above goes on as under fixed sampling.
func (d *distributed) Decide(ctx context.Context, c *agent.Context, round int, cands []*agent.Candidate) (*agent.Decision, error) {
	waves := d.waves()
	if round < len(waves) {
		var verdict *agent.Sampling
		if len(waves) > 1 {
			j, v := d.samp.Settle(cands, d.cfg.Votes-len(cands))
			verdict = &agent.Sampling{Posterior: j.Confidence}
			if j.Settled {
				if round < len(waves)-1 {
					verdict.StoppedAfter = len(cands)
				}
				out := v.Runtime(cands)
				out.Sampling = verdict
				return out, nil
			}
			if round < len(waves)-1 {
				return d.wave(ctx, c, round+1, len(cands), waves[round+1], verdict)
			}
		}
		v := vote.Majority(cands)
		failed := 0
		for _, cand := range cands {
			if cand.Status == agent.StatusFailed {
				failed++
			}
		}
		// Every task exhausted its deliveries: exploring would fail the same
		// way, so the example ends with the reason.
		if v.Confidence == vote.High || (failed > 0 && failed == len(cands)) {
			out := v.Runtime(cands)
			out.Sampling = verdict
			return out, nil
		}
		if d.cfg.pool().Explored {
			return d.explore1(ctx, c, v, verdict)
		}
	}
	out, err := d.final(ctx, c, round, cands)
	if out != nil && out.Next == nil && len(waves) > 1 {
		// The rule's last verdict, over round 0's waves.
		var first []*agent.Candidate
		for _, cand := range cands {
			if cand.Round < len(waves) {
				first = append(first, cand)
			}
		}
		j, _ := d.samp.Settle(first, 0)
		out.Sampling = &agent.Sampling{Posterior: j.Confidence}
	}
	return out, err
}

// MethodAwaitingWave is the method of the decision that draws the next
// wave of adaptive sampling.
const MethodAwaitingWave = "awaiting_wave"

// wave dispatches the next wave of round 0: n candidates from slot from.
func (d *distributed) wave(ctx context.Context, c *agent.Context, round, from, n int, verdict *agent.Sampling) (*agent.Decision, error) {
	ref, _, err := c.Store.Get(ctx, infoKey)
	if err != nil {
		return nil, err
	}
	tasks, err := generateTasks(round, from, n, taskPayload{InfoRef: ref})
	if err != nil {
		return nil, err
	}
	return &agent.Decision{Next: &agent.Dispatch{Round: round, Expect: n, Tasks: tasks},
		Confidence: string(vote.Low), Method: MethodAwaitingWave, Sampling: verdict}, nil
}

// explore1 opens the exploration round: one exploration (and
// regeneration) per vote.
func (d *distributed) explore1(ctx context.Context, c *agent.Context, v vote.Decision, verdict *agent.Sampling) (*agent.Decision, error) {
	ref, _, err := c.Store.Get(ctx, infoKey)
	if err != nil {
		return nil, err
	}
	n := d.cfg.Votes
	next := &agent.Dispatch{Round: d.exploreRound(), Expect: n}
	if next.Tasks, err = exploreTasks(next.Round, n, ref); err != nil {
		return nil, err
	}
	return &agent.Decision{Next: next, Confidence: string(v.Confidence), Method: string(v.Method), Valid: v.Valid, Sampling: verdict}, nil
}

// MethodAwaitingModelVote is the method of the decision that opens the
// model vote's round.
const MethodAwaitingModelVote = "awaiting_model_vote"

// final is the final vote of a low-confidence example. Its candidates are
// those of the rounds up to the last candidate round (the last wave
// without exploration, else the exploration round); a later round is the
// model vote's. DecideFinal sees the paper's rounds (paperRound).
func (d *distributed) final(ctx context.Context, c *agent.Context, round int, cands []*agent.Candidate) (*agent.Decision, error) {
	last := d.exploreRound()
	if !d.cfg.pool().Explored {
		last--
	}
	tie := agent.Seed(c.Seed, c.Example.ID, 2, 0, "tie")
	voters := make([]*agent.Candidate, len(cands))
	orig := map[*agent.Candidate]*agent.Candidate{}
	var record *voteRecord
	for i, cand := range cands {
		if cand.Round <= last {
			p := *cand
			p.Round = d.paperRound(cand.Round)
			voters[i], orig[&p] = &p, cand
			continue
		}
		if cand.Status == string(StatusVote) {
			var vr voteRecord
			if json.Unmarshal(cand.Payload, &vr) == nil {
				record = &vr
			}
		}
	}
	var tied []*agent.Candidate
	var tieBreak func([]*agent.Candidate) *agent.Candidate
	if d.cfg.ModelVote {
		tieBreak = func(t []*agent.Candidate) *agent.Candidate {
			tied = t
			for _, cand := range t {
				if record != nil && cand.Index == record.Chosen {
					return cand
				}
			}
			return nil
		}
	}
	v := DecideFinal(voters, d.cfg.pool(), tie, tieBreak)
	if v.Winner != nil {
		v.Winner = orig[v.Winner]
	}
	v.Confidence = vote.Low
	if d.cfg.NoVote && v.Winner != nil && v.Method == vote.MethodLone {
		v.Method = MethodNoVote
	}
	if tied != nil && round <= last {
		// A tie, and the model has not voted yet: a vote task on the
		// generate pool (the voter has no LLM client).
		return d.openVote(ctx, c, round+1, tied, v)
	}
	return v.Runtime(cands), nil
}

func (d *distributed) openVote(ctx context.Context, c *agent.Context, round int, tied []*agent.Candidate, v vote.Decision) (*agent.Decision, error) {
	ref, _, err := c.Store.Get(ctx, infoKey)
	if err != nil {
		return nil, err
	}
	vcs := make([]votedCandidate, len(tied))
	for i, t := range tied {
		vcs[i] = votedCandidate{Round: t.Round, Index: t.Index, SQL: t.SQL, CSV: truncate(t.CSV, voteCSVChars)}
	}
	b, err := json.Marshal(vcs)
	if err != nil {
		return nil, err
	}
	tiedRef, err := c.Store.PutBlob(ctx, b)
	if err != nil {
		return nil, err
	}
	slot := round * d.cfg.Votes
	t, err := agent.NewTask(KindVote, fmt.Sprintf("r%d.vote", round), round, []int{slot}, taskPayload{InfoRef: ref, TiedRef: tiedRef})
	if err != nil {
		return nil, err
	}
	return &agent.Decision{Next: &agent.Dispatch{Round: round, Expect: 1, Tasks: []agent.Task{t}},
		Confidence: string(vote.Low), Method: MethodAwaitingModelVote, Valid: v.Valid}, nil
}
