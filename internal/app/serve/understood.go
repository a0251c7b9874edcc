package serve

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

// Understood restates, in one line, how a question was taken, read from
// the answer's SQL alone (no model call): what was computed, per what,
// from which tables, filtered how, ordered, skipped and limited how, and
// how queries were combined. For example "Counted rows per customer_id in
// orders, filtered to status = 'shipped', top 10 by the count".
//
// It is "" unless every token of the SQL is accounted for: said as written
// (a filter, a grouping key) or said in a word that stands for it (a WITH
// query or a subquery in FROM is "an intermediate step", a join's key
// equality is "joined with", a fifth column is "1 more"). Every clause
// changes the answer, so a line that left one out (an outer OFFSET that
// drops a row, a WINDOW clause, a PIVOT) would say something the SQL does
// not do: such SQL is not restated at all.
func Understood(sql string, d sqltext.Dialect) string {
	raw := sqltext.Tokens(sql, d.LexOptions())
	toks := make([]tok, len(raw))
	for i, t := range raw {
		toks[i] = tok{Token: t, i: i}
	}
	r := &reader{used: make([]bool, len(toks))}
	for len(toks) > 0 && toks[len(toks)-1].Text == ";" && !toks[len(toks)-1].Word {
		r.mark(toks[len(toks)-1:])
		toks = toks[:len(toks)-1]
	}
	s, ok := r.statement(toks, 0)
	if !ok || slices.Contains(r.used, false) {
		return ""
	}
	return s
}

// tok is a token and its position in the statement, so that what was
// said of it can be checked against the whole.
type tok struct {
	sqltext.Token
	i int
}

// reader restates one statement; used marks the tokens the restatement
// accounts for.
type reader struct {
	used []bool
}

func (r *reader) mark(ts []tok) {
	for _, t := range ts {
		r.used[t.i] = true
	}
}

// say marks ts and renders them as written.
func (r *reader) say(ts []tok) string {
	r.mark(ts)
	return render(ts)
}

// kw reports whether t is the bare word w at the query's own level (its
// tokens are rebased so that level is depth 0).
func kw(t tok, w string) bool { return t.Word && t.Depth == 0 && t.Text == w }

// closing is the index of the parenthesis closing the one at open, or -1.
func closing(ts []tok, open int) int {
	for j := open + 1; j < len(ts); j++ {
		if ts[j].Text == ")" && !ts[j].Word && ts[j].Depth == ts[open].Depth {
			return j
		}
	}
	return -1
}

// inside returns the tokens between the parentheses at open and end,
// rebased to depth 0.
func inside(ts []tok, open, end int) []tok {
	out := make([]tok, 0, end-open-1)
	for _, t := range ts[open+1 : end] {
		t.Depth -= ts[open].Depth + 1
		out = append(out, t)
	}
	return out
}

// isName: a word or a quoted identifier.
func isName(t tok) bool {
	return t.Word || len(t.Text) >= 2 && strings.ContainsRune("\"`[", rune(t.Text[0]))
}

// statement reads [WITH …] query; steps are the intermediate steps
// before it (an outer query's WITH).
func (r *reader) statement(ts []tok, steps int) (string, bool) {
	if len(ts) == 0 {
		return "", false
	}
	if kw(ts[0], "with") {
		n, rest, ok := r.with(ts)
		if !ok {
			return "", false
		}
		steps, ts = steps+n, rest
	}
	return r.query(ts, steps)
}

// with reads WITH [RECURSIVE] name [(columns)] AS [[NOT] MATERIALIZED]
// (query), … and returns how many queries it names: each is said as an
// intermediate step.
func (r *reader) with(ts []tok) (int, []tok, bool) {
	i, n := 1, 0
	if i < len(ts) && kw(ts[i], "recursive") {
		i++
	}
	for {
		if i >= len(ts) || ts[i].Depth != 0 || !isName(ts[i]) {
			return 0, nil, false
		}
		i++
		if i < len(ts) && ts[i].Text == "(" {
			if i = closing(ts, i); i < 0 {
				return 0, nil, false
			}
			i++
		}
		if i >= len(ts) || !kw(ts[i], "as") {
			return 0, nil, false
		}
		i++
		if i < len(ts) && kw(ts[i], "not") {
			i++
		}
		if i < len(ts) && kw(ts[i], "materialized") {
			i++
		}
		if i >= len(ts) || ts[i].Text != "(" {
			return 0, nil, false
		}
		if i = closing(ts, i); i < 0 {
			return 0, nil, false
		}
		i++
		n++
		if i < len(ts) && ts[i].Text == "," && ts[i].Depth == 0 {
			i++
			continue
		}
		r.mark(ts[:i])
		return n, ts[i:], true
	}
}

