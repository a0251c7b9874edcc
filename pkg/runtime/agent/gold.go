package agent

import (
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/quorumsql/quorum/pkg/dataset"
)

// The gold ablation options (ReFoRCE's "w/ gold table" and "w/ gold
// schema"). An agent option of one of these names, or a member's under a
// composite agent (MEMBER.NAME, as the ensemble declares them), set to
// true is the only way an agent learns anything of the gold: then it gets
// the identifiers its example's gold SQL mentions (Context.GoldIdentifiers)
// and still not the SQL, the gold results or the gold folder.
const (
	OptGoldTables = "gold-tables"
	OptGoldSchema = "gold-schema"
)

// GoldAblation reports whether an agent's options (as the manifest records
// them) turn on a gold ablation.
func GoldAblation(opts map[string]string) bool {
	for name, v := range opts {
		switch name[strings.LastIndexByte(name, '.')+1:] {
		case OptGoldTables, OptGoldSchema:
			// A value that is not a bool fails the agent's own option
			// check; here it turns nothing on.
			if on, err := strconv.ParseBool(v); err == nil && on {
				return true
			}
		}
	}
	return false
}

// goldWord is how ReFoRCE's ablation (dbinfo.GoldReferences) reads a gold
// SQL: identifier-like words, inside quotes too, and a word directly
// followed by '*' as a BigQuery wildcard-table prefix.
var goldWord = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_$]*\*?`)

// GoldIdentifiers are the distinct identifier-like words of a gold SQL,
// lower-cased and sorted; a wildcard-table prefix keeps its '*'. They are
// all a gold ablation needs (which tables and columns the gold names)
// without the query itself. Joined with spaces they read, as a SQL text,
// as the same identifiers.
func GoldIdentifiers(sql string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range goldWord.FindAllString(sql, -1) {
		w = strings.ToLower(w)
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	sort.Strings(out)
	return out
}

// View is what the agents of one run see of its dataset: a copy without
// gold (dataset.WithoutGold), warehouses over that copy, and whether the
// run's options turn on a gold ablation. The runtime's own dataset keeps
// its gold for scoring. Build one per run: it copies the examples.
type View struct {
	ds   *dataset.Dataset
	whs  *localdb.Warehouses
	gold bool
}

// NewView builds the agents' view of ds; whs (nil where no warehouse is
// served) is copied over the view, sharing its pools. opts are the run's
// agent options.
func NewView(ds *dataset.Dataset, whs *localdb.Warehouses, opts map[string]string) *View {
	v := &View{ds: ds.WithoutGold(), gold: GoldAblation(opts)}
	if whs != nil {
		w := *whs
		w.DS = v.ds
		v.whs = &w
	}
	return v
}

// Context starts an agent's context for e (an example of the run's own
// dataset): Dataset, Example and Schema without gold and, under a gold
// ablation, GoldIdentifiers. Every agent context is built here; the
// caller fills in the rest.
func (v *View) Context(e *dataset.Example) *Context {
	c := &Context{Dataset: v.ds, Example: e.WithoutGold(), Schema: v.whs}
	if v.gold {
		c.GoldIdentifiers = GoldIdentifiers(e.Gold.SQL)
	}
	return c
}
