package outputs

import (
	"os"
	"path/filepath"
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
