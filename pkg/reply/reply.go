// Package reply reads what a model wrote: the SQL of an answer, the JSON of
// a verdict, the arguments of a tool call. Every agent reads replies through
// it, because real models do not write one canonical shape: fences are
// spelled ```sql, ```SQL, ```sqlite, ```bigquery or not at all, a draft
// comes before the final query, reasoning arrives in <think> blocks, JSON
// carries Python literals and trailing commas, and a reply may be cut by
// the token limit. What cannot be read is an *Unreadable error whose Reask
// tells the model what to fix; nothing unreadable passes silently.
package reply

import (
	"fmt"
	"regexp"
	"strings"
)

// Unreadable is a reply the caller cannot use. Reask is the sentence to
// send back to the model so its next reply can be read.
type Unreadable struct {
	Problem string
	Reask   string
}

func (e *Unreadable) Error() string { return "unreadable reply: " + e.Problem }

// Re-asks for the ways an answer's SQL goes missing.
const (
	ReaskNoSQL = "Your reply has no SQL query I can read. Put the complete query in one ```sql block."
	ReaskCut   = "Your reply was cut off before the query ended. Answer again, briefly, with the complete query in one ```sql block."
	ReaskEmpty = "Your reply was empty. Answer with the complete query in one ```sql block."
)

// FinishLength is the finish reason of a reply cut by the token limit.
const FinishLength = "length"

var thinkClose = regexp.MustCompile(`(?i)</think(?:ing)?>`)
var thinkOpen = regexp.MustCompile(`(?i)<think(?:ing)?>`)

// Visible returns text with its reasoning removed: every
// <think>…</think> section, a leading section that only closes (templates
// such as DeepSeek-R1's open <think> in the prompt, so the reply starts
// inside it), and an opened section never closed (a reply cut while
// thinking has no answer yet).
func Visible(text string) string {
	if loc := thinkClose.FindStringIndex(text); loc != nil {
		if open := thinkOpen.FindStringIndex(text); open == nil || open[0] > loc[0] {
			text = text[loc[1]:]
		}
	}
	var b strings.Builder
	for {
		open := thinkOpen.FindStringIndex(text)
		if open == nil {
			b.WriteString(text)
			break
		}
		b.WriteString(text[:open[0]])
		rest := text[open[1]:]
		cl := thinkClose.FindStringIndex(rest)
		if cl == nil {
			break
		}
		text = rest[cl[1]:]
	}
	return strings.TrimSpace(b.String())
}

// Block is one fenced block of a reply.
type Block struct {
	// Lang is the fence's info word, lower-cased ("" for a bare fence).
	Lang string
	Body string
	// Closed is false for a block the reply ends inside (a cut reply).
	Closed bool
}

// SQL fence spellings models use: the dialect's name as often as "sql".
var sqlLangs = map[string]bool{
	"sql": true, "sqlite": true, "sqlite3": true, "bigquery": true, "googlesql": true, "googlesqlite": true,
	"snowflake": true, "postgresql": true, "postgres": true, "psql": true, "pgsql": true, "plsql": true,
	"mysql": true, "tsql": true, "mssql": true, "duckdb": true, "ansi": true, "ansisql": true, "hive": true,
	"sparksql": true, "spark": true, "trino": true, "presto": true, "sql92": true, "standardsql": true,
}

// IsSQLLang reports whether a fence's info word names SQL.
func IsSQLLang(lang string) bool { return sqlLangs[strings.ToLower(lang)] }

var fenceLine = regexp.MustCompile("^[ \t]*(`{3,}|~{3,})[ \t]*([A-Za-z0-9_+.#-]*)(.*)$")

