package dataset

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ColumnDoc is one column's documentation from a BIRD description file
// (<db>/database_description/<table>.csv). Every field is trimmed of
// surrounding white space; a field the file does not have is empty.
type ColumnDoc struct {
	// Column is original_column_name as the file spells it.
	Column string
	// Name is column_name, BIRD's expanded human-readable name.
	Name string
	// Description is column_description.
	Description string
	// DataFormat is data_format (integer, text, real, date, ...).
	DataFormat string
	// ValueDescription is value_description: codes, units, how to read
	// values.
	ValueDescription string
}

// Text is the documentation as one line for a prompt: the description (or
// the expanded name when there is none and it says more than the column
// name), then the value description, white space collapsed.
func (d ColumnDoc) Text() string {
	desc := collapseSpace(d.Description)
	if desc == "" {
		if n := collapseSpace(d.Name); n != "" && !strings.EqualFold(n, strings.TrimSpace(d.Column)) {
			desc = n
		}
	}
	vd := collapseSpace(d.ValueDescription)
	switch {
	case vd == "":
		return desc
	case desc == "":
		return "Value description: " + vd
	}
	return strings.TrimRight(desc, ".") + ". Value description: " + vd
}

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// Descriptions holds a database's column documentation keyed by lower-cased
// table name (the description file's name without .csv) and lower-cased
// original_column_name.
type Descriptions map[string]map[string]ColumnDoc

// Column returns the documentation of table.column, matching names without
// regard to case or surrounding white space.
func (d Descriptions) Column(table, column string) (ColumnDoc, bool) {
	doc, ok := d[normKey(table)][normKey(column)]
	return doc, ok
}

// Table returns a table's column documentation keyed by lower-cased column
// name, or nil.
func (d Descriptions) Table(table string) map[string]ColumnDoc { return d[normKey(table)] }

// Count is the number of documented tables and columns.
func (d Descriptions) Count() (tables, columns int) {
	for _, t := range d {
		tables++
		columns += len(t)
	}
	return tables, columns
}

func normKey(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// DescriptionDirName is the folder of BIRD's per-table description CSVs,
// beside the database's sqlite file.
const DescriptionDirName = "database_description"

// loadDescriptions reads every *.csv of dir, found in folder base (the
// dataset or --sqlite-dir), into db.Descriptions. A file that cannot be
// used is a problem naming it; the others still load. A file that leads
// out of base or is over MaxDescriptionBytes refuses the database: the
// descriptions go into every prompt.
func (ds *Dataset) loadDescriptions(db *Database, dir, base string) error {
	if _, err := resolveInside(base, dir); errors.Is(err, errOutside) {
		return fmt.Errorf("description folder %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		ds.problem(dir, 0, "", "cannot read the description folder of database %q: %v", db.Name, err)
		return nil
	}
	db.DescriptionDir = dir
	var names []string
	for _, en := range entries {
		if !en.IsDir() && strings.EqualFold(filepath.Ext(en.Name()), ".csv") && !strings.HasPrefix(en.Name(), ".") {
			names = append(names, en.Name())
		}
	}
	sort.Strings(names)
	for _, name := range names {
		path := filepath.Join(dir, name)
		table := normKey(strings.TrimSuffix(name, filepath.Ext(name)))
		raw, err := readInside(base, path, MaxDescriptionBytes, "description CSV")
		if errors.Is(err, errOutside) || errors.Is(err, errTooLarge) {
			return err
		}
		var docs map[string]ColumnDoc
		line := 0
		if err == nil {
			docs, line, err = parseDescriptionFile(raw)
		}
		if err != nil {
			ds.problem(path, line, "", "description of table %q in database %q: %v", table, db.Name, err)
		}
		if len(docs) == 0 {
			continue
		}
		if db.Descriptions == nil {
			db.Descriptions = Descriptions{}
		}
		if prev := db.Descriptions[table]; prev != nil {
			// Two files for one table (names differing only in case):
			// merge, the first file read winning.
			for k, v := range docs {
				if _, dup := prev[k]; !dup {
					prev[k] = v
				}
			}
			continue
		}
		db.Descriptions[table] = docs
	}
	return nil
}

// descriptionHeader maps a normalized header name to its ColumnDoc field.
var descriptionHeader = map[string]int{
	"original_column_name": 0,
	"column_name":          1,
	"column_description":   2,
	"data_format":          3,
	"value_description":    4,
}

// parseDescriptionFile reads one BIRD description CSV. BIRD's files come in
// UTF-8, UTF-8 with a BOM, UTF-16 with a BOM and cp1252/latin-1; they may
// have blank lines, stray quotes, padded fields and short rows. docs holds
// what could be read even when err is set; line is where err happened (0
// for the whole file).
func parseDescriptionFile(raw []byte) (docs map[string]ColumnDoc, line int, err error) {
	text := DecodeText(raw)
	if strings.TrimSpace(text) == "" {
		return nil, 0, errors.New("the file is empty")
	}
	if strings.ContainsRune(text, 0) {
		return nil, 0, errors.New("the file holds NUL bytes: not a text CSV")
	}
	r := csv.NewReader(strings.NewReader(text))
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	r.TrimLeadingSpace = true
	header, err := r.Read()
	if err != nil {
		return nil, csvLine(err), fmt.Errorf("unreadable header: %v", err)
	}
	cols := [5]int{-1, -1, -1, -1, -1}
	var seen []string
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		h = strings.Join(strings.Fields(h), "_")
		seen = append(seen, h)
		if f, ok := descriptionHeader[h]; ok && cols[f] < 0 {
			cols[f] = i
		}
	}
	if cols[0] < 0 {
		return nil, 1, fmt.Errorf("the header has no original_column_name column (found %s)", strings.Join(seen, ", "))
	}
	docs = map[string]ColumnDoc{}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return docs, csvLine(err), fmt.Errorf("malformed CSV: %v", err)
		}
		get := func(f int) string {
			if i := cols[f]; i >= 0 && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		d := ColumnDoc{Column: get(0), Name: get(1), Description: get(2), DataFormat: get(3), ValueDescription: get(4)}
		key := normKey(d.Column)
		if key == "" {
			continue // a blank or padding row
		}
		if _, dup := docs[key]; !dup {
			docs[key] = d
		}
	}
	return docs, 0, nil
}

