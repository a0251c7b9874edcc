package outputs

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/cost"
)

func TestReportRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	r := &Report{RunID: "r1", Votes: 8, Started: start, Finished: start.Add(90 * time.Second), Examples: []Example{
		{InstanceID: "b", Status: "answered", Cost: cost.Cost{LLMCalls: 9}, ServiceSeconds: 4.5},
		{InstanceID: "a", Status: "no_answer", Cost: cost.Cost{LLMCalls: 3}},
	}}
	r.Summarize()
	if err := w.Report(r); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.RunID != "r1" || len(got.Examples) != 2 || got.Examples[0].InstanceID != "a" ||
		got.Examples[1].ServiceSeconds != 4.5 || got.Totals.Cost.LLMCalls != 12 || got.Totals.Answered != 1 || got.Totals.WallSeconds != 90 {
		t.Errorf("read back %+v", got)
	}
}

func TestReadReportErrorsNameTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content, want string
	}{
		{"missing", "", "run.json"},
		{"malformed", "{", filepath.Join(dir, "run.json")},
	} {
		if tc.content != "" {
			os.WriteFile(filepath.Join(dir, "run.json"), []byte(tc.content), 0o644)
		}
		if _, err := ReadReport(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.want)
		}
	}
}

// TestAnswerRefusesPaths: an instance id that could be taken for a path
// writes nothing, wherever it comes from.
func TestAnswerRefusesPaths(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	w, err := NewWriter(filepath.Join(parent, "out"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"../escape", "/tmp/abs", ".hidden", "a/b"} {
		if err := w.Answer(id, "SELECT 1", "a\n1\n"); err == nil {
			t.Errorf("answer %q was written", id)
		}
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 {
		t.Errorf("files beside the output folder: %v", entries)
	}
}

// TestCalibration: the totals count, over the examples with gold only,
// how many were right at each confidence and with each method, in a fixed
// order, and say what k EX@k ranged over.
func TestCalibration(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	ex := func(conf, method string, cands int, correct *bool) Example {
		return Example{Status: "answered", Confidence: conf, Method: method, Rounds: 1, Candidates: cands, Correct: correct, CorrectAtK: correct}
	}
	for _, tc := range []struct {
		name               string
		examples           []Example
		votes              int
		wantConf, wantMeth []Calibration
		wantName           string
		wantMeaning        string
	}{{
		name: "mixed, one without gold",
		examples: []Example{ex("high", "majority", 8, &yes), ex("high", "majority", 8, &yes), ex("high", "majority", 8, &no),
			ex("low", "random_tie_break", 16, &yes), ex("", "", 0, &no), ex("high", "majority", 8, nil)},
		votes:       8,
		wantConf:    []Calibration{{"high", 3, 2, 2.0 / 3}, {"low", 1, 1, 1}, {"none", 1, 0, 0}},
		wantMeth:    []Calibration{{"majority", 3, 2, 2.0 / 3}, {"random_tie_break", 1, 1, 1}, {"none", 1, 0, 0}},
		wantName:    "EX@k",
		wantMeaning: "any candidate right; k = candidates drawn per example, 8–16",
	}, {
		name: "confidence most sure first, unknown levels after, methods most used first",
		examples: []Example{ex("", "", 4, &no), ex("certain", "model_vote", 4, &yes), ex("low", "fallback", 4, &no), ex("medium", "fallback", 4, &yes),
			ex("high", "majority_explored", 4, &yes), ex("low", "fallback", 4, &yes)},
		votes:       8,
		wantConf:    []Calibration{{"high", 1, 1, 1}, {"medium", 1, 1, 1}, {"low", 2, 1, 0.5}, {"certain", 1, 1, 1}, {"none", 1, 0, 0}},
		wantMeth:    []Calibration{{"fallback", 3, 2, 2.0 / 3}, {"majority_explored", 1, 1, 1}, {"model_vote", 1, 1, 1}, {"none", 1, 0, 0}},
		wantName:    "EX@4",
		wantMeaning: "any of an example's 4 candidates right",
	}, {
		name:        "no gold: nothing to calibrate, k the votes",
		examples:    []Example{ex("high", "majority", 0, nil), ex("low", "fallback", 0, nil)},
		votes:       5,
		wantName:    "EX@5",
		wantMeaning: "any of an example's 5 candidates right",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Votes: tc.votes, Examples: tc.examples}
			r.Summarize()
			got := r.Totals
			if !slices.EqualFunc(got.ByConfidence, tc.wantConf, sameCalibration) {
				t.Errorf("by confidence %v, want %v", got.ByConfidence, tc.wantConf)
			}
			if !slices.EqualFunc(got.ByMethod, tc.wantMeth, sameCalibration) {
				t.Errorf("by method %v, want %v", got.ByMethod, tc.wantMeth)
			}
			if n, m := got.EXAtKName(tc.votes), got.EXAtKMeaning(tc.votes); n != tc.wantName || m != tc.wantMeaning {
				t.Errorf("EX@k labelled %q (%q), want %q (%q)", n, m, tc.wantName, tc.wantMeaning)
			}
		})
	}
	if s := (Calibration{"high", 37, 35, 35.0 / 37}).String(); s != "high: 35 of 37 right (0.946)" {
		t.Errorf("printed %q, want %q", s, "high: 35 of 37 right (0.946)")
	}
}

