package serve

import (
	"context"
	"fmt"

	"github.com/quorumsql/quorum/internal/warehouse/schema"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// open returns the warehouse of e's database: through the runtime's
// registry when it has one (within the warehouse's cluster-wide quota),
// else the dataset's SQLite file. Both read only.
func (s *Server) open(ctx context.Context, e *dataset.Example) (warehouse.Warehouse, error) {
	var wh warehouse.Warehouse
	var err error
	if reg := s.cfg.Env.Warehouses; reg != nil {
		wh, err = reg.Open(ctx, e, s.local)
	} else {
		wh, err = s.local.For(e)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", e.DB, err)
	}
	return wh, nil
}

// fingerprintOf reads a database's schema fingerprint from the warehouse
// itself, so that a cached answer is dropped once the schema changes.
func (s *Server) fingerprintOf(ctx context.Context, db *dataset.Database) (string, error) {
	wh, err := s.open(ctx, &dataset.Example{ID: "fingerprint", DB: db.Name, Dialect: db.Dialect})
	if err != nil {
		return "", err
	}
	return schema.Fingerprint(ctx, wh, db.Name)
}
