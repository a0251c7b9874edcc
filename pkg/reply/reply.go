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
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Unreadable is a reply the caller cannot use. Reask is the sentence to
// send back to the model so its next reply can be read.
type Unreadable struct {
	Problem string
	Reask   string
	// Refusal: the reply has text but no statement (a refusal, a question
	// back, prose only), counted as such (cost.Cost.Refusals).
	Refusal bool
	// Cut: the reply ended inside its query.
	Cut bool
}

// IsRefusal reports whether err is an Unreadable reply that holds no
// statement at all.
func IsRefusal(err error) bool {
	var u *Unreadable
	return errorsAs(err, &u) && u.Refusal
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

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
		m := fenceOpener(strings.TrimRight(lines[i], "\r"))
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
			if isClosing(lines[j], fence) || isClosing(tagsOff(lines[j]), fence) {
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

// SQLBlocks returns the complete statements of a reply in order
// (Statements); kept for callers that read an exploration batch.
func SQLBlocks(text string) []string { return Statements(text) }

// SQL returns the query a reply gives (the answer policy): the last
// statement the reply marks as final, else its last statement. A reply
// that drafts and then finalises ends with the final query; a "final"
// in the prose before a statement (or a JSON key naming it final) picks
// that one even when another follows. finish is the reply's finish
// reason: a reply cut by the token limit is read only if a complete
// statement precedes the cut. A reply with no statement at all is a
// refusal or a non-answer (Unreadable with Refusal set): nothing in it
// is ever run.
func SQL(text, finish string) (string, error) {
	return pick(Find(text), text, finish)
}

// SQLWithReasoning is SQL for a reply whose endpoint returned reasoning
// beside the text (reasoning_content): when the text holds no statement,
// the answer is read from the reasoning (a vLLM reasoning parser can move
// a whole reply there).
func SQLWithReasoning(text, reasoning, finish string) (string, error) {
	q, err := SQL(text, finish)
	var u *Unreadable
	if err == nil || strings.TrimSpace(reasoning) == "" || !errorsAs(err, &u) || u.Cut {
		return q, err
	}
	if rq, rerr := pick(Find(reasoning), reasoning, finish); rerr == nil {
		return rq, nil
	}
	return q, err
}

func pick(sts []Statement, text, finish string) (string, error) {
	// A comment that marks several statements final (copied from answer
	// to draft) tells none of them apart.
	marks := 0
	for _, st := range sts {
		if !st.Cut && st.ownMark {
			marks++
		}
	}
	var last, final, keyFinal *Statement
	for i := range sts {
		if sts[i].Cut {
			continue
		}
		last = &sts[i]
		if sts[i].Final && !(sts[i].byComment && marks > 1) {
			final = &sts[i]
		}
		if sts[i].keyFinal {
			keyFinal = &sts[i]
		}
	}
	if final == nil {
		final = keyFinal
	}
	// Cut by the token limit: the last statement runs to the end, or the
	// reply ends inside a fence.
	cutAtEnd := finish == FinishLength && (len(sts) > 0 && sts[len(sts)-1].AtEnd || openBlockAfter(Visible(clean(text))))
	switch {
	case finish == FinishLength && cutAtEnd:
		// The cut statement is the reply's real final query; an earlier
		// one was its draft.
		return "", &Unreadable{Problem: "the reply was cut off inside its query", Reask: ReaskCut, Cut: true}
	case final != nil:
		return final.SQL, nil
	case last != nil:
		return last.SQL, nil
	case finish == FinishLength:
		return "", &Unreadable{Problem: "the reply was cut off before a complete query", Reask: ReaskCut, Cut: true}
	case strings.TrimSpace(Visible(clean(text))) == "" && len(sts) == 0:
		return "", &Unreadable{Problem: "the reply was empty", Reask: ReaskEmpty}
	case len(sts) > 0:
		return "", &Unreadable{Problem: "the reply's query is incomplete", Reask: ReaskCut, Cut: true}
	}
	return "", &Unreadable{Problem: "no SQL statement in the reply: a refusal or a non-answer", Reask: ReaskNoSQL, Refusal: true}
}

// PlainSQL is the last statement of text, "" if none.
func PlainSQL(text string) string {
	sts := Statements(text)
	if len(sts) == 0 {
		return ""
	}
	return sts[len(sts)-1]
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

// openBlockAfter reports whether text ends inside a fenced block.
func openBlockAfter(text string) bool {
	bs := Blocks(text)
	return len(bs) > 0 && !bs[len(bs)-1].Closed
}