// setOps are the words that combine queries; MINUS is Snowflake's EXCEPT.
var setOps = map[string]string{
	"union":     "; together with the rows of: ",
	"intersect": "; only the rows also in: ",
	"except":    "; less the rows of: ",
	"minus":     "; less the rows of: ",
}

// query reads a query: one SELECT, or several combined by set operations.
// steps are the WITH queries before it.
func (r *reader) query(ts []tok, steps int) (string, bool) {
	var branches [][]tok
	var ops [][]tok
	start := 0
	for i := 0; i < len(ts); i++ {
		t := ts[i]
		if t.Depth != 0 || !t.Word || setOps[t.Text] == "" || t.Text == "except" && i > 0 && ts[i-1].Text == "*" { // BigQuery's SELECT * EXCEPT (columns)
			continue
		}
		op := ts[i : i+1]
		if i+1 < len(ts) && (kw(ts[i+1], "all") || kw(ts[i+1], "distinct")) {
			op = ts[i : i+2]
		}
		branches = append(branches, ts[start:i])
		ops = append(ops, op)
		i += len(op) - 1
		start = i + 1
	}
	branches = append(branches, ts[start:])
	if len(branches) == 1 {
		return r.branch(ts, steps)
	}
	// The ORDER BY, LIMIT and OFFSET after the last query apply to the
	// combined rows.
	last := branches[len(branches)-1]
	cut := len(last)
	for i := range last {
		if k := clauseKey(last, i); k == "order" || k == "limit" || k == "offset" || k == "fetch" {
			cut = i
			break
		}
	}
	branches[len(branches)-1] = last[:cut]
	var b strings.Builder
	for k, br := range branches {
		s, ok := r.branch(br, steps)
		if !ok {
			return "", false
		}
		steps = 0 // said once, with the first
		if k == 0 {
			b.WriteString(s)
			continue
		}
		op := ops[k-1]
		r.mark(op)
		b.WriteString(setOps[op[0].Text] + lowerFirst(s))
		if op[0].Text == "union" && (len(op) == 1 || op[1].Text == "distinct") {
			b.WriteString(" (duplicates removed)")
		}
	}
	if cut < len(last) {
		cs, ok := split(last[cut:])
		if !ok {
			return "", false
		}
		rows, ok := r.rows(cs, nil, "")
		if !ok {
			return "", false
		}
		b.WriteString("; of all that, " + rows)
	}
	return b.String(), true
}

// branch reads one query of a set operation: a SELECT, or a query in
// parentheses.
func (r *reader) branch(ts []tok, steps int) (string, bool) {
	if len(ts) > 1 && ts[0].Text == "(" && closing(ts, 0) == len(ts)-1 {
		r.mark([]tok{ts[0], ts[len(ts)-1]})
		return r.statement(inside(ts, 0, len(ts)-1), steps)
	}
	return r.selectQuery(ts, steps)
}

// clause is one clause of a SELECT: its keyword and its tokens, the
// keyword (and BY) included.
type clause struct {
	key  string
	toks []tok
}

// clauseKey names the clause ts[i] starts ("" if none).
func clauseKey(ts []tok, i int) string {
	t := ts[i]
	if t.Depth != 0 || !t.Word {
		return ""
	}
	prev := func(s string) bool { return i > 0 && ts[i-1].Text == s }
	switch t.Text {
	case "select", "where", "having", "qualify", "window", "limit", "fetch":
		return t.Text
	case "from":
		if !prev("distinct") { // IS [NOT] DISTINCT FROM
			return t.Text
		}
	case "group", "order":
		if i+1 < len(ts) && kw(ts[i+1], "by") {
			return t.Text
		}
	case "offset":
		if !prev("[") && !prev("with") { // BigQuery's a[OFFSET(0)], UNNEST … WITH OFFSET
			return t.Text
		}
	}
	return ""
}

