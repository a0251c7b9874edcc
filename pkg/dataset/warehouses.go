package dataset

import (
	"context"
	"fmt"

	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// Warehouses opens the warehouse behind each example's database. SQLite
// files get one pool each; Snowflake and BigQuery need their own
// configuration, which this type does not have yet.
type Warehouses struct {
	DS     *Dataset
	SQLite *sqlite.Set
	// Limits apply to RunInstanceSQL.
	Limits warehouse.Limits
}

// For returns the warehouse of e's database.
func (w *Warehouses) For(e *Example) (warehouse.Warehouse, error) {
	db, ok := w.DS.Database(e)
	if !ok {
		return nil, fmt.Errorf("%s: database %q is not in the dataset", e.ID, e.DB)
	}
	switch db.Dialect {
	case warehouse.SQLite:
		if db.SQLitePath == "" {
			return nil, fmt.Errorf("%s: no sqlite file for database %q; put it in resource/databases/spider2-localdb/ or pass --sqlite-dir", e.ID, e.DB)
		}
		return w.SQLite.Get(db.SQLitePath)
	}
	return nil, fmt.Errorf("%s: no %s warehouse is configured for database %q", e.ID, db.Dialect, e.DB)
}

// RunInstanceSQL implements eval.SQLRunner.
func (w *Warehouses) RunInstanceSQL(ctx context.Context, id, sql string) (*warehouse.Result, warehouse.Dialect, error) {
	e, ok := w.DS.Example(id)
	if !ok {
		return nil, "", fmt.Errorf("instance %s is not in dataset %s", id, w.DS.Root)
	}
	wh, err := w.For(e)
	if err != nil {
		return nil, e.Dialect, err
	}
	res, err := wh.Query(ctx, sql, w.Limits)
	return res, e.Dialect, err
}
