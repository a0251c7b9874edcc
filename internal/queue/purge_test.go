package queue_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/quorumsql/quorum/internal/queue"
)

// TestPurgeRunRemovesOnlyItsSubjects: a finished run's messages on every
// stage, pool and urgent lane go; another run's, including one whose id
// starts the same, stay.
func TestPurgeRunRemovesOnlyItsSubjects(t *testing.T) {
	t.Parallel()
	q := connect(t, queue.Config{})
	ctx := context.Background()
	subjects := func(run string) []string {
		return []string{
			queue.Subject(run, queue.StageGenerate, "sqlite"), queue.Subject(run, queue.Urgent(queue.StageExplore), "snowflake"),
			queue.Subject(run, queue.StageResult, ""), queue.Subject(run, queue.StageFinal, ""),
		}
	}
	for _, run := range []string{"r1", "r10", "r2"} {
		for i, subj := range subjects(run) {
			if err := q.Publish(ctx, subj, fmt.Sprintf("%s.%d", run, i), task{V: queue.Version}); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := q.PurgeRun(ctx, "r1")
	if err != nil || n != 4 {
		t.Fatalf("purged %d messages (%v), want r1's 4", n, err)
	}
	for _, tc := range []struct {
		run  string
		want uint64
	}{{"r1", 0}, {"r10", 4}, {"r2", 4}} {
		if got, err := q.RunMessages(ctx, tc.run); err != nil || got != tc.want {
			t.Errorf("run %s: %d messages (%v), want %d", tc.run, got, err, tc.want)
		}
	}
	if _, err := q.PurgeRun(ctx, "r1.>"); err == nil {
		t.Error("a run id with subject wildcards was accepted")
	}
}
