package reforce

import (
	"regexp"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// This file pins the ablations of the paper's v2 Tables 3 and 4 (issue 20
// item 7): each changes the pipeline's structure as the paper describes,
// through the runtime's seam.

// ablationIDs: low-confidence examples at seed 1 and, under the race
// detector, the one whose final vote ties.
func ablationIDs() []string {
	if raceEnabled {
		return []string{"local015"}
	}
	return append(append([]string(nil), lowAtSeed1...), "local002", "local003")
}

// TestAblationExploreAll is "Column Exploration Only": every example,
// high confidence or not, starts with column exploration — no first
// round, no first vote — and the final vote is over the exploration round.
func TestAblationExploreAll(t *testing.T) {
	t.Parallel()
	r := runDemo(t, map[string]string{OptExploreAll: "true"}, 8, ablationIDs())
	for id, lo := range r.seam {
		if lo.Rounds != 2 || len(lo.Candidates) != 8 || calls(lo.Cost, "generate") != 0 || calls(lo.Cost, "explore") == 0 {
			t.Errorf("%s: %d rounds, %d candidates, costs %v", id, lo.Rounds, len(lo.Candidates), lo.Cost)
		}
		for _, c := range lo.Candidates {
			if c.Round != 1 || c.Index < 8 {
				t.Errorf("%s: a candidate at round %d slot %d", id, c.Round, c.Index)
			}
		}
		if lo.Decision.Method == string(vote.MethodMajority) {
			t.Errorf("%s: decided by the first vote (%s)", id, lo.Decision.Method)
		}
	}
}

// TestAblationNoVote is "w/o Majority Voting": one candidate, which is the
// answer — no vote, no exploration.
func TestAblationNoVote(t *testing.T) {
	t.Parallel()
	r := runDemo(t, map[string]string{OptNoVote: "true"}, 8, ablationIDs())
	single := 0
	for id, lo := range r.seam {
		if lo.Rounds != 1 || len(lo.Candidates) != 1 || calls(lo.Cost, "explore") != 0 {
			t.Errorf("%s: %d rounds, %d candidates, costs %v", id, lo.Rounds, len(lo.Candidates), lo.Cost)
			continue
		}
		switch lo.Decision.Method {
		case string(MethodNoVote):
			single++
			if lo.Decision.Winner != lo.Candidates[0] {
				t.Errorf("%s: the answer is not the one candidate", id)
			}
		case string(vote.MethodInvalidFallback), string(vote.MethodNone):
		default:
			t.Errorf("%s: decided by %s", id, lo.Decision.Method)
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
	tie := []*agent.Candidate{rcand(1, 8, A), rcand(1, 9, B)}
	if d := DecideFinal(tie, Pool{Explored: true}, 1, nil); d.Method != vote.MethodRandomTie || d.Winner == nil {
		t.Errorf("default: %s", d.Method)
	}
	if d := DecideFinal(tie, Pool{Explored: true, NoRandom: true}, 1, nil); d.Method != vote.MethodUnresolved || d.Winner != nil {
		t.Errorf("no-random-selection: %s, winner %v", d.Method, d.Winner)
	}
	if d := DecideFinal([]*agent.Candidate{rcand(1, 8, A), rcand(1, 9, A), rcand(1, 10, B)}, Pool{Explored: true, NoRandom: true}, 1, nil); d.Method != vote.MethodFinalMajority {
		t.Errorf("a majority: %s", d.Method)
	}
	if d := DecideFinal([]*agent.Candidate{rcand(1, 8, A)}, Pool{Explored: true, NoRandom: true}, 1, nil); d.Method != vote.MethodLone {
		t.Errorf("a lone candidate: %s", d.Method)
	}
	r := runDemo(t, map[string]string{OptNoRandomSelection: "true"}, 8, ablationIDs())
	if r.decidedBy(vote.MethodUnresolved) == 0 {
		t.Error("no tie was left unanswered (local015's final vote ties at seed 1)")
	}
	for id, lo := range r.seam {
		if lo.Decision.Method == string(vote.MethodRandomTie) {
			t.Errorf("%s: a random tie-break", id)
		}
		if lo.Decision.Method == string(vote.MethodUnresolved) && lo.Decision.Winner != nil {
			t.Errorf("%s: an unresolved tie has an answer", id)
		}
	}
}

var tableLine = regexp.MustCompile(`(?m)^Table full name: (\S+)$`)

// TestAblationGoldTablesAndSchema are "w/ Gold Table" and "w/ Gold Schema":
// the generation prompt shows only the tables (and columns) the example's
// gold SQL names.
func TestAblationGoldTablesAndSchema(t *testing.T) {
	t.Parallel()
	ids := []string{"local001"} // gold: SELECT COUNT(*) AS customer_count FROM customers
	if !raceEnabled {
		ids = append(ids, "local035")
	}
	columns := map[string]int{}
	for _, tc := range []struct {
		name string
		opts map[string]string
	}{
		{"tables", map[string]string{OptGoldTables: "true", OptNoExploration: "true"}},
		{"schema", map[string]string{OptGoldSchema: "true", OptNoExploration: "true"}},
		{"full", map[string]string{OptNoExploration: "true"}},
	} {
		r := runDemo(t, tc.opts, 2, ids)
		prompts := r.prompts()
		if len(prompts) == 0 {
			t.Fatalf("%s: no generation prompt", tc.name)
		}
		for _, p := range prompts {
			tables := tableLine.FindAllStringSubmatch(p, -1)
			if tc.name != "full" && (len(tables) == 0 || len(tables) > 3) {
				t.Errorf("%s: %d tables in a gold-restricted prompt", tc.name, len(tables))
			}
			if strings.Contains(p, "How many customers") && !strings.Contains(p, "Table full name: customers\n") {
				t.Errorf("%s: the gold table customers is missing", tc.name)
			}
			columns[tc.name] += strings.Count(p, "Column name: ")
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
		OptNoCompression: "true", OptGoldTables: "true", OptGoldSchema: "true"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := ConfigFromOptions(opts)
	if err != nil || !cfg.ExploreAll || !cfg.NoVote || !cfg.NoRandomSelection || !cfg.NoCompression || !cfg.GoldTables || !cfg.GoldSchema {
		t.Errorf("cfg %+v, %v", cfg, err)
	}
	if o, _ := cfg.DBInfoOptions(); o.Group || o.Threshold != 0 {
		t.Errorf("no-compression options %+v", o)
	}
	opts, _ = Definition().CheckOptions(map[string]string{OptCompression: "structural"})
	if cfg, _, err := ConfigFromOptions(opts); err != nil || cfg.Compression != "structural" {
		t.Errorf("cfg %+v, %v", cfg, err)
	}
	for _, bad := range []map[string]string{{OptLinkBudget: "0"}, {OptNoCompression: "true", OptCompression: "structural"}} {
		if _, _, err := ConfigFromOptions(bad); err == nil {
			t.Errorf("%v was accepted", bad)
		}
	}
	bad, _ := Definition().CheckOptions(map[string]string{OptCompression: "zip"})
	if _, _, err := ConfigFromOptions(bad); err == nil {
		t.Error("compression zip was accepted")
	}
}

func calls(l cost.Ledger, stage string) int {
	if c := l[stage]; c != nil {
		return c.LLMCalls
	}
	return 0
}
