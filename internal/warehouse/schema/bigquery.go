package schema

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// bqDataset is one "project.dataset" of a BigQuery db.
type bqDataset struct{ project, dataset string }

var (
	bqProject     = regexp.MustCompile(`^[A-Za-z0-9.:_-]+$`)
	bqDatasetName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
)

// bqDatasets splits db into its datasets: "project.dataset" entries
// separated by commas, or a bare dataset of the billing project. Project
// ids may hold '.' and ':' (domain-scoped projects), dataset names cannot,
// so the dataset is what follows the last '.'.
func bqDatasets(db string) ([]bqDataset, error) {
	var out []bqDataset
	for _, e := range strings.Split(db, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		d := bqDataset{dataset: e}
		if i := strings.LastIndexByte(e, '.'); i >= 0 {
			d.project, d.dataset = e[:i], e[i+1:]
			if !bqProject.MatchString(d.project) {
				return nil, fmt.Errorf("bigquery database %q: project %q is not a project id", db, d.project)
			}
		}
		if !bqDatasetName.MatchString(d.dataset) {
			return nil, fmt.Errorf("bigquery database %q: dataset %q: use letters, digits and '_'", db, d.dataset)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bigquery database %q: name project.dataset (several separated by commas)", db)
	}
	return out, nil
}

// ref is the dataset as a FROM path prefix.
func (d bqDataset) ref() string {
	if d.project == "" {
		return d.dataset
	}
	return bqIdent(d.project) + "." + d.dataset
}

func (d bqDataset) String() string {
	if d.project == "" {
		return d.dataset
	}
	return d.project + "." + d.dataset
}

// bqIdent quotes a name as a BigQuery identifier (quoted identifiers take
// backslash escapes).
func bqIdent(s string) string {
	return "`" + strings.NewReplacer(`\`, `\\`, "`", "\\`").Replace(s) + "`"
}

func bigqueryTablesSQL(d bqDataset) string {
	return "SELECT table_catalog, table_schema, table_name, table_type, ddl FROM " + d.ref() + ".INFORMATION_SCHEMA.TABLES ORDER BY table_name"
}

// bigqueryColumnsSQL joins COLUMNS (top-level order, pseudo-columns
// hidden) with COLUMN_FIELD_PATHS (every STRUCT/ARRAY leaf with its type
// and description) in one query: each INFORMATION_SCHEMA query is billed
// at least 10 MB.
func bigqueryColumnsSQL(d bqDataset) string {
	r := d.ref()
	return "SELECT c.table_name, c.column_name, c.ordinal_position, c.data_type, p.field_path, p.data_type AS field_type, p.description" +
		" FROM " + r + ".INFORMATION_SCHEMA.COLUMNS AS c JOIN " + r + ".INFORMATION_SCHEMA.COLUMN_FIELD_PATHS AS p USING (table_name, column_name)" +
		" WHERE c.is_hidden = 'NO' ORDER BY c.table_name, c.ordinal_position, p.field_path"
}

// bqColumn is one top-level column with its field paths as received.
type bqColumn struct {
	name, typ string
	ordinal   int64
	paths     []string
}

type bqPath struct{ typ, description string }

// readBigQuery reads each dataset's INFORMATION_SCHEMA in two queries:
// TABLES (with each table's DDL) and COLUMNS joined with
// COLUMN_FIELD_PATHS. Column types are COLUMNS.data_type; nested leaves
// (Spider 2.0's nested_column_names/types) are every field path in
// schema order, the top-level columns included; descriptions are
// COLUMN_FIELD_PATHS.description.
//
// Sample rows: LIMIT alone still bills the whole table's bytes, so tables
// are read with TABLESAMPLE SYSTEM (1 PERCENT): a table under about 1 GB
// is one block and is read whole, a bigger one costs about 1% of its
// size, and a non-empty table always returns rows. Views and other
// non-tables, which TABLESAMPLE does not take, are read with LIMIT. The
// warehouse's MaximumBytesBilled and byte budget still apply: a sample
// they refuse leaves that table without sample rows. By default only the
// first shard of a sharded family is sampled (FamilySampling).
func readBigQuery(ctx context.Context, wh warehouse.Warehouse, db string, opt Options) (*dataset.Schema, error) {
	sets, err := bqDatasets(db)
	if err != nil {
		return nil, err
	}
	s := &dataset.Schema{Database: db}
	kinds := map[*dataset.Table]string{}
	for _, d := range sets {
		f, err := readBigQueryTables(ctx, wh, d, kinds)
		if err != nil {
			return nil, err
		}
		if f != nil {
			s.Folders = append(s.Folders, f)
		}
	}
	sort.SliceStable(s.Folders, func(i, j int) bool { return s.Folders[i].Path < s.Folders[j].Path })
	if err := filter(s, opt); err != nil {
		return nil, err
	}
	for _, f := range s.Folders {
		if err := readBigQueryColumns(ctx, wh, f); err != nil {
			return nil, err
		}
	}
	err = sampleAll(ctx, wh, s, opt, func(f *dataset.SchemaFolder, t *dataset.Table) string {
		project, ds := splitFolder(f.Path)
		from := bqIdent(project) + "." + bqIdent(ds) + "." + bqIdent(t.Name)
		if kinds[t] == "BASE TABLE" {
			from += " TABLESAMPLE SYSTEM (1 PERCENT)"
		}
		return "SELECT * FROM " + from + " LIMIT " + strconv.Itoa(opt.sampleRows())
	})
	if err != nil {
		return nil, fmt.Errorf("read schema of bigquery %s: %w", db, err)
	}
	return s, nil
}

func splitFolder(path string) (project, ds string) {
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return "", path
	}
	return path[:i], path[i+1:]
}

func readBigQueryTables(ctx context.Context, wh warehouse.Warehouse, d bqDataset, kinds map[*dataset.Table]string) (*dataset.SchemaFolder, error) {
	res, err := wh.Query(ctx, bigqueryTablesSQL(d), warehouse.Limits{})
	if err != nil {
		return nil, fmt.Errorf("list tables of bigquery dataset %s: %w", d, err)
	}
	idx, err := columnsOf(res, "TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME")
	if err != nil {
		return nil, fmt.Errorf("list tables of bigquery dataset %s: %w", d, err)
	}
	if len(res.Rows) == 0 {
		return nil, nil
	}
	var f *dataset.SchemaFolder
	for _, r := range res.Rows {
		path := text(cell(r, idx, "TABLE_CATALOG")) + "." + text(cell(r, idx, "TABLE_SCHEMA"))
		if f == nil {
			f = &dataset.SchemaFolder{Path: path}
		}
		name := text(cell(r, idx, "TABLE_NAME"))
		t := &dataset.Table{Name: name, FullName: path + "." + name, DDL: text(cell(r, idx, "DDL")), HasJSON: true}
		kinds[t] = text(cell(r, idx, "TABLE_TYPE"))
		f.Tables = append(f.Tables, t)
	}
	sort.SliceStable(f.Tables, func(i, j int) bool { return f.Tables[i].Name < f.Tables[j].Name })
	return f, nil
}

func readBigQueryColumns(ctx context.Context, wh warehouse.Warehouse, f *dataset.SchemaFolder) error {
	project, ds := splitFolder(f.Path)
	d := bqDataset{project: project, dataset: ds}
	res, err := wh.Query(ctx, bigqueryColumnsSQL(d), warehouse.Limits{})
	if err != nil {
		return fmt.Errorf("list columns of bigquery dataset %s: %w", d, err)
	}
	idx, err := columnsOf(res, "TABLE_NAME", "COLUMN_NAME", "DATA_TYPE", "FIELD_PATH")
	if err != nil {
		return fmt.Errorf("list columns of bigquery dataset %s: %w", d, err)
	}
	cols := map[string][]*bqColumn{}
	byName := map[[2]string]*bqColumn{}
	paths := map[string]map[string]bqPath{}
	for _, r := range res.Rows {
		table, column := text(cell(r, idx, "TABLE_NAME")), text(cell(r, idx, "COLUMN_NAME"))
		c, ok := byName[[2]string{table, column}]
		if !ok {
			ord, _ := integer(cell(r, idx, "ORDINAL_POSITION"))
			c = &bqColumn{name: column, typ: text(cell(r, idx, "DATA_TYPE")), ordinal: ord}
			byName[[2]string{table, column}] = c
			cols[table] = append(cols[table], c)
		}
		p := text(cell(r, idx, "FIELD_PATH"))
		c.paths = append(c.paths, p)
		if paths[table] == nil {
			paths[table] = map[string]bqPath{}
		}
		paths[table][p] = bqPath{typ: text(cell(r, idx, "FIELD_TYPE")), description: text(cell(r, idx, "DESCRIPTION"))}
	}
	for _, t := range f.Tables {
		list := cols[t.Name]
		sort.SliceStable(list, func(i, j int) bool { return list[i].ordinal < list[j].ordinal })
		fp := paths[t.Name]
		for _, c := range list {
			t.Columns = append(t.Columns, dataset.ColumnMeta{Name: c.name, Type: c.typ, Description: fp[c.name].description})
			t.Nested = append(t.Nested, nestedPaths(c, fp)...)
		}
	}
	return nil
}

// nestedPaths lists a column and its STRUCT/ARRAY leaves depth first in
// schema order, as Spider 2.0's nested_column_names do. The order comes
// from the column's type (COLUMN_FIELD_PATHS has no position); paths the
// type does not explain follow in the order received.
func nestedPaths(c *bqColumn, fp map[string]bqPath) []dataset.ColumnMeta {
	seen := map[string]bool{}
	var out []dataset.ColumnMeta
	add := func(path, parsedType string) {
		if seen[path] {
			return
		}
		seen[path] = true
		p, ok := fp[path]
		if !ok {
			p.typ = parsedType
		}
		out = append(out, dataset.ColumnMeta{Name: path, Type: p.typ, Description: p.description})
	}
	var walk func(prefix, typ string)
	walk = func(prefix, typ string) {
		for _, sf := range bqSubfields(typ) {
			path := prefix + "." + sf.name
			add(path, sf.typ)
			walk(path, sf.typ)
		}
	}
	add(c.name, c.typ)
	walk(c.name, c.typ)
	for _, p := range c.paths {
		add(p, "")
	}
	return out
}

type bqField struct{ name, typ string }

// bqSubfields returns the fields of a STRUCT type, looking through ARRAY:
// "ARRAY<STRUCT<key STRING, value STRUCT<x INT64>>>" gives key and value.
func bqSubfields(typ string) []bqField {
	t := strings.TrimSpace(typ)
	for {
		inner, ok := bqUnwrap(t, "ARRAY<")
		if !ok {
			break
		}
		t = inner
	}
	inner, ok := bqUnwrap(t, "STRUCT<")
	if !ok {
		return nil
	}
	var out []bqField
	for _, part := range bqSplit(inner) {
		part = strings.TrimSpace(part)
		var name, rest string
		if strings.HasPrefix(part, "`") {
			end := strings.IndexByte(part[1:], '`')
			if end < 0 {
				continue
			}
			name, rest = part[1:1+end], part[2+end:]
		} else {
			i := strings.IndexAny(part, " \t\n")
			if i < 0 {
				continue
			}
			name, rest = part[:i], part[i:]
		}
		out = append(out, bqField{name: name, typ: strings.TrimSpace(rest)})
	}
	return out
}

// bqUnwrap returns what lies between prefix's '<' and its matching '>'
// (anything after it, such as NOT NULL, is ignored).
func bqUnwrap(t, prefix string) (string, bool) {
	if len(t) < len(prefix) || !strings.EqualFold(t[:len(prefix)], prefix) {
		return "", false
	}
	depth, quoted := 1, false
	for i := len(prefix); i < len(t); i++ {
		switch c := t[i]; {
		case c == '`':
			quoted = !quoted
		case quoted:
		case c == '<':
			depth++
		case c == '>':
			depth--
			if depth == 0 {
				return t[len(prefix):i], true
			}
		}
	}
	return "", false
}

// bqSplit splits a STRUCT's field list on its top-level commas.
func bqSplit(s string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '`':
			quoted = !quoted
		case quoted:
		case c == '<' || c == '(':
			depth++
		case c == '>' || c == ')':
			depth--
		case c == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
