package warehouse

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDeadlineTakesTheShorter(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		own, query, want time.Duration
	}{
		{0, 0, 0},
		{time.Minute, 0, time.Minute},
		{0, time.Second, time.Second},
		{time.Minute, time.Second, time.Second},
		{time.Second, time.Minute, time.Second},
	} {
		if got := (Limits{Timeout: tt.query}).Deadline(tt.own); got != tt.want {
			t.Errorf("own %v, query %v: %v, want %v", tt.own, tt.query, got, tt.want)
		}
	}
}

// recorder remembers the limits of the last query.
type recorder struct{ lim Limits }

func (r *recorder) Dialect() Dialect { return SQLite }
func (r *recorder) Close() error     { return nil }
func (r *recorder) Query(_ context.Context, _ string, lim Limits) (*Result, error) {
	r.lim = lim
	return &Result{}, nil
}

func TestWithTimeoutKeepsAShorterQueryTimeout(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	w := &WithTimeout{W: rec, Timeout: 10 * time.Second}
	_, _ = w.Query(context.Background(), "SELECT 1", Limits{MaxRows: 5})
	if rec.lim.Timeout != 10*time.Second || rec.lim.MaxRows != 5 {
		t.Errorf("limits %+v, want the run's 10s and the query's 5 rows", rec.lim)
	}
	_, _ = w.Query(context.Background(), "SELECT 1", Limits{Timeout: time.Second})
	if rec.lim.Timeout != time.Second {
		t.Errorf("timeout %v, want the query's shorter 1s", rec.lim.Timeout)
	}
}

func TestResultMemoryCeiling(t *testing.T) {
	t.Parallel()
	res := &Result{}
	row := []Value{TextValue(strings.Repeat("x", 1000)), IntValue(1)}
	n := 0
	for res.Append(row, Limits{}) {
		n++
	}
	if res.TruncatedBy != "memory" || n == 0 || int64(n)*1000 > MaxResultMemory {
		t.Fatalf("kept %d rows, truncated by %q; want a cut at %d bytes", n, res.TruncatedBy, MaxResultMemory)
	}
	var qe *QueryError
	if err := res.TooLarge(SQLite); !errors.As(err, &qe) || !strings.Contains(qe.Message, "result too large") {
		t.Errorf("TooLarge: %v", err)
	}
	if err := (&Result{Truncated: true, TruncatedBy: "rows"}).TooLarge(SQLite); err != nil {
		t.Errorf("a result cut by its own row limit is not too large: %v", err)
	}
}
