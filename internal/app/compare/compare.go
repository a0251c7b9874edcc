// Package compare sets runs of one dataset side by side, example by
// example: which answers changed (their result tables, and their SQL),
// which went right to wrong or wrong to right where gold judged them,
// and what each cost (LLM calls, tokens, money, latency). It reads only a
// run's output folder (run.json and the <id>.sql and <id>.csv answers), so
// it compares runs of any agent, seed, sampling rule or machine.
package compare

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/sqltext"
)

// Run is one run's output folder, read.
type Run struct {
	Dir    string
	Report *outputs.Report
}

// Load reads the run in dir (an output folder, or its run.json).
func Load(dir string) (*Run, error) {
	if filepath.Base(dir) == "run.json" {
		dir = filepath.Dir(dir)
	}
	r, err := outputs.ReadReport(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: no run.json: name the --out folder of a quorum run, solve or bench run", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return &Run{Dir: dir, Report: r}, nil
}

// Name is how the run is shown: its folder, id, agent and settings.
func (r *Run) Name() string {
	rep := r.Report
	s := fmt.Sprintf("%s (run %s", r.Dir, rep.RunID)
	if rep.Agent != "" {
		s += ", agent " + rep.Agent
	}
	s += fmt.Sprintf(", seed %d, votes %d", rep.Seed, rep.Votes)
	if rep.LLM != "" {
		s += ", " + rep.LLM
	}
	return s + ")"
}

// Side is one run's outcome of an example.
type Side struct {
	Status     string `json:"status"`
	Confidence string `json:"confidence,omitempty"`
	Method     string `json:"method,omitempty"`
	// Correct is gold's judgement (absent: no gold, or not scored).
	Correct          *bool   `json:"correct,omitempty"`
	LLMCalls         int     `json:"llm_calls"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	Money            float64 `json:"money"`
	LatencySeconds   float64 `json:"latency_seconds"`
	// sql is the answer's SQL, normalized; result its result table.
	sql    string
	result []byte
}

// Row is one example in two runs; Base or Other is nil where the example
// is in one run only.
type Row struct {
	ID    string `json:"instance_id"`
	Base  *Side  `json:"base,omitempty"`
	Other *Side  `json:"other,omitempty"`
	// Changed: the answers differ (the status, or the result table of an
	// answered example). SQLOnly: the SQL differs, its result does not.
	Changed bool `json:"answer_changed"`
	SQLOnly bool `json:"sql_changed_same_result,omitempty"`
	// Transition is "right→wrong" or "wrong→right" where gold judged the
	// example in both runs and the judgement changed.
	Transition string `json:"transition,omitempty"`
}

// Totals sum one side over the examples both runs hold.
type Totals struct {
	Answered         int     `json:"answered"`
	Correct          int     `json:"correct"`
	Scored           int     `json:"scored"`
	LLMCalls         int     `json:"llm_calls"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	Money            float64 `json:"money"`
	LatencyP50       float64 `json:"latency_p50_seconds"`
	LatencyP95       float64 `json:"latency_p95_seconds"`
	latencies        []float64
}

// Diff is a run against a base run.
type Diff struct {
	Base  string `json:"base_run"`
	Other string `json:"other_run"`
	// Common are the examples both runs hold; OnlyBase and OnlyOther the
	// rest, by id.
	Common    int      `json:"common"`
	OnlyBase  []string `json:"only_base,omitempty"`
	OnlyOther []string `json:"only_other,omitempty"`
	// Changed counts the common examples whose answers differ (status or
	// result table); SQLOnly those whose SQL alone does.
	Changed     int    `json:"answers_changed"`
	SQLOnly     int    `json:"sql_changed_same_result"`
	RightWrong  int    `json:"right_to_wrong"`
	WrongRight  int    `json:"wrong_to_right"`
	BaseTotals  Totals `json:"base_totals"`
	OtherTotals Totals `json:"other_totals"`
	Rows        []Row  `json:"examples"`
	// Warnings say what makes the comparison less than like for like
	// (other datasets, other databases for an id).
	Warnings []string `json:"warnings,omitempty"`
	// dirs are the base's and the other's output folders (the page links
	// each example to their trace pages).
	dirs [2]string
}

// Compare sets other against base.
func Compare(base, other *Run) (*Diff, error) {
	d := &Diff{Base: base.Name(), Other: other.Name(), dirs: [2]string{base.Dir, other.Dir}}
	if base.Report.Dataset != other.Report.Dataset {
		d.Warnings = append(d.Warnings, fmt.Sprintf("the runs name different datasets (%s, %s): examples are matched by instance id", base.Report.Dataset, other.Report.Dataset))
	}
	if a, b := base.Report.DatasetFingerprint, other.Report.DatasetFingerprint; a != "" && b != "" && a != b {
		d.Warnings = append(d.Warnings, fmt.Sprintf("the runs' dataset fingerprints differ (%s, %s): they asked other examples, or the same ids asked other questions", a, b))
	}
	theirs := map[string]outputs.Example{}
	for _, e := range other.Report.Examples {
		theirs[e.InstanceID] = e
	}
	seen := map[string]bool{}
	for _, e := range base.Report.Examples {
		seen[e.InstanceID] = true
		o, ok := theirs[e.InstanceID]
		if !ok {
			d.OnlyBase = append(d.OnlyBase, e.InstanceID)
			continue
		}
		if e.Database != o.Database {
			d.Warnings = append(d.Warnings, fmt.Sprintf("%s: database %s in one run, %s in the other", e.InstanceID, e.Database, o.Database))
		}
		b, err := side(base.Dir, e)
		if err != nil {
			return nil, err
		}
		t, err := side(other.Dir, o)
		if err != nil {
			return nil, err
		}
		d.add(Row{ID: e.InstanceID, Base: b, Other: t})
	}
	for _, e := range other.Report.Examples {
		if !seen[e.InstanceID] {
			d.OnlyOther = append(d.OnlyOther, e.InstanceID)
		}
	}
	if d.Common == 0 {
		return nil, fmt.Errorf("%s and %s have no example in common: compare runs of one dataset", d.Base, d.Other)
	}
	d.BaseTotals.percentiles()
	d.OtherTotals.percentiles()
	return d, nil
}

// side reads example e's outcome in the run in dir.
func side(dir string, e outputs.Example) (*Side, error) {
	s := &Side{Status: e.Status, Confidence: e.Confidence, Method: e.Method, Correct: e.Correct,
		LLMCalls: e.Cost.LLMCalls, PromptTokens: e.Cost.LLM.PromptTokens, CompletionTokens: e.Cost.LLM.CompletionTokens,
		Money: e.Cost.LLM.Money, LatencySeconds: e.LatencySeconds}
	if e.Status != "answered" {
		return s, nil
	}
	sql, err := os.ReadFile(filepath.Join(dir, e.InstanceID+".sql"))
	if err != nil {
		return nil, fmt.Errorf("the answer of %s: %w (is %s a complete run folder?)", e.InstanceID, err, dir)
	}
	s.sql = sqltext.Normalize(string(sql), sqltext.DialectOptions(sqltext.Dialect(e.Dialect)))
	result, err := os.ReadFile(filepath.Join(dir, e.InstanceID+".csv"))
	if err != nil {
		return nil, fmt.Errorf("the result of %s: %w (is %s a complete run folder?)", e.InstanceID, err, dir)
	}
	s.result = CanonicalCSV(result)
	return s, nil
}

// CanonicalCSV is a result table with its line endings and final newline
// made uniform: the same rows written on two machines compare equal.
func CanonicalCSV(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	return bytes.TrimRight(b, "\n")
}

// add counts row r, whose example both runs hold.
func (d *Diff) add(r Row) {
	b, o := r.Base, r.Other
	d.Common++
	r.Changed = b.Status != o.Status || b.Status == "answered" && !bytes.Equal(b.result, o.result)
	r.SQLOnly = !r.Changed && b.sql != o.sql
	if b.Correct != nil && o.Correct != nil && *b.Correct != *o.Correct {
		r.Transition = "wrong→right"
		if *b.Correct {
			r.Transition = "right→wrong"
		}
	}
	switch {
	case r.Changed:
		d.Changed++
	case r.SQLOnly:
		d.SQLOnly++
	}
	switch r.Transition {
	case "right→wrong":
		d.RightWrong++
	case "wrong→right":
		d.WrongRight++
	}
	d.BaseTotals.add(b)
	d.OtherTotals.add(o)
	d.Rows = append(d.Rows, r)
}

func (t *Totals) add(s *Side) {
	if s.Status == "answered" {
		t.Answered++
	}
	if s.Correct != nil {
		t.Scored++
		if *s.Correct {
			t.Correct++
		}
	}
	t.LLMCalls += s.LLMCalls
	t.PromptTokens += s.PromptTokens
	t.CompletionTokens += s.CompletionTokens
	t.Money += s.Money
	t.latencies = append(t.latencies, s.LatencySeconds)
}

func (t *Totals) percentiles() {
	slices.Sort(t.latencies)
	t.LatencyP50, t.LatencyP95 = outputs.Quantile(t.latencies, 0.50), outputs.Quantile(t.latencies, 0.95)
}

// EX is the share of the scored examples answered right, and whether
// any was scored.
func (t Totals) EX() (float64, bool) {
	if t.Scored == 0 {
		return 0, false
	}
	return float64(t.Correct) / float64(t.Scored), true
}

// Differing are the rows whose answer, SQL or judgement changed, or that
// one run lacks, by id.
func (d *Diff) Differing() []Row {
	var out []Row
	for _, r := range d.Rows {
		if r.Changed || r.SQLOnly || r.Transition != "" {
			out = append(out, r)
		}
	}
	return out
}

// what says in words how row r changed.
func (r Row) what() string {
	var parts []string
	switch {
	case r.Base.Status != r.Other.Status:
		parts = append(parts, r.Base.Status+"→"+r.Other.Status)
	case r.Changed:
		parts = append(parts, "result differs")
	case r.SQLOnly:
		parts = append(parts, "SQL differs, same result")
	}
	if r.Transition != "" {
		parts = append(parts, r.Transition)
	}
	return strings.Join(parts, "; ")
}
