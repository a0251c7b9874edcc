package ensemble

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/pexa"
	"github.com/quorumsql/quorum/pkg/agents/raise"
	"github.com/quorumsql/quorum/pkg/agents/reforce"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// fixed is a member that decides its candidates by plain majority; it
// opens another round while round < rounds.
type fixed struct{ rounds int }

func (fixed) Start(context.Context, *agent.Context) (*agent.Dispatch, error) {
	return &agent.Dispatch{}, nil
}
func (f fixed) Decide(_ context.Context, _ *agent.Context, round int, cands []*agent.Candidate) (*agent.Decision, error) {
	if round < f.rounds {
		t := agent.Task{Kind: "k", ID: "again", Round: round + 1, Slots: []int{50 + round}}
		return &agent.Decision{Next: &agent.Dispatch{Round: round + 1, Expect: 1, Tasks: []agent.Task{t}}}, nil
	}
	count := map[string]int{}
	var best *agent.Candidate
	for _, c := range cands {
		if c.Status != agent.StatusOK {
			continue
		}
		count[c.CSV]++
		if best == nil || count[c.CSV] > count[best.CSV] {
			best = c
		}
	}
	return &agent.Decision{Winner: best, Confidence: "high", Method: "majority", Valid: len(cands)}, nil
}

func def(name string, rounds int) *agent.Definition {
	d := &agent.Definition{Name: name, New: func(agent.Config) (agent.Agent, error) { return fixed{rounds: rounds}, nil }}
	agent.Register(&d.Kinds, "k", agent.Generator, "", func(fixed, context.Context, *agent.Context, agent.Task, struct{}) (*agent.Outcome, error) {
		return &agent.Outcome{}, nil
	})
	return d
}

// ctxFor is a decision step's context: the runtime's, in memory.
func ctxFor(t *testing.T) *agent.Context {
	c := agenttest.Context(t, nil, &dataset.Example{ID: "e1"})
	c.Seed = 3
	return c
}

// pool builds a member's candidates of one round from slot from on, in
// the order given: spec "1*5 2*3" is five answering 1, then three 2.
func pool(t *testing.T, member, round, from int, spec string) []*agent.Candidate {
	t.Helper()
	var out []*agent.Candidate
	for _, f := range strings.Fields(spec) {
		ans, n, ok := strings.Cut(f, "*")
		k, err := strconv.Atoi(n)
		if !ok || err != nil {
			t.Fatalf("pool spec %q: want ANSWER*COUNT", f)
		}
		for range k {
			out = append(out, &agent.Candidate{Round: round, Index: member*slotSpan + from, Status: agent.StatusOK, SQL: "SELECT " + ans, CSV: "a\n" + ans + "\n", Rows: 1})
			from++
		}
	}
	return out
}

// failed is n failed candidates whose (stale) result says ans.
func failed(member, from, n int, ans string) []*agent.Candidate {
	var out []*agent.Candidate
	for i := range n {
		out = append(out, &agent.Candidate{Index: member*slotSpan + from + i, Status: agent.StatusFailed, Error: "gave up", CSV: "a\n" + ans + "\n"})
	}
	return out
}

func build(t *testing.T, opts map[string]string, defs ...*agent.Definition) *ensemble {
	t.Helper()
	d := Definition(defs...)
	o, err := d.RunOptions(opts, 8)
	if err != nil {
		t.Fatal(err)
	}
	e, err := d.New(agent.Config{Options: o})
	if err != nil {
		t.Fatal(err)
	}
	return e.(*ensemble)
}

// decideAll runs the ensemble's rounds over cands (round r sees the
// candidates of rounds up to r) until it decides.
func decideAll(t *testing.T, e *ensemble, cands []*agent.Candidate) *agent.Decision {
	t.Helper()
	c := ctxFor(t)
	for round := 0; round < 4; round++ {
		var in []*agent.Candidate
		for _, cand := range cands {
			if cand.Round <= round {
				in = append(in, cand)
			}
		}
		d, err := e.Decide(context.Background(), c, round, in)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if d.Next == nil {
			return d
		}
	}
	t.Fatal("no decision after 4 rounds")
	return nil
}

