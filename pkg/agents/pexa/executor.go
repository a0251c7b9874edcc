package pexa

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// The SQL Executor's three kinds of feedback (pexa §3.1.2 L83) and the
// result shown to the model (Table 5: csv, 3 rows, 500 characters), D-P8.
const (
	shownRows  = 3
	shownChars = 500
	nullError  = "NULL Error: the query executed successfully but returned no rows."
)

// execution is one SQL run by the executor.
type execution struct {
	SQL      string
	Feedback string
	OK       bool
	// CSV and Rows are the result as fetched (whole for the proposer's
	// SQL, a few rows for probes).
	CSV  string
	Rows int
}

// probeLimits fetch one row more than is shown, so that "more than 3" is
// known; an empty result needs no more.
var probeLimits = warehouse.Limits{MaxRows: shownRows + 1}

// execute runs one SQL and renders the executor's feedback. Engine errors
// (syntax, missing objects, the read-only guard's refusals) are the
// model's to see as a Compilation Error; anything else is the
// infrastructure's and returned.
func execute(ctx context.Context, wh warehouse.Warehouse, c *cost.Cost, mu *sync.Mutex, sql string, lim warehouse.Limits) (execution, error) {
	start := time.Now()
	res, err := wh.Query(ctx, sql, lim)
	var qe *warehouse.QueryError
	mu.Lock()
	c.Query(time.Since(start), err != nil)
	mu.Unlock()
	switch {
	case errors.As(err, &qe):
		return execution{SQL: sql, Feedback: "Compilation Error: " + qe.Message}, nil
	case err != nil:
		return execution{SQL: sql}, err
	case res.RowCount() == 0:
		return execution{SQL: sql, Feedback: nullError}, nil
	}
	return execution{SQL: sql, OK: true, CSV: res.CSV(), Rows: res.RowCount(), Feedback: "Success: " + shown(res)}, nil
}

// shown is a result as the model sees it: the header and the first 3
// rows, then at most 500 characters, with a mark when anything was cut.
func shown(res *warehouse.Result) string {
	lines := strings.SplitAfter(strings.TrimRight(res.CSV(), "\n"), "\n")
	cut := res.RowCount() > shownRows || res.Truncated
	if len(lines) > shownRows+1 {
		lines = lines[:shownRows+1]
	}
	s := strings.TrimRight(strings.Join(lines, ""), "\n")
	if len(s) > shownChars {
		s, cut = truncate(s, shownChars), true
	}
	if !cut {
		return s
	}
	if res.Truncated {
		return s + fmt.Sprintf(" …(truncated, more than %d rows)", shownRows)
	}
	return s + fmt.Sprintf(" …(truncated, %d rows in total)", res.RowCount())
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// executeAll runs a batch of SQLs at once, each through the warehouse's
// gate: a batch takes as long as its slowest query (D-P14). sequential
// runs them one at a time (the single-path ablation).
func executeAll(ctx context.Context, wh warehouse.Warehouse, c *cost.Cost, sqls []string, sequential bool) ([]execution, error) {
	out := make([]execution, len(sqls))
	errs := make([]error, len(sqls))
	var mu sync.Mutex
	if sequential {
		for i, q := range sqls {
			out[i], errs[i] = execute(ctx, wh, c, &mu, q, probeLimits)
		}
		return out, errors.Join(errs...)
	}
	var wg sync.WaitGroup
	for i, q := range sqls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = execute(ctx, wh, c, &mu, q, probeLimits)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}
