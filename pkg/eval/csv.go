package eval

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
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
	voteVectors [][]PyValue
}

// naValues are pandas' default missing-value spellings (pandas >= 2, which
// added "None"). They match the whole raw field, untrimmed.
var naValues = map[string]bool{
	"": true, "#N/A": true, "#N/A N/A": true, "#NA": true, "-1.#IND": true,
	"-1.#QNAN": true, "-NaN": true, "-nan": true, "1.#IND": true, "1.#QNAN": true,
	"<NA>": true, "N/A": true, "NA": true, "NULL": true, "NaN": true, "n/a": true,
	"nan": true, "null": true, "None": true,
}

var (
	intPattern   = regexp.MustCompile(`^[ \t]*[+-]?[0-9]+[ \t]*$`)
	floatPattern = regexp.MustCompile(`^[ \t]*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[ \t]*$`)
	infPattern   = regexp.MustCompile(`^[+-]?(?i:inf|infinity)$`)
	maxUint64    = new(big.Int).SetUint64(math.MaxUint64)
)

// ErrEmptyCSV is returned for a file with no header (pandas raises
// "No columns to parse from file").
var ErrEmptyCSV = errors.New("no columns to parse from file")

// ReadCSV parses data with the rules of pandas.read_csv's defaults; see
// ../../../shared/research/spider2-formats.md §3.6.
func ReadCSV(data []byte) (*Frame, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("the file is not valid UTF-8")
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	records, err := tokenize(string(data))
	if err != nil {
		return nil, err
	}
	if len(records) == 0 {
		return nil, ErrEmptyCSV
	}
	header := records[0].fields
	ncol := len(header)
	rows := records[1:]
	index := 0
	if len(rows) > 0 && len(rows[0].fields) > ncol {
		// Extra leading fields on the first data row become the index.
		index = len(rows[0].fields) - ncol
	}
	raw := make([][]string, ncol)
	for c := range raw {
		raw[c] = make([]string, len(rows))
	}
	for r, rec := range rows {
		if len(rec.fields) > ncol+index {
			return nil, fmt.Errorf("error tokenizing data: expected %d fields in line %d, saw %d", ncol+index, rec.line, len(rec.fields))
		}
		for c := 0; c < ncol; c++ {
			if i := c + index; i < len(rec.fields) {
				raw[c][r] = rec.fields[i]
			} // missing trailing fields stay "" (NA)
		}
	}
	f := &Frame{Rows: len(rows), Columns: make([]Column, ncol)}
	for c := range raw {
		f.Columns[c] = typeColumn(header[c], raw[c])
	}
	return f, nil
}

type record struct {
	fields []string
	line   int
}

// tokenize splits text into records like pandas' C tokenizer: '"' opens a
// quoted field only at a field's start, "" is an escaped quote, text after a
// closing quote is appended, \n, \r\n and \r end lines, and blank or
// whitespace-only lines are skipped.
func tokenize(s string) ([]record, error) {
	var out []record
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
		rec := record{line: line}
		var field strings.Builder
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
					field.WriteByte(c)
				}
				i++
			case quoted && afterQ:
				if c == '"' {
					field.WriteByte('"')
					afterQ = false
					i++
					continue
				}
				quoted, afterQ = false, false
				// fall through to unquoted handling of c without consuming
			case c == ',':
				rec.fields = append(rec.fields, field.String())
				field.Reset()
				i++
				if i == len(s) {
					rec.fields = append(rec.fields, "")
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
				rec.fields = append(rec.fields, field.String())
				field.Reset()
				endRecord = true
			case c == '"' && field.Len() == 0 && !fieldStarted(s, i):
				quoted = true
				i++
			default:
				field.WriteByte(c)
				i++
			}
		}
		if quoted && !afterQ {
			return nil, fmt.Errorf("error tokenizing data: EOF inside string starting at line %d", rec.line)
		}
		if !endRecord {
			rec.fields = append(rec.fields, field.String())
		}
		out = append(out, rec)
	}
	return out, nil
}

// fieldStarted reports whether position i is not the first byte of a field
// (a quote counts as opening only there).
func fieldStarted(s string, i int) bool {
	return i > 0 && s[i-1] != ',' && s[i-1] != '\n' && s[i-1] != '\r'
}

// typeColumn infers a column's dtype from all its non-missing fields:
// int, then float, then bool, else text.
func typeColumn(name string, raw []string) Column {
	col := Column{Name: name, Cells: make([]PyValue, len(raw))}
	na := make([]bool, len(raw))
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
	if c, ok := intColumn(raw, na, hasNA, col); ok {
		return c
	}
	if c, ok := floatColumn(raw, na, col); ok {
		return c
	}
	if c, ok := boolColumn(raw, na, hasNA, col); ok {
		return c
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

func intColumn(raw []string, na []bool, hasNA bool, col Column) (Column, bool) {
	for i, v := range raw {
		if !na[i] && !intPattern.MatchString(v) {
			return col, false
		}
	}
	vals := make([]*big.Int, len(raw))
	fitsInt64, fitsUint64 := true, true
	for i, v := range raw {
		if na[i] {
			continue
		}
		n, _ := new(big.Int).SetString(strings.TrimLeft(strings.Trim(v, " \t"), "+"), 10)
		vals[i] = n
		if !n.IsInt64() {
			fitsInt64 = false
		}
		if n.Sign() < 0 || n.Cmp(maxUint64) > 0 {
			fitsUint64 = false
		}
	}
	switch {
	case fitsInt64 && !hasNA:
		col.Kind = Int64
		for i, n := range vals {
			col.Cells[i] = Int(n.Int64())
		}
	case fitsInt64:
		col.Kind = Float64
		for i, n := range vals {
			if na[i] {
				col.Cells[i] = NaN()
			} else {
				col.Cells[i] = Float(float64(n.Int64()))
			}
		}
	case fitsUint64 && !hasNA:
		col.Kind = Uint64
		for i, n := range vals {
			col.Cells[i] = Uint(n.Uint64())
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
	return col, true
}

func floatColumn(raw []string, na []bool, col Column) (Column, bool) {
	vals := make([]float64, len(raw))
	for i, v := range raw {
		if na[i] {
			vals[i] = math.NaN()
			continue
		}
		var text string
		switch {
		case infPattern.MatchString(v):
			text = v
		case floatPattern.MatchString(v):
			text = strings.Trim(v, " \t")
		default:
			return col, false
		}
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && math.IsInf(f, 0) && !infPattern.MatchString(v) {
			return col, false // overflow makes the column text
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
	return col, true
}

func boolColumn(raw []string, na []bool, hasNA bool, col Column) (Column, bool) {
	for i, v := range raw {
		if !na[i] && !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return col, false
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
	return col, true
}
