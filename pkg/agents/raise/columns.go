package raise

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/quorumsql/quorum/pkg/sqltext"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// The column post-process may change "only the selected columns, without
// changing the query logic" (§3.3 L237-L239). CheckColumns holds a rewrite
// to that (D-R9):
//
//  1. the query without its outermost select list is token-identical to
//     the original's, up to case, spacing, comments, identifier
//     qualification (t.col, col) and table aliases (FROM orders o … o.x,
//     FROM orders … orders.x); references to the select list in ORDER BY,
//     GROUP BY, HAVING and QUALIFY (a position, a column alias) count as
//     the expression they name, since reordering the list moves "ORDER BY
//     2" onto another column;
//  2. every expression of the new select list is one of the original's,
//     in any order, any subset; column aliases may differ or be dropped.

// ntok is a normalised token: qual is the table reference a qualified
// name resolves to ("" when unqualified, which matches any).
type ntok struct{ text, qual string }

func (a ntok) eq(b ntok) bool {
	return a.text == b.text && (a.qual == "" || b.qual == "" || a.qual == b.qual)
}

func sameToks(a, b []ntok) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].eq(b[i]) {
			return false
		}
	}
	return true
}

func show(ts []ntok) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.text
	}
	return strings.Join(parts, " ")
}

// shape is a query cut around its outermost select list.
type shape struct {
	before []ntok   // through SELECT and its DISTINCT/ALL/TOP n
	items  [][]ntok // the select list's expressions, aliases removed
	after  []ntok   // FROM on
}

// SameOutsideSelect reports whether two queries are token-identical
// outside their outermost select lists (condition 1 of CheckColumns
// without reading references to the list).
func SameOutsideSelect(a, b string, d warehouse.Dialect) bool {
	x, err1 := splitQuery(a, d, false)
	y, err2 := splitQuery(b, d, false)
	return err1 == nil && err2 == nil && sameToks(x.before, y.before) && sameToks(x.after, y.after)
}

// CheckColumns returns why rewrite is not a column rewrite of orig (nil
// when it is).
func CheckColumns(orig, rewrite string, d warehouse.Dialect) error {
	o, err := splitQuery(orig, d, true)
	if err != nil {
		return fmt.Errorf("the original query: %w", err)
	}
	r, err := splitQuery(rewrite, d, true)
	if err != nil {
		return fmt.Errorf("the rewrite: %w", err)
	}
	if err := sameOutside(o.before, r.before); err != nil {
		return err
	}
	if err := sameOutside(o.after, r.after); err != nil {
		return err
	}
	for _, it := range r.items {
		found := false
		for _, ot := range o.items {
			if sameToks(it, ot) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("it selects %q, which the original does not select", show(it))
		}
	}
	return nil
}

func sameOutside(a, b []ntok) error {
	for i := 0; i < len(a) && i < len(b); i++ {
		if !a[i].eq(b[i]) {
			return fmt.Errorf("it changes the query outside its select list: %q where the original has %q",
				show(b[i:min(len(b), i+6)]), show(a[i:min(len(a), i+6)]))
		}
	}
	switch {
	case len(b) > len(a):
		return fmt.Errorf("it adds %q outside its select list", show(b[len(a):]))
	case len(a) > len(b):
		return fmt.Errorf("it drops %q outside its select list", show(a[len(b):]))
	}
	return nil
}

// listEnd are the clause keywords that end a select list.
var listEnd = wordSet(`from where group having order limit qualify window union intersect except into offset fetch`)

// reserved are the words that are never an alias.
var reserved = wordSet(`select from where group by having order limit offset fetch qualify window union intersect
	except into join inner left right full outer cross natural lateral on using as and or not in is like ilike glob regexp
	between case when then else end asc desc nulls first last null true false distinct all top exists any some over
	partition rows range preceding following current row unbounded filter within escape collate cast interval with
	recursive values set tablesample pivot unpivot for at zone semi anti match year month day hour minute second week
	quarter date time timestamp`)

func wordSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// query is one tokenised query with its table references.
type query struct {
	toks []sqltext.Token
	d    warehouse.Dialect
	drop map[int]bool      // alias declarations of table references
	refs map[string]string // alias or table name → the reference ("orders#0")
}

func (q *query) text(i int) string {
	if i < 0 || i >= len(q.toks) {
		return ""
	}
	return q.toks[i].Text
}

