// Package schema reads a database's table information live from its
// warehouse into quorum's Spider 2.0 metadata form (dataset.Schema), so that
// the agents' prompts for a warehouse a user names (quorum serve) are built
// and compressed by exactly the rules used for Spider 2.0's shipped
// metadata (dbinfo.FromMetadata).
//
// It holds:
//
//   - Read: tables, columns, types, descriptions, DDL and sample rows from
//     SQLite's catalogue (sqlite_master, pragma_table_info), Snowflake's
//     <DB>.INFORMATION_SCHEMA and BigQuery's <project>.<dataset>
//     .INFORMATION_SCHEMA, through warehouse.Warehouse.Query only, so every
//     catalogue query passes quorum's read-only guard, quota gates and
//     timeouts like any other.
//   - Fingerprint: one cheap catalogue query whose hash changes when the
//     schema does.
//   - Cache: schemas kept in Redis, re-read only when the fingerprint moves.
//   - WriteSpider: a schema written back as Spider 2.0 files (DDL.csv and
//     <table>.json per folder), which dataset.LoadSchema reads unchanged.
package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/pyrepr"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// DefaultSampleRows is the number of sample rows read per table when
// Options.SampleRows is 0: what quorum's live SQLite prompts have always
// shown (dbinfo.FromSQLite).
const DefaultSampleRows = 3

// DefaultSampleBytes bounds one table's sample rows when
// Options.SampleBytes is 0.
const DefaultSampleBytes = 64 << 10

// FamilyMin is the size from which tables whose names are equal once digits
// are removed (events_20240301, events_20240302, ...) form a family that the
// compressed prompt shows as one block (dbinfo.DefaultOptions' GroupMin).
const FamilyMin = 11

// FamilySampling says which members of a table family get sample rows.
type FamilySampling int

// Family sampling choices. The zero value picks by dialect: every table on
// SQLite, where a sample costs nothing, and only each family's first member
// on Snowflake and BigQuery, where every sample is a billed query and the
// compressed prompt shows the first member's rows only (a BigQuery dataset
// of 400 daily shards would otherwise cost 400 queries).
const (
	FamilyDefault FamilySampling = iota
	FamilyFirst
	FamilyEvery
)

// Options control what Read reads.
type Options struct {
	// SampleRows is the number of rows read per table: 0 means
	// DefaultSampleRows, a negative number none (sample_rows is then []).
	SampleRows int `json:"sample_rows,omitempty"`
	// Tables, when set, keeps only the named tables. A name matches a
	// table's bare name in any folder, SCHEMA.TABLE / dataset.table, or its
	// full name; case is ignored.
	Tables []string `json:"tables,omitempty"`
	// MaxTables, when positive, refuses a database with more tables (after
	// the Tables filter) with an error giving the count, instead of reading
	// a catalogue of unbounded size; name the tables to read instead.
	MaxTables int `json:"max_tables,omitempty"`
	// SampleBytes bounds one table's sample result (warehouse.Limits
	// MaxBytes; default DefaultSampleBytes): rows past it are left out.
	SampleBytes int64 `json:"sample_bytes,omitempty"`
	// Families says which family members get sample rows (see
	// FamilySampling).
	Families FamilySampling `json:"families,omitempty"`
}

func (o Options) sampleRows() int {
	switch {
	case o.SampleRows == 0:
		return DefaultSampleRows
	case o.SampleRows < 0:
		return 0
	}
	return o.SampleRows
}

func (o Options) sampleBytes() int64 {
	if o.SampleBytes <= 0 {
		return DefaultSampleBytes
	}
	return o.SampleBytes
}

func (o Options) families(d warehouse.Dialect) FamilySampling {
	if o.Families != FamilyDefault {
		return o.Families
	}
	if d == warehouse.SQLite {
		return FamilyEvery
	}
	return FamilyFirst
}

