package serve

import (
	"fmt"
	"strings"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

// Understood restates, in one line, how a question was taken, read from
// the answer's SQL alone (no model call): what was computed, per what,
// from which tables, filtered how, ordered and limited how. For example
// "Counted rows per customer_id in orders, filtered to status = 'shipped',
// top 10 by the count". It reads the outer query; "" when sql is not a
// query it can read.
func Understood(sql string, d sqltext.Dialect) string {
	return understood(sqltext.Tokens(sql, d.LexOptions()))
}

func understood(toks []sqltext.Token) string {
	start, ctes := mainSelect(toks)
	if start < 0 {
		return ""
	}
	c := clauses(toks[start:])
	if len(c["select"]) == 0 {
		return ""
	}
	if inner, ok := wrapped(c); ok {
		// SELECT * FROM (the query) [LIMIT n]: an agent's wrapper, the
		// query inside says how the question was taken.
		return understood(inner)
	}
	var b strings.Builder
	items := splitTop(c["select"], ",")
	distinct := false
	if len(items) > 0 && len(items[0]) > 0 && items[0][0].Word && items[0][0].Text == "distinct" {
		distinct = true
		items[0] = items[0][1:]
	}
	aliases := map[string]string{} // alias → what it is, said briefly
	var aggs, cols []string
	for _, it := range items {
		expr, alias := splitAlias(it)
		if what, brief, ok := aggregate(expr); ok {
			aggs = append(aggs, what)
			if alias != "" {
				aliases[alias] = brief
			}
			continue
		}
		cols = append(cols, render(expr))
	}
	switch {
	case len(aggs) > 0:
		b.WriteString(upperFirst(andList(aggs)))
	case distinct:
		b.WriteString("Listed the distinct " + andList(shorten(cols, 4)))
	case len(cols) == 1 && cols[0] == "*":
		b.WriteString("Listed every column")
	default:
		b.WriteString("Listed " + andList(shorten(cols, 4)))
	}
	if g := c["group"]; len(g) > 1 { // "by" first
		b.WriteString(" per " + andList(renderAll(splitTop(g[1:], ","))))
	}
	if tables := fromTables(c["from"]); len(tables) > 0 {
		b.WriteString(" in " + tables[0])
		if len(tables) > 1 {
			b.WriteString(" joined with " + andList(tables[1:]))
		}
	}
	if ctes > 0 {
		fmt.Fprintf(&b, " (after %d intermediate %s)", ctes, plural(ctes, "step", "steps"))
	}
	if w := c["where"]; len(w) > 0 {
		b.WriteString(", filtered to " + andList(shorten(renderAll(splitTop(w, "and")), 3)))
	}
	if h := c["having"]; len(h) > 0 {
		b.WriteString(", keeping groups where " + render(h))
	}
	limit := ""
	if l := c["limit"]; len(l) > 0 {
		limit = l[0].Text
	}
	if o := c["order"]; len(o) > 1 {
		keys := splitTop(o[1:], ",")
		first, desc := keys[0], false
		if n := len(first); n > 0 && first[n-1].Word && (first[n-1].Text == "desc" || first[n-1].Text == "asc") {
			desc, first = first[n-1].Text == "desc", first[:n-1]
		}
		by := render(first)
		if brief, ok := aliases[by]; ok {
			by = brief
		} else if _, brief, ok := aggregate(first); ok {
			by = brief
		}
		switch {
		case limit == "1" && desc:
			b.WriteString(", the one with the highest " + by)
		case limit == "1":
			b.WriteString(", the one with the lowest " + by)
		case limit != "" && desc:
			b.WriteString(", top " + limit + " by " + by)
		case limit != "":
			b.WriteString(", bottom " + limit + " by " + by)
		case desc:
			b.WriteString(", highest " + by + " first")
		default:
			b.WriteString(", ordered by " + by)
		}
	} else if limit != "" {
		b.WriteString(", at most " + limit + " rows")
	}
	return b.String()
}

// wrapped returns the subquery of SELECT * FROM (subquery) [AS t] with
// nothing else but a LIMIT or OFFSET, rebased to depth 0.
func wrapped(c map[string][]sqltext.Token) ([]sqltext.Token, bool) {
	sel, from := c["select"], c["from"]
	if len(sel) != 1 || sel[0].Text != "*" || len(from) < 3 || from[0].Text != "(" || len(c["where"])+len(c["group"])+len(c["order"]) > 0 {
		return nil, false
	}
	end := -1
	for i := 1; i < len(from); i++ {
		if from[i].Text == ")" && from[i].Depth == from[0].Depth {
			end = i
			break
		}
	}
	if end < 0 {
		return nil, false
	}
	rest := from[end+1:]
	if len(rest) > 0 && rest[0].Text == "as" {
		rest = rest[1:]
	}
	if len(rest) > 1 {
		return nil, false // joined with something else
	}
	inner := make([]sqltext.Token, 0, end-1)
	for _, t := range from[1:end] {
		t.Depth -= from[0].Depth + 1
		inner = append(inner, t)
	}
	return inner, true
}

// mainSelect finds the outer query's SELECT (after a WITH's CTEs, which
// sit in parentheses) and counts the CTEs; -1 when there is none.
func mainSelect(toks []sqltext.Token) (int, int) {
	ctes := 0
	for i, t := range toks {
		if t.Depth != 0 || !t.Word {
			continue
		}
		switch t.Text {
		case "as":
			if i+1 < len(toks) && toks[i+1].Text == "(" {
				ctes++
			}
		case "select":
			return i, ctes
		}
	}
	return -1, 0
}

// clauses splits a query's top-level tokens by clause keyword ("select",
// "from", "where", "group", "having", "order", "limit"); a set operation
// ends it.
func clauses(toks []sqltext.Token) map[string][]sqltext.Token {
	out := map[string][]sqltext.Token{}
	cur := ""
	for _, t := range toks {
		if t.Depth == 0 && t.Word {
			switch t.Text {
			case "select", "from", "where", "group", "having", "order", "limit", "qualify", "window":
				cur = t.Text
				continue
			case "union", "intersect", "except":
				return out
			}
		}
		if cur != "" && !(t.Depth == 0 && t.Text == ";") {
			out[cur] = append(out[cur], t)
		}
	}
	return out
}

// splitTop splits tokens at top-level (depth of the first token) word or
// punctuation sep.
func splitTop(toks []sqltext.Token, sep string) [][]sqltext.Token {
	if len(toks) == 0 {
		return nil
	}
	depth := toks[0].Depth
	var out [][]sqltext.Token
	var cur []sqltext.Token
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
func splitAlias(it []sqltext.Token) ([]sqltext.Token, string) {
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
// "summed amount") and briefly ("the count", "the sum of amount").
func aggregate(expr []sqltext.Token) (what, brief string, ok bool) {
	if len(expr) < 3 || !expr[0].Word || expr[1].Text != "(" || expr[len(expr)-1].Text != ")" {
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

// fromTables names the FROM clause's tables: the one after FROM and each
// joined one, without aliases.
func fromTables(toks []sqltext.Token) []string {
	var out []string
	take := true
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.Depth != toks[0].Depth {
			continue
		}
		if t.Word && t.Text == "join" || t.Text == "," {
			take = true
			continue
		}
		if !take || t.Text == "(" || t.Text == ")" || t.Word && t.Text == "as" { // a subquery is named by its alias
			continue
		}
		name := unquote(t.Text)
		for i+2 < len(toks) && toks[i+1].Text == "." {
			i += 2
			name += "." + unquote(toks[i].Text)
		}
		out = append(out, name)
		take = false
	}
	return out
}

// render writes tokens back as compact SQL text.
func render(toks []sqltext.Token) string {
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

func renderAll(parts [][]sqltext.Token) []string {
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
