// Package localdb opens the warehouses a dataset folder brings with it: the
// SQLite file behind each example's database (Spider 2.0-lite's
// spider2-localdb, BIRD's and Spider 1.0's database folders), one pool per
// file. Snowflake and BigQuery need a configured warehouse registry.
package localdb

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// Warehouses opens the warehouse behind each example's database.
type Warehouses struct {
	DS     *dataset.Dataset
	SQLite *sqlite.Set
	// Limits apply to RunInstanceSQL.
	Limits warehouse.Limits
}

// For returns the warehouse of e's database.
func (w *Warehouses) For(e *dataset.Example) (warehouse.Warehouse, error) {
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
		// The dataset's folder name, not its path: errors can reach a
		// tenant or the model.
		return nil, "", fmt.Errorf("instance %s is not in dataset %s", id, filepath.Base(w.DS.Root))
	}
	wh, err := w.For(e)
	if err != nil {
		return nil, e.Dialect, err
	}
	res, err := wh.Query(ctx, sql, w.Limits)
	return res, e.Dialect, err
}