// Read reads the schema of db from wh, dispatching on its dialect:
//
//   - SQLite: db only names the schema (the warehouse is the file). Tables
//     and views come in catalogue order, internal sqlite_* tables left out.
//   - Snowflake: db is a database name, read as Snowflake reads an
//     identifier: a plain name is upper-cased (shop is SHOP), a name in
//     double quotes is taken exactly. Every schema but INFORMATION_SCHEMA
//     becomes one folder.
//   - BigQuery: db is "project.dataset", or several separated by commas
//     (Spider 2.0's BigQuery databases span datasets); a bare "dataset"
//     reads from the billing project. Each dataset becomes one folder named
//     project.dataset.
//
// Folders come sorted by path and tables in catalogue order (by name for
// Snowflake and BigQuery), which is also the order WriteSpider and
// dataset.LoadSchema keep.
func Read(ctx context.Context, wh warehouse.Warehouse, db string, opt Options) (*dataset.Schema, error) {
	switch d := wh.Dialect(); d {
	case warehouse.SQLite:
		return readSQLite(ctx, wh, db, opt)
	case warehouse.Snowflake:
		return readSnowflake(ctx, wh, db, opt)
	case warehouse.BigQuery:
		return readBigQuery(ctx, wh, db, opt)
	default:
		return nil, fmt.Errorf("read schema of %s: unsupported dialect %q", db, d)
	}
}

// filter applies Options.Tables and Options.MaxTables to the tables found
// in the catalogue, in place.
func filter(s *dataset.Schema, opt Options) error {
	if len(opt.Tables) > 0 {
		for _, f := range s.Folders {
			kept := f.Tables[:0]
			for _, t := range f.Tables {
				if wanted(opt.Tables, f.Path, t) {
					kept = append(kept, t)
				}
			}
			f.Tables = kept
		}
		folders := s.Folders[:0]
		for _, f := range s.Folders {
			if len(f.Tables) > 0 {
				folders = append(folders, f)
			}
		}
		s.Folders = folders
	}
	if n, _ := s.Count(); opt.MaxTables > 0 && n > opt.MaxTables {
		return fmt.Errorf("read schema of %s: %d tables, over the limit of %d; name the tables to read", s.Database, n, opt.MaxTables)
	}
	return nil
}

func wanted(names []string, folder string, t *dataset.Table) bool {
	last := folder
	if i := strings.LastIndexByte(folder, '.'); i >= 0 {
		last = folder[i+1:]
	}
	for _, n := range names {
		if strings.EqualFold(n, t.Name) || strings.EqualFold(n, t.FullName) ||
			(folder != "" && (strings.EqualFold(n, last+"."+t.Name) || strings.EqualFold(n, folder+"."+t.Name))) {
			return true
		}
	}
	return false
}

var digits = regexp.MustCompile(`\d`)

// sampled lists the tables of a folder that get sample rows under the
// family rule: with FamilyFirst, every member of a family of at least
// FamilyMin tables but the first is skipped.
func sampled(tables []*dataset.Table, rule FamilySampling) []bool {
	out := make([]bool, len(tables))
	for i := range out {
		out[i] = true
	}
	if rule != FamilyFirst {
		return out
	}
	members := map[string][]int{}
	for i, t := range tables {
		k := digits.ReplaceAllString(t.Name, "")
		members[k] = append(members[k], i)
	}
	for _, idx := range members {
		if len(idx) >= FamilyMin {
			for _, i := range idx[1:] {
				out[i] = false
			}
		}
	}
	return out
}

// sampleWorkers bounds the sample queries in flight for one Read; the
// warehouse's own gate bounds them further.
const sampleWorkers = 4

