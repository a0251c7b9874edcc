package reforce

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/runtime/local"
)

// This file pins the behaviours of issue 20 items 3 and 4 that follow the
// paper and the reference code (docs/agents/reforce.md, D-R1…).

func sqlList(qs ...string) string {
	return "```sql\n" + strings.Join(qs, ";\n") + ";\n```"
}

// TestExplorationFailStreakAsTheReference pins the reference's error_rec
// rule (agent.py:63-99): every failing query gets its three corrections,
// and exploration stops only after a query fails them all while the last
// five records (of more than five) are failures.
func TestExplorationFailStreakAsTheReference(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		reply     func(n int, last string) string
		calls     int
		queries   int
		successes int
		stopped   string
	}{
		{
			// A first-try success records nothing; the first failed query
			// leaves 5 records (not more than 5), so the second failing
			// query still gets 3 corrections (the old streak rule gave it
			// none), then the rule stops before the last query.
			name: "each failing query gets three corrections",
			reply: func(_ int, last string) string {
				if strings.Contains(last, "Write at most 10") {
					return sqlList("SELECT id FROM t", "SELECT nope FROM t", "SELECT nope FROM t", "SELECT name FROM t")
				}
				return sqlReply("SELECT nope2 FROM t")
			},
			calls: 1 + 3 + 3, queries: 1 + 4 + 4, successes: 1, stopped: "the last 5 attempts failed",
		},
		{
			// A corrected success records [0, 1]; the next fully failed
			// query adds five failures: seven records, the last five
			// failures, so exploration stops at once.
			name: "after a corrected success one failed query stops",
			reply: func(_ int, last string) string {
				switch {
				case strings.Contains(last, "Write at most 10"):
					return sqlList("SELECT nope FROM t", "SELECT bad FROM t", "SELECT id FROM t")
				case strings.Contains(last, "is corrected to"):
					return sqlList("SELECT bad FROM t", "SELECT id FROM t")
				case strings.Contains(last, "Input sql:\nSELECT nope FROM t"):
					return sqlReply("SELECT id FROM t")
				}
				return sqlReply("SELECT bad2 FROM t")
			},
			calls: 1 + 1 + 1 + 3, queries: 2 + 4, successes: 1, stopped: "the last 5 attempts failed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := agenttest.Texts(tt.reply)
			e, err := newAgent(t, Config{}, m).Explore(context.Background(), agenttest.SQLite(t, tSQL), ExploreInput{Example: ex, TableInfo: "t", TableStruct: "['t']"})
			if err != nil {
				t.Fatal(err)
			}
			if m.Calls() != tt.calls || e.Cost.Queries != tt.queries || e.Successes != tt.successes || e.Stopped != tt.stopped || e.Abandoned {
				t.Errorf("calls %d, queries %d, successes %d, stopped %q, abandoned %v; want %d, %d, %d, %q",
					m.Calls(), e.Cost.Queries, e.Successes, e.Stopped, e.Abandoned, tt.calls, tt.queries, tt.successes, tt.stopped)
			}
		})
	}
}

// TestExplorationAbandons pins when a vote's exploration is abandoned, as
// the reference's exploration returned max_try <= 0 and run.py skipped the
// vote (agent.py:139-167, run.py:61-64): fewer than 3 queries after 3
// asks (none is run), or no query succeeded. A failing LLM is a gave_up
// slot instead, so that "every candidate gave up" still reads as a
// pipeline failure.
func TestExplorationAbandons(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		model   llm.Client
		calls   int
		queries int
		status  Status // the vote's slot; "" when it goes on to regeneration
	}{
		{"two queries after three asks", agenttest.Replies(sqlList("SELECT id FROM t", "SELECT name FROM t")), 3, 0, StatusAbandoned},
		{"no query succeeds", agenttest.Replies(sqlList("SELECT nope FROM t", "SELECT x FROM t", "SELECT y FROM t")),
			1 + 3 + 3, 8, StatusAbandoned},
		{"one query succeeds", agenttest.Replies(sqlList("SELECT id FROM t", "SELECT nope FROM t", "SELECT x FROM t")),
			1 + 3 + 3, 8 + 1, ""},
		{"the LLM fails", agenttest.Down(errors.New("endpoint down")), 1, 0, StatusGaveUp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, err := newAgent(t, Config{}, tt.model).Explore(context.Background(), agenttest.SQLite(t, tSQL), ExploreInput{Example: ex, TableInfo: "t", TableStruct: "['t']"})
			if err != nil {
				t.Fatal(err)
			}
			slot := e.Slot(1, 9)
			got := Status("")
			if slot != nil {
				got = slot.Status
				if slot.Round != 1 || slot.Index != 9 || slot.Error == "" {
					t.Errorf("slot %+v", slot)
				}
			}
			if e.Cost.LLMCalls != tt.calls || e.Cost.Queries != tt.queries || got != tt.status || e.Abandoned != (tt.status == StatusAbandoned) {
				t.Errorf("calls %d, queries %d, slot %q, abandoned %v (stopped %q); want %d calls, %d queries, slot %q",
					e.Cost.LLMCalls, e.Cost.Queries, got, e.Abandoned, e.Stopped, tt.calls, tt.queries, tt.status)
			}
		})
	}
}

