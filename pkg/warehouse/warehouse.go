// Package warehouse is the query interface every agent stage uses: run one
// read statement under a context and limits, get a typed result table, or the
// engine's error text verbatim (the agents show it to the model).
//
// Implementations live in subpackages (sqlite; snowflake and bigquery later).
package warehouse

import (
	"context"
	"fmt"
	"time"

	"github.com/quorumsql/quorum/pkg/slot"
	"github.com/quorumsql/quorum/pkg/sqltext"
)

// Dialect names a SQL engine family (sqltext.Dialect: one type for the
// whole project).
type Dialect = sqltext.Dialect

// The dialects Spider 2.0 uses.
const (
	SQLite    = sqltext.SQLite
	Snowflake = sqltext.Snowflake
	BigQuery  = sqltext.BigQuery
)

// ParseDialect accepts a dialect name in any case.
func ParseDialect(s string) (Dialect, error) { return sqltext.ParseDialect(s) }

// Limits bound what one query may return and how long it may run. Zero
// means no limit of that kind (a warehouse's own timeout still applies). A
// capped result is marked Truncated; nothing is cut silently.
type Limits struct {
	MaxRows  int
	MaxBytes int64
	// Timeout, when shorter than the warehouse's own, bounds this query:
	// it is interrupted inside the engine and reported as a *QueryError.
	Timeout time.Duration
}

// Deadline is the query's effective timeout: the shorter of the
// warehouse's own (own <= 0: none) and l.Timeout.
func (l Limits) Deadline(own time.Duration) time.Duration {
	if l.Timeout > 0 && (own <= 0 || l.Timeout < own) {
		return l.Timeout
	}
	return own
}

// Interrupted is the error of a query stopped at its deadline: the model
// is told, because a too-slow query is something it can fix.
func Interrupted(d Dialect, after time.Duration) *QueryError {
	return &QueryError{Dialect: d, Message: fmt.Sprintf("interrupted: the query ran longer than %s", after)}
}

// WithTimeout gives every query of W the run's timeout unless the query
// asks for a shorter one.
type WithTimeout struct {
	W       Warehouse
	Timeout time.Duration
}

// Dialect implements Warehouse.
func (w *WithTimeout) Dialect() Dialect { return w.W.Dialect() }

// Close implements Warehouse.
func (w *WithTimeout) Close() error { return w.W.Close() }

// Query implements Warehouse.
func (w *WithTimeout) Query(ctx context.Context, sql string, lim Limits) (*Result, error) {
	lim.Timeout = lim.Deadline(w.Timeout)
	return w.W.Query(ctx, sql, lim)
}

// Warehouse runs read-only queries against one database.
type Warehouse interface {
	Dialect() Dialect
	// Query runs a single read statement. Engine errors (syntax, missing
	// column, refused statements) come back as *QueryError; anything else
	// (cancelled context, lost connection) as a plain error.
	Query(ctx context.Context, sql string, lim Limits) (*Result, error)
	Close() error
}

// QueryError is an error the engine (or quorum's read-only guard) reported
// about the statement itself. Its Message is shown to the model verbatim.
type QueryError struct {
	Dialect Dialect
	// Message is the engine's text, unchanged.
	Message string
	// Refused is set when quorum refused the statement before it reached the
	// engine (not a single read statement).
	Refused bool
}

func (e *QueryError) Error() string { return e.Message }

// Guard configures the read-only guard: what it admits beyond its fixed
// rules. The zero Guard is the strict default that Admit and CheckReadOnly
// apply; a warehouse whose operator allows more keeps a Guard of its own
// (set from its configuration) and calls its methods instead.
type Guard struct {
	// AllowHistory admits queries of the engines' query history and
	// account usage (Snowflake's SNOWFLAKE.ACCOUNT_USAGE,
	// INFORMATION_SCHEMA.QUERY_HISTORY(), RESULT_SCAN; BigQuery's
	// INFORMATION_SCHEMA.JOBS*: sqltext.Policy.AllowHistory). Off by
	// default: where tenants share one warehouse identity, they would
	// show one tenant another's SQL, through quorum serve's rerun too.
	AllowHistory bool
}