// TestPooledRule: a cluster scores Σ weight × c/(n+2) over the members, c
// of a member's n counted valid candidates in it: a pool's size buys no
// votes, a tiny pool counts less, a member counts only what its own vote
// counted; ties go to the heaviest member's answer; high confidence needs
// two agents in the winning cluster.
func TestPooledRule(t *testing.T) {
	t.Parallel()
	abc := []*agent.Definition{def("a", 0), def("b", 0), def("c", 0)}
	// ReFoRCE (the real agent) as member 0, then b and c; c decides after
	// round 2, so ReFoRCE's decision of round 1 waits in the store.
	rbc := []*agent.Definition{reforce.Definition(), def("b", 0), def("c", 2)}
	for _, tt := range []struct {
		name    string
		defs    []*agent.Definition
		opts    map[string]string
		members [][]*agent.Candidate
		want    string // the winning answer
		conf    string
		method  string
		valid   int // candidates counted
		agreed  int // counted candidates in the winning cluster
		agrees  []bool
	}{
		{"32 cannot outvote two that agree", abc, nil, [][]*agent.Candidate{
			pool(t, 0, 0, 0, "1*8"), pool(t, 1, 0, 0, "1*4"), pool(t, 2, 0, 0, "2*32")},
			// 1: 8/10 + 4/6 = 1.47; 2: 32/34 = 0.94
			"1", "high", "ensemble_pooled", 44, 12, []bool{true, true, false}},
		{"shares, not counts", abc, nil, [][]*agent.Candidate{
			pool(t, 0, 0, 0, "1*5 2*3"), pool(t, 1, 0, 0, "2*4"), pool(t, 2, 0, 0, "1*30 3*2")},
			// 1: 5/10 + 30/34 = 1.38; 2: 3/10 + 4/6 = 0.97
			"1", "high", "ensemble_pooled", 44, 35, []bool{true, false, true}},
		{"review: a lone survivor against a member's majority", rbc, nil, [][]*agent.Candidate{
			// ReFoRCE's round 0 ties, so it explores and votes over round 1
			// alone: 5 A + 3 B. PExA kept one candidate, C; RAISE 12 A, 4 C,
			// 16 D. A: 5/10 + 12/34 = 0.85; D: 16/34 = 0.47; C: 1/3 + 4/34 =
			// 0.45 (the old shares gave C 1.125 against A's 1.0).
			append(pool(t, 0, 0, 0, "8*4 9*4"), pool(t, 0, 1, 8, "A*5 B*3")...),
			pool(t, 1, 0, 0, "C*1"), pool(t, 2, 0, 0, "A*12 C*4 D*16")},
			"A", "high", "ensemble_pooled", 41, 17, []bool{true, false, false}},
		{"ReFoRCE's first round weighs nothing", rbc, nil, [][]*agent.Candidate{
			// Counting round 0 would make 3 win: 4/18 + 1/3 = 0.56 against
			// 1's 5/18; over round 1 alone 1 has 5/10 against 3's 1/3.
			append(pool(t, 0, 0, 0, "3*4 4*4"), pool(t, 0, 1, 8, "1*5 2*3")...), pool(t, 1, 0, 0, "3*1"), nil},
			"1", "low", "ensemble_pooled", 9, 5, []bool{true, false, false}},
		{"a unanimous small member beats a split large one", abc, nil, [][]*agent.Candidate{
			// 1: 4/6 = 0.67; 2: 18/34 = 0.53
			pool(t, 0, 0, 0, "1*4"), pool(t, 1, 0, 0, "2*18 3*14"), nil},
			"1", "low", "ensemble_pooled", 36, 4, []bool{true, false, false}},
		{"a lone candidate loses to a clear majority", abc, nil, [][]*agent.Candidate{
			// 1: 1/3; 2: 10/18 = 0.56 (the old shares: 1 against 0.63)
			pool(t, 0, 0, 0, "1*1"), pool(t, 1, 0, 0, "2*10 3*6"), nil},
			"2", "low", "ensemble_pooled", 17, 10, []bool{false, true, false}},
		{"members with no valid candidate add nothing", rbc[:2:2], nil, [][]*agent.Candidate{
			// ReFoRCE's answers are all zeros (invalid): it votes over none.
			append(pool(t, 0, 0, 0, "0*8"), pool(t, 0, 1, 8, "0*8")...), pool(t, 1, 0, 0, "1*2")},
			"1", "low", "ensemble_pooled", 2, 2, []bool{false, true}},
		{"failed candidates count for nothing", abc, nil, [][]*agent.Candidate{
			// 2: 3/5 = 0.6; 1: 2/4 = 0.5, and 1 more if c's failures counted
			pool(t, 0, 0, 0, "1*2"), pool(t, 1, 0, 0, "2*3"), failed(2, 0, 6, "1")},
			"2", "low", "ensemble_pooled", 5, 3, []bool{false, true, false}},
		{"weights: 5/7 beats 3/5", abc, nil, [][]*agent.Candidate{
			pool(t, 0, 0, 0, "1*5"), pool(t, 1, 0, 0, "2*3"), nil},
			"1", "low", "ensemble_pooled", 8, 5, []bool{true, false, false}},
		{"weights: 1.5 × 3/5 beats 5/7", abc, map[string]string{OptWeights: "b=1.5"}, [][]*agent.Candidate{
			pool(t, 0, 0, 0, "1*5"), pool(t, 1, 0, 0, "2*3"), nil},
			"2", "low", "ensemble_pooled", 8, 3, []bool{false, true, false}},
		{"weights: 2 × 4/6 beats 8/10", abc, map[string]string{OptWeights: "b=2"}, [][]*agent.Candidate{
			pool(t, 0, 0, 0, "1*8"), pool(t, 1, 0, 0, "2*4"), nil},
			"2", "low", "ensemble_pooled", 12, 4, []bool{false, true, false}},
		{"a tie goes to the heaviest member", abc, map[string]string{OptWeights: "b=2"}, [][]*agent.Candidate{
			// 1: 4/6; 2: 2 × 1/3
			pool(t, 0, 0, 0, "1*4"), pool(t, 1, 0, 0, "2*1"), nil},
			"2", "low", "ensemble_pooled_heaviest", 5, 1, []bool{false, true, false}},
		{"an even tie goes to the first-listed member's answer", abc, nil, [][]*agent.Candidate{
			pool(t, 0, 0, 0, "1*4"), pool(t, 1, 0, 0, "2*4"), nil},
			"1", "low", "ensemble_pooled_heaviest", 8, 4, []bool{true, false, false}},
		{"a member missing", abc, nil, [][]*agent.Candidate{
			// 2: 6/10 + 1/3 = 0.93; 1: 2/10
			pool(t, 0, 0, 0, "1*2 2*6"), pool(t, 1, 0, 0, "2*1"), nil},
			"2", "high", "ensemble_pooled", 9, 7, []bool{true, true, false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := build(t, tt.opts, tt.defs...)
			var all []*agent.Candidate
			for _, m := range tt.members {
				all = append(all, m...)
			}
			d := decideAll(t, e, all)
			got := "none"
			if d.Winner != nil {
				got = strings.TrimSuffix(strings.TrimPrefix(d.Winner.CSV, "a\n"), "\n")
			}
			if got != tt.want || d.Confidence != tt.conf || d.Method != tt.method || d.Rule != RulePooled {
				t.Fatalf("winner %s, confidence %s, method %s, rule %s; want %s, %s, %s, %s", got, d.Confidence, d.Method, d.Rule, tt.want, tt.conf, tt.method, RulePooled)
			}
			if d.Valid != tt.valid || len(d.Agreed) != tt.agreed {
				t.Errorf("valid %d, agreed %d; want %d, %d", d.Valid, len(d.Agreed), tt.valid, tt.agreed)
			}
			if len(d.Members) != len(tt.agrees) {
				t.Fatalf("%d members, want %d", len(d.Members), len(tt.agrees))
			}
			for i, m := range d.Members {
				if m.Agrees != tt.agrees[i] {
					t.Errorf("member %s agrees=%v, want %v", m.Agent, m.Agrees, tt.agrees[i])
				}
			}
		})
	}
	// A tie holding no member's answer is a seeded, stable choice: X and Y
	// score 2/7 + 1/6 each; the members' answers A, B, C less.
	e := build(t, nil, abc...)
	pick := func() string {
		d := decideAll(t, e, append(append(pool(t, 0, 0, 0, "X*2 A*3"), pool(t, 1, 0, 0, "Y*2 B*3")...), pool(t, 2, 0, 0, "X*1 Y*1 C*2")...))
		return d.Winner.CSV + " by " + d.Method
	}
	a, b := pick(), pick()
	if a != b || !strings.HasSuffix(a, "ensemble_random_tie_break") || !strings.ContainsAny(a[2:3], "XY") {
		t.Errorf("tie: %q then %q; want the same X or Y by ensemble_random_tie_break", a, b)
	}
}

