package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestConformanceUnderPersonas runs every agent under personas that write
// as real models do (fences spelt by dialect, bare and plain SQL, Python
// literals and string booleans in JSON, <think> blocks, replies cut by the
// token limit) through the real pieces: no candidate may be lost to the
// form of a reply, and the table must show the forms were met (the
// truncating persona's cuts are re-asked, never executed).
func TestConformanceUnderPersonas(t *testing.T) {
	tier.Servers(t, "a cluster per agent and persona")
	t.Parallel()
	sc := Standard()
	sc.Dataset = "../../../examples/demo"
	sc.Examples, sc.Votes, sc.RPM = 6, 2, 0
	sc.FirstTokenMS, sc.TokensPerSecond, sc.Jitter = 1, 0, 0
	sc.Generators, sc.GeneratorConcurrency, sc.Explorers, sc.ExplorerConcurrency = 2, 8, 1, 8
	agents := []string{"reforce", "pexa", "raise"}
	personas := []string{llmsim.PersonaQwenCoder, llmsim.PersonaDeepSeekR1, llmsim.PersonaTruncating}
	var progress bytes.Buffer
	c, err := Conform(context.Background(), sc, agents, personas, t.TempDir(), &progress)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(agents) * (len(personas) + 1); len(c.Rows) != want {
		t.Fatalf("%d rows, want %d (canonical first): %+v", len(c.Rows), want, c.Rows)
	}
	reasks := map[string]int{}
	for _, r := range c.Rows {
		if r.Examples != sc.Examples || r.FailedExamples != 0 {
			t.Errorf("%s under %s: %d examples, %d failed; want %d, 0", r.Agent, r.Persona, r.Examples, r.FailedExamples, sc.Examples)
		}
		if r.CandidatesLost != 0 {
			t.Errorf("%s under %s lost %d candidates to the form of its replies", r.Agent, r.Persona, r.CandidatesLost)
		}
		if r.Persona == llmsim.PersonaCanonical && (r.FormatReasks != 0 || r.EndedEarly != 0 || r.VerdictsUnread != 0 || r.DeltaPoints != 0 ||
			r.AnswersDiffer != 0 || r.ResultsDiffer != 0 || r.AnsweredDiffer != 0 || r.RefusalsSent != 0 || r.CallsRatio != 1 || r.PromptTokensRatio != 1 || r.LLMCalls == 0) {
			t.Errorf("%s under canonical: %+v; want no re-ask, early end, unread verdict, delta, differing answer or refusal, and ratios of 1", r.Agent, r)
		}
		if r.Answered == 0 || r.CallsRatio <= 0 || r.PromptTokensRatio <= 0 {
			t.Errorf("%s under %s: %d answered, ratios %.2f %.2f", r.Agent, r.Persona, r.Answered, r.CallsRatio, r.PromptTokensRatio)
		}
		if r.LLMErrors != 0 {
			t.Errorf("%s under %s: %d LLM calls failed", r.Agent, r.Persona, r.LLMErrors)
		}
		reasks[r.Persona] += r.FormatReasks
	}
	// Cut replies are re-asked: the counters see them.
	if reasks[llmsim.PersonaTruncating] == 0 {
		t.Errorf("no format re-ask under the truncating persona: its cuts were not seen (rows %+v)", c.Rows)
	}
	var html bytes.Buffer
	if err := ConformanceHTML(&html, c); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(html.String(), `class="conformance-row"`); n != len(c.Rows) {
		t.Errorf("report.html has %d conformance rows, want %d", n, len(c.Rows))
	}
}

