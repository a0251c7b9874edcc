package serve

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/service"
	"github.com/quorumsql/quorum/internal/warehouse/schema"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Refresher is the live schema refresher, a component: from Start until
// Stop it checks every live database's schema fingerprint every Period and
// re-reads a database whose fingerprint changed, through the Redis schema
// cache shared by serve processes, into the dataset Materialise wrote.
type Refresher struct {
	// Dir is the materialised dataset; DBs its databases and Fingerprints
	// what Materialise returned (updated as schemas are re-read).
	Dir          string
	DBs          []LiveDB
	Fingerprints map[string]string
	Cache        *schema.Cache
	// Period is how often the fingerprints are checked (default 1m).
	Period time.Duration
	Log    *zap.Logger
	service.Loop
}

// Start starts checking.
func (r *Refresher) Start(ctx context.Context) error { return r.Go(ctx, r.run) }

func (r *Refresher) run(ctx context.Context) error {
	read := func(ctx context.Context, wh warehouse.Warehouse, db LiveDB) (*dataset.Schema, error) {
		return r.Cache.Get(ctx, "serve", wh, db.name, schema.Options{})
	}
	period := r.Period
	if period <= 0 {
		period = time.Minute
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, db := range r.DBs {
			if ctx.Err() != nil {
				return nil
			}
			key := string(db.dialect) + "/" + db.name
			wh, closeWH, err := db.open(ctx)
			if err != nil {
				r.Log.Warn("schema refresh: open", zap.String("db", db.name), zap.Error(err))
				continue
			}
			fp, err := schema.Fingerprint(ctx, wh, db.name)
			closeWH()
			if err != nil || fp == r.Fingerprints[key] {
				continue
			}
			if fp, err = writeLive(ctx, r.Dir, db, read); err != nil {
				r.Log.Warn("schema refresh", zap.String("db", db.name), zap.Error(err))
				continue
			}
			r.Fingerprints[key] = fp
			r.Log.Info("schema changed: re-read", zap.String("db", db.name), zap.String("fingerprint", fp))
		}
	}
}