// TestWinnersRule: one vote per member's answer; all different falls back
// to pooled.
func TestWinnersRule(t *testing.T) {
	t.Parallel()
	abc := []*agent.Definition{def("a", 0), def("b", 0), def("c", 0)}
	e := build(t, map[string]string{OptRule: RuleWinners}, abc...)
	d, _ := e.Decide(context.Background(), ctxFor(t), 0, append(append(pool(t, 0, 0, 0, "1*8"),
		pool(t, 1, 0, 0, "1*1 2*3")...), pool(t, 2, 0, 0, "2*30")...))
	// Winners: a→1, b→2, c→2: 2 wins by two votes to one.
	if d.Winner.CSV != "a\n2\n" || d.Method != "ensemble_winners" {
		t.Errorf("winners: %s by %s", d.Winner.CSV, d.Method)
	}
	d, _ = e.Decide(context.Background(), ctxFor(t), 0, append(pool(t, 0, 0, 0, "1*2"), pool(t, 1, 0, 0, "2*1")...))
	if d.Method == "ensemble_winners" {
		t.Errorf("all winners differ, yet the winners rule decided: %s", d.Method)
	}
}

// TestMembersKeepTheirRounds: a member opening another round gets it
// (namespaced), the others' decisions wait in the store, and the final
// decision comes when all have decided.
func TestMembersKeepTheirRounds(t *testing.T) {
	t.Parallel()
	e := build(t, nil, def("a", 1), def("b", 0))
	c := ctxFor(t)
	all := append(pool(t, 0, 0, 0, "1*3"), pool(t, 1, 0, 0, "1*2")...)
	d, err := e.Decide(context.Background(), c, 0, all)
	if err != nil || d.Next == nil || d.Next.Expect != 1 || d.Next.Tasks[0].Kind != "a.k" || d.Next.Tasks[0].ID != "a/again" || d.Next.Tasks[0].Slots[0] != 50 {
		t.Fatalf("round 0: %+v (%v)", d, err)
	}
	if _, ok, _ := c.Store.Get(context.Background(), "ensemble/b"); !ok {
		t.Error("b's decision was not kept for the final round")
	}
	d, err = e.Decide(context.Background(), c, 1, append(all, &agent.Candidate{Round: 1, Index: 50, Status: agent.StatusOK, CSV: "a\n1\n"}))
	if err != nil || d.Next != nil || d.Winner == nil || len(d.Members) != 2 || !d.Members[0].Agrees || !d.Members[1].Agrees {
		t.Fatalf("round 1: %+v (%v)", d, err)
	}
	// Wrapping a member's task and unwrapping it gives it back.
	m := e.members[1]
	in := agent.Task{Kind: "k", ID: "x", Slots: []int{3}, Join: &agent.Join{Group: "g", Part: 1, Of: 2, Then: agent.Task{Kind: "k", ID: "y", Slots: []int{3}}}}
	got, back, err := e.unwrap(m.wrap(in))
	if err != nil || got != m || !reflect.DeepEqual(back, in) {
		t.Errorf("wrap/unwrap: %+v -> %+v (%v)", in, back, err)
	}
}

