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

var (
	sfPlain = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*$`)
	sfBare  = regexp.MustCompile(`^[A-Z_][A-Z0-9_$]*$`)
)

// snowflakeName resolves a database name the way Snowflake resolves an
// identifier: a plain name is stored upper-case, a double-quoted one as
// written.
func snowflakeName(db string) (string, error) {
	db = strings.TrimSpace(db)
	if len(db) >= 2 && db[0] == '"' && db[len(db)-1] == '"' {
		inner := db[1 : len(db)-1]
		if strings.Contains(strings.ReplaceAll(inner, `""`, ""), `"`) || inner == "" {
			return "", fmt.Errorf("snowflake database %s: malformed quoted name", db)
		}
		return strings.ReplaceAll(inner, `""`, `"`), nil
	}
	if !sfPlain.MatchString(db) {
		return "", fmt.Errorf("snowflake database %q: use a plain name (letters, digits, '_', '$') or a double-quoted one", db)
	}
	return strings.ToUpper(db), nil
}

// sfIdent quotes a stored name as a Snowflake identifier, so that it is
// found exactly (lower case, spaces and quotes included).
func sfIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// sfDDLIdent writes a name as GET_DDL does: bare when Snowflake would
// store it unchanged unquoted, quoted otherwise.
func sfDDLIdent(s string) string {
	if sfBare.MatchString(s) {
		return s
	}
	return sfIdent(s)
}

