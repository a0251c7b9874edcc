package pexa_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/llmsim"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/pexa"
	"github.com/quorumsql/quorum/pkg/llm"
)

// meter records what crosses the HTTP client (agenttest.Record) and
// measures the most test-case calls in flight at once.
type meter struct {
	*agenttest.Model
	mu       sync.Mutex
	inflight int
	peak     int
	// dropped is the probes_dropped of the pass records.
	dropped int
}

func (m *meter) Chat(ctx context.Context, req llm.Request) (*llm.Response, error) {
	if req.Role == pexa.RoleTestcase {
		m.mu.Lock()
		m.inflight++
		m.peak = max(m.peak, m.inflight)
		m.mu.Unlock()
		defer func() {
			m.mu.Lock()
			m.inflight--
			m.mu.Unlock()
		}()
	}
	return m.Model.Chat(ctx, req)
}

// calls counts the calls by role.
func (m *meter) calls() map[llm.Role]int {
	out := map[llm.Role]int{}
	for _, r := range m.Requests() {
		out[r.Role]++
	}
	return out
}

// offered reports whether a tool was offered to role ("" for any).
func (m *meter) offered(role llm.Role, tool string) bool {
	for _, r := range m.Requests() {
		for _, t := range r.Tools {
			if t.Name == tool && (role == "" || r.Role == role) {
				return true
			}
		}
	}
	return false
}

// sqls counts the SQLs the test cases submitted.
func (m *meter) sqls() int {
	n := 0
	resps := m.Responses()
	for i, r := range m.Requests() {
		if r.Role != pexa.RoleTestcase || resps[i] == nil {
			continue
		}
		for _, c := range resps[i].ToolCalls {
			var a struct {
				Queries []json.RawMessage `json:"queries"`
			}
			if c.Name == pexa.ToolExecuteSQL && json.Unmarshal([]byte(c.Arguments), &a) == nil {
				n += len(a.Queries)
			}
		}
	}
	return n
}

