package bench

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"path/filepath"
	"strings"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// Comparison is several agents run one after another on the same dataset,
// seed and quota.
type Comparison struct {
	Scenario Scenario   `json:"scenario"`
	Agents   []AgentRow `json:"agents"`
	Runs     []*Report  `json:"runs"`
}

// AgentRow is one agent's line of the comparison.
type AgentRow struct {
	Agent            string  `json:"agent"`
	Examples         int     `json:"examples"`
	EX               float64 `json:"ex"`
	EXAtK            float64 `json:"ex_at_k"`
	K                int     `json:"k"`
	CallsPerExample  float64 `json:"llm_calls_per_example"`
	TokensPerExample float64 `json:"tokens_per_example"`
	QueriesPerEx     float64 `json:"warehouse_queries_per_example"`
	Wall             float64 `json:"wall_seconds"`
	QuotaRatio       float64 `json:"quota_ratio"`
	RateLimited      int64   `json:"rate_limited_responses"`
	LatencyP50       float64 `json:"latency_p50_seconds"`
	LatencyP95       float64 `json:"latency_p95_seconds"`
	FailedExamples   int     `json:"failed_examples"`
	// Members are an ensemble's members, judged against its answers.
	Members []outputs.MemberStats `json:"members,omitempty"`
}

// Compare runs the scenario once per agent (no scaling runs).
func Compare(ctx context.Context, sc Scenario, agentNames []string, work string, progress io.Writer) (*Comparison, error) {
	c := &Comparison{Scenario: sc}
	for _, name := range agentNames {
		s := sc
		s.Agent, s.Scaling = strings.TrimSpace(name), nil
		if err := s.Validate(); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "bench %s: agent %s\n", sc.Name, s.Agent)
		r, err := Run(ctx, s, filepath.Join(work, s.Agent), progress)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", s.Agent, err)
		}
		c.Runs = append(c.Runs, r)
		row := AgentRow{Agent: s.Agent, Examples: r.Examples, EX: r.EX, EXAtK: r.EXAtK, K: r.Run.Totals.KOrVotes(sc.Votes),
			CallsPerExample: r.CallsPerExample, TokensPerExample: r.TokensPerExample, QueriesPerEx: r.QueriesPerEx, Wall: r.Wall,
			QuotaRatio: r.QuotaRatio, RateLimited: r.RateLimited, LatencyP50: r.LatencyP50, LatencyP95: r.LatencyP95,
			FailedExamples: r.FailedExamples, Members: outputs.Members(r.Run)}
		c.Agents = append(c.Agents, row)
	}
	return c, nil
}

// CompareHTML renders the comparison ahead of the last run's own report.
func CompareHTML(w io.Writer, c *Comparison) error {
	if len(c.Runs) == 0 {
		return fmt.Errorf("bench comparison: no run")
	}
	var b strings.Builder
	b.WriteString(`<p class="note">Every accuracy figure here is the <b>simulated LLM's</b> (llmsim answers from gold SQL with noise), not a model's; compare the agents' structure and cost, not their EX.</p>`)
	b.WriteString(`<table id="comparison-table"><tr><th>agent</th><th>EX (simulated)</th><th>EX@k (simulated)</th><th>LLM calls / example</th><th>tokens / example</th><th>warehouse queries / example</th><th>wall</th><th>quota ratio</th><th>429s</th><th>latency p50 / p95</th><th>failed</th></tr>`)
	var labels []string
	var ex, calls []float64
	for _, a := range c.Agents {
		fmt.Fprintf(&b, `<tr class="agent-row"><td>%s</td><td>%.1f%%</td><td>%.1f%% (k=%d)</td><td>%.1f</td><td>%.0f</td><td>%.1f</td><td>%.1f s</td><td>%.3f</td><td>%d</td><td>%.1f s / %.1f s</td><td>%d</td></tr>`,
			template.HTMLEscapeString(a.Agent), 100*a.EX, 100*a.EXAtK, a.K, a.CallsPerExample, a.TokensPerExample, a.QueriesPerEx, a.Wall,
			a.QuotaRatio, a.RateLimited, a.LatencyP50, a.LatencyP95, a.FailedExamples)
		labels = append(labels, a.Agent)
		ex, calls = append(ex, 100*a.EX), append(calls, a.CallsPerExample)
	}
	b.WriteString(`</table>`)
	for _, a := range c.Agents {
		if len(a.Members) == 0 {
			continue
		}
		fmt.Fprintf(&b, `<h3>%s: its members against its answers</h3><table><tr><th>member</th><th>answered</th><th>agrees with the ensemble</th><th>right when the ensemble was wrong</th><th>wrong when the ensemble was right</th></tr>`,
			template.HTMLEscapeString(a.Agent))
		for _, m := range a.Members {
			fmt.Fprintf(&b, `<tr><td>%s</td><td>%d of %d</td><td>%d</td><td>%d</td><td>%d</td></tr>`, template.HTMLEscapeString(m.Agent),
				m.Answered, m.Examples, m.Agrees, m.RightWhenEnsembleWrong, m.WrongWhenEnsembleRight)
		}
		b.WriteString(`</table>`)
	}
	b.WriteString(string(outputs.Bars("EX per agent (simulated LLM)", "%", labels, ex)))
	b.WriteString(string(outputs.Bars("LLM calls per example", "", labels, calls)))
	last := c.Runs[len(c.Runs)-1]
	return outputs.WriteHTML(w, last.Run, &outputs.Extra{Title: "comparison of " + strings.Join(labels, ", ") + "; the run below is " + last.Scenario.agent() + "'s",
		Lead: []outputs.Section{{ID: "comparison", Heading: "Agents compared (same dataset, seed and quota)", HTML: template.HTML(b.String())}}})
}
