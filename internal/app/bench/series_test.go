package bench

import (
	"bytes"
	"context"
	"math"
	"os"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/quorumsql/quorum/internal/testutil/tier"
)

// slowRun says the figures that depend on the machine's speed (429s, how
// long questions wait beside a batch) are to be checked: make slow sets
// QUORUM_SLOW; the default run logs them, and make bench reports them
// against its thresholds.
func slowRun() bool { return os.Getenv("QUORUM_SLOW") != "" }

// TestSeriesReportsEveryFigure runs a scale series at 4 and 8 examples
// through the real pieces and checks each point's figures are there and
// sane (not their size: the machine's load sets that). That no call drew
// a 429 is checked under make slow (QUORUM_SLOW=1) only: a call the
// limiter admits can reach the simulator late on a loaded machine,
// bunched with others.
func TestSeriesReportsEveryFigure(t *testing.T) {
	tier.Servers(t, "a cluster (embedded NATS, redis-server, llmsim)")
	t.Parallel()
	sc := Standard()
	sc.Dataset = "../../../examples/demo"
	sc.Votes, sc.RPM = 4, 600
	sc.FirstTokenMS, sc.TokensPerSecond = 20, 0
	sc.Generators, sc.GeneratorConcurrency, sc.Explorers, sc.ExplorerConcurrency = 2, 4, 1, 4
	var progress bytes.Buffer
	rep, err := Series(context.Background(), sc, []int{4, 8}, t.TempDir(), &progress)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Series) != 2 || rep.Examples != 4 || len(rep.Scaling) != 0 {
		t.Fatalf("report of %d examples with %d series points and %d scaling points; want the 4-example run, 2 points, no scaling", rep.Examples, len(rep.Series), len(rep.Scaling))
	}
	for i, p := range rep.Series {
		want := []int{4, 8}[i]
		if p.Examples != want {
			t.Errorf("point %d: %d examples, want %d", i, p.Examples, want)
		}
		if p.Wall <= 0 || p.Total <= p.Wall || p.OutsideWall <= 0 || p.OutsideWall != p.Total-p.Wall {
			t.Errorf("%d examples: wall %.2fs, total %.2fs, outside the wall %.2fs: want 0 < wall < total and outside = total - wall", want, p.Wall, p.Total, p.OutsideWall)
		}
		if got := p.OutsideWall * 1000 / float64(want); math.Abs(p.OutsideWallPerExampleMS-got) > 1e-6 {
			t.Errorf("%d examples: outside the wall %.3f ms per example, want %.3f (%.2fs / %d)", want, p.OutsideWallPerExampleMS, got, p.OutsideWall, want)
		}
		// The limiter held the run to the quota: never faster than it
		// allows (the simulator refuses what is over it).
		if p.QuotaRatio <= 0 || p.QuotaRatio > 1.2 || p.FailedExamples != 0 {
			t.Errorf("%d examples: quota ratio %.3f, %d failed", want, p.QuotaRatio, p.FailedExamples)
		}
		t.Logf("%d examples: %d 429s, quota ratio %.3f", want, p.RateLimited, p.QuotaRatio)
		if slowRun() && p.RateLimited != 0 {
			t.Errorf("%d examples: %d 429s with the limiter set to the provider's quota", want, p.RateLimited)
		}
		if p.CPUPerExample <= 0 {
			t.Errorf("%d examples: CPU per example %.3fs", want, p.CPUPerExample)
		}
		if p.PeakRSS < 10<<20 || p.PeakRSS > 16<<30 {
			t.Errorf("%d examples: peak RSS %d bytes", want, p.PeakRSS)
		}
		if p.RuntimeOverheadP50MS <= 0 || p.RuntimeOverheadP95MS < p.RuntimeOverheadP50MS || p.RuntimeOverheadMeanMS <= 0 {
			t.Errorf("%d examples: runtime overhead per task p50 %.3f ms, p95 %.3f ms, mean %.3f ms", want, p.RuntimeOverheadP50MS, p.RuntimeOverheadP95MS, p.RuntimeOverheadMeanMS)
		}
		if p.RedisBytesPerExample <= 0 || p.RunKeyBytesPerExample <= 0 {
			t.Errorf("%d examples: Redis %.0f bytes per example, run keys %.0f", want, p.RedisBytesPerExample, p.RunKeyBytesPerExample)
		}
		sum := 0.0
		for _, phase := range []string{"dataset", "simulator", "cluster", "manifest", "coordinator", "measure", "close"} {
			v, ok := p.Phases[phase]
			if !ok || v < 0 {
				t.Errorf("%d examples: phase %s %.3fs (timed %v)", want, phase, v, ok)
			}
			sum += v
		}
		if d := sum - p.Total; d > 0.01 || d < -0.01 {
			t.Errorf("%d examples: phases add up to %.3fs, the point took %.3fs", want, sum, p.Total)
		}
		if c := p.Phases["coordinator_outside_wall"]; c < 0 || c > p.OutsideWall {
			t.Errorf("%d examples: coordinator outside the wall %.3fs, all outside %.3fs", want, c, p.OutsideWall)
		}
	}
	var html bytes.Buffer
	if err := WriteHTML(&html, rep.Run, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "Scale series") || !strings.Contains(html.String(), "<td>8</td>") {
		t.Error("report.html lacks the scale series table")
	}
	if _, err := Series(context.Background(), sc, []int{4, 0}, t.TempDir(), &progress); err == nil || !strings.Contains(err.Error(), "at least 1") {
		t.Errorf("a size of 0: %v", err)
	}
}

// TestHistogramQuantile: quantiles interpolate within their bucket as
// PromQL's histogram_quantile does, over merged series.
func TestHistogramQuantile(t *testing.T) {
	t.Parallel()
	bucket := func(le float64, n uint64) *dto.Bucket { return &dto.Bucket{UpperBound: &le, CumulativeCount: &n} }
	series := func(counts ...uint64) *dto.Histogram {
		total := counts[len(counts)-1]
		return &dto.Histogram{SampleCount: &total, Bucket: []*dto.Bucket{bucket(1, counts[0]), bucket(2, counts[1]), bucket(4, counts[2])}}
	}
	var h histogram
	if q := h.quantile(0.5); q != 0 {
		t.Errorf("no observations: median %v, want 0", q)
	}
	h.add(series(10, 20, 20)) // 10 in (0,1], 10 in (1,2]
	h.add(series(0, 0, 20))   // 20 in (2,4]
	for _, c := range []struct{ q, want float64 }{{0.25, 1}, {0.5, 2}, {0.125, 0.5}, {0.75, 3}, {1, 4}} {
		if got := h.quantile(c.q); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("quantile %.3f = %v, want %v", c.q, got, c.want)
		}
	}
}
