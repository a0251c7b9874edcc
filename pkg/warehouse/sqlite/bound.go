package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"time"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// outcome is what a query's work ended with.
type outcome struct {
	res *warehouse.Result
	err error
}

// runBounded runs work on its own goroutine and returns its outcome; once
// ctx is done it waits at most grace more. SQLite stops an interrupted
// statement only between VM steps, so a step can outlast the interrupt;
// then runBounded returns late, which delivers the outcome when the work
// ends, so that the caller is not held by a step it cannot stop.
func runBounded[T any](ctx context.Context, grace time.Duration, work func() T) (out T, late <-chan T) {
	done := make(chan T, 1)
	go func() { done <- work() }()
	select {
	case out = <-done:
		return out, nil
	case <-ctx.Done():
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case out = <-done:
		return out, nil
	case <-t.C:
		return out, done
	}
}

// discardWhenDone closes conn once its abandoned work ended, telling the
// pool not to reuse it: the connection's state after an interrupted step
// (page cache, memory) is not worth keeping.
func discardWhenDone(conn *sql.Conn, late <-chan outcome) {
	<-late
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
