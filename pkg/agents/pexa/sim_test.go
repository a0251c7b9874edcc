package pexa_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/agents/pexa"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/runtime/local"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// meter counts what crosses the HTTP client: calls by role, the SQLs the
// test cases submit, and the most test-case calls in flight at once.
type meter struct {
	llm.Client
	mu       sync.Mutex
	calls    map[llm.Role]int
	sqls     int
	inflight int
	peak     int
	offered  map[string]bool
	// planner is what the planner was offered.
	planner map[string]bool
	// dropped is the probes_dropped of the pass records.
	dropped int
}

func (m *meter) Chat(ctx context.Context, req llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	m.calls[req.Role]++
	for _, t := range req.Tools {
		m.offered[t.Name] = true
		if req.Role == pexa.RolePlan {
			m.planner[t.Name] = true
		}
	}
	if req.Role == pexa.RoleTestcase {
		m.inflight++
		m.peak = max(m.peak, m.inflight)
	}
	m.mu.Unlock()
	resp, err := m.Client.Chat(ctx, req)
	m.mu.Lock()
	defer m.mu.Unlock()
	if req.Role == pexa.RoleTestcase {
		m.inflight--
		for _, c := range respCalls(resp) {
			var a struct {
				Queries []json.RawMessage `json:"queries"`
			}
			if c.Name == pexa.ToolExecuteSQL && json.Unmarshal([]byte(c.Arguments), &a) == nil {
				m.sqls += len(a.Queries)
			}
		}
	}
	return resp, err
}

func respCalls(r *llm.Response) []llm.ToolCall {
	if r == nil {
		return nil
	}
	return r.ToolCalls
}

