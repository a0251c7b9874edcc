// Package sqlite is the read-only SQLite warehouse.
//
// Driver choice: modernc.org/sqlite, the pure-Go translation of SQLite. It
// needs no cgo, so static binaries, minimal container images and
// cross-compilation keep working; it interrupts a running statement when the
// context ends and returns ctx.Err(); and it exposes SQLite's authorizer. Its
// CPU cost on heavy aggregates (about 2x C) is small next to LLM latency.
// mattn/go-sqlite3 needs cgo; ncruces/go-sqlite3's current release needs a
// module this proxy refuses.
//
// Read-only in depth: the file is opened with mode=ro and query_only, but
// mode=ro protects only the main file (ATTACH of a new file and PRAGMA
// query_only=0 still work), so every connection also gets an authorizer that
// allows only reads, and each statement passes warehouse.CheckReadOnly first.
//
// Bounded in time: SQLite checks its interrupt only between VM steps, so
// a query is kept to short steps (functions.go: the built-ins that are
// quadratic in one call are replaced; limits.go: per-connection
// sqlite3_limit values), and a statement still inside one step half its
// timeout after it was interrupted is left to finish on a spare
// connection, which is then discarded, while the caller gets its answer
// and the pool its slot (bound.go).
//
// No path leaves the package: errors name the database, not its file,
// and pragma_database_list, which shows the file, is not allowed.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	msqlite "modernc.org/sqlite"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Config configures one database file.
type Config struct {
	// Path of the .sqlite file.
	Path string
	// Name is what errors call the database instead of its path (tenants
	// and the model never see a server path). Default: the file's name
	// without its extension.
	Name string
	// MaxOpenConns bounds the pool; every connection has its own page cache.
	// Default 4.
	MaxOpenConns int
	// QueryTimeout bounds one query; a query stopped by it is reported to the
	// caller as a *warehouse.QueryError ("interrupted"), because a too-slow
	// query is something the model should fix. Default 60s; negative = none.
	QueryTimeout time.Duration
	// Immutable tells SQLite nobody writes the file (benchmark databases),
	// which skips locking.
	Immutable bool
	// MaxValueBytes bounds any one string or blob a query makes (SQLite's
	// SQLITE_LIMIT_LENGTH, enforced inside the engine before the value is
	// built): `zeroblob(1e9)` or `hex(randomblob(4e8))` fail at once instead
	// of holding gigabytes and minutes inside one step, where neither the
	// row caps nor the interrupt can reach. Default 16 MiB.
	MaxValueBytes int
	// StopGrace is how long a query may still run after its timeout or
	// its caller interrupted it before Query returns without it and its
	// connection is discarded once it ends. Default: half the timeout,
	// at least 250ms (1s without a timeout).
	StopGrace time.Duration
}

// DB is a read-only SQLite warehouse, safe for concurrent use.
type DB struct {
	cfg  Config
	db   *sql.DB
	fns  *funcs
	name string
	// slots holds one token per query running on a connection; the
	// *sql.DB allows as many again, for statements left to finish after
	// their caller got its answer (bound.go).
	slots chan struct{}
}

// readPragmas may be read through pragma functions (pragma_table_info('t'))
// by exploration queries; none of them changes anything when read.
var readPragmas = map[string]bool{
	"table_info": true, "table_xinfo": true, "table_list": true, "index_list": true,
	"index_info": true, "index_xinfo": true, "foreign_key_list": true,
	"collation_list": true, "function_list": true,
	// database_list is left out: its file column is the server's path.
}

// authorize allows reads only. Everything else, ATTACH and setting pragmas
// included, is denied before the statement is compiled.
func authorize(action msqlite.AuthorizerActionCode, arg1, arg2, _, _ string) msqlite.AuthorizerReturnCode {
	switch action {
	case msqlite.AuthSelect, msqlite.AuthRead, msqlite.AuthRecursive:
		return msqlite.AuthorizerOK
	case msqlite.AuthFunction:
		if strings.EqualFold(arg2, "load_extension") {
			return msqlite.AuthorizerDeny
		}
		return msqlite.AuthorizerOK
	case msqlite.AuthPragma:
		// arg2 is the pragma's argument (a table name for table_info); the
		// listed pragmas only read whatever it is.
		if readPragmas[strings.ToLower(arg1)] {
			return msqlite.AuthorizerOK
		}
	}
	return msqlite.AuthorizerDeny
}

// connector opens connections through a private driver so the authorizer
// hook applies only to quorum's connections, without global registration.
type connector struct {
	dsn string
	drv *msqlite.Driver
}

func (c *connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c *connector) Driver() driver.Driver                        { return c.drv }