// split cuts a SELECT into its clauses, each at most once; false when
// anything comes before the first.
func split(ts []tok) (map[string]clause, bool) {
	out := map[string]clause{}
	cur := ""
	for i, t := range ts {
		if k := clauseKey(ts, i); k != "" {
			if _, dup := out[k]; dup {
				return nil, false
			}
			cur = k
		} else if cur == "" {
			return nil, false
		}
		c := out[cur]
		c.key = cur
		c.toks = append(c.toks, t)
		out[cur] = c
	}
	return out, true
}

// body is a clause's tokens after its keyword (and BY), marking those.
func (r *reader) body(c clause) []tok {
	n := 1
	if c.key == "group" || c.key == "order" {
		n = 2
	}
	r.mark(c.toks[:min(n, len(c.toks))])
	return c.toks[min(n, len(c.toks)):]
}

// item is one select-list item.
type item struct {
	expr  []tok
	alias string
}

// selectQuery reads one SELECT.
func (r *reader) selectQuery(ts []tok, steps int) (string, bool) {
	cs, ok := split(ts)
	if !ok || len(ts) == 0 || !kw(ts[0], "select") {
		return "", false
	}
	if _, ok := cs["window"]; ok {
		return "", false // named windows: not said
	}
	sel := r.body(cs["select"])
	distinct, top := false, ""
	if len(sel) > 0 && (kw(sel[0], "distinct") || kw(sel[0], "all")) {
		distinct = sel[0].Text == "distinct"
		r.mark(sel[:1])
		sel = sel[1:]
	}
	if len(sel) > 1 && kw(sel[0], "top") { // Snowflake's SELECT TOP n
		top = sel[1].Text
		r.mark(sel[:2])
		sel = sel[2:]
	}
	if len(sel) == 0 || kw(sel[0], "as") { // BigQuery's SELECT AS STRUCT
		return "", false
	}
	var items []item
	parts := splitTop(sel, ",")
	if n := len(parts); n > 1 && len(parts[n-1]) == 0 { // BigQuery's trailing comma
		parts = parts[:n-1]
	}
	for _, it := range parts {
		if len(it) == 0 {
			return "", false
		}
		expr, alias := splitAlias(it)
		items = append(items, item{expr, alias})
	}
	r.mark(sel) // each item is said below, or stands for itself as a grouping key

	// SELECT * FROM (query) [AS t] and at most an ORDER BY, LIMIT or
	// OFFSET: an agent's wrapper. The query inside says how the question
	// was taken, then what the wrapper does to its rows.
	if from, ok := cs["from"]; ok && !distinct && top == "" && len(items) == 1 && render(items[0].expr) == "*" &&
		cs["where"].toks == nil && cs["group"].toks == nil && cs["having"].toks == nil && cs["qualify"].toks == nil {
		if inner, ok := r.wrapped(from); ok {
			s, ok := r.statement(inner, steps)
			if !ok {
				return "", false
			}
			rows, ok := r.rows(cs, nil, "")
			if !ok {
				return "", false
			}
			if rows != "" {
				s += ", then " + rows
			}
			return s, true
		}
	}

	var b strings.Builder
	group := r.groupKeys(cs, items)
	var aggs, cols, extra []string
	brief := map[string]string{} // alias → what it is, said briefly
	for _, it := range items {
		if what, short, ok := aggregate(it.expr); ok {
			aggs = append(aggs, what)
			if it.alias != "" {
				brief[it.alias] = short
			}
			continue
		}
		col := render(it.expr)
		cols = append(cols, col)
		if !slices.ContainsFunc(group, func(g string) bool { return sameName(g, col) || sameName(g, it.alias) }) {
			extra = append(extra, col)
		}
	}
	switch {
	case len(aggs) > 0:
		b.WriteString(upperFirst(andList(aggs)))
		if len(extra) > 0 { // columns beside the aggregates that are not grouping keys
			b.WriteString(", with " + andList(shorten(extra, 3)))
		}
		if distinct {
			b.WriteString(" (distinct rows)")
		}
	case distinct && len(cols) == 1 && cols[0] == "*":
		b.WriteString("Listed the distinct rows")
	case distinct:
		b.WriteString("Listed the distinct " + andList(shorten(cols, 4)))
	case len(cols) == 1 && cols[0] == "*":
		b.WriteString("Listed every column")
	default:
		b.WriteString("Listed " + andList(shorten(cols, 4)))
	}
	if len(group) > 0 {
		b.WriteString(" per " + andList(group))
	}
	if from, ok := cs["from"]; ok {
		s, n, ok := r.from(r.body(from))
		if !ok {
			return "", false
		}
		b.WriteString(s)
		steps += n
	}
	if steps > 0 {
		fmt.Fprintf(&b, " (after %d intermediate %s)", steps, plural(steps, "step", "steps"))
	}
	if c, ok := cs["where"]; ok {
		w := r.body(c)
		if len(w) == 0 {
			return "", false
		}
		r.mark(w)
		conds := renderAll(splitTop(w, "and"))
		if len(conds) > 3 {
			conds = append(conds[:3:3], fmt.Sprintf("%d more %s", len(conds)-3, plural(len(conds)-3, "condition", "conditions")))
		}
		b.WriteString(", filtered to " + andList(conds))
	}
	if c, ok := cs["having"]; ok {
		h := r.body(c)
		if len(h) == 0 {
			return "", false
		}
		b.WriteString(", keeping groups where " + r.say(h))
	}
	if c, ok := cs["qualify"]; ok {
		q := r.body(c)
		if len(q) == 0 {
			return "", false
		}
		b.WriteString(", keeping rows where " + r.say(q))
	}
	rows, ok := r.rows(cs, func(by string) string {
		by = positional(by, items)
		if s, ok := brief[by]; ok {
			return s
		}
		return by
	}, top)
	if !ok {
		return "", false
	}
	if rows != "" {
		b.WriteString(", " + rows)
	}
	return b.String(), true
}

