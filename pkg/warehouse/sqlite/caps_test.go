package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// TestHostileValuesFailInsideTheEngine: one huge value, built in a single
// step where no row cap or interrupt reaches, fails at once with the
// engine's "too big" as a query error the model can read; ordinary values
// are untouched.
func TestHostileValuesFailInsideTheEngine(t *testing.T) {
	t.Parallel()
	db, err := Open(Config{Path: filepath.Join("..", "..", "..", "examples", "demo", "resource", "databases", "spider2-localdb", "shop.sqlite")})
	if err != nil {
		t.Skipf("demo database: %v", err)
	}
	defer db.Close()
	ctx := context.Background()
	for _, q := range []string{
		"SELECT zeroblob(1000000000)",
		"SELECT length(hex(randomblob(400000000)))",
		"SELECT length(replace(hex(zeroblob(100000000)), '0', 'xx'))",
	} {
		_, err := db.Query(ctx, q, warehouse.Limits{MaxRows: 10, MaxBytes: 1 << 20})
		var qe *warehouse.QueryError
		if !errors.As(err, &qe) || !strings.Contains(qe.Message, "too big") {
			t.Errorf("%s: %v, want a query error saying the value is too big", q, err)
		}
	}
	res, err := db.Query(ctx, "SELECT length(randomblob(1000)) AS n", warehouse.Limits{MaxRows: 10, MaxBytes: 1 << 20})
	if err != nil || res.RowCount() != 1 {
		t.Errorf("an ordinary value: %v", err)
	}
}

// TestHostileResultsAreCut: queries that would fill the process's memory
// end as query errors the model can read: a result is cut at
// warehouse.MaxResultMemory as rows are read, before the timeout they are
// given (and must not need). It asserts the reason recorded in the
// QueryError (which cap ended it), never the time it took. It reads 64 MiB
// of rows in one goroutine: make test runs it without the race detector
// (NORACE), which makes it ten times slower and checks nothing here.
func TestHostileResultsAreCut(t *testing.T) {
	t.Parallel()
	hostileQueries(t, []hostileQuery{
		{"cross join", "SELECT * FROM order_items a, order_items b, order_items c, order_items d", time.Minute, "result too large"},
		{"endless recursive CTE", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x, zeroblob(1000) FROM c", time.Minute, "result too large"},
	})
}

// TestHostileQueriesEndInTime: a query that returns nothing for a long
// time is interrupted at its Limits' timeout, inside the statement, from
// the goroutine that watches the deadline (run under the race detector).
// It asserts the reason recorded in the QueryError, never the time taken.
func TestHostileQueriesEndInTime(t *testing.T) {
	t.Parallel()
	hostileQueries(t, []hostileQuery{
		{"long aggregate", "SELECT count(*) FROM order_items a, order_items b, order_items c", time.Second, "interrupted: the query ran longer than 1s"},
	})
}

type hostileQuery struct {
	name, sql string
	timeout   time.Duration
	want      string // in the QueryError's message
}

func hostileQueries(t *testing.T, qs []hostileQuery) {
	db, err := Open(Config{Path: filepath.Join("..", "..", "..", "examples", "demo", "resource", "databases", "spider2-localdb", "shop.sqlite")})
	if err != nil {
		t.Skipf("demo database: %v", err)
	}
	defer db.Close()
	for _, tt := range qs {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := db.Query(context.Background(), tt.sql, warehouse.Limits{Timeout: tt.timeout})
			took := time.Since(start) //clock:ok logged, not asserted: the recorded reason is the check
			var qe *warehouse.QueryError
			if !errors.As(err, &qe) || !strings.Contains(qe.Message, tt.want) {
				t.Fatalf("%v (after %s), want a query error saying %q", err, took, tt.want)
			}
			// The recorded reason says which cap ended the query, not the
			// time it took: a memory cap's query must not have run into its
			// timeout instead, and the timeout's names the limit it hit.
			t.Logf("ended after %s: %s", took, qe.Message)
			if !strings.Contains(tt.want, "interrupted") && strings.Contains(qe.Message, "interrupted") {
				t.Errorf("%q: the query was interrupted by its %s timeout, want it cut at the memory cap", qe.Message, tt.timeout)
			}
		})
	}
}
