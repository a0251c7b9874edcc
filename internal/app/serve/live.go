package serve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/quorumsql/quorum/internal/warehouse/registry"
	"github.com/quorumsql/quorum/internal/warehouse/schema"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// LiveDB is one database read from its warehouse.
type LiveDB struct {
	dialect warehouse.Dialect
	name    string
	open    func(ctx context.Context) (warehouse.Warehouse, func(), error)
}

// LiveDatabases lists the databases serve reads live: every <db>.sqlite of
// sqliteDir (--sqlite-dir), and the databases each Snowflake or BigQuery
// warehouse of file (--warehouses-config) names.
func LiveDatabases(sqliteDir string, file *registry.File) ([]LiveDB, error) {
	var dbs []LiveDB
	if sqliteDir != "" {
		entries, err := os.ReadDir(sqliteDir)
		if err != nil {
			return nil, fmt.Errorf("--sqlite-dir: %w", err)
		}
		for _, en := range entries {
			name, ok := strings.CutSuffix(en.Name(), ".sqlite")
			if !ok || en.IsDir() {
				continue
			}
			if err := dataset.CheckName(name); err != nil {
				return nil, fmt.Errorf("--sqlite-dir: %s: %w", en.Name(), err)
			}
			path := filepath.Join(sqliteDir, en.Name())
			dbs = append(dbs, LiveDB{dialect: warehouse.SQLite, name: name, open: func(context.Context) (warehouse.Warehouse, func(), error) {
				db, err := sqlite.Open(sqlite.Config{Path: path, MaxOpenConns: 2})
				if err != nil {
					return nil, nil, err
				}
				return db, func() { db.Close() }, nil
			}})
		}
	}
	if file != nil {
		reg := &registry.Registry{File: file}
		for _, spec := range file.Warehouses {
			if spec.Kind == warehouse.SQLite {
				continue
			}
			for _, name := range spec.Databases {
				if err := dataset.CheckName(name); err != nil {
					return nil, fmt.Errorf("--warehouses-config: warehouse %s: database %q: %w", spec.Name, name, err)
				}
				e := &dataset.Example{ID: "live", DB: name, Dialect: spec.Kind}
				dbs = append(dbs, LiveDB{dialect: spec.Kind, name: name, open: func(ctx context.Context) (warehouse.Warehouse, func(), error) {
					wh, err := reg.Open(ctx, e, nil)
					return wh, func() {}, err
				}})
			}
		}
	}
	if len(dbs) == 0 {
		return nil, errors.New("no databases to serve: pass --dataset DIR, or --sqlite-dir DIR of .sqlite files, or --warehouses-config naming each Snowflake or BigQuery warehouse's databases")
	}
	sort.Slice(dbs, func(i, j int) bool { return dbs[i].name < dbs[j].name })
	return dbs, nil
}

// Materialise reads each database's schema from its warehouse and writes it
// as a Spider 2.0 dataset under dir, which every agent and worker reads
// like any other dataset. It returns the fingerprints it wrote, by
// dialect/name.
func Materialise(ctx context.Context, dir string, dbs []LiveDB) (map[string]string, error) {
	read := func(ctx context.Context, wh warehouse.Warehouse, db LiveDB) (*dataset.Schema, error) {
		return schema.Read(ctx, wh, db.name, schema.Options{})
	}
	if err := os.MkdirAll(dir, outputs.DirMode); err != nil {
		return nil, err
	}
	// An empty task file: the questions come over the API.
	if err := os.WriteFile(filepath.Join(dir, "questions.jsonl"), nil, outputs.FileMode); err != nil {
		return nil, err
	}
	fps := map[string]string{}
	for _, db := range dbs {
		fp, err := writeLive(ctx, dir, db, read)
		if err != nil {
			return nil, err
		}
		fps[string(db.dialect)+"/"+db.name] = fp
	}
	return fps, nil
}

func writeLive(ctx context.Context, dir string, db LiveDB, read func(ctx context.Context, wh warehouse.Warehouse, db LiveDB) (*dataset.Schema, error)) (string, error) {
	wh, closeWH, err := db.open(ctx)
	if err != nil {
		return "", fmt.Errorf("database %s: %w", db.name, err)
	}
	defer closeWH()
	fp, err := schema.Fingerprint(ctx, wh, db.name)
	if err != nil {
		return "", fmt.Errorf("database %s: %w", db.name, err)
	}
	s, err := read(ctx, wh, db)
	if err != nil {
		return "", fmt.Errorf("database %s: %w", db.name, err)
	}
	if err := schema.WriteSpider(filepath.Join(dir, "resource", "databases", string(db.dialect), db.name), s); err != nil {
		return "", fmt.Errorf("database %s: %w", db.name, err)
	}
	return fp, nil
}
