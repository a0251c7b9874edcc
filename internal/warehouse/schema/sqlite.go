package schema

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// sqliteTables lists tables and views in catalogue (creation) order, which
// is the order Spider 2.0's DDL.csv files follow. sqlite_* tables are
// SQLite's own bookkeeping (sqlite_sequence, sqlite_stat1), not data.
const sqliteTables = `SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite!_%' ESCAPE '!' ORDER BY rowid`

// sqliteLiteral quotes s as an SQLite string literal.
func sqliteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// sqliteIdent quotes s as an SQLite identifier.
func sqliteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func readSQLite(ctx context.Context, wh warehouse.Warehouse, db string, opt Options) (*dataset.Schema, error) {
	res, err := wh.Query(ctx, sqliteTables, warehouse.Limits{})
	if err != nil {
		return nil, fmt.Errorf("list tables of %s: %w", db, err)
	}
	f := &dataset.SchemaFolder{}
	views := map[string]bool{}
	for _, r := range res.Rows {
		kind, name, sql := text(r[0]), text(r[1]), text(r[2])
		ddl := strings.TrimSpace(sql)
		if ddl != "" && !strings.HasSuffix(ddl, ";") {
			// Spider 2.0's DDL.csv ends every statement with ';';
			// sqlite_master keeps the text without it.
			ddl += ";"
		}
		if kind == "view" {
			views[name] = true
		}
		f.Tables = append(f.Tables, &dataset.Table{Name: name, FullName: name, DDL: ddl, HasJSON: true})
	}
	s := &dataset.Schema{Database: db, Folders: []*dataset.SchemaFolder{f}}
	if err := filter(s, opt); err != nil {
		return nil, err
	}
	for _, f := range s.Folders {
		kept := f.Tables[:0]
		for _, t := range f.Tables {
			cols, err := wh.Query(ctx, "SELECT name, type FROM pragma_table_info("+sqliteLiteral(t.Name)+")", warehouse.Limits{})
			var qe *warehouse.QueryError
			if err != nil && errors.As(err, &qe) && views[t.Name] {
				continue // a view over a dropped table cannot be queried; leave it out
			}
			if err != nil {
				return nil, fmt.Errorf("columns of %s.%s: %w", db, t.Name, err)
			}
			for _, c := range cols.Rows {
				t.Columns = append(t.Columns, dataset.ColumnMeta{Name: text(c[0]), Type: text(c[1])})
			}
			kept = append(kept, t)
		}
		f.Tables = kept
	}
	err = sampleAll(ctx, wh, s, opt, func(_ *dataset.SchemaFolder, t *dataset.Table) string {
		return "SELECT * FROM " + sqliteIdent(t.Name) + fmt.Sprintf(" LIMIT %d", opt.sampleRows())
	})
	if err != nil {
		return nil, fmt.Errorf("read schema of %s: %w", db, err)
	}
	return s, nil
}