// sfLiteral quotes s as a Snowflake string literal (which has backslash
// escapes).
func sfLiteral(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

func snowflakeTablesSQL(q string) string {
	return `SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, COMMENT FROM ` + q + `.INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA <> 'INFORMATION_SCHEMA' ORDER BY TABLE_SCHEMA, TABLE_NAME`
}

func snowflakeColumnsSQL(q string) string {
	return `SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, IS_NULLABLE, COMMENT FROM ` +
		q + `.INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA <> 'INFORMATION_SCHEMA' ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION`
}

// sfColumn is one INFORMATION_SCHEMA.COLUMNS row.
type sfColumn struct {
	name, dataType, nullable, comment string
	ordinal                           int64
	charLen, precision, scale, dtPrec int64
	hasLen, hasPrec, hasScale, hasDT  bool
}

// readSnowflake reads <DB>.INFORMATION_SCHEMA in two queries (tables, then
// every column of the database) and reconstructs each table's DDL from
// them in GET_DDL's layout. GET_DDL itself takes one query per table (or
// one per schema whose output must be split back into statements): on a
// schema of hundreds of tables that is hundreds of billed round trips for
// text the agents never show, since the prompt is built from the columns.
func readSnowflake(ctx context.Context, wh warehouse.Warehouse, db string, opt Options) (*dataset.Schema, error) {
	name, err := snowflakeName(db)
	if err != nil {
		return nil, err
	}
	q := sfIdent(name)
	res, err := wh.Query(ctx, snowflakeTablesSQL(q), warehouse.Limits{})
	if err != nil {
		return nil, fmt.Errorf("list tables of snowflake database %s: %w", name, err)
	}
	idx, err := columnsOf(res, "TABLE_SCHEMA", "TABLE_NAME", "TABLE_TYPE")
	if err != nil {
		return nil, fmt.Errorf("list tables of snowflake database %s: %w", name, err)
	}
	s := &dataset.Schema{Database: name}
	folders := map[string]*dataset.SchemaFolder{}
	kinds := map[*dataset.Table]string{}
	for _, r := range res.Rows {
		sch, tname := text(cell(r, idx, "TABLE_SCHEMA")), text(cell(r, idx, "TABLE_NAME"))
		f, ok := folders[sch]
		if !ok {
			f = &dataset.SchemaFolder{Path: sch}
			folders[sch] = f
			s.Folders = append(s.Folders, f)
		}
		t := &dataset.Table{Name: tname, FullName: name + "." + sch + "." + tname, Description: text(cell(r, idx, "COMMENT")), HasJSON: true}
		kinds[t] = text(cell(r, idx, "TABLE_TYPE"))
		f.Tables = append(f.Tables, t)
	}
	// Go's order, not the engine's collation, so that folders and tables
	// come back as dataset.LoadSchema lists the files WriteSpider writes.
	sort.SliceStable(s.Folders, func(i, j int) bool { return s.Folders[i].Path < s.Folders[j].Path })
	for _, f := range s.Folders {
		sort.SliceStable(f.Tables, func(i, j int) bool { return f.Tables[i].Name < f.Tables[j].Name })
	}
	if err := filter(s, opt); err != nil {
		return nil, err
	}
	if n, _ := s.Count(); n == 0 {
		return s, nil
	}

	res, err = wh.Query(ctx, snowflakeColumnsSQL(q), warehouse.Limits{})
	if err != nil {
		return nil, fmt.Errorf("list columns of snowflake database %s: %w", name, err)
	}
	idx, err = columnsOf(res, "TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME", "DATA_TYPE")
	if err != nil {
		return nil, fmt.Errorf("list columns of snowflake database %s: %w", name, err)
	}
	cols := map[[2]string][]sfColumn{}
	for _, r := range res.Rows {
		key := [2]string{text(cell(r, idx, "TABLE_SCHEMA")), text(cell(r, idx, "TABLE_NAME"))}
		c := sfColumn{name: text(cell(r, idx, "COLUMN_NAME")), dataType: text(cell(r, idx, "DATA_TYPE")),
			nullable: text(cell(r, idx, "IS_NULLABLE")), comment: text(cell(r, idx, "COMMENT"))}
		c.ordinal, _ = integer(cell(r, idx, "ORDINAL_POSITION"))
		c.charLen, c.hasLen = integer(cell(r, idx, "CHARACTER_MAXIMUM_LENGTH"))
		c.precision, c.hasPrec = integer(cell(r, idx, "NUMERIC_PRECISION"))
		c.scale, c.hasScale = integer(cell(r, idx, "NUMERIC_SCALE"))
		c.dtPrec, c.hasDT = integer(cell(r, idx, "DATETIME_PRECISION"))
		cols[key] = append(cols[key], c)
	}
	for _, f := range s.Folders {
		for _, t := range f.Tables {
			cs := cols[[2]string{f.Path, t.Name}]
			sort.SliceStable(cs, func(i, j int) bool { return cs[i].ordinal < cs[j].ordinal })
			for _, c := range cs {
				t.Columns = append(t.Columns, dataset.ColumnMeta{Name: c.name, Type: c.dataType, Description: c.comment})
			}
			t.DDL = snowflakeDDL(kinds[t], t.Name, t.Description, cs)
		}
	}
	err = sampleAll(ctx, wh, s, opt, func(f *dataset.SchemaFolder, t *dataset.Table) string {
		return "SELECT * FROM " + q + "." + sfIdent(f.Path) + "." + sfIdent(t.Name) + " LIMIT " + strconv.Itoa(opt.sampleRows())
	})
	if err != nil {
		return nil, fmt.Errorf("read schema of snowflake database %s: %w", name, err)
	}
	return s, nil
}

// snowflakeDDL writes a table's DDL in GET_DDL's layout:
//
//	create or replace TABLE ORDERS (
//		ID NUMBER(38,0) NOT NULL COMMENT 'Order id',
//		"note" VARCHAR(16777216)
//	)COMMENT='Orders'
//	;
func snowflakeDDL(kind, name, comment string, cols []sfColumn) string {
	keyword := kind
	switch kind {
	case "BASE TABLE", "":
		keyword = "TABLE"
	case "VIEW":
		keyword = "VIEW"
	}
	var b strings.Builder
	b.WriteString("create or replace " + keyword + " " + sfDDLIdent(name) + " (\n")
	for i, c := range cols {
		b.WriteString("\t" + sfDDLIdent(c.name) + " " + c.ddlType())
		if c.nullable == "NO" {
			b.WriteString(" NOT NULL")
		}
		if c.comment != "" {
			b.WriteString(" COMMENT " + sfLiteral(c.comment))
		}
		if i < len(cols)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	if comment != "" {
		b.WriteString(")COMMENT=" + sfLiteral(comment) + "\n;")
	} else {
		b.WriteString(");")
	}
	return b.String()
}

// ddlType is the column's declared type as GET_DDL writes it: TEXT as
// VARCHAR(n), NUMBER with precision and scale, times with their
// precision.
func (c sfColumn) ddlType() string {
	t := strings.ToUpper(c.dataType)
	switch {
	case t == "TEXT" && c.hasLen:
		return fmt.Sprintf("VARCHAR(%d)", c.charLen)
	case t == "TEXT":
		return "VARCHAR"
	case t == "BINARY" && c.hasLen:
		return fmt.Sprintf("BINARY(%d)", c.charLen)
	case t == "NUMBER" && c.hasPrec && c.hasScale:
		return fmt.Sprintf("NUMBER(%d,%d)", c.precision, c.scale)
	case (strings.HasPrefix(t, "TIMESTAMP") || t == "TIME") && c.hasDT:
		return fmt.Sprintf("%s(%d)", t, c.dtPrec)
	}
	return c.dataType
}