// groupKeys says the GROUP BY keys, a position named by its item.
func (r *reader) groupKeys(cs map[string]clause, items []item) []string {
	c, ok := cs["group"]
	if !ok {
		return nil
	}
	g := r.body(c)
	r.mark(g)
	if len(g) == 1 && kw(g[0], "all") { // GROUP BY ALL: the items that are not aggregates
		var keys []string
		for _, it := range items {
			if _, _, agg := aggregate(it.expr); !agg {
				keys = append(keys, cmp.Or(it.alias, render(it.expr)))
			}
		}
		return keys
	}
	var keys []string
	for _, k := range splitTop(g, ",") {
		keys = append(keys, positional(render(k), items))
	}
	return keys
}

// positional names the item a position (GROUP BY 2, ORDER BY 2) means.
func positional(s string, items []item) string {
	if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= len(items) {
		it := items[n-1]
		if it.alias != "" {
			return it.alias
		}
		if _, brief, ok := aggregate(it.expr); ok {
			return brief
		}
		return render(it.expr)
	}
	return s
}

// sameName compares names as written, quoted or not.
func sameName(a, b string) bool {
	unq := strings.NewReplacer(`"`, "", "`", "")
	return a != "" && unq.Replace(a) == unq.Replace(b)
}

// wrapped returns the query of FROM (query) [[AS] t], rebased, marking
// the rest.
func (r *reader) wrapped(from clause) ([]tok, bool) {
	ts := from.toks[1:]
	if len(ts) < 3 || ts[0].Text != "(" {
		return nil, false
	}
	end := closing(ts, 0)
	if end < 0 || !startsQuery(ts[1:end]) {
		return nil, false
	}
	rest := ts[end+1:]
	if len(rest) > 0 && kw(rest[0], "as") {
		rest = rest[1:]
	}
	if len(rest) > 1 || len(rest) == 1 && !isName(rest[0]) {
		return nil, false // joined with something else
	}
	r.mark(from.toks[:1])
	r.mark([]tok{ts[0], ts[end]})
	r.mark(ts[end+1:])
	return inside(ts, 0, end), true
}

// startsQuery reports whether ts (inside parentheses) start a query.
func startsQuery(ts []tok) bool {
	for len(ts) > 0 && ts[0].Text == "(" {
		ts = ts[1:]
	}
	return len(ts) > 0 && ts[0].Word && (ts[0].Text == "select" || ts[0].Text == "with")
}

// notAlias are words that may follow a table in FROM and are not its
// alias: what they do is not said, so the SQL is not restated.
var notAlias = map[string]bool{"pivot": true, "unpivot": true, "sample": true, "tablesample": true, "at": true, "before": true,
	"changes": true, "match_recognize": true, "for": true, "with": true, "lateral": true, "natural": true, "left": true,
	"right": true, "full": true, "inner": true, "outer": true, "cross": true, "join": true, "on": true, "using": true}