// TestCallStructureThroughTheSimulator runs one pass per example through
// HTTP to llmsim set first-time-right (every probe succeeds at once, the
// proposer executes, verifies and answers): the pass makes exactly k + 7
// LLM calls and Σm + 1 warehouse queries (spec §1.10, §5.1); the probes of a
// batch are in flight together (measured at the client); and each ablation
// changes the structure as the paper describes it (Table 2, Table 4).
func TestCallStructureThroughTheSimulator(t *testing.T) {
	t.Parallel()
	ds, err := dataset.Load("../../../examples/demo", dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 3,
		Noise:   llmsim.Noise{Gold: 1, Fix: 1, ExploreRight: 1, Link: 1, ProposeBoost: 1, VerifyCall: 1, Verify: 1},
		Latency: llmsim.Latency{FirstToken: 40 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	client, err := llm.New(llm.Config{BaseURL: ts.URL + "/v1", APIKey: "x", Default: llm.ModelConfig{Name: "gpt-4o"}})
	if err != nil {
		t.Fatal(err)
	}
	set := &sqlite.Set{}
	t.Cleanup(func() { set.Close() })
	whs := &dataset.Warehouses{DS: ds, SQLite: set}
	for _, tt := range []struct {
		name  string
		opts  map[string]string
		check func(t *testing.T, m *meter, queries int)
	}{
		{"paper", nil, func(t *testing.T, m *meter, queries int) {
			k := m.calls[pexa.RoleTestcase]
			if k < 3 || m.calls[pexa.RolePlan] != 3 || m.calls[pexa.RolePropose] != 3 || m.calls[pexa.RoleVerify] != 1 || total(m) != k+7 {
				t.Errorf("calls %v: want plan 3, testcase k ≥ 3, propose 3, verify 1 = k+7", m.calls)
			}
			if queries != m.sqls+1 {
				t.Errorf("%d warehouse queries, want Σm+1 = %d", queries, m.sqls+1)
			}
			if m.peak < 2 {
				t.Errorf("at most %d test cases in flight at once: the batch did not run in parallel", m.peak)
			}
		}},
		{"sequential plan", map[string]string{pexa.OptSequentialPlan: "true"}, func(t *testing.T, m *meter, _ int) {
			// llmsim's Planner follows the prompt: one probe per turn,
			// each outcome read before the next (D-P22), none dropped.
			if m.peak != 1 || m.calls[pexa.RoleTestcase] < 2 || m.dropped != 0 {
				t.Errorf("sequential plan: %d test cases, %d in flight at once, %d probes dropped; want ≥ 2, 1 and 0",
					m.calls[pexa.RoleTestcase], m.peak, m.dropped)
			}
		}},
		{"single path", map[string]string{pexa.OptMaxSQLs: "1"}, func(t *testing.T, m *meter, queries int) {
			if k := m.calls[pexa.RoleTestcase]; queries != k+1 {
				t.Errorf("single path: %d queries for %d probes, want one each plus the proposal", queries, k)
			}
		}},
		{"two probes", map[string]string{pexa.OptMaxProbes: "2"}, func(t *testing.T, m *meter, _ int) {
			if m.calls[pexa.RoleTestcase] != 2 {
				t.Errorf("max 2 probes per plan: %d test cases", m.calls[pexa.RoleTestcase])
			}
		}},
		{"no verifier", map[string]string{pexa.OptNoVerifier: "true"}, func(t *testing.T, m *meter, _ int) {
			if m.calls[pexa.RoleVerify] != 0 || m.offered[pexa.ToolSemanticVerifier] || m.calls[pexa.RolePropose] != 2 {
				t.Errorf("no verifier: calls %v, verifier offered %v", m.calls, m.offered[pexa.ToolSemanticVerifier])
			}
		}},
		{"no proposer", map[string]string{pexa.OptNoProposer: "true"}, func(t *testing.T, m *meter, queries int) {
			// generate, execute_sql, semantic_verifier, finish: the
			// planner's own SQL runs once (D-P21).
			k := m.calls[pexa.RoleTestcase]
			if m.calls[pexa.RolePropose] != 0 || m.calls[pexa.RolePlan] != 4 || m.calls[pexa.RoleVerify] != 1 || total(m) != k+5 {
				t.Errorf("no proposer: calls %v, want plan 4, testcase k, verify 1 and no propose", m.calls)
			}
			if !m.planner[pexa.ToolExecuteSQL] || !m.planner[pexa.ToolSemanticVerifier] || !m.planner[pexa.ToolFinish] || m.planner[pexa.ToolProposeFinalSQL] {
				t.Errorf("the planner was offered %v", m.planner)
			}
			if queries != m.sqls+1 {
				t.Errorf("%d warehouse queries, want Σm+1 = %d", queries, m.sqls+1)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, id := range []string{"local001", "local007", "local030"} {
				opts := map[string]string{pexa.OptPasses: "1"}
				for k, v := range tt.opts {
					opts[k] = v
				}
				def := pexa.Definition()
				opts, err := def.CheckOptions(opts)
				if err != nil {
					t.Fatal(err)
				}
				m := &meter{Client: client, calls: map[llm.Role]int{}, offered: map[string]bool{}, planner: map[string]bool{}}
				ag, err := def.New(agent.Config{Options: opts, LLM: m})
				if err != nil {
					t.Fatal(err)
				}
				e, _ := ds.Example(id)
				out, err := local.Solve(context.Background(), local.Config{Agent: ag, Def: def, Dataset: ds, Warehouses: whs, Run: "t", Seed: 5}, e)
				if err != nil {
					t.Fatal(err)
				}
				if out.Decision.Winner == nil {
					t.Errorf("%s: no answer (%+v)", id, out.Candidates[0])
				}
				for _, c := range out.Candidates {
					var rec struct {
						Dropped int `json:"probes_dropped"`
					}
					if len(c.Payload) > 0 {
						if err := json.Unmarshal(c.Payload, &rec); err != nil {
							t.Fatalf("%s: pass record %s: %v", id, c.Payload, err)
						}
					}
					m.dropped += rec.Dropped
				}
				tot := out.Cost.Total()
				if tot.LLMCalls != total(m) {
					t.Errorf("%s: the ledger has %d calls, the client saw %d", id, tot.LLMCalls, total(m))
				}
				// llmsim writes the canonical shapes: nothing is re-asked.
				if tot.FormatReasks+tot.FormatLost+tot.FormatEnded+tot.VerdictsUnread != 0 {
					t.Errorf("%s: form counters %d/%d/%d/%d on canonical replies, want 0", id, tot.FormatReasks, tot.FormatLost, tot.FormatEnded, tot.VerdictsUnread)
				}
				t.Logf("%s: calls %v, sqls %d, queries %d, peak %d", id, m.calls, m.sqls, tot.Queries, m.peak)
				t.Run(id, func(t *testing.T) { tt.check(t, m, tot.Queries) })
			}
		})
	}
}

func total(m *meter) int {
	n := 0
	for _, c := range m.calls {
		n += c
	}
	return n
}

// TestChooseFinalMarker: the simulator recognises the agent's choose_final
// question by a marker that must stay in the agent's prompt.
func TestChooseFinalMarker(t *testing.T) {
	if p := pexa.ChooseFinalPrompt([]int{1, 3}); !strings.Contains(p, llmsim.MarkerPExAChooseFinal) {
		t.Fatalf("ChooseFinalPrompt %q lacks the simulator's marker %q", p, llmsim.MarkerPExAChooseFinal)
	}
}
