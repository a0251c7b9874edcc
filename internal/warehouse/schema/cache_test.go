package schema

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // registers "sqlite" for the read-write test connection

	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// openRW opens path read-write, as a user changing their database would.
func openRW(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestFingerprint: equal while the schema stands (data changes included),
// different once a table is added, a column added or a view created.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	db, _, _ := demo(t)
	path := copyDemo(t, db)
	wh, err := sqlite.Open(sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	rw := openRW(t, path)
	ctx := context.Background()
	fp := func() string {
		t.Helper()
		s, err := Fingerprint(ctx, wh, "shop")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s, "sha256:") || len(s) != len("sha256:")+64 {
			t.Fatalf("fingerprint %q", s)
		}
		return s
	}
	seen := map[string]string{}
	prev := fp()
	seen[prev] = "start"
	tests := []struct {
		change string
		moves  bool
	}{
		{"", false},
		{"INSERT INTO orders (order_id) VALUES (999999)", false},
		{"CREATE TABLE wishlists (customer_id INTEGER, product_id INTEGER)", true},
		{"ALTER TABLE wishlists ADD COLUMN added_at TIMESTAMP", true},
		{"CREATE VIEW big_orders AS SELECT * FROM orders WHERE total > 1000", true},
		{"DELETE FROM orders WHERE order_id = 999999", false},
	}
	for _, tt := range tests {
		if tt.change != "" {
			if _, err := rw.Exec(tt.change); err != nil {
				t.Fatalf("%s: %v", tt.change, err)
			}
		}
		got := fp()
		if moved := got != prev; moved != tt.moves {
			t.Errorf("after %q: fingerprint moved = %v, want %v", tt.change, moved, tt.moves)
		}
		if tt.moves {
			if before, ok := seen[got]; ok {
				t.Errorf("after %q: fingerprint equals the one after %q", tt.change, before)
			}
			seen[got] = tt.change
		}
		prev = got
	}
	// The dialect's catalogue query for the others, without a warehouse.
	for _, tt := range []struct {
		d    warehouse.Dialect
		db   string
		want string
	}{
		{warehouse.Snowflake, "shop", `FROM "SHOP".INFORMATION_SCHEMA.COLUMNS`},
		{warehouse.Snowflake, `"My""Db"`, `FROM "My""Db".INFORMATION_SCHEMA.TABLES`},
		{warehouse.BigQuery, "p-1.a, p-1.b", "FROM `p-1`.b.INFORMATION_SCHEMA.COLUMNS"},
	} {
		q, _, err := fingerprintSQL(tt.d, tt.db)
		if err != nil || !strings.Contains(q, tt.want) {
			t.Errorf("%s %s: %v\n%s", tt.d, tt.db, err, q)
		}
	}
	for _, bad := range []struct {
		d  warehouse.Dialect
		db string
	}{{warehouse.Snowflake, `sh"op`}, {warehouse.BigQuery, "p.d'x"}, {warehouse.BigQuery, "p`q.d"}, {warehouse.BigQuery, " , "}} {
		if _, _, err := fingerprintSQL(bad.d, bad.db); err == nil {
			t.Errorf("%s %q accepted", bad.d, bad.db)
		}
	}
}

// counting passes queries to a real warehouse and counts the full reads
// (Read's first query).
type counting struct {
	warehouse.Warehouse
	mu    sync.Mutex
	reads int
}

func (c *counting) Query(ctx context.Context, q string, lim warehouse.Limits) (*warehouse.Result, error) {
	if q == sqliteTables {
		c.mu.Lock()
		c.reads++
		c.mu.Unlock()
	}
	return c.Warehouse.Query(ctx, q, lim)
}

func (c *counting) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// TestCache: against a real redis-server, a schema is read once, served
// from Redis while the fingerprint stands, re-read after the schema
// changes; concurrent callers, in one process or two, read once.
func TestCache(t *testing.T) {
	t.Parallel()
	db, _, _ := demo(t)
	path := copyDemo(t, db)
	sq, err := sqlite.Open(sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	wh := &counting{Warehouse: sq}
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	c := &Cache{Client: rdb, TTL: time.Hour}
	meta := &dataset.Database{Name: "shop", Dialect: warehouse.SQLite}

	first, err := c.Get(ctx, "local", wh, "shop", Options{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Get(ctx, "local", wh, "shop", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if wh.count() != 1 {
		t.Fatalf("%d reads for two Gets of an unchanged schema, want 1", wh.count())
	}
	// The cached copy (through JSON) renders as the fresh one.
	if render(again, meta, dbinfo.DefaultOptions()) != render(first, meta, dbinfo.DefaultOptions()) {
		t.Error("the cached schema renders differently from the read one")
	}
	key := Key("local", warehouse.SQLite, "shop", Options{})
	if !strings.HasPrefix(key, "quorum:schema:local:") {
		t.Errorf("key %q", key)
	}
	if ttl := rdb.TTL(ctx, key).Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("entry TTL %v, want up to an hour", ttl)
	}
	// Other options are another entry.
	if _, err := c.Get(ctx, "local", wh, "shop", Options{Tables: []string{"orders"}}); err != nil || wh.count() != 2 {
		t.Errorf("a filtered Get: %v, %d reads, want 2", err, wh.count())
	}

	if _, err := openRW(t, path).Exec("CREATE TABLE wishlists (customer_id INTEGER, product_id INTEGER)"); err != nil {
		t.Fatal(err)
	}
	changed, err := c.Get(ctx, "local", wh, "shop", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if wh.count() != 3 {
		t.Errorf("%d reads after the schema changed, want 3", wh.count())
	}
	if !strings.Contains(render(changed, meta, dbinfo.DefaultOptions()), "Table full name: wishlists\n") {
		t.Error("the re-read schema lacks the new table")
	}
	if _, err := c.Get(ctx, "local", wh, "shop", Options{}); err != nil || wh.count() != 3 {
		t.Errorf("Get after the re-read: %v, %d reads, want still 3", err, wh.count())
	}

	// Two processes (two caches), eight callers each, on a fresh key.
	other := &Cache{Client: rdb, Poll: 10 * time.Millisecond}
	before := wh.count()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		cache := c
		if i%2 == 1 {
			cache = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := cache.Get(ctx, "burst", wh, "shop", Options{SampleRows: 1})
			if err == nil && len(s.Folders) != 1 {
				err = errAt("burst schema has no folder")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := wh.count() - before; n != 1 {
		t.Errorf("16 concurrent Gets from two caches read %d times, want 1", n)
	}
	if n := rdb.Exists(ctx, Key("burst", warehouse.SQLite, "shop", Options{SampleRows: 1})+":lock").Val(); n != 0 {
		t.Error("the read lock was left behind")
	}

	// An entry stored under another fingerprint is replaced.
	if err := rdb.Set(ctx, key, `{"fingerprint":"sha256:old","schema":{"Database":"stale"}}`, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	before = wh.count()
	s, err := c.Get(ctx, "local", wh, "shop", Options{})
	if err != nil || s.Database != "shop" || wh.count() != before+1 {
		t.Errorf("stale entry: %v, database %q, %d reads", err, s.Database, wh.count()-before)
	}
}

type errAt string

func (e errAt) Error() string { return string(e) }
