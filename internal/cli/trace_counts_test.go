package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/trace"
)

// TestTraceCountsAreRunJSONs: the trace's last decision of each example
// counts what run.json says of it — the valid candidates, those agreeing
// with the winner, and the groups by result hold exactly the valid ones —
// in process (solve) and on the cluster (run), for a single agent and the
// ensemble, whose members' votes leave candidates uncounted. Before, the
// trace grouped every usable candidate by raw result (9 "agree" where
// run.json said 5).
func TestTraceCountsAreRunJSONs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cmd, agent string }{{"solve", "ensemble"}, {"run", "ensemble"}, {"solve", "reforce"}} {
		t.Run(tc.cmd+"/"+tc.agent, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "out")
			if log, err := run(t, tc.cmd, "--dataset", demo, "--agent", tc.agent, "--examples", "4", "--votes", "2", "--out", out); err != nil {
				t.Fatalf("%s: %v\n%s", tc.cmd, err, log)
			}
			rep, err := outputs.ReadReport(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range rep.Examples {
				x, err := traceFromOut(out, e.InstanceID)
				if err != nil {
					t.Fatal(err)
				}
				var d *trace.Decision
				for _, en := range x.Entries {
					if en.Decision != nil && en.Decision.NextRound == nil {
						d = en.Decision
					}
				}
				if d == nil {
					t.Errorf("%s: no final decision in the trace", e.InstanceID)
					continue
				}
				grouped := 0
				for _, g := range d.Clusters {
					grouped += len(g)
				}
				if d.Valid != e.ValidCandidates || grouped != e.ValidCandidates || len(d.Agreed) != len(e.AgreedCandidates) {
					t.Errorf("%s: trace says %d valid, %d in groups by result, %d agree with the winner; run.json %d valid, %d agree (groups %v, not counted %v)",
						e.InstanceID, d.Valid, grouped, len(d.Agreed), e.ValidCandidates, len(e.AgreedCandidates), d.Clusters, 0)
				}
				var page strings.Builder
				if err := trace.WriteHTML(&page, x, trace.PageInfo{}); err != nil {
					t.Fatal(err)
				}
				if want := "agree with the winner"; e.Status == "answered" && !strings.Contains(page.String(), want) {
					t.Errorf("%s: the trace page does not say how many %s", e.InstanceID, want)
				}
			}
		})
	}
}