// TestCallStructureThroughTheSimulator runs one pass per example through
// HTTP to llmsim set first-time-right (every probe succeeds at once, the
// proposer executes, verifies and answers): the pass makes exactly k + 7
// LLM calls and Σm + 1 warehouse queries (spec §1.10, §5.1); the probes of a
// batch are in flight together (measured at the client); and each ablation
// changes the structure as the paper describes it (Table 2, Table 4).
func TestCallStructureThroughTheSimulator(t *testing.T) {
	t.Parallel()
	demo := agenttest.Demo(t)
	_, client := agenttest.Sim(t, llmsim.Config{Dataset: demo.Dataset, Seed: 3,
		Noise:   llmsim.Noise{Gold: 1, Fix: 1, ExploreRight: 1, Link: 1, ProposeBoost: 1, VerifyCall: 1, Verify: 1},
		Latency: llmsim.Latency{FirstToken: 40 * time.Millisecond}}, "")
	for _, tt := range []struct {
		name  string
		opts  map[string]string
		check func(t *testing.T, m *meter, queries int)
	}{
		{"paper", nil, func(t *testing.T, m *meter, queries int) {
			k := m.CallsOf(pexa.RoleTestcase)
			if k < 3 || m.CallsOf(pexa.RolePlan) != 3 || m.CallsOf(pexa.RolePropose) != 3 || m.CallsOf(pexa.RoleVerify) != 1 || m.Calls() != k+7 {
				t.Errorf("calls %v: want plan 3, testcase k ≥ 3, propose 3, verify 1 = k+7", m.calls())
			}
			if queries != m.sqls()+1 {
				t.Errorf("%d warehouse queries, want Σm+1 = %d", queries, m.sqls()+1)
			}
			if m.peak < 2 {
				t.Errorf("at most %d test cases in flight at once: the batch did not run in parallel", m.peak)
			}
		}},
		{"sequential plan", map[string]string{pexa.OptSequentialPlan: "true"}, func(t *testing.T, m *meter, _ int) {
			// llmsim's Planner follows the prompt: one probe per turn,
			// each outcome read before the next (D-P22), none dropped.
			if m.peak != 1 || m.CallsOf(pexa.RoleTestcase) < 2 || m.dropped != 0 {
				t.Errorf("sequential plan: %d test cases, %d in flight at once, %d probes dropped; want ≥ 2, 1 and 0",
					m.CallsOf(pexa.RoleTestcase), m.peak, m.dropped)
			}
		}},
		{"single path", map[string]string{pexa.OptMaxSQLs: "1"}, func(t *testing.T, m *meter, queries int) {
			if k := m.CallsOf(pexa.RoleTestcase); queries != k+1 {
				t.Errorf("single path: %d queries for %d probes, want one each plus the proposal", queries, k)
			}
		}},
		{"two probes", map[string]string{pexa.OptMaxProbes: "2"}, func(t *testing.T, m *meter, _ int) {
			if m.CallsOf(pexa.RoleTestcase) != 2 {
				t.Errorf("max 2 probes per plan: %d test cases", m.CallsOf(pexa.RoleTestcase))
			}
		}},
		{"no verifier", map[string]string{pexa.OptNoVerifier: "true"}, func(t *testing.T, m *meter, _ int) {
			if m.CallsOf(pexa.RoleVerify) != 0 || m.offered("", pexa.ToolSemanticVerifier) || m.CallsOf(pexa.RolePropose) != 2 {
				t.Errorf("no verifier: calls %v, verifier offered %v", m.calls(), m.offered("", pexa.ToolSemanticVerifier))
			}
		}},
		{"no proposer", map[string]string{pexa.OptNoProposer: "true"}, func(t *testing.T, m *meter, queries int) {
			// generate, execute_sql, semantic_verifier, finish: the
			// planner's own SQL runs once (D-P21).
			k := m.CallsOf(pexa.RoleTestcase)
			if m.CallsOf(pexa.RolePropose) != 0 || m.CallsOf(pexa.RolePlan) != 4 || m.CallsOf(pexa.RoleVerify) != 1 || m.Calls() != k+5 {
				t.Errorf("no proposer: calls %v, want plan 4, testcase k, verify 1 and no propose", m.calls())
			}
			if !m.offered(pexa.RolePlan, pexa.ToolExecuteSQL) || !m.offered(pexa.RolePlan, pexa.ToolSemanticVerifier) || !m.offered(pexa.RolePlan, pexa.ToolFinish) ||
				m.offered(pexa.RolePlan, pexa.ToolProposeFinalSQL) {
				t.Errorf("the planner was offered %v", m.Request(0).Tools)
			}
			if queries != m.sqls()+1 {
				t.Errorf("%d warehouse queries, want Σm+1 = %d", queries, m.sqls()+1)
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
				m := &meter{Model: agenttest.Record(client)}
				out := agenttest.Run(t, pexa.Definition(), demo.Only(t, id), agenttest.Options{LLM: m, Agent: opts, Seed: 5})[id]
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
				if tot.LLMCalls != m.Calls() {
					t.Errorf("%s: the ledger has %d calls, the client saw %d", id, tot.LLMCalls, m.Calls())
				}
				// llmsim writes the canonical shapes: nothing is re-asked.
				if tot.FormatReasks+tot.FormatLost+tot.FormatEnded+tot.VerdictsUnread != 0 {
					t.Errorf("%s: form counters %d/%d/%d/%d on canonical replies, want 0", id, tot.FormatReasks, tot.FormatLost, tot.FormatEnded, tot.VerdictsUnread)
				}
				t.Logf("%s: calls %v, sqls %d, queries %d, peak %d", id, m.calls(), m.sqls(), tot.Queries, m.peak)
				t.Run(id, func(t *testing.T) { tt.check(t, m, tot.Queries) })
			}
		})
	}
}

// TestChooseFinalMarker: the simulator recognises the agent's choose_final
// question by a marker that must stay in the agent's prompt.
func TestChooseFinalMarker(t *testing.T) {
	if p := pexa.ChooseFinalPrompt([]int{1, 3}); !strings.Contains(p, llmsim.MarkerPExAChooseFinal) {
		t.Fatalf("ChooseFinalPrompt %q lacks the simulator's marker %q", p, llmsim.MarkerPExAChooseFinal)
	}
}