// TestDecideFinalPools pins which candidates the final vote is over: the
// exploration round alone (paper eq. 7, the reference's step 2 replacing
// step 1), both rounds with pool-rounds, round 0 without exploration, and
// round 0 when the exploration round has no valid candidate.
func TestDecideFinalPools(t *testing.T) {
	t.Parallel()
	A, B, C, zero := "x\n1\n", "x\n2\n", "x\n3\n", "x\n0\n"
	abandoned := func(i int) *agent.Candidate {
		return &agent.Candidate{Round: 1, Index: i, Status: string(StatusAbandoned)}
	}
	modelVote := &agent.Candidate{Round: 2, Index: 16, Status: string(StatusVote)}
	within := func(d vote.Decision, pos ...int) bool {
		for _, g := range d.Clusters {
			for _, p := range g {
				if !slices.Contains(pos, p) {
					return false
				}
			}
		}
		return d.Winner != nil
	}
	// Round 0 tied A/B; round 1: A, C and an abandoned vote.
	all := []*agent.Candidate{rcand(0, 0, A), rcand(0, 1, B), rcand(1, 2, A), rcand(1, 3, C), abandoned(4), modelVote}

	d := DecideFinal(all, Pool{Explored: true}, 1, nil)
	if d.Method != vote.MethodRandomTie || d.Valid != 2 || !within(d, 2, 3) {
		t.Errorf("exploration round alone: %+v", d)
	}
	d = DecideFinal(all, Pool{Explored: true, Rounds: true}, 1, nil)
	if d.Method != vote.MethodFinalMajority || d.Winner != all[0] || !slices.Equal(d.Clusters[0], []int{0, 2}) || d.Valid != 4 {
		t.Errorf("pooled rounds: %+v", d)
	}
	d = DecideFinal(all, Pool{}, 1, nil)
	if d.Method != vote.MethodRandomTie || d.Valid != 2 || !within(d, 0, 1) {
		t.Errorf("no exploration: %+v", d)
	}
	// The model breaks the exploration round's tie, among its candidates.
	var tied []int
	d = DecideFinal(all, Pool{Explored: true}, 1, func(c []*agent.Candidate) *agent.Candidate {
		for _, x := range c {
			tied = append(tied, x.Index)
		}
		return c[1]
	})
	if d.Method != vote.MethodModelVote || !slices.Equal(tied, []int{2, 3}) || d.Winner != all[3] {
		t.Errorf("model vote: tied %v, %+v", tied, d)
	}

	// Every exploration vote abandoned: round 0 decides.
	d = DecideFinal([]*agent.Candidate{rcand(0, 0, A), rcand(0, 1, B), abandoned(2), abandoned(3)}, Pool{Explored: true}, 1, nil)
	if d.Method != MethodFirstRound || !within(d, 0, 1) {
		t.Errorf("all abandoned: %+v", d)
	}
	// Only an invalid answer explored: a valid first-round one is preferred…
	d = DecideFinal([]*agent.Candidate{rcand(0, 0, A), rcand(1, 1, zero)}, Pool{Explored: true}, 1, nil)
	if d.Method != MethodFirstRound || d.Winner.Index != 0 {
		t.Errorf("invalid exploration answer: %+v", d)
	}
	// …and with none valid anywhere, the explored invalid answer is taken.
	d = DecideFinal([]*agent.Candidate{rcand(0, 0, zero), rcand(1, 1, zero)}, Pool{Explored: true}, 1, nil)
	if d.Method != vote.MethodInvalidFallback || d.Winner.Index != 1 {
		t.Errorf("only invalid answers: %+v", d)
	}
	if d := DecideFinal([]*agent.Candidate{abandoned(0)}, Pool{Explored: true}, 1, nil); d.Method != vote.MethodNone || d.Winner != nil {
		t.Errorf("nothing: %+v", d)
	}
}

// promptKind names which of the agent's prompts a request is, so a test
// can script rounds whose candidates run in parallel (agenttest.Model's
// Count then counts each kind apart).
func promptKind(req llm.Request) string {
	last := agenttest.LastMessage(req).Content
	switch {
	case strings.Contains(last, "Write at most 10"):
		return "explore"
	case strings.Contains(last, "few-shot examples after column exploration"):
		return "regenerate"
	case strings.HasPrefix(last, "Input sql:"):
		return "correct"
	case strings.Contains(last, "SQL file name:"):
		return "vote"
	}
	return "generate"
}