// TestSeamThroughTheSimulator runs the shipped members as one ensemble
// through the runtime's seam in process (agenttest.Run) against llmsim:
// each member's tasks run under its own namespace, the decision names
// every member with the pooled rule, and every call the simulator served
// is in the examples' ledgers.
func TestSeamThroughTheSimulator(t *testing.T) {
	t.Parallel()
	demo := agenttest.Demo(t).Only(t, "local001", "local002")
	sim, client := agenttest.Sim(t, llmsim.Config{Dataset: demo.Dataset, Seed: 1}, "")
	outs := agenttest.Run(t, Definition(reforce.Definition(), pexa.Definition(), raise.Definition()), demo, agenttest.Options{LLM: client,
		Agent: map[string]string{"reforce.votes": "2", "pexa.passes": "1", "raise.rounds": "1"}, Seed: 1})
	calls := 0
	for id, o := range outs {
		calls += o.Cost.Total().LLMCalls
		d := o.Decision
		if d.Winner == nil || d.Rule != RulePooled || len(d.Members) != 3 {
			t.Errorf("%s: decision %+v", id, d)
			continue
		}
		for i, name := range []string{"reforce", "pexa", "raise"} {
			if d.Members[i].Agent != name {
				t.Errorf("%s: member %d is %s, want %s", id, i, d.Members[i].Agent, name)
			}
		}
		t.Logf("%s: %d candidates, %s (%s)", id, len(o.Candidates), d.Method, d.Confidence)
	}
	if st := sim.Stats(); int64(calls) != st.Requests || st.Unknown != 0 {
		t.Errorf("%d calls in the ledgers, %d served, %d not recognised", calls, st.Requests, st.Unknown)
	}
}
