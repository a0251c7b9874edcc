package dbinfo

import (
	"regexp"
	"strings"
)

// goldWord matches the identifier-like words of a SQL text, inside quotes
// too (`project.dataset.table`, "SCHEMA"."TABLE"), so that a name is found
// however the gold SQL quotes it. A word directly followed by '*' is a
// BigQuery wildcard-table prefix (ga_sessions_*).
var goldWord = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_$]*\*?`)

// GoldRefs are the identifiers a gold SQL mentions, lower-cased.
type GoldRefs struct {
	Words    map[string]bool
	Prefixes []string
}

// GoldReferences reads the identifiers of a gold SQL.
func GoldReferences(sql string) GoldRefs {
	r := GoldRefs{Words: map[string]bool{}}
	for _, w := range goldWord.FindAllString(sql, -1) {
		w = strings.ToLower(w)
		if p, ok := strings.CutSuffix(w, "*"); ok {
			if p != "" {
				r.Prefixes = append(r.Prefixes, p)
			}
			continue
		}
		r.Words[w] = true
	}
	return r
}

func (r GoldRefs) table(name string) bool {
	n := strings.ToLower(name)
	if r.Words[n] {
		return true
	}
	for _, p := range r.Prefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// Restrict is the paper's gold-table and gold-schema ablations (v2 Tables 3
// and 4; the reference's --use_gold_table and --use_gold_schema): it keeps
// the blocks whose table (or a member of its family) the gold SQL names,
// and with columns also only the columns it names (a block none of whose
// columns is named keeps them all). Names are matched without regard to
// case or quoting. When the gold SQL names no table of info, info is
// returned unchanged, as schema linking does.
func Restrict(info *Info, goldSQL string, columns bool) *Info {
	refs := GoldReferences(goldSQL)
	out := &Info{Database: info.Database, Dialect: info.Dialect, opt: info.opt, Linked: info.Linked}
	for _, bl := range info.Blocks {
		hit := refs.table(bl.Name)
		for _, m := range bl.Members {
			hit = hit || refs.table(m)
		}
		if !hit {
			continue
		}
		nb := *bl
		if columns {
			keep := map[string]bool{}
			for _, c := range bl.Columns {
				name := strings.ToLower(c.Name)
				if refs.Words[name] && (bl.keep == nil || bl.keep[name]) {
					keep[name] = true
				}
			}
			if len(keep) > 0 {
				nb.keep = keep
			}
		}
		out.Blocks = append(out.Blocks, &nb)
	}
	if len(out.Blocks) == 0 {
		return info
	}
	out.render()
	return out
}
