package ensemble

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// fixed is a member that decides its candidates by plain majority; it
// never opens another round unless more is set.
type fixed struct{ more bool }

func (fixed) Start(context.Context, *agent.Context) (*agent.Dispatch, error) {
	return &agent.Dispatch{}, nil
}
func (fixed) Execute(context.Context, *agent.Context, agent.Task) (*agent.Outcome, error) {
	return &agent.Outcome{}, nil
}
func (f fixed) Decide(_ context.Context, _ *agent.Context, round int, cands []*agent.Candidate) (*agent.Decision, error) {
	if f.more && round == 0 {
		t := agent.Task{Kind: "k", ID: "again", Round: 1, Slots: []int{50}}
		return &agent.Decision{Next: &agent.Dispatch{Round: 1, Expect: 1, Tasks: []agent.Task{t}}}, nil
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

func def(name string, more bool) *agent.Definition {
	return &agent.Definition{Name: name, Kinds: []agent.Kind{{Name: "k", Pool: agent.Generator}},
		New: func(agent.Config) (agent.Agent, error) { return fixed{more: more}, nil }}
}

type memStore struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *memStore) Once(ctx context.Context, name string, fn func(context.Context) (string, error)) (string, error) {
	return fn(ctx)
}
func (s *memStore) Get(_ context.Context, name string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[name]
	return v, ok, nil
}
func (s *memStore) Set(_ context.Context, name, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[name] = value
	return nil
}
func (s *memStore) PutBlob(context.Context, []byte) (string, error)     { return "", nil }
func (s *memStore) GetBlob(context.Context, string) ([]byte, error)     { return nil, nil }
func (s *memStore) Parts(context.Context, string) ([]agent.Part, error) { return nil, nil }
func ctxFor() *agent.Context {
	return &agent.Context{Run: "t", Seed: 3, Example: &dataset.Example{ID: "e1"}, Store: &memStore{m: map[string]string{}},
		Ledger: cost.Ledger{}, Log: zap.NewNop()}
}

// cands builds a member's candidates: n answering answer.
func cands(member, from int, answers map[string]int) []*agent.Candidate {
	var out []*agent.Candidate
	i := from
	for ans, n := range answers {
		for range n {
			out = append(out, &agent.Candidate{Index: member*slotSpan + i, Status: agent.StatusOK, SQL: "SELECT " + ans, CSV: "a\n" + ans + "\n", Rows: 1})
			i++
		}
	}
	return out
}

func build(t *testing.T, opts map[string]string, defs ...*agent.Definition) *ensemble {
	t.Helper()
	d := Definition(defs...)
	o, err := d.CheckOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	e, err := d.New(agent.Config{Options: o})
	if err != nil {
		t.Fatal(err)
	}
	return e.(*ensemble)
}

// TestPooledRule: a member's pool size buys no votes; ties go to the
// heaviest member's answer; a member with no candidates does not block;
// high confidence needs two agents in the winning cluster.
func TestPooledRule(t *testing.T) {
	t.Parallel()
	abc := []*agent.Definition{def("a", false), def("b", false), def("c", false)}
	for _, tt := range []struct {
		name    string
		opts    map[string]string
		members [][]*agent.Candidate
		want    string
		conf    string
		agrees  []bool
	}{
		{"32 cannot outvote two that agree", nil, [][]*agent.Candidate{
			cands(0, 0, map[string]int{"1": 8}), cands(1, 0, map[string]int{"1": 4}), cands(2, 0, map[string]int{"2": 32})},
			"1", "high", []bool{true, true, false}},
		{"shares, not counts", nil, [][]*agent.Candidate{
			cands(0, 0, map[string]int{"1": 5, "2": 3}), cands(1, 0, map[string]int{"2": 4}), cands(2, 0, map[string]int{"1": 30, "3": 2})},
			// 1: 5/8 + 30/32 = 1.56; 2: 3/8 + 1 = 1.375
			"1", "high", []bool{true, false, true}},
		{"a tie goes to the heaviest member", map[string]string{OptWeights: "b=2"}, [][]*agent.Candidate{
			cands(0, 0, map[string]int{"1": 8}), cands(1, 0, map[string]int{"2": 4}), nil},
			"2", "low", []bool{false, true, false}},
		{"a member missing", nil, [][]*agent.Candidate{
			cands(0, 0, map[string]int{"1": 2, "2": 6}), cands(1, 0, map[string]int{"2": 1}), nil},
			"2", "high", []bool{true, true, false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := build(t, tt.opts, abc...)
			var all []*agent.Candidate
			for _, m := range tt.members {
				all = append(all, m...)
			}
			d, err := e.Decide(context.Background(), ctxFor(), 0, all)
			if err != nil {
				t.Fatal(err)
			}
			if d.Winner == nil || d.Winner.CSV != "a\n"+tt.want+"\n" || d.Confidence != tt.conf || d.Rule != RulePooled {
				t.Fatalf("winner %+v, confidence %s, method %s; want %s, %s", d.Winner, d.Confidence, d.Method, tt.want, tt.conf)
			}
			for i, m := range d.Members {
				if m.Agrees != tt.agrees[i] {
					t.Errorf("member %s agrees=%v, want %v", m.Agent, m.Agrees, tt.agrees[i])
				}
			}
		})
	}
	// An even tie with equal weights is a seeded, stable choice.
	e := build(t, nil, abc[:2]...)
	pick := func() string {
		d, _ := e.Decide(context.Background(), ctxFor(), 0, append(cands(0, 0, map[string]int{"1": 4}), cands(1, 0, map[string]int{"2": 4})...))
		return d.Winner.CSV + d.Method
	}
	if a, b := pick(), pick(); a != b {
		t.Errorf("tie broken differently for the same seed: %s, %s", a, b)
	}
}

// TestWinnersRule: one vote per member's answer; all different falls back
// to pooled.
func TestWinnersRule(t *testing.T) {
	t.Parallel()
	abc := []*agent.Definition{def("a", false), def("b", false), def("c", false)}
	e := build(t, map[string]string{OptRule: RuleWinners}, abc...)
	d, _ := e.Decide(context.Background(), ctxFor(), 0, append(append(cands(0, 0, map[string]int{"1": 8}),
		cands(1, 0, map[string]int{"1": 1, "2": 3})...), cands(2, 0, map[string]int{"2": 30})...))
	// Winners: a→1, b→2, c→2: 2 wins by two votes to one.
	if d.Winner.CSV != "a\n2\n" || d.Method != "ensemble_winners" {
		t.Errorf("winners: %s by %s", d.Winner.CSV, d.Method)
	}
	d, _ = e.Decide(context.Background(), ctxFor(), 0, append(cands(0, 0, map[string]int{"1": 2}), cands(1, 0, map[string]int{"2": 1})...))
	if d.Method == "ensemble_winners" {
		t.Errorf("all winners differ, yet the winners rule decided: %s", d.Method)
	}
}

// TestMembersKeepTheirRounds: a member opening another round gets it
// (namespaced), the others' decisions wait in the store, and the final
// decision comes when all have decided.
func TestMembersKeepTheirRounds(t *testing.T) {
	t.Parallel()
	e := build(t, nil, def("a", true), def("b", false))
	c := ctxFor()
	all := append(cands(0, 0, map[string]int{"1": 3}), cands(1, 0, map[string]int{"1": 2})...)
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
