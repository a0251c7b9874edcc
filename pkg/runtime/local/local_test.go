package local_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/quorumsql/quorum/internal/testutil/toyagent"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/runtime/local"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// TestLocalRunsTheSeam: the toy agent runs in process through the same
// seam as on the cluster: continuations, a join whose lost part does not
// fail the slot, a task failing for good recorded failed in its slot, one
// decision per example.
func TestLocalRunsTheSeam(t *testing.T) {
	t.Parallel()
	ds, err := dataset.Load("../../../examples/demo", dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set := &sqlite.Set{}
	t.Cleanup(func() { set.Close() })
	for _, tt := range []struct {
		name   string
		toy    toyagent.Config
		ex     string
		status string
		tasks  int
	}{
		{"fan-out", toyagent.Config{FanOut: 3, LoseProbe: 1}, "local001", "ok", 1 + 3*(3+1)},
		{"plain", toyagent.Config{}, "local002", "ok", 1 + 3},
		{"failing", toyagent.Config{FailExample: "local003"}, "local003", "failed", 1 + 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var execs atomic.Int64
			tt.toy.Executions = &execs
			def := toyagent.Definition(tt.toy)
			ag, err := def.New(agent.Config{Options: map[string]string{agent.OptVotes: "3"}})
			if err != nil {
				t.Fatal(err)
			}
			e, _ := ds.Example(tt.ex)
			out, err := local.Solve(context.Background(), local.Config{Agent: ag, Def: def, Dataset: ds,
				Warehouses: &dataset.Warehouses{DS: ds, SQLite: set}, Run: "t", Seed: 1}, e)
			if err != nil {
				t.Fatal(err)
			}
			if out.Tasks != tt.tasks || len(out.Candidates) != 3 {
				t.Errorf("%d tasks, %d candidates; want %d and 3", out.Tasks, len(out.Candidates), tt.tasks)
			}
			for _, c := range out.Candidates {
				if c.Status != tt.status {
					t.Errorf("candidate %d: %s %s", c.Index, c.Status, c.Error)
				}
				if tt.toy.FanOut > 0 && !strings.Contains(string(c.Payload), `"parts":3,"lost":1`) {
					t.Errorf("candidate %d payload %s", c.Index, c.Payload)
				}
			}
			if tt.status == "ok" && (out.Decision.Winner == nil || out.Decision.Confidence != "high") {
				t.Errorf("decision %+v", out.Decision)
			}
			if tt.status == "failed" && out.Decision.Winner != nil {
				t.Errorf("a failed example has winner %+v", out.Decision.Winner)
			}
		})
	}
}
