package dbinfo

import (
	"context"
	"fmt"
	"strings"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// FromMetadata builds the table information from Spider 2.0 metadata
// (DDL.csv rows and per-table JSON). Families are formed over every table,
// JSON or not, as the reference groups DDL.csv rows before it reads any
// JSON (reconstruct_data.py:200-213): a family's members name all its
// tables. Only then are tables without a JSON file skipped, having no
// columns to show; a family whose representative has none vanishes whole,
// as in the reference (docs/agents/reforce.md D-F10).
func FromMetadata(s *dataset.Schema, db *dataset.Database, opt Options) *Info {
	info := &Info{Database: db.Name, Dialect: db.Dialect, opt: opt}
	for _, f := range s.Folders {
		var blocks []*Block
		noJSON := map[*Block]bool{}
		for _, t := range f.Tables {
			bl := &Block{FullName: t.FullName, Name: t.Name, sampleJSON: t.SampleRows}
			if !t.HasJSON {
				noJSON[bl] = true
			}
			if bl.FullName == "" {
				bl.FullName = t.Name
			}
			bl.DBName, bl.Schema = db.Name, f.Path
			if parts := strings.Split(bl.FullName, "."); len(parts) >= 3 {
				bl.DBName, bl.Schema = parts[0], parts[1]
			}
			for _, c := range t.Columns {
				bl.Columns = append(bl.Columns, Column{Name: c.Name, Type: c.Type, Description: c.Description})
			}
			blocks = append(blocks, bl)
		}
		if opt.Group {
			blocks = group(blocks, opt.GroupMin)
		}
		kept := blocks[:0]
		for _, bl := range blocks {
			if !noJSON[bl] {
				kept = append(kept, bl)
			}
		}
		blocks = kept
		if opt.Structural {
			blocks = groupStructure(blocks)
		}
		info.Blocks = append(info.Blocks, blocks...)
	}
	info.render()
	return info
}

// FromSQLite builds the table information straight from a live SQLite
// database: tables in catalogue order, declared column types and the first
// three rows of each table. When column documentation is given (BIRD's
// database_description, dataset.Database.Descriptions), each documented
// column's Description is its ColumnDoc.Text(), matched by table and column
// name without regard to case.
func FromSQLite(ctx context.Context, wh warehouse.Warehouse, name string, opt Options, docs ...dataset.Descriptions) (*Info, error) {
	info := &Info{Database: name, Dialect: warehouse.SQLite, opt: opt}
	res, err := wh.Query(ctx, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'", warehouse.Limits{})
	if err != nil {
		return nil, fmt.Errorf("list tables of %s: %w", name, err)
	}
	var blocks []*Block
	for _, r := range res.Rows {
		table := r[0].Str
		lit := "'" + strings.ReplaceAll(table, "'", "''") + "'"
		cols, err := wh.Query(ctx, "SELECT name, type FROM pragma_table_info("+lit+")", warehouse.Limits{})
		if err != nil {
			return nil, fmt.Errorf("columns of %s.%s: %w", name, table, err)
		}
		bl := &Block{FullName: table, Name: table}
		for _, c := range cols.Rows {
			col := Column{Name: c[0].Str, Type: c[1].Str}
			for _, d := range docs {
				if doc, ok := d.Column(table, col.Name); ok {
					col.Description = doc.Text()
					break
				}
			}
			bl.Columns = append(bl.Columns, col)
		}
		if opt.SampleRows {
			rows, err := wh.Query(ctx, `SELECT * FROM "`+strings.ReplaceAll(table, `"`, `""`)+`" LIMIT 3`, warehouse.Limits{MaxBytes: 64 << 10})
			if err != nil {
				return nil, fmt.Errorf("sample rows of %s.%s: %w", name, table, err)
			}
			bl.sampleRows = rows.Rows
			if bl.sampleRows == nil {
				bl.sampleRows = [][]warehouse.Value{}
			}
		}
		blocks = append(blocks, bl)
	}
	if opt.Group {
		blocks = group(blocks, opt.GroupMin)
	}
	if opt.Structural {
		blocks = groupStructure(blocks)
	}
	info.Blocks = blocks
	info.render()
	return info, nil
}

// Opener gives the warehouse of a database, for live SQLite reads.
type Opener interface {
	For(e *dataset.Example) (warehouse.Warehouse, error)
}

// ForExample builds the table information of e's database: from its Spider
// 2.0 metadata when the dataset has it, otherwise from the live SQLite file,
// with the database's BIRD column descriptions when it has them.
func ForExample(ctx context.Context, ds *dataset.Dataset, e *dataset.Example, open Opener, opt Options) (*Info, error) {
	db, ok := ds.Database(e)
	if !ok {
		return nil, fmt.Errorf("%s: database %q is not in the dataset", e.ID, e.DB)
	}
	if db.MetaDir != "" {
		s, _, err := dataset.LoadSchema(db)
		if err != nil {
			return nil, err
		}
		return FromMetadata(s, db, opt), nil
	}
	if db.Dialect != warehouse.SQLite || open == nil {
		return nil, fmt.Errorf("%s: database %q has no metadata folder and no live connection", e.ID, e.DB)
	}
	wh, err := open.For(e)
	if err != nil {
		return nil, err
	}
	return FromSQLite(ctx, wh, db.Name, opt, db.Descriptions)
}