// TestConformanceJudge: a row against its agent's canonical run: the
// ratios, the answers compared normalized, and the goal.
func TestConformanceJudge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// An answer's result table is its SQL's result in canon's run; an
	// answer canon did not give returns "other" (results overrides).
	canonResult := map[string]string{"SELECT x FROM t": "x\n1\n", "SELECT y FROM u": "y\n2\n"}
	write := func(sub string, answers map[string]string, results ...map[string]string) *Report {
		out := filepath.Join(dir, sub)
		if err := os.MkdirAll(out, 0o700); err != nil {
			t.Fatal(err)
		}
		run := &outputs.Report{}
		for id, sql := range answers {
			run.Examples = append(run.Examples, outputs.Example{InstanceID: id, Dialect: "sqlite", Status: "answered"})
			if err := os.WriteFile(filepath.Join(out, id+".sql"), []byte(sql+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			csv, ok := canonResult[sql]
			if !ok {
				csv = "z\r\n3\r\n"
			}
			if len(results) > 0 && results[0][id] != "" {
				csv = results[0][id]
			}
			if err := os.WriteFile(filepath.Join(out, id+".csv"), []byte(csv), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		run.Examples = append(run.Examples, outputs.Example{InstanceID: "none", Dialect: "sqlite", Status: "no_answer"})
		run.Totals.Answered = len(answers)
		return &Report{Run: run, Out: out, LLMCalls: 100, PromptTokens: 10000, EX: 0.5}
	}
	canonRep := write("canon", map[string]string{"a": "SELECT x FROM t", "b": "SELECT y FROM u"})
	canonAnswers, err := finalAnswers(canonRep)
	if err != nil {
		t.Fatal(err)
	}
	canonResults, err := finalResults(canonRep)
	if err != nil {
		t.Fatal(err)
	}
	base := baseline{conformanceRow("reforce", "canonical", canonRep), canonAnswers, canonResults}
	tests := []struct {
		name                    string
		answers                 map[string]string
		results                 map[string]string
		calls, prompt           int64
		lost                    int
		ex                      float64
		wantAnswered, wantDiffs int
		wantResults             int
		wantPass                bool
	}{
		{"same, written otherwise", map[string]string{"a": "select x\r\nFROM t;", "b": "-- answer\nSELECT  y FROM u"}, map[string]string{"a": "x\r\n1\r\n", "b": "y\n2"}, 103, 10400, 0, 0.5, 0, 0, 0, true},
		{"another answer", map[string]string{"a": "SELECT z FROM t", "b": "SELECT y FROM u"}, nil, 100, 10000, 0, 0.5, 0, 1, 1, true},
		{"another answer, the same rows", map[string]string{"a": "SELECT x FROM t WHERE 1", "b": "SELECT y FROM u"}, map[string]string{"a": "x\n1\n"}, 100, 10000, 0, 0.5, 0, 1, 0, true},
		{"one example fewer", map[string]string{"a": "SELECT x FROM t"}, nil, 100, 10000, 0, 0.5, 1, 1, 1, false},
		{"calls 6% more", map[string]string{"a": "SELECT x FROM t", "b": "SELECT y FROM u"}, nil, 106, 10000, 0, 0.5, 0, 0, 0, false},
		{"prompt tokens 6% fewer", map[string]string{"a": "SELECT x FROM t", "b": "SELECT y FROM u"}, nil, 100, 9400, 0, 0.5, 0, 0, 0, false},
		{"a candidate lost", map[string]string{"a": "SELECT x FROM t", "b": "SELECT y FROM u"}, nil, 100, 10000, 1, 0.5, 0, 0, 0, false},
		{"EX 3 points lower", map[string]string{"a": "SELECT x FROM t", "b": "SELECT y FROM u"}, nil, 100, 10000, 0, 0.47, 0, 0, 0, false},
	}
	for i, tt := range tests {
		rep := write(fmt.Sprint("p", i), tt.answers, tt.results)
		rep.LLMCalls, rep.PromptTokens, rep.EX = tt.calls, tt.prompt, tt.ex
		row := conformanceRow("reforce", llmsim.PersonaEnvelopes, rep)
		row.CandidatesLost = tt.lost
		answers, err := finalAnswers(rep)
		if err != nil {
			t.Fatal(err)
		}
		results, err := finalResults(rep)
		if err != nil {
			t.Fatal(err)
		}
		judge(&row, answers, results, base)
		if row.AnsweredDiffer != tt.wantAnswered || row.AnswersDiffer != tt.wantDiffs || row.ResultsDiffer != tt.wantResults || row.Pass != tt.wantPass ||
			row.CallsRatio != float64(tt.calls)/100 || row.PromptTokensRatio != float64(tt.prompt)/10000 {
			t.Errorf("%s: answered differ %d, answers differ %d, results differ %d, ratios %.2f %.2f, pass %v; want %d, %d, %d, %v",
				tt.name, row.AnsweredDiffer, row.AnswersDiffer, row.ResultsDiffer, row.CallsRatio, row.PromptTokensRatio, row.Pass, tt.wantAnswered, tt.wantDiffs, tt.wantResults, tt.wantPass)
		}
	}
	c := &Conformance{Rows: []ConformanceRow{base.row}, Runs: []*Report{canonRep}, Agents: []string{"reforce"}, Personas: []string{"canonical"},
		MaxDeltaPoints: MaxDeltaPoints, MaxCostRatioDelta: MaxCostRatioDelta}
	var html bytes.Buffer
	if err := ConformanceHTML(&html, c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"LLM calls vs canonical", "prompt tokens vs canonical", "answers ≠ canonical", "results ≠ canonical", "refusals recorded / sent", "within 5%"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}