// from says the FROM clause: " in orders joined with customers, left-joined
// with returns (on …)"; n counts its subqueries, each an intermediate step.
// A join's key equalities (a.x = b.y) are said by "joined with"; its other
// conditions are said as written.
func (r *reader) from(ts []tok) (string, int, bool) {
	type source struct{ verb, name, on string }
	var srcs []source
	n := 0
	verb := ""
	for i := 0; ; {
		if i >= len(ts) {
			return "", 0, false
		}
		if kw(ts[i], "lateral") {
			r.mark(ts[i : i+1])
			i++
		}
		if i >= len(ts) {
			return "", 0, false
		}
		var name string
		switch {
		case ts[i].Text == "(":
			end := closing(ts, i)
			if end < 0 || !startsQuery(ts[i+1:end]) {
				return "", 0, false
			}
			r.mark(ts[i : end+1])
			n++
			name = "a subquery"
			i = end + 1
		case isName(ts[i]):
			start := i
			name = unquote(ts[i].Text)
			for i+2 < len(ts) && ts[i+1].Text == "." && isName(ts[i+2]) {
				name += "." + unquote(ts[i+2].Text)
				i += 2
			}
			i++
			if i < len(ts) && ts[i].Text == "(" { // a table function: said as written
				end := closing(ts, i)
				if end < 0 {
					return "", 0, false
				}
				i = end + 1
				name = render(ts[start:i])
			}
			r.mark(ts[start:i])
		default:
			return "", 0, false
		}
		// [AS] alias: a subquery is named by it.
		if i < len(ts) && kw(ts[i], "as") {
			r.mark(ts[i : i+1])
			i++
			if i >= len(ts) || !isName(ts[i]) {
				return "", 0, false
			}
		}
		if i < len(ts) && isName(ts[i]) && !(ts[i].Word && notAlias[ts[i].Text]) {
			if name == "a subquery" {
				name = unquote(ts[i].Text)
			}
			r.mark(ts[i : i+1])
			i++
		}
		src := source{verb: verb, name: name}
		if verb != "" && i < len(ts) && kw(ts[i], "on") {
			r.mark(ts[i : i+1])
			j := i + 1
			for j < len(ts) && !(ts[j].Depth == 0 && (ts[j].Text == "," || joinStart(ts, j))) {
				j++
			}
			if j == i+1 {
				return "", 0, false
			}
			var shown []string
			for _, c := range splitTop(ts[i+1:j], "and") {
				if !keyEquality(c) {
					shown = append(shown, render(c))
				}
			}
			r.mark(ts[i+1 : j])
			if len(shown) > 0 {
				src.on = " (on " + andList(shown) + ")"
			}
			i = j
		} else if verb != "" && i+1 < len(ts) && kw(ts[i], "using") && ts[i+1].Text == "(" {
			end := closing(ts, i+1)
			if end < 0 {
				return "", 0, false
			}
			r.mark(ts[i : end+1])
			i = end + 1
		}
		srcs = append(srcs, src)
		if i == len(ts) {
			break
		}
		if ts[i].Text == "," && ts[i].Depth == 0 {
			r.mark(ts[i : i+1])
			verb, i = "joined with", i+1
			continue
		}
		v, next, ok := joinKind(ts, i)
		if !ok {
			return "", 0, false
		}
		r.mark(ts[i:next])
		verb, i = v, next
	}
	var b strings.Builder
	b.WriteString(" in " + srcs[0].name + srcs[0].on)
	for k := 1; k < len(srcs); {
		v := srcs[k].verb
		var names []string
		for ; k < len(srcs) && srcs[k].verb == v; k++ {
			names = append(names, srcs[k].name+srcs[k].on)
		}
		if k-len(names) > 1 {
			b.WriteString(",")
		}
		b.WriteString(" " + v + " " + andList(names))
	}
	return b.String(), n, true
}

// joinStart reports whether a join's keywords start at ts[i].
func joinStart(ts []tok, i int) bool {
	_, _, ok := joinKind(ts, i)
	return ok
}

// joinKind reads [NATURAL] [INNER | CROSS | LEFT|RIGHT|FULL [OUTER]] JOIN
// at ts[i]: what it does in words, and the index after it.
func joinKind(ts []tok, i int) (string, int, bool) {
	verb := "joined with"
	if i < len(ts) && kw(ts[i], "natural") {
		i++
	}
	if i < len(ts) && ts[i].Word && ts[i].Depth == 0 {
		switch ts[i].Text {
		case "inner":
			i++
		case "cross":
			verb = "cross-joined with"
			i++
		case "left", "right", "full":
			verb = ts[i].Text + "-joined with"
			i++
			if i < len(ts) && kw(ts[i], "outer") {
				i++
			}
		}
	}
	if i < len(ts) && kw(ts[i], "join") {
		return verb, i + 1, true
	}
	return "", 0, false
}

