package bench

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/quorumsql/quorum/internal/app/compare"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/sqltext"
)

// The conformance goal: under every persona an agent's simulated EX
// stays within MaxDeltaPoints points of its canonical EX, and its LLM calls
// and prompt tokens within MaxCostRatioDelta of its canonical run's (a
// reply read as it was meant costs what canonical's costs; a re-ask, a
// lost trajectory or a re-sent envelope shows here first).
const (
	MaxDeltaPoints    = 2.0
	MaxCostRatioDelta = 0.05
)

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
	// Pass: every row's goal met (ConformanceRow.Pass).
	Pass              bool      `json:"pass"`
	MaxDeltaPoints    float64   `json:"max_delta_points"`
	MaxCostRatioDelta float64   `json:"max_cost_ratio_delta"`
	Runs              []*Report `json:"-"`
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
	// The run's LLM calls and prompt tokens (the simulator's counts), and
	// each against the same agent's canonical run (1 = the same; 0 when
	// canonical's is 0).
	LLMCalls          int64   `json:"llm_calls"`
	PromptTokens      int64   `json:"prompt_tokens"`
	CallsRatio        float64 `json:"llm_calls_ratio"`
	PromptTokensRatio float64 `json:"prompt_tokens_ratio"`
	// Answered examples; AnsweredDiffer are those answered in this run or
	// the canonical one but not both; AnswersDiffer those whose final SQL,
	// normalized (sqltext.Normalize: spacing, keyword case, comments,
	// trailing ;), differs from canonical's, an unanswered side included.
	Answered       int `json:"answered"`
	AnsweredDiffer int `json:"answered_differ"`
	AnswersDiffer  int `json:"answers_differ"`
	// ResultsDiffer are the examples whose result table (<id>.csv)
	// differs from canonical's, an unanswered side included: another SQL
	// with the same rows is not another answer to the user.
	ResultsDiffer int `json:"results_differ"`
	// Refusals are the replies the agent recorded as refusals (pkg/cost),
	// RefusalsSent those the simulator wrote: fewer recorded than sent
	// means a refusal was read as something else, such as a query to run.
	Refusals     int   `json:"refusals"`
	RefusalsSent int64 `json:"refusals_sent"`
	// Pass: no candidate lost to format, the same examples answered as
	// canonical, calls and prompt tokens within MaxCostRatioDelta of
	// canonical's and EX within MaxDeltaPoints.
	Pass bool `json:"pass"`
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
	c := &Conformance{Scenario: sc, Agents: agentNames, Personas: ps, Pass: true, MaxDeltaPoints: MaxDeltaPoints, MaxCostRatioDelta: MaxCostRatioDelta}
	canonical := map[string]baseline{}
	for _, p := range ps {
		s := sc
		s.Persona = p
		cmp, err := Compare(ctx, s, agentNames, filepath.Join(work, p), progress)
		if err != nil {
			return nil, fmt.Errorf("persona %s: %w", p, err)
		}
		for i, r := range cmp.Runs {
			row := conformanceRow(cmp.Agents[i].Agent, p, r)
			answers, err := finalAnswers(r)
			if err != nil {
				return nil, fmt.Errorf("persona %s, agent %s: %w", p, row.Agent, err)
			}
			results, err := finalResults(r)
			if err != nil {
				return nil, fmt.Errorf("persona %s, agent %s: %w", p, row.Agent, err)
			}
			if p == llmsim.PersonaCanonical {
				canonical[row.Agent] = baseline{row, answers, results}
			}
			judge(&row, answers, results, canonical[row.Agent])
			c.Pass = c.Pass && row.Pass
			c.Rows = append(c.Rows, row)
			c.Runs = append(c.Runs, r)
		}
	}
	return c, nil
}

// baseline is an agent's canonical run: its row, its final answers and
// their result tables.
type baseline struct {
	row     ConformanceRow
	answers map[string]string
	results map[string]string
}

// judge sets a row's figures against its agent's canonical run, and
// whether it meets the goal.
func judge(row *ConformanceRow, answers, results map[string]string, base baseline) {
	row.DeltaPoints = 100 * (row.EX - base.row.EX)
	row.CallsRatio = ratio(row.LLMCalls, base.row.LLMCalls)
	row.PromptTokensRatio = ratio(row.PromptTokens, base.row.PromptTokens)
	row.AnsweredDiffer, row.AnswersDiffer = compareAnswers(answers, base.answers)
	_, row.ResultsDiffer = compareAnswers(results, base.results)
	row.Pass = row.CandidatesLost == 0 && row.AnsweredDiffer == 0 &&
		withinRatio(row.CallsRatio) && withinRatio(row.PromptTokensRatio) &&
		math.Abs(row.DeltaPoints) <= MaxDeltaPoints+1e-9
}

// ratio is x against base (1 when both are 0, 0 when only base is).
func ratio(x, base int64) float64 {
	switch {
	case base > 0:
		return float64(x) / float64(base)
	case x == 0:
		return 1
	}
	return 0
}

func withinRatio(r float64) bool { return math.Abs(r-1) <= MaxCostRatioDelta+1e-9 }