// TestFinalVoteOverExplorationRound runs two votes through the runtime's
// seam whose first round ties: the final vote is over the regenerated
// candidates (a tie again) unless pool-rounds lets the first round's join
// them (a majority); abandoned explorations regenerate nothing and leave
// the decision to the first round.
func TestFinalVoteOverExplorationRound(t *testing.T) {
	t.Parallel()
	first := []string{"SELECT 1 AS x", "SELECT 2 AS x"}
	regen := []string{"SELECT 1 AS x", "SELECT 3 AS x"}
	explore := sqlList("SELECT 1 AS x", "SELECT 2 AS x", "SELECT 3 AS x")
	solve := func(t *testing.T, opts map[string]string, exploreReply string) *local.Outcome {
		m := agenttest.Script(func(req llm.Request, n int) *llm.Response {
			switch promptKind(req) {
			case "explore":
				return agenttest.Text(exploreReply)
			case "regenerate":
				return agenttest.Text(sqlReply(regen[n%2]))
			case "correct":
				return agenttest.Text(sqlReply("SELECT nope FROM t"))
			}
			return agenttest.Text(sqlReply(first[n%2]))
		})
		m.Count = promptKind
		o := runSeam(t, m, opts, 2, "local001")
		if o.Rounds != 2 || len(o.Candidates) != 4 {
			t.Fatalf("%d rounds, %d candidates", o.Rounds, len(o.Candidates))
		}
		return o
	}
	t.Run("exploration round alone", func(t *testing.T) {
		t.Parallel()
		d := solve(t, nil, explore).Decision
		if d.Method != string(vote.MethodRandomTie) || d.Valid != 2 || d.Winner.Round != 1 {
			t.Errorf("decision %+v", d)
		}
	})
	t.Run("pool-rounds", func(t *testing.T) {
		t.Parallel()
		d := solve(t, map[string]string{OptPoolRounds: "true"}, explore).Decision
		if d.Method != string(vote.MethodFinalMajority) || d.Winner.SQL != "SELECT 1 AS x" || d.Valid != 4 {
			t.Errorf("decision %+v", d)
		}
	})
	t.Run("abandoned explorations", func(t *testing.T) {
		t.Parallel()
		o := solve(t, nil, sqlList("SELECT 1 AS x", "SELECT 2 AS x"))
		for _, c := range o.Candidates[2:] {
			if c.Status != string(StatusAbandoned) || c.Round != 1 {
				t.Errorf("round 1 candidate %+v", c)
			}
		}
		if calls(o.Cost, "regenerate") != 0 || calls(o.Cost, "explore") != 2*3 {
			t.Errorf("costs %v", o.Cost)
		}
		if d := o.Decision; d.Method != string(MethodFirstRound) || d.Winner.Round != 0 {
			t.Errorf("decision %+v", d)
		}
	})
}

// runSeam runs one demo example through the runtime's seam in process
// (local.Solve), the agent answered by client.
func runSeam(t *testing.T, client llm.Client, opts map[string]string, votes int, id string) *local.Outcome {
	t.Helper()
	return agenttest.Run(t, Definition(), agenttest.Demo(t).Only(t, id), agenttest.Options{LLM: client, Agent: opts, Votes: votes, Seed: 3})[id]
}

// demoRun is ReFoRCE over demo examples through the runtime's seam in
// process (local.Solve), against llmsim, with its requests recorded.
type demoRun struct {
	seam map[string]*local.Outcome
	sim  *llmsim.Server
	log  *agenttest.Model
}

func runDemo(t *testing.T, opts map[string]string, votes int, ids []string) *demoRun {
	t.Helper()
	demo := agenttest.Demo(t)
	r := &demoRun{}
	var client llm.Client
	r.sim, client = agenttest.Sim(t, llmsim.Config{Dataset: demo.Dataset, Seed: 1}, "")
	r.log = agenttest.Record(client)
	r.seam = agenttest.Run(t, Definition(), demo.Only(t, ids...), agenttest.Options{LLM: r.log, Agent: opts, Votes: votes, Seed: 1})
	return r
}

// prompts are the generation prompts the agent sent: the first message
// of each generation request that shows tables.
func (r *demoRun) prompts() []string {
	var out []string
	for _, req := range r.log.Requests() {
		if req.Role != llm.RoleGenerate {
			continue
		}
		for _, m := range req.Messages {
			if strings.Contains(m.Content, "Table full name: ") {
				out = append(out, m.Content)
				break
			}
		}
	}
	return out
}

// decidedBy counts the examples decided by method m.
func (r *demoRun) decidedBy(m vote.Method) int {
	n := 0
	for _, lo := range r.seam {
		if lo.Decision.Method == string(m) {
			n++
		}
	}
	return n
}

