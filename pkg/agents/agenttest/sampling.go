package agenttest

import (
	"maps"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/sampling"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/runtime/local"
)

// PolicyRun is one run of an agent over a fixture under one sampling
// policy.
type PolicyRun struct {
	Outcomes map[string]*local.Outcome
	// Calls are the LLM calls the run's ledgers record; llmsim served
	// exactly these (checked).
	Calls int64
}

// SamplingConfig is what RunPolicies runs an agent with.
type SamplingConfig struct {
	// Sim configures each run's llmsim; its Dataset is the fixture's.
	Sim llmsim.Config
	// Model is the client's model, as Sim takes it.
	Model string
	// Run are the runs' options; each run sets the sampling option in
	// Run.Agent to its policy.
	Run Options
}

// RunPolicies runs def over the fixture twice, under fixed and then
// adaptive sampling, each against its own llmsim so that the calls it
// serves are the run's alone. A run in which llmsim served other than the
// calls its ledgers record fails the test: a released slot's call would
// be served and not recorded.
func RunPolicies(t testing.TB, def *agent.Definition, f *Fixture, cfg SamplingConfig) (fixed, adaptive PolicyRun) {
	t.Helper()
	run := func(policy string) PolicyRun {
		sc := cfg.Sim
		sc.Dataset = f.Dataset
		sim, client := Sim(t, sc, cfg.Model)
		opt := cfg.Run
		opt.LLM = client
		opt.Agent = maps.Clone(cfg.Run.Agent)
		if opt.Agent == nil {
			opt.Agent = map[string]string{}
		}
		opt.Agent[sampling.OptSampling] = policy
		r := PolicyRun{Outcomes: Run(t, def, f, opt)}
		for _, o := range r.Outcomes {
			r.Calls += int64(o.Cost.Total().LLMCalls)
		}
		if st := sim.Stats(); st.Requests != r.Calls {
			t.Errorf("%s: llmsim served %d requests, the ledgers record %d", policy, st.Requests, r.Calls)
		}
		return r
	}
	return run(sampling.Fixed), run(sampling.Adaptive)
}

// ComparePolicies checks what holds of every agent's fixed and adaptive
// runs: the fixed run records no verdict and the adaptive run one on
// every example, some example stopped early (else the waves were never
// tested), and the adaptive run made fewer LLM calls. It calls each with
// every example that has its verdict, for the agent's own checks, and
// returns how many stopped early.
func ComparePolicies(t testing.TB, fixed, adaptive PolicyRun, each func(id string, f, a *local.Outcome)) (stopped int) {
	t.Helper()
	for id, a := range adaptive.Outcomes {
		f := fixed.Outcomes[id]
		if f.Decision.Sampling != nil {
			t.Errorf("%s: fixed sampling recorded a verdict %+v", id, f.Decision.Sampling)
		}
		if a.Decision.Sampling == nil {
			t.Errorf("%s: adaptive sampling recorded no verdict", id)
			continue
		}
		if a.Decision.Sampling.StoppedAfter > 0 {
			stopped++
		}
		each(id, f, a)
	}
	t.Logf("fixed: %d LLM calls; adaptive: %d (%d of %d examples stopped early)", fixed.Calls, adaptive.Calls, stopped, len(adaptive.Outcomes))
	if stopped == 0 {
		t.Fatal("no example stopped early: the waves were never tested")
	}
	if adaptive.Calls >= fixed.Calls {
		t.Errorf("adaptive sampling made %d LLM calls, fixed %d", adaptive.Calls, fixed.Calls)
	}
	return stopped
}

// SameAnswer fails unless the adaptive outcome a answers as the fixed
// outcome f (the same winner, or none in both): sampling's default rule
// (sampling.Sure) stops only where the undrawn candidates cannot change
// the vote.
func SameAnswer(t testing.TB, id string, f, a *local.Outcome) {
	t.Helper()
	answer := func(o *local.Outcome) string {
		if o.Decision.Winner == nil {
			return "no answer"
		}
		return o.Decision.Winner.SQL
	}
	if fa, aa := answer(f), answer(a); fa != aa {
		t.Errorf("%s: adaptive sampling answered %q (stopped after %d), fixed sampling %q", id, aa, a.Decision.Sampling.StoppedAfter, fa)
	}
}

// ByIndex is the candidate with index i, or nil.
func ByIndex(cands []*agent.Candidate, i int) *agent.Candidate {
	for _, c := range cands {
		if c.Index == i {
			return c
		}
	}
	return nil
}
