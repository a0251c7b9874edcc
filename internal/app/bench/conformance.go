package bench

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/quorumsql/quorum/internal/llmsim"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// MaxDeltaPoints is the conformance goal: under every persona an agent's
// simulated EX stays within this many points of its canonical EX.
const MaxDeltaPoints = 2.0

// Conformance is every agent run under every persona of the simulator on
// the same dataset and seed: whether the agents read what real models
// write (llmsim's personas reproduce their forms) as well as llmsim's
// canonical replies.
type Conformance struct {
	Scenario Scenario `json:"scenario"`
	Agents   []string `json:"agents"`
	Personas []string `json:"personas"`
	// Rows are agent × persona, personas in the order given, canonical
	// first.
	Rows []ConformanceRow `json:"rows"`
	// Pass: no candidate lost to format and every delta within
	// MaxDeltaPoints.
	Pass           bool      `json:"pass"`
	MaxDeltaPoints float64   `json:"max_delta_points"`
	Runs           []*Report `json:"-"`
}

// ConformanceRow is one agent under one persona.
type ConformanceRow struct {
	Agent    string `json:"agent"`
	Persona  string `json:"persona"`
	Examples int    `json:"examples"`
	// EX is the simulated LLM's; DeltaPoints is EX minus the agent's
	// canonical EX, in points.
	EX          float64 `json:"ex"`
	DeltaPoints float64 `json:"ex_delta_points"`
	// What the replies' form cost (pkg/cost's format counters summed over
	// the run's examples).
	CandidatesLost int `json:"candidates_lost_to_format"`
	FormatReasks   int `json:"format_reasks"`
	EndedEarly     int `json:"ended_early"`
	VerdictsUnread int `json:"verdicts_unread"`
	// LLMErrors are calls that failed after their retries (an o-series
	// model refusing temperature shows here).
	LLMErrors       int     `json:"llm_errors"`
	CallsPerExample float64 `json:"llm_calls_per_example"`
	FailedExamples  int     `json:"failed_examples"`
	Pass            bool    `json:"pass"`
}

// Conform runs sc once per agent per persona (no scaling runs), canonical
// first so the others' deltas have their baseline.
func Conform(ctx context.Context, sc Scenario, agentNames, personas []string, work string, progress io.Writer) (*Conformance, error) {
	ps := []string{llmsim.PersonaCanonical}
	for _, p := range personas {
		p = strings.TrimSpace(p)
		if p == "" || p == llmsim.PersonaCanonical {
			continue
		}
		if llmsim.PersonaDescription(p) == "" {
			return nil, fmt.Errorf("bench: persona %q (--personas): unknown; the personas are %s", p, strings.Join(llmsim.PersonaNames(), ", "))
		}
		ps = append(ps, p)
	}
	if len(agentNames) == 0 {
		agentNames = []string{sc.agent()}
	}
	c := &Conformance{Scenario: sc, Agents: agentNames, Personas: ps, Pass: true, MaxDeltaPoints: MaxDeltaPoints}
	canonical := map[string]float64{}
	for _, p := range ps {
		s := sc
		s.Persona = p
		cmp, err := Compare(ctx, s, agentNames, filepath.Join(work, p), progress)
		if err != nil {
			return nil, fmt.Errorf("persona %s: %w", p, err)
		}
		for i, r := range cmp.Runs {
			row := conformanceRow(cmp.Agents[i].Agent, p, r)
			if p == llmsim.PersonaCanonical {
				canonical[row.Agent] = row.EX
			}
			row.DeltaPoints = 100 * (row.EX - canonical[row.Agent])
			row.Pass = row.CandidatesLost == 0 && math.Abs(row.DeltaPoints) <= MaxDeltaPoints+1e-9
			c.Pass = c.Pass && row.Pass
			c.Rows = append(c.Rows, row)
			c.Runs = append(c.Runs, r)
		}
	}
	return c, nil
}

func conformanceRow(agent, persona string, r *Report) ConformanceRow {
	row := ConformanceRow{Agent: agent, Persona: persona, Examples: r.Examples, EX: r.EX,
		CallsPerExample: r.CallsPerExample, FailedExamples: r.FailedExamples}
	if r.Run == nil {
		return row
	}
	for _, e := range r.Run.Examples {
		row.CandidatesLost += e.Cost.FormatLost
		row.FormatReasks += e.Cost.FormatReasks
		row.EndedEarly += e.Cost.FormatEnded
		row.VerdictsUnread += e.Cost.VerdictsUnread
		row.LLMErrors += e.Cost.LLMErrors
	}
	return row
}

// ConformanceHTML renders the table ahead of the last run's own report.
func ConformanceHTML(w io.Writer, c *Conformance) error {
	if len(c.Runs) == 0 {
		return fmt.Errorf("bench conformance: no run")
	}
	var b strings.Builder
	b.WriteString(`<p class="note">Every figure here comes from the <b>simulated LLM</b> (llmsim) speaking as each persona: the forms are real models', the answers are the simulator's. It shows whether an agent reads what real models write, not how accurate a real model is.</p>`)
	b.WriteString(`<table id="conformance-table"><tr><th>agent</th><th>persona</th><th>EX (simulated)</th><th>Δ vs canonical</th><th>candidates lost to format</th><th>format re-asks</th><th>ended early</th><th>verdicts unread</th><th>LLM errors</th><th>calls / example</th><th>goal</th></tr>`)
	for _, r := range c.Rows {
		verdict := "met"
		if !r.Pass {
			verdict = "NOT MET"
		}
		fmt.Fprintf(&b, `<tr class="conformance-row"><td>%s</td><td>%s</td><td>%.1f%%</td><td>%+.1f</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%.1f</td><td>%s</td></tr>`,
			template.HTMLEscapeString(r.Agent), template.HTMLEscapeString(r.Persona), 100*r.EX, r.DeltaPoints, r.CandidatesLost, r.FormatReasks,
			r.EndedEarly, r.VerdictsUnread, r.LLMErrors, r.CallsPerExample, verdict)
	}
	b.WriteString(`</table>`)
	last := c.Runs[len(c.Runs)-1]
	var rep *outputs.Report
	if last != nil {
		rep = last.Run
	}
	return outputs.WriteHTML(w, rep, &outputs.Extra{Title: "conformance of " + strings.Join(c.Agents, ", ") + " under " + strings.Join(c.Personas, ", ") + "; the run below is the last",
		Lead: []outputs.Section{{ID: "conformance", Heading: fmt.Sprintf("Agents under real models' forms (goal: 0 candidates lost, EX within %.0f points of canonical)", c.MaxDeltaPoints), HTML: template.HTML(b.String())}}})
}