// Blocks returns the fenced blocks of text in order. Fences are ``` or ~~~
// (three or more), indented or not; an info word may be any case. A fence
// whose opening line also holds the code and the closing fence
// ("```sql SELECT 1 ```") is an inline block.
func Blocks(text string) []Block {
	lines := strings.Split(text, "\n")
	var out []Block
	for i := 0; i < len(lines); i++ {
		m := fenceLine.FindStringSubmatch(strings.TrimRight(lines[i], "\r"))
		if m == nil {
			if b, ok := inlineBlock(lines[i]); ok {
				out = append(out, b)
			}
			continue
		}
		fence, word, rest := m[1], m[2], strings.TrimSpace(m[3])
		lang := strings.ToLower(word)
		var first []string // code on the opening line
		if rest != "" {
			code := rest
			if lang != "" && !IsSQLLang(lang) && looksLikeSQL(word+" "+rest) {
				// "```SELECT 1```": no info word, the code starts at once.
				code, lang = word+" "+rest, ""
			}
			if j := strings.Index(code, fence[:3]); j >= 0 {
				out = append(out, Block{Lang: lang, Body: strings.TrimSpace(code[:j]), Closed: true})
				continue
			}
			if IsSQLLang(lang) || lang == "" {
				first = []string{code}
			} // else an info string ("```python title=x"), not code
		}
		j := i + 1
		body := first
		for ; j < len(lines); j++ {
			if isClosing(lines[j], fence) {
				break
			}
			body = append(body, lines[j])
		}
		b := Block{Lang: lang, Body: strings.TrimSpace(strings.Join(body, "\n")), Closed: j < len(lines)}
		// A closing fence that ends the code's last line ("SELECT 1```").
		if !b.Closed {
			if k := strings.LastIndex(b.Body, fence[:3]); k >= 0 && strings.TrimSpace(b.Body[k+3:]) == "" {
				b.Body, b.Closed = strings.TrimSpace(b.Body[:k]), true
			}
		}
		out = append(out, b)
		i = j
	}
	return out
}

func isClosing(line, fence string) bool {
	t := strings.TrimSpace(line)
	return len(t) >= 3 && t[0] == fence[0] && strings.Trim(t, string(fence[0])) == "" && len(t) >= len(fence)
}

var inlineFence = regexp.MustCompile("```([A-Za-z0-9_]*)[ \t]+([^`]+?)[ \t]*```")

// inlineBlock finds "… ```sql SELECT 1``` …" inside a line of prose.
func inlineBlock(line string) (Block, bool) {
	m := inlineFence.FindStringSubmatch(line)
	if m == nil {
		return Block{}, false
	}
	lang, body := strings.ToLower(m[1]), m[2]
	if lang != "" && !IsSQLLang(lang) {
		body = m[1] + " " + body
		lang = ""
	}
	return Block{Lang: lang, Body: strings.TrimSpace(body), Closed: true}, true
}

var sqlStart = regexp.MustCompile(`(?is)^\s*(?:--[^\n]*\n\s*|/\*.*?\*/\s*)*\(?\s*(SELECT|WITH)\b`)

// looksLikeSQL tells a query from prose or another language in a bare
// fence: it starts (after comments) with SELECT or WITH.
func looksLikeSQL(s string) bool { return sqlStart.MatchString(s) }

// SQLBlocks returns the complete SQL blocks of a reply in order, reasoning
// removed: fences named for SQL or a dialect, and bare fences holding a
// query. A block the reply ends inside is left out: its query is cut.
func SQLBlocks(text string) []string {
	var out []string
	for _, b := range Blocks(Visible(text)) {
		if !b.Closed || b.Body == "" {
			continue
		}
		if IsSQLLang(b.Lang) || (b.Lang == "" && looksLikeSQL(b.Body)) {
			out = append(out, b.Body)
		}
	}
	return out
}

