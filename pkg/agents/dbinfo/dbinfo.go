// Package dbinfo builds the database-information prompt ("table_info")
// that ReFoRCE introduced and PExA and RAISE also show, and compresses it:
// pattern-based table grouping, the oversize rules for sample rows and
// descriptions, and LLM table-level schema linking when a prompt is still
// over budget. No agent owns it.
//
// The prompt grammar follows the reference code (see
// shared/research/reforce-reference.md §2): one block per table with its full
// name, columns with types and descriptions, and sample rows as a Python
// repr; then the external knowledge and the database/schema/table structure
// line. Where the reference had bugs this package fixes them: external
// knowledge is included for SQLite examples too, the "similar structure"
// hint survives sample-row shrinking and schema linking, and linked columns
// match exactly rather than by substring.
package dbinfo

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/quorumsql/quorum/pkg/pyrepr"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Separator ends every table block: 50 dashes, as in the reference.
const Separator = "--------------------------------------------------"

// Options control what goes into the prompt and how it is compressed.
type Options struct {
	// Group collapses families of more than GroupMin-1 tables whose names
	// are equal once digits are removed (ga_sessions_20170801 ->
	// ga_sessions_) into their first member plus the list of members.
	Group    bool
	GroupMin int
	// Descriptions and SampleRows include column descriptions and sample
	// rows.
	Descriptions bool
	SampleRows   bool
	// Threshold is the size in characters above which sample rows are
	// shrunk and then, with ClearLongDescriptions, descriptions removed.
	Threshold             int
	ClearLongDescriptions bool
	// Structural is quorum's compression past the paper (the "structural"
	// mode; see structural.go): after the digit-family rule, tables of
	// one schema with identical columns (names and types) are grouped
	// whatever their names, and a prompt still over Target is collapsed
	// deterministically. Off, the output is the paper's, byte for byte.
	Structural bool
	// Target is the size in bytes (UTF-8) every prompt of a structural
	// Info stays under, external knowledge of up to EKReserve bytes
	// included (default DefaultLinkBudget).
	Target    int
	EKReserve int
}

// DefaultOptions are the reference's main-script settings.
func DefaultOptions() Options {
	return Options{Group: true, GroupMin: 11, Descriptions: true, SampleRows: true, Threshold: 200_000, ClearLongDescriptions: true}
}

// Compression modes (ReFoRCE's option compression).
const (
	CompressionPaper      = "paper"
	CompressionStructural = "structural"
)

// ModeOptions are the options of a compression mode: "paper" (or "") is
// DefaultOptions, "structural" adds StructuralOptions' rules.
func ModeOptions(mode string) (Options, error) {
	switch mode {
	case "", CompressionPaper:
		return DefaultOptions(), nil
	case CompressionStructural:
		return StructuralOptions(), nil
	}
	return Options{}, fmt.Errorf("compression mode %q: use %s or %s", mode, CompressionPaper, CompressionStructural)
}

// StructuralOptions are DefaultOptions plus structural grouping and the
// collapse to Target.
func StructuralOptions() Options {
	o := DefaultOptions()
	o.Structural = true
	o.Target = DefaultLinkBudget
	o.EKReserve = DefaultEKReserve
	return o
}

// Uncompressed are the same options with grouping and the oversize rules
// off: the "before" of a compression report.
func Uncompressed() Options {
	o := DefaultOptions()
	o.Group = false
	o.Threshold = 0
	return o
}

// Column is one column of a block.
type Column struct {
	Name, Type, Description string
}

// Block is one table (or family representative) in the prompt.
type Block struct {
	// FullName as the dialect writes it (project.dataset.table,
	// DB.SCHEMA.TABLE, or the bare SQLite name).
	FullName string
	Name     string
	// Path is the database/schema pair the table lives in (empty for
	// SQLite).
	DBName, Schema string
	Columns        []Column
	// Members lists every table of the family this block represents
	// (including itself); empty when the table is not grouped.
	Members []string
	// sample rows: JSON (metadata) or typed rows (live SQLite).
	sampleJSON []byte
	sampleRows [][]warehouse.Value
	// keep restricts the rendered columns after schema linking.
	keep map[string]bool
}

