package registry

import (
	"context"
	"errors"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/snowflake"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

const config = `
warehouses:
  - name: local
    kind: sqlite
    quota: {qps: 20, max_concurrent: 4}
  - name: sf-marketplace
    kind: snowflake
    databases: [GA360, NOAA_DATA]
    snowflake: {account: acme, user: reader, password: pw, role: READER, warehouse: WH, statement_timeout: 60000000000}
    quota: {max_concurrent: 8}
  - name: sf-rest
    kind: snowflake
    snowflake: {account: acme, user: reader, oauth_token: tok}
  - name: bq
    kind: bigquery
    bigquery: {project: billing-1, location: US, max_bytes_billed: 1000000000}
    quota: {qps: 2, bytes_per_run: 5000000000000}
`

func write(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "warehouses.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadAndRoute(t *testing.T) {
	t.Parallel()
	f, err := Load(write(t, config))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ex   dataset.Example
		want string
	}{
		{dataset.Example{ID: "local1", DB: "shop", Dialect: warehouse.SQLite}, "local"},
		{dataset.Example{ID: "sf1", DB: "ga360", Dialect: warehouse.Snowflake}, "sf-marketplace"},
		{dataset.Example{ID: "sf2", DB: "FINANCE", Dialect: warehouse.Snowflake}, "sf-rest"},
		{dataset.Example{ID: "bq1", DB: "ga4", Dialect: warehouse.BigQuery}, "bq"},
	}
	for _, tt := range tests {
		got, err := f.Route(&tt.ex)
		if err != nil || got != tt.want {
			t.Errorf("Route(%s) = %q, %v; want %q", tt.ex.ID, got, err, tt.want)
		}
	}
	s, _ := f.Spec("bq")
	if s.Quota.BytesPerRun != 5_000_000_000_000 || s.BigQuery.MaxBytesBilled != 1_000_000_000 {
		t.Errorf("bq spec %+v", s)
	}
	only, _ := Load(write(t, "warehouses:\n  - {name: local, kind: sqlite}\n"))
	if _, err := only.Route(&dataset.Example{ID: "bq9", DB: "x", Dialect: warehouse.BigQuery}); err == nil || !strings.Contains(err.Error(), "no bigquery warehouse") {
		t.Errorf("unrouted example: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ text, want string }{
		{"warehouses:\n  - {name: a, kind: oracle}\n", "unknown dialect"},
		{"warehouses:\n  - {name: a, kind: sqlite}\n  - {name: a, kind: sqlite}\n", "configured twice"},
		{"warehouses:\n  - {name: a.b, kind: sqlite}\n", "single word"},
		{"warehouses:\n  - {name: a, kind: sqlite, qouta: {qps: 1}}\n", "unknown field"},
	}
	for _, tt := range tests {
		if _, err := Load(write(t, tt.text)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%q) = %v, want %q", tt.text, err, tt.want)
		}
	}
}

type countingGate struct{ n int }

func (g *countingGate) Acquire(context.Context) (func(), error) { g.n++; return func() {}, nil }

func TestOpenGatesAndReusesConnections(t *testing.T) {
	t.Parallel()
	f, _ := Load(write(t, config))
	gates := map[string]*countingGate{}
	r := &Registry{File: f, Gates: func(name string, q Quota) (warehouse.Gate, error) {
		g := &countingGate{}
		gates[name] = g
		return g, nil
	}}
	defer r.Close()
	ds, err := dataset.Load("../../../examples/demo", dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	local := &localdb.Warehouses{DS: ds, SQLite: &sqlite.Set{}}
	e, _ := ds.Example("local001")
	wh, err := r.Open(context.Background(), e, local)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wh.Query(context.Background(), "SELECT count(*) FROM customers", warehouse.Limits{}); err != nil {
		t.Fatal(err)
	}
	if gates["local"] == nil || gates["local"].n != 1 {
		t.Errorf("the SQLite query did not pass the warehouse's gate: %v", gates)
	}
	sf := &dataset.Example{ID: "sf1", DB: "GA360", Dialect: warehouse.Snowflake}
	a, err := r.Open(context.Background(), sf, local)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := r.Open(context.Background(), sf, local)
	ga, okA := a.(*warehouse.Gated)
	gb, okB := b.(*warehouse.Gated)
	if !okA || !okB {
		t.Fatalf("Snowflake warehouse with a quota is not gated: %T", a)
	}
	if _, ok := ga.W.(*snowflake.DB); !ok || ga.W != gb.W {
		t.Errorf("Snowflake warehouse not opened once per process: %T %T", ga.W, gb.W)
	}
}

// TestSlotReleasedWhenAQueryIsStopped: a warehouse's concurrency slot (the
// shared Redis semaphore) is given back when a query is interrupted at its
// timeout or cancelled by its caller, so stopped queries never starve the
// warehouse's quota.
func TestSlotReleasedWhenAQueryIsStopped(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	lim, err := ratelimit.New(ratelimit.Config{Client: srv.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	file := &File{Warehouses: []Spec{{Name: "local", Kind: warehouse.SQLite, Quota: Quota{MaxConcurrent: 1}}}}
	r := WithLimiter(file, lim)
	defer r.Close()
	ds, err := dataset.Load("../../../examples/demo", dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	local := &localdb.Warehouses{DS: ds, SQLite: &sqlite.Set{}}
	defer local.SQLite.Close()
	e, _ := ds.Example("local001")
	wh, err := r.Open(context.Background(), e, local)
	if err != nil {
		t.Fatal(err)
	}
	const slow = "SELECT count(*) FROM order_items a, order_items b, order_items c"
	// Interrupted at its timeout.
	_, err = wh.Query(context.Background(), slow, warehouse.Limits{Timeout: 300 * time.Millisecond})
	var qe *warehouse.QueryError
	if !errors.As(err, &qe) || !strings.Contains(qe.Message, "interrupted") {
		t.Fatalf("slow query: %v, want interrupted", err)
	}
	// Cancelled by its caller.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := wh.Query(ctx, slow, warehouse.Limits{}); err == nil {
		t.Fatal("a cancelled query returned no error")
	}
	// The one slot is free again: the next query starts at once.
	qctx, qcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer qcancel()
	if _, err := wh.Query(qctx, "SELECT 1", warehouse.Limits{}); err != nil {
		t.Fatalf("the next query did not get the slot: %v", err)
	}
}
