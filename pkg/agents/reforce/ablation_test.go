package reforce

import (
	"context"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/runtime/local"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// This file pins the ablations of the paper's v2 Tables 3 and 4 (issue 20
// item 7): each changes the pipeline's structure as the paper describes,
// in Agent.Solve and through the runtime's seam alike.

// promptLog records the first user message of every generation request.
type promptLog struct {
	llm.Client
	mu      sync.Mutex
	prompts []string
}

func (p *promptLog) Chat(ctx context.Context, req llm.Request) (*llm.Response, error) {
	if req.Role == llm.RoleGenerate && len(req.Messages) > 0 {
		p.mu.Lock()
		for _, m := range req.Messages {
			if strings.Contains(m.Content, "Table full name: ") {
				p.prompts = append(p.prompts, m.Content)
				break
			}
		}
		p.mu.Unlock()
	}
	return p.Client.Chat(ctx, req)
}

// ablationRun is demoRun with the configuration's table information (its
// compression and gold ablations) and the generation prompts recorded.
type ablationRun struct {
	demoRun
	logs [2]*promptLog
}

func runAblation(t *testing.T, cfg Config, opts map[string]string, ids []string) *ablationRun {
	t.Helper()
	ds, err := dataset.Load("../../../examples/demo", dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &ablationRun{demoRun: demoRun{solve: map[string]*Outcome{}, seam: map[string]*local.Outcome{}}}
	client := func(i int) llm.Client {
		sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(sim)
		t.Cleanup(ts.Close)
		r.sims[i] = sim
		c, err := llm.New(llm.Config{BaseURL: ts.URL + "/v1", APIKey: "x", Default: llm.ModelConfig{Name: "gpt-4o"}})
		if err != nil {
			t.Fatal(err)
		}
		r.logs[i] = &promptLog{Client: c}
		return r.logs[i]
	}
	set := &sqlite.Set{}
	t.Cleanup(func() { set.Close() })
	whs := &dataset.Warehouses{DS: ds, SQLite: set}
	a := newAgent(t, cfg, client(0))
	def := Definition()
	if opts, err = def.CheckOptions(opts); err != nil {
		t.Fatal(err)
	}
	ag, err := def.New(agent.Config{Options: opts, Votes: cfg.Votes, LLM: client(1)})
	if err != nil {
		t.Fatal(err)
	}
	opt, err := a.Config().DBInfoOptions()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		e, ok := ds.Example(id)
		if !ok {
			t.Fatalf("no example %s", id)
		}
		wh, err := whs.For(e)
		if err != nil {
			t.Fatal(err)
		}
		info, err := dbinfoFor(ds, e, whs, opt)
		if err != nil {
			t.Fatal(err)
		}
		o, err := a.Solve(context.Background(), wh, SolveInput{Example: exampleOf(e), Info: info, RunSeed: 1, GoldSQL: e.Gold.SQL})
		if err != nil {
			t.Fatalf("%s: solve: %v", id, err)
		}
		lo, err := local.Solve(context.Background(), local.Config{Agent: ag, Def: def, Options: opts, Dataset: ds, Warehouses: whs, Run: "t", Seed: 1, Votes: cfg.Votes}, e)
		if err != nil {
			t.Fatalf("%s: seam: %v", id, err)
		}
		r.solve[id], r.seam[id] = o, lo
	}
	return r
}

// ablationIDs: low-confidence examples at seed 1 and, under the race
// detector, the one whose final vote ties.
func ablationIDs() []string {
	if raceEnabled {
		return []string{"local035"}
	}
	return append(append([]string(nil), lowAtSeed1...), "local002", "local003")
}

// TestAblationExploreAll is "Column Exploration Only": every example,
// high confidence or not, starts with column exploration — no first
// round, no first vote — and the final vote is over the exploration round.
func TestAblationExploreAll(t *testing.T) {
	t.Parallel()
	r := runAblation(t, Config{Votes: 8, ExploreAll: true}, map[string]string{OptExploreAll: "true"}, ablationIDs())
	r.sameAnswers(t, MethodMajorityExplore)
	for id, o := range r.solve {
		if len(o.Explorations) != 8 || len(o.Candidates) != 8 || calls(o.Cost, "generate") != 0 {
			t.Errorf("%s: %d explorations, %d candidates, %d first-round calls", id, len(o.Explorations), len(o.Candidates), calls(o.Cost, "generate"))
		}
		for _, c := range o.Candidates {
			if c != nil && c.Round != 1 {
				t.Errorf("%s: a round-%d candidate", id, c.Round)
			}
		}
		if o.Decision.Method == MethodMajority || o.First.Confidence != Low {
			t.Errorf("%s: decided by the first vote (%s)", id, o.Decision.Method)
		}
		lo := r.seam[id]
		if lo.Rounds != 2 || calls(lo.Cost, "generate") != 0 || calls(lo.Cost, "explore") == 0 {
			t.Errorf("%s: the seam ran %d rounds, costs %v", id, lo.Rounds, lo.Cost)
		}
		for _, c := range lo.Candidates {
			if c.Round != 1 || c.Index < 8 {
				t.Errorf("%s: seam candidate at round %d slot %d", id, c.Round, c.Index)
			}
		}
	}
}

// TestAblationNoVote is "w/o Majority Voting": one candidate, which is the
// answer — no vote, no exploration.
func TestAblationNoVote(t *testing.T) {
	t.Parallel()
	r := runAblation(t, Config{Votes: 8, NoVote: true}, map[string]string{OptNoVote: "true"}, ablationIDs())
	r.sameAnswers(t, MethodNoVote)
	single := 0
	for id, o := range r.solve {
		if len(o.Candidates) != 1 || len(o.Explorations) != 0 || calls(o.Cost, "explore") != 0 {
			t.Errorf("%s: %d candidates, %d explorations", id, len(o.Candidates), len(o.Explorations))
		}
		switch o.Decision.Method {
		case MethodNoVote:
			single++
			if o.Final != o.Candidates[0] {
				t.Errorf("%s: the answer is not the one candidate", id)
			}
		case MethodInvalidFallback, MethodNone:
		default:
			t.Errorf("%s: decided by %s", id, o.Decision.Method)
		}
		if lo := r.seam[id]; lo.Rounds != 1 || len(lo.Candidates) != 1 {
			t.Errorf("%s: the seam ran %d rounds, %d candidates", id, lo.Rounds, len(lo.Candidates))
		}
	}
	if single == 0 {
		t.Error("no example was answered by its one candidate")
	}
}

// TestAblationNoRandomSelection is "w/o Random Selection": a tie of the
// final vote stays unanswered instead of the seeded random pick; a unique
// majority and a lone candidate still answer.
func TestAblationNoRandomSelection(t *testing.T) {
	t.Parallel()
	A, B := "x\n1\n", "x\n2\n"
	tie := []*Candidate{rcand(1, 8, A), rcand(1, 9, B)}
	if d := DecideFinal(tie, Pool{Explored: true}, 1, nil); d.Method != MethodRandomTie || d.Winner == nil {
		t.Errorf("default: %s", d.Method)
	}
	if d := DecideFinal(tie, Pool{Explored: true, NoRandom: true}, 1, nil); d.Method != MethodUnresolved || d.Winner != nil {
		t.Errorf("no-random-selection: %s, winner %v", d.Method, d.Winner)
	}
	if d := DecideFinal([]*Candidate{rcand(1, 8, A), rcand(1, 9, A), rcand(1, 10, B)}, Pool{Explored: true, NoRandom: true}, 1, nil); d.Method != MethodMajorityExplore {
		t.Errorf("a majority: %s", d.Method)
	}
	if d := DecideFinal([]*Candidate{rcand(1, 8, A)}, Pool{Explored: true, NoRandom: true}, 1, nil); d.Method != MethodLone {
		t.Errorf("a lone candidate: %s", d.Method)
	}
	r := runAblation(t, Config{Votes: 8, NoRandomSelection: true}, map[string]string{OptNoRandomSelection: "true"}, ablationIDs())
	if n := r.sameAnswers(t, MethodUnresolved); n == 0 {
		t.Error("no tie was left unanswered (local035's final vote ties at seed 1)")
	}
	for id, o := range r.solve {
		if o.Decision.Method == MethodRandomTie {
			t.Errorf("%s: a random tie-break", id)
		}
		if o.Decision.Method == MethodUnresolved && o.Final != nil {
			t.Errorf("%s: an unresolved tie has an answer", id)
		}
	}
}

var tableLine = regexp.MustCompile(`(?m)^Table full name: (\S+)$`)

// TestAblationGoldTablesAndSchema are "w/ Gold Table" and "w/ Gold Schema":
// the generation prompt shows only the tables (and columns) the example's
// gold SQL names, in Solve and through the seam.
func TestAblationGoldTablesAndSchema(t *testing.T) {
	t.Parallel()
	ids := []string{"local001"} // gold: SELECT COUNT(*) AS customer_count FROM customers
	if !raceEnabled {
		ids = append(ids, "local035")
	}
	columns := map[string]int{}
	for _, tc := range []struct {
		name string
		cfg  Config
		opts map[string]string
	}{
		{"tables", Config{Votes: 2, GoldTables: true, NoExploration: true}, map[string]string{OptGoldTables: "true", OptNoExploration: "true"}},
		{"schema", Config{Votes: 2, GoldSchema: true, NoExploration: true}, map[string]string{OptGoldSchema: "true", OptNoExploration: "true"}},
		{"full", Config{Votes: 2, NoExploration: true}, map[string]string{OptNoExploration: "true"}},
	} {
		r := runAblation(t, tc.cfg, tc.opts, ids)
		for id, o := range r.solve {
			if o.GoldRestricted != (tc.name != "full") {
				t.Errorf("%s %s: restricted %v", tc.name, id, o.GoldRestricted)
			}
		}
		for i, log := range r.logs {
			if len(log.prompts) == 0 {
				t.Fatalf("%s: client %d saw no generation prompt", tc.name, i)
			}
			for _, p := range log.prompts {
				tables := tableLine.FindAllStringSubmatch(p, -1)
				if tc.name != "full" && (len(tables) == 0 || len(tables) > 3) {
					t.Errorf("%s: client %d: %d tables in a gold-restricted prompt", tc.name, i, len(tables))
				}
				if strings.Contains(p, "How many customers") && !strings.Contains(p, "Table full name: customers\n") {
					t.Errorf("%s: client %d: the gold table customers is missing", tc.name, i)
				}
				if i == 0 {
					columns[tc.name] += strings.Count(p, "Column name: ")
				}
			}
		}
		t.Logf("%s: %d column lines over the generation prompts", tc.name, columns[tc.name])
	}
	if !(columns["schema"] < columns["tables"] && columns["tables"] < columns["full"]) && !raceEnabled {
		t.Errorf("column lines: gold schema %d, gold tables %d, full %d: each ablation must show less", columns["schema"], columns["tables"], columns["full"])
	}
}

// TestSeamReadsTheAblationOptions: the manifest's options reach the agent.
func TestSeamReadsTheAblationOptions(t *testing.T) {
	t.Parallel()
	opts, err := Definition().CheckOptions(map[string]string{OptExploreAll: "true", OptNoVote: "true", OptNoRandomSelection: "true",
		OptNoCompression: "true", OptGoldTables: "true", OptGoldSchema: "true", OptCompression: "structural"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := ConfigFromOptions(opts, 8)
	if err != nil || !cfg.ExploreAll || !cfg.NoVote || !cfg.NoRandomSelection || !cfg.NoCompression || !cfg.GoldTables || !cfg.GoldSchema || cfg.Compression != "structural" {
		t.Errorf("cfg %+v, %v", cfg, err)
	}
	if o, _ := cfg.DBInfoOptions(); o.Group || o.Threshold != 0 {
		t.Errorf("no-compression options %+v", o)
	}
	bad, _ := Definition().CheckOptions(map[string]string{OptCompression: "zip"})
	if _, _, err := ConfigFromOptions(bad, 8); err == nil {
		t.Error("compression zip was accepted")
	}
}

func dbinfoFor(ds *dataset.Dataset, e *dataset.Example, whs *dataset.Warehouses, opt dbinfo.Options) (*dbinfo.Info, error) {
	return dbinfo.ForExample(context.Background(), ds, e, whs, opt)
}

func calls(l cost.Ledger, stage string) int {
	if c := l[stage]; c != nil {
		return c.LLMCalls
	}
	return 0
}