// keyEquality reports whether c is a.x = b.y between two columns: the
// join's key, which "joined with" says.
func keyEquality(c []tok) bool {
	for len(c) > 2 && c[0].Text == "(" && closing(c, 0) == len(c)-1 {
		c = c[1 : len(c)-1]
	}
	eq := slices.IndexFunc(c, func(t tok) bool { return t.Text == "=" && !t.Word })
	if eq < 0 {
		return false
	}
	column := func(ts []tok) bool {
		if len(ts) == 0 || len(ts)%2 == 0 {
			return false
		}
		for k, t := range ts {
			if k%2 == 0 && !(isName(t) && !isNumber(t.Text)) || k%2 == 1 && t.Text != "." {
				return false
			}
		}
		return true
	}
	return column(c[:eq]) && column(c[eq+1:])
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// rows says a query's ORDER BY, LIMIT, OFFSET and FETCH (top: Snowflake's
// SELECT TOP n): "top 10 by the count", "the one with the 2nd highest
// price", "skipping the first row"; "" when it has none. name names an
// ORDER BY key (nil: as written).
func (r *reader) rows(cs map[string]clause, name func(string) string, top string) (string, bool) {
	limit, offset := top, ""
	if c, ok := cs["limit"]; ok {
		l := r.body(c)
		switch {
		case limit != "":
			return "", false
		case len(l) == 1:
			limit = l[0].Text
		case len(l) == 3 && l[1].Text == ",": // SQLite's LIMIT offset, count
			offset, limit = l[0].Text, l[2].Text
		default:
			return "", false
		}
		r.mark(l)
	}
	if c, ok := cs["offset"]; ok { // OFFSET n [ROW|ROWS]
		o := r.body(c)
		if offset != "" || len(o) < 1 || len(o) > 2 || len(o) == 2 && !kw(o[1], "row") && !kw(o[1], "rows") {
			return "", false
		}
		offset = o[0].Text
		r.mark(o)
	}
	if c, ok := cs["fetch"]; ok { // FETCH FIRST|NEXT [n] ROW|ROWS ONLY
		f := r.body(c)
		if limit != "" || len(f) < 3 || len(f) > 4 || !kw(f[0], "first") && !kw(f[0], "next") ||
			!kw(f[len(f)-2], "row") && !kw(f[len(f)-2], "rows") || !kw(f[len(f)-1], "only") {
			return "", false
		}
		limit = "1"
		if len(f) == 4 {
			limit = f[1].Text
		}
		r.mark(f)
	}
	if offset == "0" {
		offset = ""
	}
	skip := ""
	switch {
	case offset == "1":
		skip = "skipping the first row"
	case offset != "":
		skip = "skipping the first " + offset + " rows"
	}
	atMost := "at most " + limit + " " + plural(atoiOr(limit), "row", "rows")
	c, ok := cs["order"]
	if !ok {
		switch {
		case limit != "" && skip != "":
			return skip + " and keeping " + atMost, true
		case limit != "":
			return atMost, true
		}
		return skip, true
	}
	keys := splitTop(r.body(c), ",")
	r.mark(c.toks)
	first, desc, nulls := keys[0], false, ""
	if n := len(first); n > 2 && kw(first[n-2], "nulls") {
		nulls, first = " (nulls "+first[n-1].Text+")", first[:n-2]
	}
	if n := len(first); n > 0 && (kw(first[n-1], "desc") || kw(first[n-1], "asc")) {
		desc, first = first[n-1].Text == "desc", first[:n-1]
	}
	if len(first) == 0 {
		return "", false
	}
	by := render(first)
	if _, short, ok := aggregate(first); ok {
		by = short
	} else if name != nil {
		by = name(by)
	}
	by += nulls
	more := ""
	if len(keys) > 1 {
		more = ", then " + andList(renderAll(keys[1:]))
	}
	high, most := "lowest", strings.TrimPrefix(by, "the ") // "the one with the lowest count"
	if desc {
		high = "highest"
	}
	switch {
	case limit == "1" && offset == "":
		return "the one with the " + high + " " + most + more, true
	case limit == "1" && isInt(offset):
		return "the one with the " + ordinal(atoiOr(offset)+1) + " " + high + " " + most + more, true
	case limit != "":
		s := "top " + limit + " by " + by + more
		if !desc {
			s = "bottom " + limit + " by " + by + more
		}
		if skip != "" {
			s += ", after " + skip
		}
		return s, true
	}
	s := "ordered by " + by + more
	if desc {
		s = "highest " + most + " first" + more
	}
	if skip != "" {
		s += ", " + skip
	}
	return s, true
}

func isInt(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

func atoiOr(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 2 // not a number: said as "rows"
	}
	return n
}

func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return strconv.Itoa(n) + suffix
}

