package bench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/quorumsql/quorum/pkg/trace"
)

// TraceRow is one run of the scenario at one trace level.
type TraceRow struct {
	Trace      string  `json:"trace"`
	Examples   int     `json:"examples"`
	EX         float64 `json:"ex"`
	Wall       float64 `json:"wall_seconds"`
	QuotaRatio float64 `json:"quota_ratio"`
	// RuntimeOverhead* are the runtime's own time per task (decoding,
	// Redis, blobs, NATS: trace writes included).
	RuntimeOverheadMS    float64 `json:"runtime_overhead_ms_per_task"`
	RuntimeOverheadP50MS float64 `json:"runtime_overhead_ms_per_task_p50"`
	RuntimeOverheadP95MS float64 `json:"runtime_overhead_ms_per_task_p95"`
	// RedisBytesPerExample is what Redis's memory grew by over the run,
	// per example (the run's state, blobs and traces).
	RedisBytesPerExample float64 `json:"redis_bytes_per_example"`
	RateLimited          int64   `json:"rate_limited"`
	FailedExamples       int     `json:"failed_examples"`
}

// TraceComparison is the scenario run at several trace levels: what
// keeping traces costs.
type TraceComparison struct {
	Scenario Scenario   `json:"scenario"`
	Rows     []TraceRow `json:"rows"`
	Runs     []*Report  `json:"-"`
}

// CompareTrace runs the scenario once per trace level (no scaling runs).
func CompareTrace(ctx context.Context, sc Scenario, levels []string, work string, progress io.Writer) (*TraceComparison, error) {
	for _, l := range levels {
		if _, err := trace.ParseLevel(strings.TrimSpace(l)); err != nil {
			return nil, err
		}
	}
	c := &TraceComparison{Scenario: sc}
	for _, l := range levels {
		s := sc
		s.Trace, s.Scaling = strings.TrimSpace(l), nil
		if err := s.Validate(); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "bench %s: --trace %s\n", sc.Name, s.Trace)
		r, err := Run(ctx, s, filepath.Join(work, "trace-"+s.Trace), progress)
		if err != nil {
			return nil, fmt.Errorf("--trace %s: %w", s.Trace, err)
		}
		c.Runs = append(c.Runs, r)
		row := TraceRow{Trace: s.Trace, Examples: r.Examples, EX: r.EX, Wall: r.Wall, QuotaRatio: r.QuotaRatio,
			RuntimeOverheadMS: r.RuntimeOverheadMS, RuntimeOverheadP50MS: r.RuntimeOverheadP50MS, RuntimeOverheadP95MS: r.RuntimeOverheadP95MS,
			RateLimited: r.RateLimited, FailedExamples: r.FailedExamples}
		if r.Redis != nil && r.Examples > 0 {
			row.RedisBytesPerExample = float64(r.Redis.After.UsedMemory-r.Redis.Before.UsedMemory) / float64(r.Examples)
		}
		c.Rows = append(c.Rows, row)
	}
	return c, nil
}