// Open opens cfg.Path read-only.
func Open(cfg Config) (*DB, error) {
	if cfg.MaxOpenConns <= 0 {
		cfg.MaxOpenConns = 4
	}
	if cfg.QueryTimeout == 0 {
		cfg.QueryTimeout = 60 * time.Second
	}
	if cfg.MaxValueBytes <= 0 {
		cfg.MaxValueBytes = 16 << 20
	}
	if cfg.Name == "" {
		cfg.Name = strings.TrimSuffix(filepath.Base(cfg.Path), filepath.Ext(cfg.Path))
	}
	abs, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("sqlite database %s: %w", cfg.Name, err)
	}
	d := &DB{name: cfg.Name, fns: &funcs{maxValue: cfg.MaxValueBytes, maxPattern: likePatternLength}}
	cfg.Path = abs
	d.cfg = cfg
	st, err := os.Stat(abs)
	if err != nil {
		// The file's name, not its path: the error can reach a tenant.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("sqlite database %s: %w (check the path or --sqlite-dir)", filepath.Base(abs), err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("sqlite database %s is a directory, not a .sqlite file", filepath.Base(abs))
	}
	if err := checkCallContext(); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("_query_only", "1")
	if cfg.Immutable {
		q.Set("immutable", "1")
	}
	drv := &msqlite.Driver{}
	drv.RegisterConnectionHook(func(c msqlite.ExecQuerierContext, _ string) error {
		reg, ok := c.(msqlite.AuthorizerRegisterer)
		if !ok {
			return errors.New("sqlite driver connection has no authorizer; refusing to open read-write")
		}
		return reg.RegisterAuthorizer(authorize)
	})
	if err := d.fns.register(drv); err != nil {
		return nil, err
	}
	// The path goes in verbatim (not URL-escaped as a whole) so that SQLite
	// sees the file name; only '?' and '#' would confuse the URI parser.
	path := strings.NewReplacer("?", "%3f", "#", "%23").Replace(abs)
	db := sql.OpenDB(&connector{dsn: "file:" + path + "?" + q.Encode(), drv: drv})
	// Twice the slots: a statement left to finish after its caller was
	// answered holds a connection but no slot.
	db.SetMaxOpenConns(2 * cfg.MaxOpenConns)
	db.SetMaxIdleConns(cfg.MaxOpenConns)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, d.hide(fmt.Errorf("open sqlite database %s: %w", cfg.Name, err))
	}
	d.db = db
	d.slots = make(chan struct{}, cfg.MaxOpenConns)
	return d, nil
}

// Path is the absolute path of the database file.
func (d *DB) Path() string { return d.cfg.Path }

// Name is what errors call the database.
func (d *DB) Name() string { return d.name }

// Dialect implements warehouse.Warehouse.
func (d *DB) Dialect() warehouse.Dialect { return warehouse.SQLite }

// Close closes the pool.
func (d *DB) Close() error { return d.db.Close() }

// QueryTimeout is the pool's own bound on one query (negative: none).
func (d *DB) QueryTimeout() time.Duration { return d.cfg.QueryTimeout }