// TestModelVoteOnTheRuntime runs the model vote (v1 option model-vote)
// through the runtime's seam: a tie of the final vote opens a round with
// one vote task on the generate pool (the voter has no LLM), and the
// decision after it takes the model's choice. The vote calls are accounted
// in the "vote" stage, as many as the simulator served.
func TestModelVoteOnTheRuntime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		opts          map[string]string
		noExploration bool
	}{
		{"after exploration", map[string]string{OptModelVote: "true"}, false},
		{"without exploration", map[string]string{OptModelVote: "true", OptNoExploration: "true"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runDemo(t, tc.opts, 8, demoIDs())
			voted := r.decidedBy(vote.MethodModelVote)
			if voted == 0 {
				t.Fatal("no example was decided by the model vote")
			}
			calls := 0
			for id, lo := range r.seam {
				if lo.Decision.Method != string(vote.MethodModelVote) {
					continue
				}
				var voteRecords int
				for _, c := range lo.Candidates {
					if c.Status == string(StatusVote) {
						voteRecords++
						if c.Round != lo.Rounds-1 || c.Index != c.Round*8 {
							t.Errorf("%s: vote record at round %d slot %d", id, c.Round, c.Index)
						}
					}
				}
				rounds := 3
				if tc.noExploration {
					rounds = 2
				}
				if voteRecords != 1 || lo.Rounds != rounds || lo.Cost["vote"].LLMCalls == 0 {
					t.Errorf("%s: %d vote records, %d rounds, vote stage %+v", id, voteRecords, lo.Rounds, lo.Cost["vote"])
				}
				calls += lo.Cost["vote"].LLMCalls
			}
			if got := r.sim.Stats().ByKind[llmsim.KindVote]; got != int64(calls) {
				t.Errorf("the simulator served %d vote calls, the ledgers say %d", got, calls)
			}
			t.Logf("%d of %d examples decided by the model vote", voted, len(r.seam))
		})
	}
}

// lowAtSeed1 are demo examples of low first-round confidence at llmsim
// seed 1 and run seed 1 (local035's final vote ties), and one of high. They
// depend on the prompts' exact text, which seeds llmsim's answers: after a
// rewording (issue 20 item 5) list the demo again with ModelVote on.
var lowAtSeed1 = []string{"local001", "local004", "local015", "local023", "local029", "local035"}

// demoIDs are the examples these tests run: under the race detector, which
// makes tokenizing ~10x slower, only local015 (explored, its final vote
// tied).
func demoIDs() []string {
	if raceEnabled {
		return []string{"local015"}
	}
	return lowAtSeed1
}

// TestPoolRoundsOnTheRuntime: with pool-rounds the final vote of an
// explored example counts both rounds' valid candidates.
func TestPoolRoundsOnTheRuntime(t *testing.T) {
	t.Parallel()
	r := runDemo(t, map[string]string{OptPoolRounds: "true"}, 8, demoIDs())
	explored := 0
	for id, lo := range r.seam {
		if lo.Rounds != 2 {
			continue
		}
		explored++
		if lo.Decision.Valid <= 8 {
			t.Errorf("%s: the pooled vote counted %d valid candidates", id, lo.Decision.Valid)
		}
	}
	if explored == 0 {
		t.Error("no example was explored")
	}
}

// TestSeamConfigFromOptions reads the options the manifest records.
func TestSeamConfigFromOptions(t *testing.T) {
	t.Parallel()
	opts, err := Definition().RunOptions(map[string]string{OptModelVote: "true", OptPoolRounds: "true", OptLinkBudget: "1234"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	cfg, budget, err := ConfigFromOptions(opts)
	if err != nil || !cfg.ModelVote || !cfg.PoolRounds || budget != 1234 || cfg.Votes != 4 {
		t.Errorf("cfg %+v, budget %d, %v", cfg, budget, err)
	}
	opts, _ = Definition().CheckOptions(nil)
	if cfg, _, _ := ConfigFromOptions(opts); cfg.ModelVote || cfg.PoolRounds || cfg.Votes != 8 {
		t.Errorf("defaults %+v", cfg)
	}
	// The run's votes fill the option only when it is unset.
	if opts, _ := Definition().RunOptions(map[string]string{OptVotes: "3"}, 4); opts[OptVotes] != "3" {
		t.Errorf("votes %s, want the option's 3", opts[OptVotes])
	}
	if _, _, err := ConfigFromOptions(map[string]string{OptVotes: "0"}); err == nil {
		t.Error("votes=0 was accepted")
	}
	if _, err := Definition().CheckOptions(map[string]string{"model_vote": "true"}); err == nil {
		t.Error("an unknown option was accepted")
	}
}