// sampleAll fills every table's SampleRows, running query(folder, table)
// for the tables the family rule keeps, at most sampleWorkers at once.
// Tables left out, and tables whose sample query the engine refused or
// failed (a view over a dropped table, a BigQuery scan over the byte cap,
// a value over the size limit), get an empty list: a missing sample is
// not worth losing the whole schema. Other errors (cancelled context,
// lost connection) end the read.
func sampleAll(ctx context.Context, wh warehouse.Warehouse, s *dataset.Schema, opt Options, query func(f *dataset.SchemaFolder, t *dataset.Table) string) error {
	n := opt.sampleRows()
	type job struct {
		f *dataset.SchemaFolder
		t *dataset.Table
	}
	var jobs []job
	for _, f := range s.Folders {
		keep := sampled(f.Tables, opt.families(wh.Dialect()))
		for i, t := range f.Tables {
			t.SampleRows = json.RawMessage("[]")
			if n > 0 && keep[i] {
				jobs = append(jobs, job{f, t})
			}
		}
	}
	if len(jobs) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan job)
	)
	for range min(sampleWorkers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				res, err := wh.Query(ctx, query(j.f, j.t), warehouse.Limits{MaxRows: n, MaxBytes: opt.sampleBytes()})
				var qe *warehouse.QueryError
				switch {
				case err == nil:
					j.t.SampleRows = encodeRows(res, wh.Dialect())
				case errors.As(err, &qe):
				default:
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("sample rows of %s: %w", j.t.FullName, err)
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for _, j := range jobs {
		select {
		case next <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = fmt.Errorf("sample rows of %s: %w", s.Database, ctx.Err())
	}
	return first
}

// encodeRows writes sample rows as Spider 2.0's metadata holds them: a JSON
// list of row objects, keys in column order, written with json.dumps'
// separators. Integers stay integers and floats are written as Python
// writes them (0.0, 1e+16), so dbinfo renders the same repr pandas showed;
// Snowflake and BigQuery exact decimals (NUMBER(p,s), NUMERIC) are written
// as numbers too, as pandas gave them. Non-finite floats, which JSON
// cannot hold, become null, as dataset.LoadSchema reads Python's NaN.
func encodeRows(res *warehouse.Result, d warehouse.Dialect) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, row := range res.Rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('{')
		for j, col := range res.Columns {
			if j > 0 {
				b.WriteString(", ")
			}
			writeString(&b, col.Name)
			b.WriteString(": ")
			var v warehouse.Value
			if j < len(row) {
				v = row[j]
			}
			writeValue(&b, v, d, col.Type)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.Bytes()
}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// maxBinary is how much of a binary value a sample keeps: dbinfo shows
// any bytearray value as <binary data>, so the rest would only weigh on
// the cache.
const maxBinary = 32

func writeValue(b *bytes.Buffer, v warehouse.Value, d warehouse.Dialect, colType string) {
	switch v.Kind {
	case warehouse.Null:
		b.WriteString("null")
	case warehouse.Int:
		b.WriteString(strconv.FormatInt(v.Int, 10))
	case warehouse.Float:
		if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
			b.WriteString("null")
		} else {
			b.WriteString(pyrepr.Float(v.Float))
		}
	case warehouse.Bool:
		b.WriteString(strconv.FormatBool(v.Bool))
	case warehouse.Bytes:
		raw := []byte(v.Str)
		more := ""
		if len(raw) > maxBinary {
			raw, more = raw[:maxBinary], "..."
		}
		// Spider 2.0's files hold binary cells as the text of Python's
		// bytearray repr, which dbinfo recognises.
		writeString(b, "bytearray("+pyrepr.Bytes(raw)+more+")")
	case warehouse.Text:
		if d != warehouse.SQLite && exactNumeric(colType) && jsonNumber.MatchString(v.Str) {
			b.WriteString(v.Str)
			return
		}
		writeString(b, v.Str)
	}
}

// exactNumeric reports the result column types whose cells arrive as
// decimal text: Snowflake's FIXED (NUMBER with a scale, or beyond int64)
// and BigQuery's NUMERIC and BIGNUMERIC.
func exactNumeric(t string) bool {
	switch strings.ToUpper(t) {
	case "FIXED", "NUMBER", "DECIMAL", "NUMERIC", "BIGNUMERIC", "BIGDECIMAL":
		return true
	}
	return false
}

func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b.Truncate(b.Len() - 1)
}

// text returns a catalogue cell as text (NULL as "").
func text(v warehouse.Value) string {
	switch v.Kind {
	case warehouse.Null:
		return ""
	case warehouse.Int:
		return strconv.FormatInt(v.Int, 10)
	}
	return v.CSV()
}

// integer returns a catalogue cell as a number; ok is false for NULL or
// non-numeric text.
func integer(v warehouse.Value) (int64, bool) {
	switch v.Kind {
	case warehouse.Int:
		return v.Int, true
	case warehouse.Float:
		return int64(v.Float), true
	case warehouse.Text:
		n, err := strconv.ParseInt(strings.TrimSpace(v.Str), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// columnsOf maps a catalogue result's column names (upper-cased) to their
// index, so rows are read by name whatever order the engine returns.
func columnsOf(res *warehouse.Result, want ...string) (map[string]int, error) {
	idx := map[string]int{}
	for i, c := range res.Columns {
		idx[strings.ToUpper(c.Name)] = i
	}
	for _, w := range want {
		if _, ok := idx[w]; !ok {
			return nil, fmt.Errorf("catalogue result has no %s column (got %d columns)", w, len(res.Columns))
		}
	}
	return idx, nil
}

// cell returns row[idx[name]], or NULL when absent.
func cell(row []warehouse.Value, idx map[string]int, name string) warehouse.Value {
	i, ok := idx[name]
	if !ok || i >= len(row) {
		return warehouse.Value{}
	}
	return row[i]
}
