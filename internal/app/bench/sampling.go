package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/agents/sampling"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// SamplingRow is one agent's run under one sampling policy.
type SamplingRow struct {
	Agent            string  `json:"agent"`
	Sampling         string  `json:"sampling"`
	Examples         int     `json:"examples"`
	EX               float64 `json:"ex"`
	EXAtK            float64 `json:"ex_at_k"`
	CallsPerExample  float64 `json:"llm_calls_per_example"`
	TokensPerExample float64 `json:"tokens_per_example"`
	Wall             float64 `json:"wall_seconds"`
	QuotaRatio       float64 `json:"quota_ratio"`
	// StoppedEarly counts the examples adaptive sampling settled before
	// drawing every candidate (an ensemble's: one member or more did).
	StoppedEarly   int `json:"stopped_early"`
	FailedExamples int `json:"failed_examples"`
	// AnswersChanged counts the examples whose final SQL (normalized)
	// differs from the agent's first policy's run (the one-sided ones
	// included); Changed names them. Compared per example, not by EX.
	AnswersChanged int      `json:"answers_changed"`
	Changed        []string `json:"changed,omitempty"`
}

// SamplingComparison is the sampling policies compared per agent on one
// scenario (same dataset, seed, difficulty mix and quota).
type SamplingComparison struct {
	Scenario Scenario      `json:"scenario"`
	Rows     []SamplingRow `json:"rows"`
	Runs     []*Report     `json:"-"`
}

// CompareSampling runs the scenario once per agent and policy (no
// scaling runs), the policy set as the agent's sampling option (a
// composite agent's members' own, MEMBER.sampling, when it declares
// none). Without a difficulty mix it runs the default one: on questions
// of one uniform skill agreement would say little.
func CompareSampling(ctx context.Context, sc Scenario, agents, policies []string, work string, progress io.Writer) (*SamplingComparison, error) {
	if sc.Difficulty == "" {
		sc.Difficulty = llmsim.DefaultDifficulty().String()
	}
	c := &SamplingComparison{Scenario: sc}
	// Every agent and policy is checked before the first run starts.
	for _, name := range agents {
		for _, p := range policies {
			if err := setSampling(strings.TrimSpace(name), map[string]string{}, strings.TrimSpace(p)); err != nil {
				return nil, err
			}
		}
	}
	for _, name := range agents {
		var first map[string]string
		for i, p := range policies {
			s := sc
			s.Agent, s.Scaling = strings.TrimSpace(name), nil
			s.AgentOptions = maps.Clone(sc.AgentOptions)
			if s.AgentOptions == nil {
				s.AgentOptions = map[string]string{}
			}
			if err := setSampling(s.agent(), s.AgentOptions, strings.TrimSpace(p)); err != nil {
				return nil, err
			}
			if err := s.Validate(); err != nil {
				return nil, err
			}
			fmt.Fprintf(progress, "bench %s: agent %s, %s sampling\n", sc.Name, s.agent(), p)
			r, err := Run(ctx, s, filepath.Join(work, s.agent()+"-"+p), progress)
			if err != nil {
				return nil, fmt.Errorf("agent %s, %s sampling: %w", s.agent(), p, err)
			}
			c.Runs = append(c.Runs, r)
			answers, err := finalAnswers(r)
			if err != nil {
				return nil, fmt.Errorf("agent %s, %s sampling: %w", s.agent(), p, err)
			}
			if i == 0 {
				first = answers
			}
			row := SamplingRow{Agent: s.agent(), Sampling: p, Examples: r.Examples, EX: r.EX, EXAtK: r.EXAtK,
				CallsPerExample: r.CallsPerExample, TokensPerExample: r.TokensPerExample, Wall: r.Wall,
				QuotaRatio: r.QuotaRatio, FailedExamples: r.FailedExamples}
			for _, e := range r.Run.Examples {
				// An ensemble's members sample by their own policies:
				// the example stopped early when one of them did.
				stopped := e.StoppedAfter > 0
				for _, m := range e.Members {
					stopped = stopped || m.StoppedAfter > 0
				}
				if stopped {
					row.StoppedEarly++
				}
			}
			row.Changed = changedAnswers(answers, first)
			row.AnswersChanged = len(row.Changed)
			c.Rows = append(c.Rows, row)
		}
	}
	return c, nil
}

// changedAnswers are the examples answered otherwise in got than in want
// (one side unanswered included), sorted.
func changedAnswers(got, want map[string]string) []string {
	var out []string
	for id, sql := range got {
		if w, ok := want[id]; !ok || w != sql {
			out = append(out, id)
		}
	}
	for id := range want {
		if _, ok := got[id]; !ok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// setSampling sets the policy on agent's options: its own sampling
// option, else each member's.
func setSampling(agent string, opts map[string]string, policy string) error {
	if policy != sampling.Fixed && policy != sampling.Adaptive {
		return fmt.Errorf("--sampling: %q is not a policy (fixed, adaptive)", policy)
	}
	def, err := agents.Builtin().Lookup(agent)
	if err != nil {
		return err
	}
	set := false
	for _, o := range def.Options {
		if o.Name == sampling.OptSampling || strings.HasSuffix(o.Name, "."+sampling.OptSampling) {
			opts[o.Name], set = policy, true
		}
	}
	if !set {
		return fmt.Errorf("agent %s has no sampling option", agent)
	}
	return nil
}
