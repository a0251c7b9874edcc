package serve

import (
	"context"
	"fmt"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/registry"
	"github.com/quorumsql/quorum/pkg/warehouse/schema"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// fingerprinter reads a database's schema fingerprint from the warehouse
// itself (through reg when set, within its quotas), so that a cached
// answer is dropped once the schema changes. The returned close releases
// the SQLite files it opened.
func fingerprinter(ds *dataset.Dataset, reg *registry.Registry) (func(ctx context.Context, db *dataset.Database) (string, error), func()) {
	local := &localdb.Warehouses{DS: ds, SQLite: &sqlite.Set{}}
	return func(ctx context.Context, db *dataset.Database) (string, error) {
		e := &dataset.Example{ID: "fingerprint", DB: db.Name, Dialect: db.Dialect}
		var wh warehouse.Warehouse
		var err error
		if reg != nil {
			wh, err = reg.Open(ctx, e, local)
		} else {
			wh, err = local.For(e)
		}
		if err != nil {
			return "", fmt.Errorf("open %s: %w", db.Name, err)
		}
		return schema.Fingerprint(ctx, wh, db.Name)
	}, func() { _ = local.SQLite.Close() }
}
