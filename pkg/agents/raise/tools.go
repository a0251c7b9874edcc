package raise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Tools are the agent's four commands (raise §3.1 L152-L157; D-R1, D-R3).
// The three read_* commands read quorum's metadata (compressed as for
// ReFoRCE: digit families of tables collapse to one line) and make no
// warehouse query; only run_query touches the warehouse, through its guard
// and gate.
type Tools struct {
	Info *dbinfo.Info
	WH   warehouse.Warehouse
	// Static refuses run_query (the static agent).
	Static bool
	// Cost receives run_query's queries.
	Cost *cost.Cost
}

// run_query's output limits (D-R3).
const (
	queryRows  = 20
	queryChars = 4000
)

// Commands the agent may run.
const (
	CmdTableNames = "read_table_names"
	CmdColumns    = "read_table_columns"
	CmdDocs       = "read_columns_documentation"
	CmdQuery      = "run_query"
)

// Run executes one command and returns its output. Errors of the command
// (unknown command, a bad argument, the engine's message) are outputs the
// model reads; only the infrastructure's failures are returned.
func (t *Tools) Run(ctx context.Context, name, args string) (string, error) {
	switch name {
	case CmdTableNames:
		return t.tableNames(), nil
	case CmdColumns:
		return t.columns(unquote(argument(args, "table_name", "table"))), nil
	case CmdDocs:
		return t.docs(parseList(argument(args, "column_names", "columns"))), nil
	case CmdQuery:
		if t.Static {
			return "Error: unknown command run_query", nil
		}
		return t.query(ctx, unquote(argument(args, "sql", "query")))
	}
	return fmt.Sprintf("Error: unknown command %s (the commands are read_table_names, read_table_columns, read_columns_documentation, run_query)", name), nil
}

func (t *Tools) tableNames() string {
	var lines []string
	for _, bl := range t.Info.Blocks {
		line := bl.FullName
		if others := len(bl.Members) - 1; others > 0 {
			line += fmt.Sprintf(" (and %d similar tables: %s, …, %s)", others, bl.Members[0], bl.Members[len(bl.Members)-1])
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// block finds a table by its full or bare name, case-insensitively; a
// member of a family answers with its representative's columns.
func (t *Tools) block(name string) *dbinfo.Block {
	name = strings.ToLower(strings.Trim(name, "`\"[] "))
	for _, bl := range t.Info.Blocks {
		full := strings.ToLower(bl.FullName)
		if full == name || strings.ToLower(bl.Name) == name || strings.HasSuffix(full, "."+name) {
			return bl
		}
		for _, m := range bl.Members {
			if strings.ToLower(m) == name {
				return bl
			}
		}
	}
	return nil
}

func (t *Tools) columns(table string) string {
	bl := t.block(table)
	if bl == nil {
		return "Error: table " + table + " not found"
	}
	lines := make([]string, len(bl.Columns))
	for i, c := range bl.Columns {
		lines[i] = c.Name + " " + c.Type
	}
	return strings.Join(lines, "\n")
}

func (t *Tools) docs(cols []string) string {
	var lines []string
	for _, c := range cols {
		table, col, dotted := cutLast(c, ".")
		found := false
		for _, bl := range t.Info.Blocks {
			if dotted && t.block(table) != bl {
				continue
			}
			for _, bc := range bl.Columns {
				if !strings.EqualFold(bc.Name, col) {
					continue
				}
				found = true
				doc := strings.TrimSpace(bc.Description)
				if doc == "" {
					doc = "(no documentation)"
				}
				lines = append(lines, bl.Name+"."+bc.Name+": "+doc)
			}
		}
		if !found {
			lines = append(lines, c+": (no such column)")
		}
	}
	if len(lines) == 0 {
		return "Error: give the columns as a list, e.g. read_columns_documentation([\"table.column\"])"
	}
	return strings.Join(lines, "\n")
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return "", s, false
}

func (t *Tools) query(ctx context.Context, sql string) (string, error) {
	if strings.TrimSpace(sql) == "" {
		return "Error: run_query needs a SQL query", nil
	}
	start := time.Now()
	res, err := t.WH.Query(ctx, sql, warehouse.Limits{MaxRows: 10_000})
	if t.Cost != nil {
		t.Cost.Query(time.Since(start), err != nil)
	}
	var qe *warehouse.QueryError
	switch {
	case errors.As(err, &qe):
		return "Error: " + qe.Message, nil
	case err != nil:
		return "", err
	case res.RowCount() == 0:
		return "The query returned no rows.", nil
	}
	lines := strings.SplitAfter(strings.TrimRight(res.CSV(), "\n"), "\n")
	cut := len(lines) > queryRows+1
	if cut {
		lines = lines[:queryRows+1]
	}
	out := strings.TrimRight(strings.Join(lines, ""), "\n")
	if len(out) > queryChars {
		out, cut = out[:queryChars], true
	}
	if cut || res.Truncated {
		total := fmt.Sprint(res.RowCount())
		if res.Truncated {
			total = "more than " + total
		}
		out += fmt.Sprintf("\n(%s rows in total; first %d shown)", total, min(queryRows, res.RowCount()))
	}
	return out, nil
}

// argument is a command's one argument: positional, after one of its
// keyword names ("sql=", "sql:"), or a JSON object holding it
// ({"table_name": "orders"}).
func argument(args string, names ...string) string {
	a := strings.TrimSpace(args)
	if strings.HasPrefix(a, "{") {
		if f, err := reply.Args(a); err == nil {
			for _, n := range names {
				if v, ok := f.String(n); ok {
					return strconv.Quote(v)
				}
				if v, ok := f[n]; ok {
					if b, err := json.Marshal(v); err == nil {
						return string(b)
					}
				}
			}
		}
	}
	for _, n := range names {
		if rest, ok := strings.CutPrefix(a, n); ok {
			if r := strings.TrimSpace(rest); strings.HasPrefix(r, "=") || strings.HasPrefix(r, ":") {
				return strings.TrimSpace(r[1:])
			}
		}
	}
	return a
}

// unquote reads one string argument: fenced (```sql … ```), triple-,
// double- or single-quoted (with backslash escapes), or bare text.
func unquote(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "```") || strings.HasPrefix(s, "~~~") {
		if bs := reply.Blocks(s); len(bs) > 0 {
			return bs[0].Body
		}
	}
	for _, q := range []string{`"""`, `'''`} {
		if len(s) >= 6 && strings.HasPrefix(s, q) && strings.HasSuffix(s, q) {
			return strings.TrimSpace(s[3 : len(s)-3])
		}
	}
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		body := s[1 : len(s)-1]
		r := strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\"`, `"`, `\'`, `'`, `\\`, `\`)
		return r.Replace(body)
	}
	return s
}

// parseList reads a list of strings, ["a", 'b'] or a bare a, b, also
// when it comes as one string holding the list ("[\"a\"]": a template
// that passes every parameter as text, <parameter=columns>["a"]).
func parseList(s string) []string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') {
		if inner := strings.TrimSpace(unquote(s)); strings.HasPrefix(inner, "[") && strings.HasSuffix(inner, "]") {
			s = inner
		}
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	var out []string
	for _, part := range strings.Split(s, ",") {
		if p := unquote(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}