// Query implements warehouse.Warehouse.
func (d *DB) Query(ctx context.Context, query string, lim warehouse.Limits) (*warehouse.Result, error) {
	stmt, err := warehouse.CheckReadOnly(warehouse.SQLite, query)
	if err != nil {
		return nil, err
	}
	qctx := ctx
	timeout := lim.Deadline(d.cfg.QueryTimeout)
	if timeout > 0 {
		var cancel context.CancelFunc
		qctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	select {
	case d.slots <- struct{}{}:
		defer func() { <-d.slots }()
	case <-qctx.Done():
		return nil, d.classify(ctx, qctx, timeout, qctx.Err())
	}
	conn, err := d.db.Conn(qctx)
	if err != nil {
		return nil, d.classify(ctx, qctx, timeout, err)
	}
	maxValue := d.cfg.MaxValueBytes
	if lim.MaxBytes > 0 && lim.MaxBytes < int64(maxValue) {
		maxValue = int(max(lim.MaxBytes, 1024))
	}
	if err := setLimits(conn, maxValue); err != nil {
		conn.Close()
		return nil, d.hide(fmt.Errorf("sqlite query on %s: %w", d.name, err))
	}
	out, late := runBounded(qctx, d.grace(timeout), func() outcome {
		res, err := d.run(qctx, conn, stmt, lim)
		return outcome{res, err}
	})
	if late != nil {
		// Still inside one step half its timeout after the interrupt: the
		// caller is answered and the slot freed now, and the connection
		// is dropped, not pooled, once the step ends.
		go discardWhenDone(conn, late)
		return nil, d.classify(ctx, qctx, timeout, qctx.Err())
	}
	conn.Close()
	res, err := out.res, out.err
	if err != nil {
		return nil, d.classify(ctx, qctx, timeout, err)
	}
	if err := res.TooLarge(warehouse.SQLite); err != nil {
		return nil, err
	}
	return res, nil
}

// run is one query's work on conn: the date-type probe, then the rows.
func (d *DB) run(ctx context.Context, conn *sql.Conn, stmt string, lim warehouse.Limits) (*warehouse.Result, error) {
	run := stmt
	if wrapped, ok := d.textPreservingQuery(ctx, conn, stmt); ok {
		run = wrapped
	}
	return d.scan(ctx, conn, run, lim)
}

// grace is how long a query may run past its interrupt (Config.StopGrace).
func (d *DB) grace(timeout time.Duration) time.Duration {
	switch {
	case d.cfg.StopGrace > 0:
		return d.cfg.StopGrace
	case timeout <= 0:
		return time.Second
	}
	return max(timeout/2, 250*time.Millisecond)
}

// classify turns a driver error into what callers expect: the caller's own
// cancellation as a plain error, quorum's per-query timeout and engine errors
// as *warehouse.QueryError with the engine's text. No message carries the
// file's path.
func (d *DB) classify(parent, qctx context.Context, timeout time.Duration, err error) error {
	if parent.Err() != nil {
		return fmt.Errorf("sqlite query on %s: %w", d.name, parent.Err())
	}
	if qctx.Err() != nil {
		return warehouse.Interrupted(warehouse.SQLite, timeout)
	}
	var se *msqlite.Error
	if errors.As(err, &se) {
		return &warehouse.QueryError{Dialect: warehouse.SQLite, Message: d.redact(se.Error())}
	}
	return d.hide(fmt.Errorf("sqlite query on %s: %w", d.name, err))
}

// textPreservingQuery works around the driver's date handling. modernc (like
// mattn and ncruces) turns TEXT values of columns declared DATE, DATETIME or
// TIMESTAMP into time.Time, losing the stored text that Python's sqlite3
// (and so every Spider 2.0 gold file) returns. A cheap LIMIT 0 probe reads
// the declared types; when one of those appears, the statement is re-run
// inside a CTE whose outputs are "+col", a no-op on the value that drops the
// declared type. Column names are kept as aliases.
func (d *DB) textPreservingQuery(ctx context.Context, conn *sql.Conn, stmt string) (string, bool) {
	rows, err := conn.QueryContext(ctx, "SELECT * FROM (\n"+stmt+"\n) LIMIT 0")
	if err != nil {
		return "", false // the real run reports the engine's error verbatim
	}
	types, err := rows.ColumnTypes()
	rows.Close()
	if err != nil {
		return "", false
	}
	needed := false
	for _, t := range types {
		switch strings.ToUpper(t.DatabaseTypeName()) {
		case "DATE", "DATETIME", "TIMESTAMP":
			needed = true
		}
	}
	if !needed {
		return "", false
	}
	cols := make([]string, len(types))
	sel := make([]string, len(types))
	for i, t := range types {
		cols[i] = "c" + strconv.Itoa(i)
		sel[i] = "+\"c" + strconv.Itoa(i) + "\" AS \"" + strings.ReplaceAll(t.Name(), `"`, `""`) + "\""
	}
	return "WITH \"quorum_q\"(" + strings.Join(cols, ",") + ") AS (\n" + stmt + "\n) SELECT " +
		strings.Join(sel, ", ") + " FROM \"quorum_q\"", true
}

func (d *DB) scan(ctx context.Context, conn *sql.Conn, stmt string, lim warehouse.Limits) (*warehouse.Result, error) {
	rows, err := conn.QueryContext(ctx, stmt)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return warehouse.ScanRows(rows, lim, func(v any, _ int) warehouse.Value { return toValue(v) })
}

func toValue(v any) warehouse.Value {
	if cell, ok := warehouse.BasicValue(v); ok {
		return cell
	}
	switch x := v.(type) {
	case time.Time:
		// Only reachable if the probe missed a date column; keep SQLite's
		// own text form.
		return warehouse.TextValue(x.Format("2006-01-02 15:04:05"))
	}
	return warehouse.TextValue(fmt.Sprint(v))
}

// Set keeps one pool per database file for processes that serve many
// databases (a worker over a whole benchmark).
type Set struct {
	// Base is applied to every database opened through the set.
	Base Config

	mu  sync.Mutex
	dbs map[string]*DB
}

// Get returns the pool for path, opening it on first use.
func (s *Set) Get(path string) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite database %s: %w", filepath.Base(path), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if db, ok := s.dbs[abs]; ok {
		return db, nil
	}
	cfg := s.Base
	cfg.Path, cfg.Name = abs, "" // each database is named after its file
	db, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	if s.dbs == nil {
		s.dbs = make(map[string]*DB)
	}
	s.dbs[abs] = db
	return db, nil
}

// Close closes every pool in the set.
func (s *Set) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, db := range s.dbs {
		errs = append(errs, db.Close())
	}
	s.dbs = nil
	return errors.Join(errs...)
}
