package eval

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// ColumnKind is the dtype pandas' read_csv gives a column.
type ColumnKind uint8

// Column kinds, as pandas names them.
const (
	Int64 ColumnKind = iota + 1
	Uint64
	Float64
	Bool
	// BoolObject is a bool column with missing cells (object dtype holding
	// True, False and NaN).
	BoolObject
	Text
)

func (k ColumnKind) String() string {
	return [...]string{"?", "int64", "uint64", "float64", "bool", "object(bool)", "object"}[k]
}

// Column is one typed column. Cells holds one element per row.
type Column struct {
	Name  string
	Kind  ColumnKind
	Cells []PyValue
}

// Frame is a table read the way pandas.read_csv reads it.
type Frame struct {
	Columns []Column
	Rows    int

	// voteOnce/voteVectors cache the sorted column vectors the vote
	// compares, so deciding among n candidates sorts each table once
	// rather than once per pair.
	voteOnce    sync.Once
	voteVectors []vector
}

// naValues are pandas' default missing-value spellings (pandas >= 2, which
// added "None"). They match the whole raw field, untrimmed.
var naValues = map[string]bool{
	"": true, "#N/A": true, "#N/A N/A": true, "#NA": true, "-1.#IND": true,
	"-1.#QNAN": true, "-NaN": true, "-nan": true, "1.#IND": true, "1.#QNAN": true,
	"<NA>": true, "N/A": true, "NA": true, "NULL": true, "NaN": true, "n/a": true,
	"nan": true, "null": true, "None": true,
}

var maxUint64 = new(big.Int).SetUint64(math.MaxUint64)

// ErrEmptyCSV is returned for a file with no header (pandas raises
// "No columns to parse from file").
var ErrEmptyCSV = errors.New("no columns to parse from file")

// ReadCSV parses data with the rules of pandas.read_csv's defaults (see
// ../../../shared/research/spider2-formats.md §3.6), within the default
// Limits.
func ReadCSV(data []byte) (*Frame, error) {
	return ReadCSVLimited(data, Limits{})
}

// ReadCSVLimited is ReadCSV within lim: more than lim.MaxBytes of data, or
// more than lim.MaxCells fields or cells, fail with ErrTooLarge before the
// table is built.
func ReadCSVLimited(data []byte, lim Limits) (*Frame, error) {
	lim = lim.withDefaults()
	if lim.bytesOver(int64(len(data))) {
		return nil, fmt.Errorf("%w: %d bytes of CSV (limit %d bytes)", ErrTooLarge, len(data), lim.MaxBytes)
	}
	return readCSVText(string(data), lim)
}

// readCSVText parses CSV text; lim has its defaults.
func readCSVText(text string, lim Limits) (*Frame, error) {
	if !utf8.ValidString(text) {
		return nil, errors.New("the file is not valid UTF-8")
	}
	text = strings.TrimPrefix(text, "\xef\xbb\xbf")
	t, err := tokenize(text, lim)
	if err != nil {
		return nil, err
	}
	if t.records() == 0 {
		return nil, ErrEmptyCSV
	}
	header := t.record(0)
	ncol := len(header)
	rows := t.records() - 1 // tokenize held ncol × rows within lim.MaxCells
	index := 0
	if rows > 0 && len(t.record(1)) > ncol {
		// Extra leading fields on the first data row become the index.
		index = len(t.record(1)) - ncol
	}
	for r := 1; r <= rows; r++ {
		if n := len(t.record(r)); n > ncol+index {
			return nil, fmt.Errorf("error tokenizing data: expected %d fields in line %d, saw %d", ncol+index, t.lines[r], n)
		}
	}
	f := &Frame{Rows: rows, Columns: make([]Column, ncol)}
	var ty typer
	raw := make([]string, rows) // one column at a time, reused
	for c := range f.Columns {
		for r := range raw {
			raw[r] = "" // missing trailing fields stay "" (NA)
			if rec := t.record(r + 1); c+index < len(rec) {
				raw[r] = rec[c+index]
			}
		}
		f.Columns[c] = ty.column(header[c], raw)
	}
	return f, nil
}