func sameCalibration(a, b Calibration) bool {
	return a.Value == b.Value && a.Examples == b.Examples && a.Correct == b.Correct && math.Abs(a.EX-b.EX) < 1e-9
}

// TestRunJSONHoldsCalibration: run.json carries the accuracy by
// confidence and by method under its totals, and the range of k.
func TestRunJSONHoldsCalibration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := sampleReport()
	r.Examples[0].Candidates = 12
	r.Summarize()
	if err := w.Report(r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Totals struct {
			ByConfidence []Calibration `json:"accuracy_by_confidence"`
			ByMethod     []Calibration `json:"accuracy_by_method"`
			KMin         int           `json:"k_min"`
			KMax         int           `json:"k_max"`
		} `json:"totals"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	wantConf := []Calibration{{"high", 8, 5, 0.625}, {"low", 1, 1, 1}, {"none", 3, 1, 1.0 / 3}}
	wantMeth := []Calibration{{"vote", 8, 5, 0.625}, {"fallback", 1, 1, 1}, {"none", 3, 1, 1.0 / 3}}
	if !slices.EqualFunc(raw.Totals.ByConfidence, wantConf, sameCalibration) || !slices.EqualFunc(raw.Totals.ByMethod, wantMeth, sameCalibration) {
		t.Errorf("run.json's totals: by confidence %v, by method %v; want %v and %v", raw.Totals.ByConfidence, raw.Totals.ByMethod, wantConf, wantMeth)
	}
	if raw.Totals.KMin != 4 || raw.Totals.KMax != 12 {
		t.Errorf("run.json's k range %d–%d, want 4–12", raw.Totals.KMin, raw.Totals.KMax)
	}
}

// TestLimitNote says what the limiter learned and hints at the flag to
// set where the configured quota is above the provider's.
func TestLimitNote(t *testing.T) {
	t.Parallel()
	tests := []struct {
		l    LimitLearned
		want string
	}{
		{LimitLearned{Endpoint: "default", Model: "gpt-4o", ConfiguredRPM: 3000, StatedRPM: 1500},
			"gpt-4o: configured 3000 req/min; the provider stated 1500 req/min — the configured quota is not the provider's: configure the stated one (--llm-rpm 1500)"},
		{LimitLearned{Model: "gpt-4o", StatedRPM: 600, StatedTPM: 90000},
			"gpt-4o: configured no limit; the provider stated 600 req/min and 90000 tokens/min — the configured quota is not the provider's: configure the stated one (--llm-rpm 600, --llm-tpm 90000)"},
		{LimitLearned{Endpoint: "azure", Model: "o3", ConfiguredRPM: 1500, StatedRPM: 1500, LearnedRPM: 1185},
			"o3 at azure: configured 1500 req/min; the provider stated 1500 req/min; its 429s left 1185 req/min in force — the provider allowed less than configured: another client may share the quota"},
		{LimitLearned{Model: "gpt-4o", ConfiguredRPM: 600, StatedRPM: 600}, "gpt-4o: configured 600 req/min; the provider stated 600 req/min"},
	}
	for _, tt := range tests {
		if got := tt.l.Note(); got != tt.want {
			t.Errorf("%+v:\n got %s\nwant %s", tt.l, got, tt.want)
		}
	}
}
