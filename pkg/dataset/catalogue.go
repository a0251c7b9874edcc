package dataset

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// catalogue registers the databases no example names: each metadata folder
// under resource/databases/<dialect>/ and each SQLite file where the loader
// looks for them. Names that are not safe are left out.
func (ds *Dataset) catalogue(opt Options) {
	base := filepath.Join(ds.Root, "resource", "databases")
	for _, d := range []warehouse.Dialect{warehouse.SQLite, warehouse.Snowflake, warehouse.BigQuery} {
		entries, _ := os.ReadDir(filepath.Join(base, string(d)))
		for _, en := range entries {
			dir := filepath.Join(base, string(d), en.Name())
			if en.IsDir() && CheckName(en.Name()) == nil && hasMetadata(dir) {
				ds.register(d, en.Name(), opt)
			}
		}
	}
	dirs := []string{filepath.Join(base, "spider2-localdb"), base}
	if opt.SQLiteDir != "" {
		dirs = append([]string{opt.SQLiteDir}, dirs...)
	}
	for _, dir := range dirs {
		entries, _ := os.ReadDir(dir)
		for _, en := range entries {
			name, ok := strings.CutSuffix(en.Name(), ".sqlite")
			if ok && !en.IsDir() && CheckName(name) == nil {
				ds.register(warehouse.SQLite, name, opt)
			}
		}
	}
}

// register adds a database unless it is known, resolving it as an
// example's would be.
func (ds *Dataset) register(d warehouse.Dialect, name string, opt Options) {
	if _, ok := ds.Databases[string(d)+"/"+name]; ok {
		return
	}
	e := &Example{ID: "catalogue", DB: name, Dialect: d}
	before, blocked := len(ds.Problems), ds.blocked[e.ID]
	ds.resolveDatabase(e, "", 0, opt)
	// A database without its file is just not askable: no problem to report.
	ds.Problems, ds.blocked[e.ID] = ds.Problems[:before], blocked
	if !blocked {
		delete(ds.blocked, e.ID)
	}
	if db := ds.Databases[string(d)+"/"+name]; db != nil && d == warehouse.SQLite && db.SQLitePath == "" {
		delete(ds.Databases, string(d)+"/"+name)
	}
}