// table is the tokenizer's output: every field, record after record.
type table struct {
	fields []string
	starts []int // record r is fields[starts[r]:starts[r+1]]
	lines  []int // line where record r starts
}

func (t *table) records() int { return len(t.lines) }

func (t *table) record(r int) []string { return t.fields[t.starts[r]:t.starts[r+1]] }

// fieldBuf collects one field's bytes. A field whose bytes are contiguous
// in the input (no escaped quote, no text after a closing quote) is a
// substring of it, which costs no allocation; only the others are copied.
type fieldBuf struct {
	s          string
	start, end int
	b          strings.Builder
	copied     bool
}

// add appends the input byte at position p.
func (f *fieldBuf) add(p int) {
	switch {
	case f.copied:
		f.b.WriteByte(f.s[p])
	case f.start == f.end:
		f.start, f.end = p, p+1
	case p == f.end:
		f.end++
	default:
		f.b.Grow(f.end - f.start + 16)
		f.b.WriteString(f.s[f.start:f.end])
		f.b.WriteByte(f.s[p])
		f.copied = true
	}
}

func (f *fieldBuf) len() int {
	if f.copied {
		return f.b.Len()
	}
	return f.end - f.start
}

// take returns the field and empties the buffer.
func (f *fieldBuf) take() string {
	out := f.s[f.start:f.end]
	if f.copied {
		out = f.b.String()
		f.b = strings.Builder{}
	}
	f.start, f.end, f.copied = 0, 0, false
	return out
}