// CheckReadOnly returns the read-only text to run for sql (trimmed, without
// a trailing semicolon or comment) or a *QueryError saying why it is refused.
// See Admit.
func CheckReadOnly(d Dialect, sql string) (string, error) { return Guard{}.CheckReadOnly(d, sql) }

// Admit applies the strict Guard; see Guard.Admit.
func Admit(d Dialect, sql string) (sqltext.Verdict, error) { return Guard{}.Admit(d, sql) }

// CheckReadOnly returns the read-only text to run for sql or a
// *QueryError saying why it is refused (see Admit).
func (g Guard) CheckReadOnly(d Dialect, sql string) (string, error) {
	v, err := g.Admit(d, sql)
	return v.Text, err
}

// Admit classifies sql with the dialect's read-only statement classifier
// (sqltext.Policy.Classify): exactly one SELECT, WITH or VALUES query, or in
// BigQuery a script of DECLARE, SET of a variable, CREATE TEMP FUNCTION and
// queries; no other statement, no second statement, no function with side
// effects, no read of query history unless g allows it. Text over
// sqltext.MaxSQLBytes is refused before it is classified. A refusal is a
// *QueryError with Refused set, whose message (shown to the model) names
// what was refused. It is the first layer of protection; engines add their
// own (the SQLite authorizer, Snowflake's MULTI_STATEMENT_COUNT=1 and a
// read-only role, BigQuery's dry-run statement type).
func (g Guard) Admit(d Dialect, sql string) (sqltext.Verdict, error) {
	if len(sql) > sqltext.MaxSQLBytes {
		why := fmt.Sprintf("the SQL text is %d bytes, over the limit of %d bytes", len(sql), sqltext.MaxSQLBytes)
		return sqltext.Verdict{Reason: why}, &QueryError{Dialect: d, Refused: true,
			Message: "quorum refused the statement: " + why + "; send a shorter query"}
	}
	v := sqltext.Policy{AllowHistory: g.AllowHistory}.Classify(sql, d)
	if v.Allowed {
		return v, nil
	}
	send := "send exactly one read-only SELECT or WITH query"
	if d == BigQuery {
		send += " (or a script of DECLARE, SET, CREATE TEMP FUNCTION and SELECT/WITH statements)"
	}
	return v, &QueryError{Dialect: d, Refused: true,
		Message: "quorum refused the statement: " + v.Reason + "; " + send}
}

// Gate admits queries (a warehouse's QPS and concurrency quota).
type Gate interface {
	Acquire(ctx context.Context) (release func(), err error)
}

// Gated runs every query of W through G.
type Gated struct {
	W Warehouse
	G Gate
}

// Dialect implements Warehouse.
func (g *Gated) Dialect() Dialect { return g.W.Dialect() }

// Close implements Warehouse.
func (g *Gated) Close() error { return g.W.Close() }

// Query waits for the gate, then runs the query.
func (g *Gated) Query(ctx context.Context, sql string, lim Limits) (*Result, error) {
	// Waiting for the gate runs no query: the task's slot is another's
	// meanwhile. The query itself runs in a slot (a local warehouse's
	// query is this process's CPU).
	wait, back := slot.Idle(ctx)
	release, err := g.G.Acquire(wait)
	back()
	if err != nil {
		return nil, err
	}
	defer release()
	return g.W.Query(ctx, sql, lim)
}

type labelsKey struct{}

// WithLabels attaches labels naming the work a query serves (run, example,
// candidate). Snowflake sends them as the QUERY_TAG, BigQuery as job labels,
// so spending can be traced back to the run.
func WithLabels(ctx context.Context, labels map[string]string) context.Context {
	return context.WithValue(ctx, labelsKey{}, labels)
}

// Labels returns the labels attached to ctx.
func Labels(ctx context.Context) map[string]string {
	l, _ := ctx.Value(labelsKey{}).(map[string]string)
	return l
}