// splitTop splits tokens at top-level (depth of the first token) word or
// punctuation sep.
func splitTop(toks []tok, sep string) [][]tok {
	if len(toks) == 0 {
		return [][]tok{nil}
	}
	depth := toks[0].Depth
	var out [][]tok
	var cur []tok
	between := false // inside BETWEEN x AND y: that AND does not split
	for _, t := range toks {
		if t.Depth == depth && t.Text == "between" {
			between = true
		}
		if t.Depth == depth && t.Text == sep {
			if sep == "and" && between {
				between = false
			} else {
				out = append(out, cur)
				cur = nil
				continue
			}
		}
		cur = append(cur, t)
	}
	return append(out, cur)
}

// splitAlias separates a select item's trailing "AS alias" (or bare
// alias after an expression).
func splitAlias(it []tok) ([]tok, string) {
	n := len(it)
	if n >= 3 && it[n-2].Word && it[n-2].Text == "as" {
		return it[:n-2], unquote(it[n-1].Text)
	}
	if n >= 2 && it[n-2].Text == ")" && it[n-1].Word {
		return it[:n-1], it[n-1].Text
	}
	return it, ""
}

// aggregate says what an aggregate select item computes ("counted rows",
// "summed amount") and briefly ("the count", "the sum of amount"); a
// ROUND around it is said too. Not an aggregate over a window (… OVER
// (…)): that is said as written.
func aggregate(expr []tok) (what, brief string, ok bool) {
	if len(expr) < 3 || !expr[0].Word || expr[1].Text != "(" || closing(expr, 1) != len(expr)-1 {
		return "", "", false
	}
	if expr[0].Text == "round" {
		args := splitTop(expr[2:len(expr)-1], ",")
		if what, brief, ok := aggregate(args[0]); ok {
			return what + " (rounded)", brief, true
		}
		return "", "", false
	}
	arg := render(expr[2 : len(expr)-1])
	switch expr[0].Text {
	case "count":
		if arg == "*" || arg == "1" {
			return "counted rows", "the count", true
		}
		return "counted " + arg, "the count of " + arg, true
	case "sum":
		return "summed " + arg, "the sum of " + arg, true
	case "avg":
		return "averaged " + arg, "the average " + arg, true
	case "min":
		return "took the smallest " + arg, "the smallest " + arg, true
	case "max":
		return "took the largest " + arg, "the largest " + arg, true
	}
	return "", "", false
}

// render writes tokens back as compact SQL text.
func render(toks []tok) string {
	var b strings.Builder
	prev := ""
	for i, t := range toks {
		if i > 0 && t.Text != "," && t.Text != ")" && t.Text != "." && prev != "(" && prev != "." && !(t.Text == "(" && isFunc(prev)) &&
			!(isOp(prev) && isOp(t.Text)) {
			b.WriteByte(' ')
		}
		b.WriteString(t.Text)
		prev = t.Text
	}
	return b.String()
}

func isFunc(w string) bool {
	return w != "" && w != "in" && w != "and" && w != "or" && w != "not" && w != "exists" && w != "," && w != "=" &&
		(w[0] >= 'a' && w[0] <= 'z' || w[0] == '_')
}

// isOp: one character of a comparison operator (<>, >=, ||), which the
// lexer gives one token each.
func isOp(s string) bool { return len(s) == 1 && strings.Contains("<>=!|", s) }

func renderAll(parts [][]tok) []string {
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		out = append(out, render(p))
	}
	return out
}

func unquote(s string) string {
	if len(s) >= 2 && strings.ContainsRune("\"`[", rune(s[0])) {
		return s[1 : len(s)-1]
	}
	return s
}

// shorten keeps the first n items, counting the rest.
func shorten(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return append(items[:n:n], fmt.Sprintf("%d more", len(items)-n))
}

func andList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