// tokenize splits text into records like pandas' C tokenizer: '"' opens a
// quoted field only at a field's start, "" is an escaped quote, text after a
// closing quote is appended, \n, \r\n and \r end lines, and blank or
// whitespace-only lines are skipped. It stops with ErrTooLarge beyond
// lim.MaxCells fields.
func tokenize(s string, lim Limits) (*table, error) {
	// One allocation for the fields in the usual case: every field but the
	// last ends at a separator.
	guess := strings.Count(s, ",") + strings.Count(s, "\n") + strings.Count(s, "\r") + 1
	if lim.MaxCells > 0 {
		guess = min(guess, lim.MaxCells+1)
	}
	t := &table{fields: make([]string, 0, guess), starts: []int{0}}
	field := fieldBuf{s: s}
	// The header and the data rows are each held to MaxCells fields: a
	// header-only table still costs a column per field.
	push := func() error {
		t.fields = append(t.fields, field.take())
		first := t.starts[min(1, len(t.starts)-1)] // the data rows' first field, once the header is done
		if !lim.cellsOver(int64(len(t.fields) - first)) {
			return nil
		}
		if len(t.starts) == 1 {
			return fmt.Errorf("%w: more than %d fields in the header (limit %d cells)", ErrTooLarge, lim.MaxCells, lim.MaxCells)
		}
		return fmt.Errorf("%w: more than %d fields in the first %d lines (limit %d cells)", ErrTooLarge, lim.MaxCells, t.lines[len(t.lines)-1], lim.MaxCells)
	}
	line := 1
	i := 0
	for i < len(s) {
		// Skip blank and whitespace-only lines.
		j := i
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
		if j == len(s) {
			break
		}
		if s[j] == '\n' || s[j] == '\r' {
			if s[j] == '\r' && j+1 < len(s) && s[j+1] == '\n' {
				j++
			}
			i = j + 1
			line++
			continue
		}
		t.lines = append(t.lines, line)
		quoted := false // inside a quoted section
		afterQ := false // just saw a quote inside a quoted section
		endRecord := false
		for i < len(s) && !endRecord {
			c := s[i]
			switch {
			case quoted && !afterQ:
				if c == '"' {
					afterQ = true
				} else {
					if c == '\n' {
						line++
					}
					field.add(i)
				}
				i++
			case quoted && afterQ:
				if c == '"' {
					field.add(i) // the second quote of "" is the escaped one
					afterQ = false
					i++
					continue
				}
				quoted, afterQ = false, false
				// fall through to unquoted handling of c without consuming
			case c == ',':
				if err := push(); err != nil {
					return nil, err
				}
				i++
				if i == len(s) {
					if err := push(); err != nil {
						return nil, err
					}
					endRecord = true
				} else if s[i] == '"' {
					quoted = true
					i++
				}
			case c == '\n' || c == '\r':
				if c == '\r' && i+1 < len(s) && s[i+1] == '\n' {
					i++
				}
				i++
				line++
				if err := push(); err != nil {
					return nil, err
				}
				endRecord = true
			case c == '"' && field.len() == 0 && !fieldStarted(s, i):
				quoted = true
				i++
			default:
				field.add(i)
				i++
			}
		}
		if quoted && !afterQ {
			return nil, fmt.Errorf("error tokenizing data: EOF inside string starting at line %d", t.lines[len(t.lines)-1])
		}
		if !endRecord {
			if err := push(); err != nil {
				return nil, err
			}
		}
		t.starts = append(t.starts, len(t.fields))
		if err := t.checkCells(lim); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// checkCells fails once the records read make more cells than lim allows:
// pandas pads every row to the header's width, so a wide header over short
// rows is refused after a few rows rather than after the whole file.
func (t *table) checkCells(lim Limits) error {
	rows := t.records() - 1
	if rows < 1 {
		return nil
	}
	ncol := len(t.record(0))
	if cells := int64(ncol) * int64(rows); lim.cellsOver(cells) {
		return fmt.Errorf("%w: %d columns × %d rows read so far = %d cells (limit %d cells)", ErrTooLarge, ncol, rows, cells, lim.MaxCells)
	}
	return nil
}

// fieldStarted reports whether position i is not the first byte of a field
// (a quote counts as opening only there).
func fieldStarted(s string, i int) bool {
	return i > 0 && s[i-1] != ',' && s[i-1] != '\n' && s[i-1] != '\r'
}

// typer types columns, reusing its scratch buffers from one column to the
// next so that reading a table allocates little beyond its cells.
type typer struct {
	na     []bool
	ints   []int64
	floats []float64
}

// grow returns buf resized to n elements, reallocated only when too small.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// column infers a column's dtype from all its non-missing fields: int,
// then float, then bool, else text.
func (ty *typer) column(name string, raw []string) Column {
	col := Column{Name: name, Cells: make([]PyValue, len(raw))}
	ty.na = grow(ty.na, len(raw))
	na := ty.na
	hasNA, nonNA := false, 0
	for i, v := range raw {
		na[i] = naValues[v]
		if na[i] {
			hasNA = true
		} else {
			nonNA++
		}
	}
	if len(raw) == 0 {
		col.Kind = Text
		return col
	}
	if nonNA == 0 {
		col.Kind = Float64
		for i := range col.Cells {
			col.Cells[i] = NaN()
		}
		return col
	}
	if ty.intColumn(raw, hasNA, &col) || ty.floatColumn(raw, &col) || ty.boolColumn(raw, hasNA, &col) {
		return col
	}
	col.Kind = Text
	for i, v := range raw {
		if na[i] {
			col.Cells[i] = NaN()
		} else {
			col.Cells[i] = Str(v)
		}
	}
	return col
}

// isIntText is the match of ^[ \t]*[+-]?[0-9]+[ \t]*$, pandas' integer
// field.
func isIntText(v string) bool {
	v = trimSign(strings.Trim(v, " \t"))
	return v != "" && leadingDigits(v) == len(v)
}

// isFloatText is the match of
// ^[ \t]*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[ \t]*$, pandas'
// float field. Written out rather than a regexp, whose match allocates
// whenever its pool of matchers was emptied (at every GC).
func isFloatText(v string) bool {
	v = trimSign(strings.Trim(v, " \t"))
	n := leadingDigits(v)
	v = v[n:]
	if strings.HasPrefix(v, ".") {
		m := leadingDigits(v[1:])
		if n == 0 && m == 0 {
			return false
		}
		v = v[1+m:]
	} else if n == 0 {
		return false
	}
	if v != "" && (v[0] == 'e' || v[0] == 'E') {
		v = trimSign(v[1:])
		m := leadingDigits(v)
		if m == 0 {
			return false
		}
		v = v[m:]
	}
	return v == ""
}

// isInfText is the match of ^[+-]?(?i:inf|infinity)$.
func isInfText(v string) bool {
	v = trimSign(v)
	return strings.EqualFold(v, "inf") || strings.EqualFold(v, "infinity")
}

// trimSign drops one leading + or -.
func trimSign(v string) string {
	if v != "" && (v[0] == '+' || v[0] == '-') {
		return v[1:]
	}
	return v
}

// leadingDigits counts the ASCII digits v starts with.
func leadingDigits(v string) int {
	n := 0
	for n < len(v) && v[n] >= '0' && v[n] <= '9' {
		n++
	}
	return n
}

// intColumn types an all-integer column. Values that fit int64 are parsed
// directly; only larger ones go through big.Int.
func (ty *typer) intColumn(raw []string, hasNA bool, col *Column) bool {
	na := ty.na
	for i, v := range raw {
		if !na[i] && !isIntText(v) {
			return false
		}
	}
	ty.ints = grow(ty.ints, len(raw))
	ints := ty.ints
	var bigs map[int]*big.Int // values beyond int64
	fitsInt64, fitsUint64 := true, true
	for i, v := range raw {
		if na[i] {
			continue
		}
		text := strings.TrimLeft(strings.Trim(v, " \t"), "+")
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			ints[i] = n
			fitsUint64 = fitsUint64 && n >= 0
			continue
		}
		n, _ := new(big.Int).SetString(text, 10)
		if bigs == nil {
			bigs = make(map[int]*big.Int)
		}
		bigs[i] = n
		fitsInt64 = false
		if n.Sign() < 0 || n.Cmp(maxUint64) > 0 {
			fitsUint64 = false
		}
	}
	switch {
	case fitsInt64 && !hasNA:
		col.Kind = Int64
		for i, n := range ints {
			col.Cells[i] = Int(n)
		}
	case fitsInt64:
		col.Kind = Float64
		for i, n := range ints {
			if na[i] {
				col.Cells[i] = NaN()
			} else {
				col.Cells[i] = Float(float64(n))
			}
		}
	case fitsUint64 && !hasNA:
		col.Kind = Uint64
		for i, n := range ints {
			if b, ok := bigs[i]; ok {
				col.Cells[i] = Uint(b.Uint64())
			} else {
				col.Cells[i] = Uint(uint64(n))
			}
		}
	default:
		// Text. pandas keeps even the missing cells' raw text in the
		// uint64-with-NA corner; otherwise they are NaN.
		col.Kind = Text
		for i, v := range raw {
			switch {
			case !na[i]:
				col.Cells[i] = Str(v)
			case fitsUint64:
				col.Cells[i] = Str(v)
			default:
				col.Cells[i] = NaN()
			}
		}
	}
	return true
}

func (ty *typer) floatColumn(raw []string, col *Column) bool {
	na := ty.na
	ty.floats = grow(ty.floats, len(raw))
	vals := ty.floats
	for i, v := range raw {
		if na[i] {
			vals[i] = math.NaN()
			continue
		}
		var text string
		inf := isInfText(v)
		switch {
		case inf:
			text = v
		case isFloatText(v):
			text = strings.Trim(v, " \t")
		default:
			return false
		}
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && math.IsInf(f, 0) && !inf {
			return false // overflow makes the column text
		}
		vals[i] = f
	}
	col.Kind = Float64
	for i, f := range vals {
		if na[i] {
			col.Cells[i] = NaN()
		} else {
			col.Cells[i] = Float(f)
		}
	}
	return true
}

func (ty *typer) boolColumn(raw []string, hasNA bool, col *Column) bool {
	na := ty.na
	for i, v := range raw {
		if !na[i] && !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return false
		}
	}
	col.Kind = Bool
	if hasNA {
		col.Kind = BoolObject
	}
	for i, v := range raw {
		if na[i] {
			col.Cells[i] = NaN()
		} else {
			col.Cells[i] = Boolean(strings.EqualFold(v, "true"))
		}
	}
	return true
}