// SQL returns the query a reply gives: the last complete SQL block (a
// reply that drafts and then finalises ends with the final query), else a
// query written as plain text. finish is the reply's finish reason: a
// reply cut by the token limit is read only if a complete block precedes
// the cut.
func SQL(text, finish string) (string, error) {
	vis := Visible(text)
	if blocks := SQLBlocks(text); len(blocks) > 0 {
		last := blocks[len(blocks)-1]
		if finish == FinishLength && openBlockAfter(vis) {
			// The cut block is the reply's real final query; the earlier
			// one was its draft.
			return "", &Unreadable{Problem: "the reply was cut off inside its query", Reask: ReaskCut}
		}
		return last, nil
	}
	if finish == FinishLength {
		return "", &Unreadable{Problem: "the reply was cut off before a complete query", Reask: ReaskCut}
	}
	if strings.TrimSpace(vis) == "" {
		return "", &Unreadable{Problem: "the reply was empty", Reask: ReaskEmpty}
	}
	if q := PlainSQL(vis); q != "" {
		return q, nil
	}
	return "", &Unreadable{Problem: "no SQL query found in the reply", Reask: ReaskNoSQL}
}

// openBlockAfter reports whether text ends inside a fenced block.
func openBlockAfter(text string) bool {
	bs := Blocks(text)
	return len(bs) > 0 && !bs[len(bs)-1].Closed
}

var plainStart = regexp.MustCompile(`(?im)^[ \t]*(?:--[^\n]*\n[ \t]*)*(SELECT|WITH)\b`)

// PlainSQL finds a query written without a fence: from a line that starts
// with SELECT or WITH to the first ";" ending a line, or to a blank line
// followed by prose. With several, the last is taken (the final one); a
// line inside a query already read (a subquery on its own line) starts
// none.
func PlainSQL(text string) string {
	locs := plainStart.FindAllStringSubmatchIndex(text, -1)
	var found []string
	end := 0
	for _, loc := range locs {
		if loc[2] < end {
			continue
		}
		q, n := statementAt(text[loc[2]:])
		end = loc[2] + n
		if q != "" {
			found = append(found, q)
		}
	}
	if len(found) == 0 {
		return ""
	}
	return found[len(found)-1]
}

// statementAt reads one statement from s: lines up to one ending in ";",
// or up to a blank line after which the text is not SQL. n is the length
// of s it read.
func statementAt(s string) (q string, n int) {
	lines := strings.SplitAfter(s, "\n")
	var out []string
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" {
			if i+1 < len(lines) && continuesSQL(lines[i+1:]) {
				out = append(out, l)
				n += len(l)
				continue
			}
			break
		}
		out = append(out, l)
		n += len(l)
		if strings.HasSuffix(t, ";") {
			break
		}
	}
	q = strings.TrimSpace(strings.Join(out, ""))
	q = strings.TrimSpace(strings.TrimSuffix(q, ";"))
	if !strings.Contains(strings.ToUpper(q), "SELECT") {
		return "", n
	}
	return q, n
}

var sqlContinuation = regexp.MustCompile(`(?i)^\s*(FROM|WHERE|GROUP|ORDER|HAVING|LIMIT|JOIN|LEFT|RIGHT|INNER|OUTER|CROSS|FULL|UNION|INTERSECT|EXCEPT|AND|OR|ON|SELECT|WITH|QUALIFY|WINDOW|OFFSET|\)|,)`)

// continuesSQL reports whether the first non-blank line of rest carries on
// a query (a clause keyword, a closing parenthesis, a comma).
func continuesSQL(rest []string) bool {
	for _, l := range rest {
		if strings.TrimSpace(l) == "" {
			continue
		}
		return sqlContinuation.MatchString(l)
	}
	return false
}

// Describe names a reply's form for a log line or a trace: how many fenced
// blocks, which spellings, whether it was cut.
func Describe(text, finish string) string {
	bs := Blocks(Visible(text))
	langs := make([]string, 0, len(bs))
	for _, b := range bs {
		l := b.Lang
		if l == "" {
			l = "(bare)"
		}
		langs = append(langs, l)
	}
	return fmt.Sprintf("%d blocks %v, finish %q", len(bs), langs, finish)
}
