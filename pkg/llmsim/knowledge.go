package llmsim

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/sqltext"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// knowledge is what llmsim knows about the dataset: each example's gold SQL
// and the tables it touches, so it can answer like a model of a chosen skill.
type knowledge struct {
	ds       *dataset.Dataset
	seed     uint64
	examples map[string]*exampleInfo
	// questions in descending length, so the longest match wins.
	questions []*exampleInfo

	mu      sync.Mutex
	schemas map[string][]*tableInfo // by database key
}

type exampleInfo struct {
	ex *dataset.Example
	// gold is the gold statement without trailing semicolon or comments.
	gold string
	// header is the gold result's header line, for format requests.
	header string
	// skill scales the probability of answering correctly; hard examples
	// get less, so some of them end with low-confidence votes.
	skill float64
	// tier is the question's difficulty ("" without a mix); cluster the
	// share of its wrong answers that are plausible, its one plausible
	// wrong SQL (Difficulty).
	tier      string
	cluster   float64
	plausible string
}

type tableInfo struct {
	name    string // bare table name
	ref     string // how SQL refers to it in the dialect
	columns []string
}

func newKnowledge(ds *dataset.Dataset, seed uint64, mix Difficulty) *knowledge {
	k := &knowledge{ds: ds, seed: seed, examples: map[string]*exampleInfo{}, schemas: map[string][]*tableInfo{}}
	for _, e := range ds.Examples {
		info := &exampleInfo{ex: e, skill: skillOf(seed, e.ID)}
		if stmts := sqltext.Inspect(e.Gold.SQL, e.Dialect.LexOptions()); len(stmts) > 0 {
			info.gold = stmts[0].Text
		}
		if len(e.Gold.Results) > 0 {
			if b, err := os.ReadFile(e.Gold.Results[0]); err == nil {
				info.header, _, _ = strings.Cut(strings.TrimLeft(string(b), "\ufeff"), "\n")
				info.header = strings.TrimRight(info.header, "\r")
			}
		}
		if !mix.Off() {
			info.tier = mix.tier(seed, e.ID)
			info.skill, info.cluster = tiers[info.tier].skill, tiers[info.tier].cluster
			info.plausible = plausibleWrong(seed, info)
		}
		k.examples[e.ID] = info
		if strings.TrimSpace(e.Question) != "" {
			k.questions = append(k.questions, info)
		}
	}
	sort.SliceStable(k.questions, func(i, j int) bool { return len(k.questions[i].ex.Question) > len(k.questions[j].ex.Question) })
	return k
}

// skillOf maps an example to a skill factor in [0.35, 1.35): most examples
// are answered at about the configured rate, some far less often.
func skillOf(seed uint64, id string) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", seed, id)
	return 0.35 + float64(h.Sum64()%1000)/1000
}

// probeTag is how llmsim tags the probes it writes as a PExA Planner, so
// that a Test Case Generator request, which carries only the probe, still
// names its example (spec §4.1 item 5). A real model never needs it.
var probeTag = regexp.MustCompile(`\[llmsim:([^\]]+)\]`)

// find returns the example a request is about: the one a probe tag names,
// else the question that follows a "Task: " marker, or failing that any
// question contained in the text.
func (k *knowledge) find(text string) *exampleInfo {
	for _, m := range probeTag.FindAllStringSubmatch(text, -1) {
		if info, ok := k.examples[m[1]]; ok {
			return info
		}
	}
	for rest := text; ; {
		i := strings.Index(rest, "Task: ")
		if i < 0 {
			break
		}
		rest = rest[i+len("Task: "):]
		for _, q := range k.questions {
			if strings.HasPrefix(rest, q.ex.Question) {
				return q
			}
		}
	}
	for _, q := range k.questions {
		if strings.Contains(text, q.ex.Question) {
			return q
		}
	}
	return nil
}

// tables returns the database's tables, loaded once: from the Spider 2.0
// metadata when present, else from the SQLite file.
func (k *knowledge) tables(e *dataset.Example) []*tableInfo {
	db, ok := k.ds.Database(e)
	if !ok {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if t, ok := k.schemas[db.Key()]; ok {
		return t
	}
	var out []*tableInfo
	if db.MetaDir != "" {
		if s, _, err := dataset.LoadSchema(db); err == nil {
			for _, f := range s.Folders {
				for _, t := range f.Tables {
					ti := &tableInfo{name: t.Name, ref: tableRef(db.Dialect, t.Name, t.FullName)}
					for _, c := range t.Columns {
						ti.columns = append(ti.columns, c.Name)
					}
					out = append(out, ti)
				}
			}
		}
	} else if db.SQLitePath != "" {
		out = sqliteTables(db.SQLitePath)
	}
	k.schemas[db.Key()] = out
	return out
}

func tableRef(d warehouse.Dialect, name, full string) string {
	switch d {
	case warehouse.BigQuery:
		return "`" + full + "`"
	case warehouse.Snowflake:
		return full
	}
	return quoteSQLite(name)
}

func quoteSQLite(name string) string {
	for _, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
		}
	}
	return name
}

func sqliteTables(path string) []*tableInfo {
	db, err := sqlite.Open(sqlite.Config{Path: path, MaxOpenConns: 1})
	if err != nil {
		return nil
	}
	defer db.Close()
	ctx := context.Background()
	res, err := db.Query(ctx, "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table' ORDER BY m.name, p.cid", warehouse.Limits{})
	if err != nil {
		return nil
	}
	var out []*tableInfo
	var cur *tableInfo
	for _, r := range res.Rows {
		if cur == nil || cur.name != r[0].Str {
			cur = &tableInfo{name: r[0].Str, ref: quoteSQLite(r[0].Str)}
			out = append(out, cur)
		}
		cur.columns = append(cur.columns, r[1].Str)
	}
	return out
}

// goldTables returns the tables the gold SQL reads and, for each, the
// columns it uses.
func (k *knowledge) goldTables(info *exampleInfo) []*tableInfo {
	words := map[string]bool{}
	for _, w := range sqltext.Words(info.gold, info.ex.Dialect.LexOptions()) {
		words[strings.ToLower(w.Text)] = true
	}
	// Quoted identifiers count too ("Column Name", `project.dataset.t`).
	for _, part := range strings.FieldsFunc(info.gold, func(r rune) bool { return r == '"' || r == '`' || r == '.' || r == ' ' || r == '\n' }) {
		words[strings.ToLower(part)] = true
	}
	var out []*tableInfo
	for _, t := range k.tables(info.ex) {
		if !words[strings.ToLower(t.name)] {
			continue
		}
		used := &tableInfo{name: t.name, ref: t.ref}
		for _, c := range t.columns {
			if words[strings.ToLower(c)] {
				used.columns = append(used.columns, c)
			}
		}
		if len(used.columns) == 0 && len(t.columns) > 0 {
			used.columns = t.columns[:1]
		}
		out = append(out, used)
	}
	return out
}