// ident reports whether token i is a name: a bare word not starting with
// a digit, or a quoted identifier of the dialect.
func (q *query) ident(i int) bool {
	if i < 0 || i >= len(q.toks) {
		return false
	}
	t := q.toks[i]
	if t.Word {
		return t.Text[0] < '0' || t.Text[0] > '9'
	}
	switch t.Text[0] {
	case '`':
		return true
	case '[':
		return q.d == warehouse.SQLite
	case '"':
		return q.d != warehouse.BigQuery
	}
	return false
}

// alias reports whether token i can be an alias: a name that is not a
// keyword.
func (q *query) alias(i int) bool { return q.ident(i) && !reserved[q.text(i)] }

func unquoteIdent(s string) string {
	if len(s) >= 2 && strings.ContainsRune("`\"[", rune(s[0])) {
		s = s[1 : len(s)-1]
	}
	return strings.ToLower(s)
}

// closing is the index of the ')' matching the '(' at i.
func (q *query) closing(i int) int {
	for k := i + 1; k < len(q.toks); k++ {
		if q.toks[k].Text == ")" && q.toks[k].Depth == q.toks[i].Depth {
			return k
		}
	}
	return len(q.toks) - 1
}

// tableRefs finds the references after FROM and JOIN (and the commas of a
// FROM list): their alias declarations are dropped from the comparison,
// and each alias or table name resolves to "table#n", the n-th reference
// to that table, so that o.x and orders.x read alike and a self-join's two
// sides do not.
func (q *query) tableRefs() {
	q.drop, q.refs = map[int]bool{}, map[string]string{}
	count := map[string]int{}
	for i, t := range q.toks {
		if !t.Word || (t.Text != "from" && t.Text != "join") {
			continue
		}
		for j := i + 1; j < len(q.toks); {
			var name string
			switch {
			case q.text(j) == "(":
				name, j = "(subquery)", q.closing(j)+1
			case q.ident(j):
				for q.text(j+1) == "." && q.ident(j+2) {
					j += 2
				}
				name = unquoteIdent(q.text(j))
				j++
				if q.text(j) == "(" { // a table function: UNNEST(…)
					name, j = name+"()", q.closing(j)+1
				}
			default:
				j = len(q.toks)
				continue
			}
			alias := ""
			switch {
			case q.text(j) == "as" && q.ident(j+1):
				alias = unquoteIdent(q.text(j + 1))
				q.drop[j], q.drop[j+1] = true, true
				j += 2
			case q.alias(j):
				alias = unquoteIdent(q.text(j))
				q.drop[j] = true
				j++
			}
			id := name + "#" + strconv.Itoa(count[name])
			count[name]++
			for _, n := range []string{alias, name} {
				if _, ok := q.refs[n]; n != "" && !ok {
					q.refs[n] = id
				}
			}
			if q.text(j) != "," || q.toks[j].Depth != t.Depth {
				break
			}
			j++
		}
	}
}

// norm normalises tokens [a, b): qualified names become their last part
// with the reference they resolve to; dropped tokens are left out.
func (q *query) norm(a, b int) []ntok {
	var out []ntok
	for i := a; i < b; i++ {
		if q.drop[i] {
			continue
		}
		if q.ident(i) && q.text(i+1) == "." && i+2 < b && (q.ident(i+2) || q.text(i+2) == "*") {
			j := i
			for q.text(j+1) == "." && j+2 < b && (q.ident(j+2) || q.text(j+2) == "*") {
				j += 2
			}
			qual := unquoteIdent(q.text(j - 2))
			if r, ok := q.refs[qual]; ok {
				qual = r
			}
			out = append(out, ntok{text: q.text(j), qual: qual})
			i = j
			continue
		}
		out = append(out, ntok{text: q.text(i)})
	}
	return out
}

