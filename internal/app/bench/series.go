package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// SeriesPoint is one size of a scale series: the scenario run at Examples
// examples on a rig of its own, and what it cost besides its wall.
type SeriesPoint struct {
	Examples       int     `json:"examples"`
	Wall           float64 `json:"wall_seconds"`
	QuotaRatio     float64 `json:"quota_ratio"`
	RateLimited    int64   `json:"rate_limited_responses"`
	FailedExamples int     `json:"failed_examples"`
	// CPUPerExample is this process's CPU time over the whole point
	// (quorum's roles, NATS and the simulator; not redis-server) per
	// example.
	CPUPerExample float64 `json:"cpu_seconds_per_example"`
	// PeakRSS is this process's peak resident set during the point (its
	// high-water mark reset at the start), 0 where the OS cannot say.
	PeakRSS int64 `json:"peak_rss_bytes"`
	// Total is the point's whole time; OutsideWall is Total less the
	// run's wall: preparation (the dataset, the simulator, the cluster,
	// the manifest, the coordinator's start) and output (scoring,
	// run.json, report.html, the predictions left, measuring, shutting
	// down). Phases splits Total; coordinator_outside_wall is the
	// coordinator's share outside the wall.
	Total       float64            `json:"total_seconds"`
	OutsideWall float64            `json:"outside_wall_seconds"`
	Phases      map[string]float64 `json:"phase_seconds"`
	// OutsideWallPerExampleMS is OutsideWall per example: preparation and
	// output are O(N) at best, so linear growth keeps it flat.
	OutsideWallPerExampleMS float64 `json:"outside_wall_ms_per_example"`
	// RuntimeOverhead* are each executed task's time in its worker
	// outside the agent's execute (quorum_task_runtime_seconds): median,
	// p95 and the mean of the parts the workers time.
	RuntimeOverheadP50MS  float64 `json:"runtime_overhead_ms_per_task_p50"`
	RuntimeOverheadP95MS  float64 `json:"runtime_overhead_ms_per_task_p95"`
	RuntimeOverheadMeanMS float64 `json:"runtime_overhead_ms_per_task_mean"`
	// RedisBytesPerExample is INFO memory's used_memory once the run
	// ended less before it, per example (blobs included); RunKeyBytes
	// the MEMORY USAGE of the run's own keys per example.
	RedisBytesPerExample  float64 `json:"redis_bytes_per_example"`
	RunKeyBytesPerExample float64 `json:"run_key_bytes_per_example"`
}

// clock times a bench run's phases; a nil clock times nothing.
type clock struct {
	last   time.Time
	phases map[string]float64
}

func newClock() *clock { return &clock{last: time.Now(), phases: map[string]float64{}} }

// lap adds the time since the last lap to phase.
func (c *clock) lap(phase string) {
	if c == nil {
		return
	}
	now := time.Now()
	c.phases[phase] += now.Sub(c.last).Seconds()
	c.last = now
}

// Series runs sc at each of sizes examples in turn, each on a rig of its
// own, with no scaling runs. The report is the first point's run, with
// Series holding every point.
func Series(ctx context.Context, sc Scenario, sizes []int, work string, progress io.Writer) (*Report, error) {
	if len(sizes) == 0 {
		return nil, fmt.Errorf("bench scale series: no sizes")
	}
	for _, n := range sizes {
		if n < 1 {
			return nil, fmt.Errorf("bench scale series: a size is %d; each must be at least 1", n)
		}
	}
	sc.Scaling = nil
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	var rep *Report
	for i, n := range sizes {
		fmt.Fprintf(progress, "scale series: %d examples (point %d of %d)\n", n, i+1, len(sizes))
		psc := sc
		psc.Examples = n
		r, p, err := runPoint(ctx, psc, filepath.Join(work, fmt.Sprintf("series-%d-%d", i, n)), progress)
		if err != nil {
			return nil, fmt.Errorf("scale series at %d examples: %w", n, err)
		}
		if rep == nil {
			rep = r
		}
		rep.Series = append(rep.Series, p)
	}
	return rep, nil
}

// runPoint runs one point of a series and measures it.
func runPoint(ctx context.Context, sc Scenario, dir string, progress io.Writer) (*Report, SeriesPoint, error) {
	// The previous point's garbage is not this one's peak.
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	cpu := cpuTime()
	clk := newClock()
	start := clk.last
	rep, err := runTimed(ctx, sc, sc.Examples, sc.Generators, true, dir, progress, clk)
	if err != nil {
		return nil, SeriesPoint{}, err
	}
	total := time.Since(start).Seconds()
	n := float64(max(1, rep.Examples))
	p := SeriesPoint{Examples: rep.Examples, Wall: rep.Wall, QuotaRatio: rep.QuotaRatio, RateLimited: rep.RateLimited,
		FailedExamples: rep.FailedExamples, CPUPerExample: (cpuTime() - cpu).Seconds() / n, PeakRSS: peakRSS(),
		Total: total, OutsideWall: total - rep.Wall, Phases: clk.phases,
		RuntimeOverheadP50MS: rep.RuntimeOverheadP50MS, RuntimeOverheadP95MS: rep.RuntimeOverheadP95MS,
		RuntimeOverheadMeanMS: rep.RuntimeOverheadMS}
	p.OutsideWallPerExampleMS = 1000 * p.OutsideWall / n
	p.Phases["coordinator_outside_wall"] = p.Phases["coordinator"] - rep.Wall
	if rd := rep.Redis; rd != nil {
		p.RedisBytesPerExample = float64(rd.After.UsedMemory-rd.Before.UsedMemory) / n
		p.RunKeyBytesPerExample = float64(rd.RunBytes) / n
	}
	return rep, p, nil
}

// resetPeakRSS resets this process's resident high-water mark (Linux:
// writing 5 to /proc/self/clear_refs); elsewhere the peak is the
// process's.
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS is this process's resident high-water mark (VmHWM), 0 when the
// OS does not say.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// histogram is a merged Prometheus histogram: cumulative counts at upper
// bounds.
type histogram struct {
	bounds []float64
	counts []float64
	total  float64
}

// add merges h's buckets (every series of a metric has the same).
func (hs *histogram) add(h *dto.Histogram) {
	bs := h.GetBucket()
	if hs.bounds == nil {
		for _, b := range bs {
			hs.bounds = append(hs.bounds, b.GetUpperBound())
		}
		hs.counts = make([]float64, len(bs))
	}
	if len(bs) != len(hs.bounds) {
		return
	}
	for i, b := range bs {
		hs.counts[i] += float64(b.GetCumulativeCount())
	}
	hs.total += float64(h.GetSampleCount())
}

// quantile interpolates the q-quantile linearly within its bucket, as
// PromQL's histogram_quantile does; 0 without observations.
func (hs *histogram) quantile(q float64) float64 {
	if hs.total == 0 {
		return 0
	}
	rank := q * hs.total
	lower, below := 0.0, 0.0
	for i, c := range hs.counts {
		if c >= rank {
			if c == below {
				return hs.bounds[i]
			}
			return lower + (hs.bounds[i]-lower)*(rank-below)/(c-below)
		}
		lower, below = hs.bounds[i], c
	}
	// Beyond the last bound: the last bound is all that is known.
	return hs.bounds[len(hs.bounds)-1]
}
