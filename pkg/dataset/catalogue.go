package dataset

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

// catalogue registers the databases no example names: each metadata folder
// under resource/databases/<dialect>/ and each SQLite file where the loader
// looks for them. Names that are not safe are left out.
func (ds *Dataset) catalogue(opt Options) {
	base := filepath.Join(ds.Root, "resource", "databases")
	for _, d := range []sqltext.Dialect{sqltext.SQLite, sqltext.Snowflake, sqltext.BigQuery} {
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
				ds.register(sqltext.SQLite, name, opt)
			}
		}
	}
}

// register adds a database unless it is known, resolving it as an
// example's would be. A database without its file is just not askable; one
// refused (a link out of the dataset, a file over its limit) is reported.
func (ds *Dataset) register(d sqltext.Dialect, name string, opt Options) {
	key := string(d) + "/" + name
	if _, ok := ds.Databases[key]; ok {
		return
	}
	if _, ok := ds.refused[key]; ok {
		return
	}
	db, err := ds.database(d, name, opt)
	if err != nil {
		ds.problem(filepath.Join(ds.Root, "resource", "databases"), 0, "", "%v", err)
		return
	}
	if d == sqltext.SQLite && db.SQLitePath == "" {
		delete(ds.Databases, key)
	}
}