// Info is a database's compressed table information.
type Info struct {
	Database string
	Dialect  warehouse.Dialect
	Blocks   []*Block
	// Tables is the rendered blocks after the oversize rules.
	Tables string
	// Linked is set when schema linking reduced the blocks.
	Linked bool
	opt    Options
	// blockTexts are the rendered blocks after the oversize rules; Tables
	// is their concatenation.
	blockTexts []string
}

// Prompt is the full table information of one example: the table blocks,
// its external knowledge (the literal None when there is none) and the
// structure line.
func (i *Info) Prompt(externalKnowledge string) string {
	var b strings.Builder
	b.Grow(len(i.Tables) + len(externalKnowledge) + 256)
	b.WriteString(i.Tables)
	ek := externalKnowledge
	if strings.TrimSpace(ek) == "" {
		ek = "None"
	}
	b.WriteString("External knowledge that might be helpful: \n")
	b.WriteString(ek)
	b.WriteString("\n")
	b.WriteString(i.Structure())
	return b.String()
}

// Structure is the closing line that lists every table.
func (i *Info) Structure() string {
	return "The table structure information is " + i.structureKind() + ": \n" + i.TableStruct() + "\n"
}

func (i *Info) structureKind() string {
	if i.Dialect == warehouse.SQLite {
		return "(table names)"
	}
	return "({database name: {schema name: [table name]}})"
}

// TableStruct is the Python repr of the table structure: a list of names
// for SQLite, {database: {schema: [tables]}} otherwise. Family members
// follow their representative.
func (i *Info) TableStruct() string {
	names := func(bl *Block) []string {
		if len(bl.Members) == 0 {
			return []string{bl.Name}
		}
		out := []string{bl.Name}
		for _, m := range bl.Members {
			if m != bl.Name {
				out = append(out, m)
			}
		}
		return out
	}
	if i.Dialect == warehouse.SQLite {
		var all []string
		for _, bl := range i.Blocks {
			all = append(all, names(bl)...)
		}
		return pyrepr.List(all)
	}
	var dbs []string
	schemas := map[string][]string{}
	tables := map[string][]string{}
	for _, bl := range i.Blocks {
		if _, ok := schemas[bl.DBName]; !ok {
			dbs = append(dbs, bl.DBName)
		}
		key := bl.DBName + "\x00" + bl.Schema
		if _, ok := tables[key]; !ok {
			schemas[bl.DBName] = append(schemas[bl.DBName], bl.Schema)
		}
		tables[key] = append(tables[key], names(bl)...)
	}
	var b strings.Builder
	b.WriteByte('{')
	for di, d := range dbs {
		if di > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pyrepr.Str(d) + ": {")
		for si, s := range schemas[d] {
			if si > 0 {
				b.WriteString(", ")
			}
			b.WriteString(pyrepr.Str(s) + ": " + pyrepr.List(tables[d+"\x00"+s]))
		}
		b.WriteByte('}')
	}
	b.WriteByte('}')
	return b.String()
}

var digitsRE = regexp.MustCompile(`\d`)

// groupKey is the reference's rm_digits key: the name with every decimal
// digit removed, case kept.
func groupKey(name string) string { return digitsRE.ReplaceAllString(name, "") }

// group collapses families within one schema folder, keeping order: a
// family of at least min tables keeps its first member, which lists all.
func group(blocks []*Block, min int) []*Block {
	fam := map[string][]*Block{}
	for _, b := range blocks {
		k := groupKey(b.Name)
		fam[k] = append(fam[k], b)
	}
	var out []*Block
	for _, b := range blocks {
		members := fam[groupKey(b.Name)]
		if len(members) < min {
			out = append(out, b)
			continue
		}
		if members[0] != b {
			continue
		}
		for _, m := range members {
			b.Members = append(b.Members, m.Name)
		}
		out = append(out, b)
	}
	return out
}
