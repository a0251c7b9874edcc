package warehouse

import (
	"bufio"
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unsafe"

	"github.com/quorumsql/quorum/pkg/pyrepr"
)

// Kind is the type of one result cell. The zero Kind is SQL NULL, so a zero
// Value is a NULL cell.
type Kind uint8

// Cell kinds.
const (
	Null Kind = iota
	Int
	Float
	Text
	Bytes
	Bool
)

// Value is one typed cell.
type Value struct {
	Kind  Kind
	Int   int64
	Float float64
	// Str holds Text, and Bytes as raw bytes.
	Str  string
	Bool bool
}

// Constructors for cells.
func IntValue(i int64) Value     { return Value{Kind: Int, Int: i} }
func FloatValue(f float64) Value { return Value{Kind: Float, Float: f} }
func TextValue(s string) Value   { return Value{Kind: Text, Str: s} }
func BytesValue(b []byte) Value  { return Value{Kind: Bytes, Str: string(b)} }
func BoolValue(b bool) Value     { return Value{Kind: Bool, Bool: b} }

// BasicValue converts the Go types database drivers return for plain cells
// (nil, int64, float64, bool, string, []byte); ok is false for any other
// type, which the driver's own conversion handles.
func BasicValue(v any) (cell Value, ok bool) {
	switch x := v.(type) {
	case nil:
		return Value{}, true
	case int64:
		return IntValue(x), true
	case float64:
		return FloatValue(x), true
	case bool:
		return BoolValue(x), true
	case string:
		return TextValue(x), true
	case []byte:
		return BytesValue(x), true
	}
	return Value{}, false
}

// CSV returns the cell as pandas' to_csv writes it: NULL empty, floats as
// Python repr, bools True/False, bytes as b'..'.
func (v Value) CSV() string {
	switch v.Kind {
	case Int:
		return strconv.FormatInt(v.Int, 10)
	case Float:
		return pyrepr.Float(v.Float)
	case Text:
		return v.Str
	case Bytes:
		return pyrepr.Bytes([]byte(v.Str))
	case Bool:
		return pyrepr.Bool(v.Bool)
	}
	return ""
}

// size is the cell's contribution to Result.Bytes.
func (v Value) size() int64 {
	switch v.Kind {
	case Text, Bytes:
		return int64(len(v.Str))
	case Null:
		return 0
	}
	return 8
}

// Column describes one result column.
type Column struct {
	Name string
	// Type is the engine's type name for the column, when it knows one.
	Type string
}

// Result is a query's typed result table.
type Result struct {
	Columns []Column
	Rows    [][]Value
	// Truncated is set when a limit stopped the rows; TruncatedBy says which
	// ("rows" or "bytes").
	Truncated   bool
	TruncatedBy string
	// Bytes is the approximate size of the returned cells.
	Bytes int64
	// mem is what the cells hold in memory, overheads included.
	mem int64
}

// MaxResultMemory bounds what one result holds in memory whatever its
// Limits say: a cross join or an endless recursive CTE stops here, counted
// as each row is read, instead of exhausting the process. 64 MiB is far
// above any Spider 2.0 gold result (the largest is a few MB).
const MaxResultMemory = 64 << 20

// cellOverhead is a Value's own size, which a row of short cells is
// mostly made of.
const cellOverhead = int64(unsafe.Sizeof(Value{}))

// TooLarge reports a result cut by MaxResultMemory as the query's error:
// the model is told to aggregate or limit, and an evaluation scores it 0.
func (r *Result) TooLarge(d Dialect) error {
	if r.TruncatedBy != "memory" {
		return nil
	}
	return &QueryError{Dialect: d, Message: fmt.Sprintf("result too large: more than %d MiB after %d rows; aggregate, filter or add a LIMIT", MaxResultMemory>>20, len(r.Rows))}
}

// RowCount is the number of rows returned.
func (r *Result) RowCount() int { return len(r.Rows) }

// Append adds a row unless lim forbids it; it reports whether the row was
// kept. Implementations call it while streaming rows.
func (r *Result) Append(row []Value, lim Limits) bool {
	if lim.MaxRows > 0 && len(r.Rows) >= lim.MaxRows {
		r.Truncated, r.TruncatedBy = true, "rows"
		return false
	}
	var n int64
	for _, v := range row {
		n += v.size()
	}
	if lim.MaxBytes > 0 && r.Bytes+n > lim.MaxBytes {
		r.Truncated, r.TruncatedBy = true, "bytes"
		return false
	}
	m := n + int64(len(row))*cellOverhead + 24 // 24: the row's slice header
	if r.mem+m > MaxResultMemory {
		r.Truncated, r.TruncatedBy = true, "memory"
		return false
	}
	r.Rows = append(r.Rows, row)
	r.Bytes += n
	r.mem += m
	return true
}

// WriteCSV writes the table as pandas' DataFrame.to_csv(index=False) does,
// which is how Spider 2.0's gold result files were written: a header of
// column names, '\n' line ends, fields quoted only when they hold a comma,
// quote or line break, and a lone empty field written as "" so the row is
// not mistaken for a blank line.
func (r *Result) WriteCSV(w io.Writer) error {
	bw := bufio.NewWriter(w)
	names := make([]string, len(r.Columns))
	for i, c := range r.Columns {
		names[i] = c.Name
	}
	writeCSVRecord(bw, names)
	fields := make([]string, len(r.Columns))
	for _, row := range r.Rows {
		for i := range fields {
			fields[i] = ""
			if i < len(row) {
				fields[i] = row[i].CSV()
			}
		}
		writeCSVRecord(bw, fields)
	}
	return bw.Flush()
}

// CSV returns WriteCSV's output as a string.
func (r *Result) CSV() string {
	var b bytes.Buffer
	_ = r.WriteCSV(&b) // writes to a bytes.Buffer cannot fail
	return b.String()
}

func writeCSVRecord(w *bufio.Writer, fields []string) {
	if len(fields) == 1 && fields[0] == "" {
		w.WriteString("\"\"\n")
		return
	}
	for i, f := range fields {
		if i > 0 {
			w.WriteByte(',')
		}
		if strings.ContainsAny(f, ",\"\r\n") {
			w.WriteByte('"')
			w.WriteString(strings.ReplaceAll(f, `"`, `""`))
			w.WriteByte('"')
		} else {
			w.WriteString(f)
		}
	}
	w.WriteByte('\n')
}

// ScanRows reads database/sql rows into a Result within lim, converting
// each cell with convert (given the column's index).
func ScanRows(rows *sql.Rows, lim Limits, convert func(v any, col int) Value) (*Result, error) {
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	res := &Result{Columns: make([]Column, len(types))}
	for i, t := range types {
		res.Columns[i] = Column{Name: t.Name(), Type: t.DatabaseTypeName()}
	}
	dest := make([]any, len(types))
	ptrs := make([]any, len(types))
	for i := range dest {
		ptrs[i] = &dest[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]Value, len(dest))
		for i, v := range dest {
			row[i] = convert(v, i)
		}
		if !res.Append(row, lim) {
			break
		}
	}
	return res, rows.Err()
}