// splitQuery cuts q around its outermost select list: the first SELECT
// outside parentheses (after any WITH clause, whose bodies sit in them).
// With refs, positions and column aliases in ORDER BY, GROUP BY, HAVING
// and QUALIFY are replaced by the expressions they name.
func splitQuery(sql string, d warehouse.Dialect, refs bool) (shape, error) {
	q := &query{toks: sqltext.Tokens(sql, d.LexOptions()), d: d}
	for len(q.toks) > 0 && q.toks[len(q.toks)-1].Text == ";" {
		q.toks = q.toks[:len(q.toks)-1]
	}
	q.tableRefs()
	sel := -1
	for i, t := range q.toks {
		if t.Depth == 0 && t.Word && t.Text == "select" {
			sel = i
			break
		}
	}
	if sel < 0 {
		return shape{}, errors.New("no SELECT outside parentheses")
	}
	start := sel + 1
	for {
		switch q.text(start) {
		case "distinct", "all":
			start++
			continue
		case "top":
			start += 2
			continue
		}
		break
	}
	end := len(q.toks)
	for i := start; i < len(q.toks); i++ {
		if t := q.toks[i]; t.Depth == 0 && t.Word && listEnd[t.Text] {
			end = i
			break
		}
	}
	if start >= end {
		return shape{}, errors.New("an empty select list")
	}
	sh := shape{before: q.norm(0, start)}
	aliases := map[string][]ntok{}
	for a := start; a < end; {
		b := a
		for b < end && !(q.toks[b].Depth == 0 && q.toks[b].Text == ",") {
			b++
		}
		exprEnd, alias := b, ""
		switch {
		case b-a >= 3 && q.text(b-2) == "as" && q.ident(b-1):
			exprEnd, alias = b-2, q.text(b-1)
		case b-a >= 2 && q.alias(b-1) && q.endsExpr(b-2):
			exprEnd, alias = b-1, q.text(b-1)
		}
		item := q.norm(a, exprEnd)
		sh.items = append(sh.items, item)
		if alias != "" {
			aliases[unquoteIdent(alias)] = item
		}
		a = b + 1
	}
	if !refs {
		sh.after = q.norm(end, len(q.toks))
		return sh, nil
	}
	clause := ""
	for i := end; i < len(q.toks); i++ {
		t := q.toks[i]
		if t.Depth == 0 && t.Word {
			switch t.Text {
			case "order", "group", "having", "qualify":
				clause = t.Text
			case "from", "where", "join", "on", "limit", "offset", "fetch", "window", "union", "intersect", "except":
				clause = ""
			}
		}
		if clause != "" && !q.drop[i] {
			if e, ok := q.listRef(i, clause, sh.items, aliases); ok {
				sh.after = append(sh.after, e...)
				continue
			}
		}
		n := q.norm(i, i+1)
		if q.ident(i) && q.text(i+1) == "." {
			// A qualified name: normalise the chain whole.
			j := i
			for q.text(j+1) == "." && j+2 < len(q.toks) {
				j += 2
			}
			n, i = q.norm(i, j+1), j
		}
		sh.after = append(sh.after, n...)
	}
	return sh, nil
}

// endsExpr reports whether token i can end an expression, so that a name
// after it is an implicit alias ("COUNT(*) n", "name n").
func (q *query) endsExpr(i int) bool {
	t := q.text(i)
	switch {
	case t == "":
		return false
	case t == ")" || t == "end" || t == "null" || t == "true" || t == "false":
		return true
	case q.toks[i].Word:
		return !reserved[t]
	}
	return t[0] == '\'' || t[0] == '"' || q.ident(i)
}

// listRef reads token i of an ORDER BY/GROUP BY/HAVING/QUALIFY clause as a
// reference to the select list: a position (ORDER BY and GROUP BY only)
// or a column alias.
func (q *query) listRef(i int, clause string, items [][]ntok, aliases map[string][]ntok) ([]ntok, bool) {
	t := q.toks[i]
	if q.text(i-1) == "." || q.text(i+1) == "." || q.text(i+1) == "(" {
		return nil, false
	}
	if t.Word && !q.ident(i) && (clause == "order" || clause == "group") && t.Depth == 0 {
		prev, next := q.text(i-1), q.text(i+1)
		itemEnd := next == "" || next == "," || next == "asc" || next == "desc" || next == "nulls" || listEnd[next]
		if n, err := strconv.Atoi(t.Text); err == nil && (prev == "by" || prev == ",") && itemEnd && n >= 1 && n <= len(items) {
			return items[n-1], true
		}
		return nil, false
	}
	if q.alias(i) {
		if e, ok := aliases[unquoteIdent(t.Text)]; ok {
			return e, true
		}
	}
	return nil, false
}
