package outputs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCandidateFiles: a candidate is written as candidates/<id>/<name>.sql,
// with its .csv only when it produced a result; ids and names that could
// leave the folder are refused.
func TestCandidateFiles(t *testing.T) {
	t.Parallel()
	csv := "a\n1\n"
	tests := []struct {
		name, id, cand string
		csv            *string
		wantFiles      []string // relative to the output folder
		wantErr        string
	}{
		{"with a result", "dev_1", CandidateName(0, 3), &csv, []string{"candidates/dev_1/r0_c3.sql", "candidates/dev_1/r0_c3.csv"}, ""},
		{"without a result", "dev_2", CandidateName(1, 0), nil, []string{"candidates/dev_2/r1_c0.sql"}, ""},
		{"id escapes", "../x", "r0_c0", nil, nil, "instance"},
		{"name escapes", "dev_3", "../../r0_c0", nil, nil, "candidate"},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		w, err := NewWriter(dir)
		if err != nil {
			t.Fatal(err)
		}
		err = w.Candidate(tt.id, tt.cand, "SELECT 1", tt.csv)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err %v, want one about the %s", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		var got []string
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				got = append(got, filepath.ToSlash(rel))
			}
			return nil
		})
		if strings.Join(got, " ") != strings.Join(slices.Sorted(slices.Values(tt.wantFiles)), " ") {
			t.Errorf("%s: files %v, want %v", tt.name, got, tt.wantFiles)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, tt.wantFiles[0])); string(b) != "SELECT 1\n" {
			t.Errorf("%s: the .sql holds %q", tt.name, b)
		}
	}
}

// TestReportShowsWarningsAndMetric: run.json keeps the run's warnings, and
// report.html shows them escaped and names BIRD's rule when it scored the
// examples.
func TestReportShowsWarningsAndMetric(t *testing.T) {
	t.Parallel()
	yes := true
	r := sampleReport()
	r.Warnings = []string{"raise: final_a, final_b and final_c all resolve to model " + hostile}
	for i := range r.Examples {
		r.Examples[i].Metric = "bird"
		r.Examples[i].Correct, r.Examples[i].CorrectAtK = &yes, &yes
	}
	dir := t.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Report(r); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Warnings) != 1 || back.Warnings[0] != r.Warnings[0] || back.Examples[0].Metric != "bird" {
		t.Errorf("run.json read back: warnings %q, metric %q", back.Warnings, back.Examples[0].Metric)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	for _, want := range []string{"Warning: raise: final_a, final_b and final_c all resolve to model &lt;script&gt;", "BIRD&#39;s execution accuracy"} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(html, hostile) {
		t.Error("report.html holds the warning's markup unescaped")
	}
}