// finalAnswers are a run's answered examples' final SQL, normalized, by
// instance id (the answers folder's <id>.sql).
func finalAnswers(r *Report) (map[string]string, error) {
	return finalFiles(r, ".sql", func(b []byte, e outputs.Example) string {
		return sqltext.Normalize(string(b), sqltext.DialectOptions(sqltext.Dialect(e.Dialect)))
	})
}

// finalResults are a run's answered examples' result tables, by instance
// id (the answers folder's <id>.csv, compare.CanonicalCSV).
func finalResults(r *Report) (map[string]string, error) {
	return finalFiles(r, ".csv", func(b []byte, _ outputs.Example) string { return string(compare.CanonicalCSV(b)) })
}

// finalFiles reads each answered example's <id><ext> from the run's
// answers folder, as canon makes it comparable (a run without a folder:
// canon of nothing).
func finalFiles(r *Report, ext string, canon func([]byte, outputs.Example) string) (map[string]string, error) {
	out := map[string]string{}
	if r.Run == nil {
		return out, nil
	}
	for _, e := range r.Run.Examples {
		if e.Status != "answered" {
			continue
		}
		var b []byte
		if r.Out != "" {
			var err error
			if b, err = os.ReadFile(filepath.Join(r.Out, e.InstanceID+ext)); err != nil {
				return nil, fmt.Errorf("answer of %s: %w", e.InstanceID, err)
			}
		}
		out[e.InstanceID] = canon(b, e)
	}
	return out, nil
}

// compareAnswers counts the examples answered on one side only, and those
// whose answers differ (the one-sided ones included).
func compareAnswers(got, want map[string]string) (answered, differ int) {
	for id, sql := range got {
		w, ok := want[id]
		if !ok {
			answered++
		}
		if !ok || w != sql {
			differ++
		}
	}
	for id := range want {
		if _, ok := got[id]; !ok {
			answered++
			differ++
		}
	}
	return answered, differ
}

func conformanceRow(agent, persona string, r *Report) ConformanceRow {
	row := ConformanceRow{Agent: agent, Persona: persona, Examples: r.Examples, EX: r.EX,
		CallsPerExample: r.CallsPerExample, FailedExamples: r.FailedExamples,
		LLMCalls: r.LLMCalls, PromptTokens: r.PromptTokens, RefusalsSent: r.RefusalsSent}
	if r.Run == nil {
		return row
	}
	row.Answered = r.Run.Totals.Answered
	for _, e := range r.Run.Examples {
		row.CandidatesLost += e.Cost.FormatLost
		row.FormatReasks += e.Cost.FormatReasks
		row.EndedEarly += e.Cost.FormatEnded
		row.VerdictsUnread += e.Cost.VerdictsUnread
		row.Refusals += e.Cost.Refusals
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
	b.WriteString(`<table id="conformance-table"><tr><th>agent</th><th>persona</th><th>EX (simulated)</th><th>Δ vs canonical</th><th>LLM calls vs canonical</th><th>prompt tokens vs canonical</th><th>answered (≠ canonical)</th><th>answers ≠ canonical</th><th>results ≠ canonical</th><th>candidates lost to format</th><th>format re-asks</th><th>ended early</th><th>verdicts unread</th><th>refusals recorded / sent</th><th>LLM errors</th><th>calls / example</th><th>goal</th></tr>`)
	for _, r := range c.Rows {
		verdict := "met"
		if !r.Pass {
			verdict = "NOT MET"
		}
		fmt.Fprintf(&b, `<tr class="conformance-row"><td>%s</td><td>%s</td><td>%.1f%%</td><td>%+.1f</td><td>×%.2f</td><td>×%.2f</td><td>%d (%d)</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d / %d</td><td>%d</td><td>%.1f</td><td>%s</td></tr>`,
			template.HTMLEscapeString(r.Agent), template.HTMLEscapeString(r.Persona), 100*r.EX, r.DeltaPoints, r.CallsRatio, r.PromptTokensRatio,
			r.Answered, r.AnsweredDiffer, r.AnswersDiffer, r.ResultsDiffer, r.CandidatesLost, r.FormatReasks, r.EndedEarly, r.VerdictsUnread, r.Refusals, r.RefusalsSent,
			r.LLMErrors, r.CallsPerExample, verdict)
	}
	b.WriteString(`</table>`)
	last := c.Runs[len(c.Runs)-1]
	var rep *outputs.Report
	if last != nil {
		rep = last.Run
	}
	return outputs.WriteHTML(w, rep, &outputs.Extra{Title: "conformance of " + strings.Join(c.Agents, ", ") + " under " + strings.Join(c.Personas, ", ") + "; the run below is the last",
		Lead: []outputs.Section{{ID: "conformance", Heading: fmt.Sprintf("Agents under real models' forms (goal: 0 candidates lost, the same examples answered, LLM calls and prompt tokens within %.0f%% and EX within %.0f points of canonical)", 100*c.MaxCostRatioDelta, c.MaxDeltaPoints), HTML: template.HTML(b.String())}}})
}