func csvLine(err error) int {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pe.Line
	}
	return 0
}

// DecodeText turns a text file's bytes into a string: a UTF-8 or UTF-16 byte
// order mark is honoured and removed; valid UTF-8 is kept; anything else is
// read as Windows-1252 (latin-1 with curly quotes, dashes and the euro sign
// in 0x80-0x9f; the five bytes cp1252 leaves undefined map to the latin-1
// control characters, as Python's latin-1 codec does).
func DecodeText(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte{0xef, 0xbb, 0xbf}):
		b = b[3:]
	case bytes.HasPrefix(b, []byte{0xff, 0xfe}):
		return decodeUTF16(b[2:], false)
	case bytes.HasPrefix(b, []byte{0xfe, 0xff}):
		return decodeUTF16(b[2:], true)
	}
	if utf8.Valid(b) {
		return string(b)
	}
	var s strings.Builder
	s.Grow(len(b) + len(b)/8)
	for len(b) > 0 {
		// Keep the valid UTF-8 runs of a mixed file; only the bytes that
		// are not UTF-8 are read as cp1252.
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			s.WriteRune(cp1252(b[0]))
			b = b[1:]
			continue
		}
		s.WriteRune(r)
		b = b[n:]
	}
	return s.String()
}

func decodeUTF16(b []byte, bigEndian bool) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		if bigEndian {
			u = append(u, uint16(b[i])<<8|uint16(b[i+1]))
		} else {
			u = append(u, uint16(b[i+1])<<8|uint16(b[i]))
		}
	}
	return string(utf16.Decode(u))
}

// cp1252High is Windows-1252's 0x80-0x9f; zero entries are undefined there.
var cp1252High = [32]rune{
	'€', 0, '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', 0, 'Ž', 0,
	0, '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', 0, 'ž', 'Ÿ',
}

func cp1252(c byte) rune {
	if c >= 0x80 && c <= 0x9f {
		if r := cp1252High[c-0x80]; r != 0 {
			return r
		}
	}
	return rune(c)
}
