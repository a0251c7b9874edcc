package reply

import (
	"encoding/json"
	"html"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

// Statement is one SQL statement found in a reply.
type Statement struct {
	// SQL is the statement as written, trimmed, without a closing ';'.
	SQL string
	// Final: the reply marks it as its final one (prose before it saying
	// "final", or a JSON key such as "final_sql").
	Final bool
	// Cut: the reply ends inside it (an open string, bracket or clause).
	Cut bool
	// AtEnd: nothing follows it but space (a reply cut by the token limit
	// may have stopped inside it, at a point that happens to be complete).
	AtEnd bool
	// keyFinal: a JSON key names it final ("final_sql"); weaker than prose
	// ("For comparison, my first attempt was: {"final": …}").
	keyFinal bool
	// ownMark: the comment lines right before it say final ("-- final
	// answer"); byComment: Final rests on them alone, which tells it apart
	// only when no other statement carries such a mark (pick).
	ownMark, byComment bool
}

// Find returns the statements of a reply in order: its visible text
// first (reasoning in <think> sections removed); when that holds none,
// the reasoning sections. Envelopes are removed generically: a JSON value
// anywhere in the text is read through its string values at any depth,
// HTML entities inside markup are decoded, and everything else is left to
// the statement scanner, which ends a statement at any fence, tag or
// quote that wraps it.
func Find(text string) []Statement {
	text = clean(text)
	if out := findIn(Visible(text), 0); len(out) > 0 {
		return out
	}
	return findIn(text, 0)
}

// Statements returns the complete statements of a reply in order (an
// exploration batch: every query the reply gives).
func Statements(text string) []string {
	var out []string
	for _, st := range Find(text) {
		if !st.Cut {
			out = append(out, st.SQL)
		}
	}
	return out
}

// maxDepth bounds JSON strings holding JSON holding a reply.
const maxDepth = 4

// maxStarts bounds the SELECT/WITH words tried in one text, so that a
// hostile reply of a million "select" words costs linear time.
const maxStarts = 4096

// envelopes are the JSON values of a text that wrap its content rather
// than belong to a statement. A value inside a statement of the text is
// the query's own literal; but a query in a JSON string before it can run
// on over the whole text (cut: the string's quote never closes for SQL),
// hiding the statements after it. So the values outside every statement
// are taken out and the text read again: a value that then sits inside a
// whole statement, and holds no query itself, is that statement's own
// ("UNNEST(['a', 'b'])" in BigQuery) and stays.
func envelopes(text string, raw []found) []region {
	var out []region
	for _, r := range jsonRegions(text) {
		if !inside(raw, r.start, r.end) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil
	}
	b := []byte(text)
	for _, r := range out {
		blankBytes(b, r.start, r.end)
	}
	again := scanText(string(b))
	kept := out[:0]
	for _, r := range out {
		if inside(again, r.start, r.end) && !holdsQuery(r) {
			continue
		}
		kept = append(kept, r)
	}
	return kept
}

// holdsQuery reports whether a JSON value's strings hold a query.
func holdsQuery(r region) bool {
	for _, l := range r.leaves {
		if looksLikeSQL(peel(clean(l.value))) || len(scanText(clean(l.value))) > 0 {
			return true
		}
	}
	return false
}

// blankBytes turns b[start:end] into spaces, keeping its line breaks so
// that offsets and lines stay where they were.
func blankBytes(b []byte, start, end int) {
	for i := start; i < end; i++ {
		if b[i] != '\n' {
			b[i] = ' '
		}
	}
}

// found is a statement with its place in the text it was found in.
type found struct {
	pos int
	st  Statement
}

func findIn(text string, depth int) []Statement {
	if depth > maxDepth || strings.TrimSpace(text) == "" {
		return nil
	}
	if hasMarkup(text) && entity.MatchString(text) {
		text = html.UnescapeString(text)
	}
	// A fenced block declared SQL (or a bare one starting with a query)
	// is the model's query even when it is not valid SQL: the warehouse's
	// error is what the agents feed back.
	var fs []found
	blanked := []byte(nil)
	blank := func(start, end int) {
		if blanked == nil {
			blanked = []byte(text)
		}
		blankBytes(blanked, start, end)
	}
	prevEnd := 0 // the prose marking a block final is between it and the last
	if end, next, ok := leadingQuery(text); ok {
		// A reply that continues a prefilled "```sql" starts with its
		// query and closes the fence the prompt opened.
		sts := explicit(text[:end], true)
		for i, st := range sts {
			st.AtEnd = i == len(sts)-1 && strings.TrimSpace(text[end:]) == ""
			fs = append(fs, found{pos: 0, st: st})
		}
		blank(0, next)
		prevEnd = next
	}
	base := prevEnd // after a leading query, its closing fence is no opening one
	for _, f := range fences(text[base:]) {
		f.start, f.end, f.bodyStart, f.bodyEnd = f.start+base, f.end+base, f.bodyStart+base, f.bodyEnd+base
		body := text[f.bodyStart:f.bodyEnd]
		var sts []Statement
		switch declared := IsSQLLang(f.lang); {
		case looksLikeSQL(body):
			sts = explicit(body, declared)
		case declared && looksLikeSQL(peel(body)):
			sts = explicit(peel(body), true) // <output>…</output> in a ```sql block
		default:
			sts = findIn(body, depth+1) // another language, markup, JSON, a fence inside
		}
		for i, st := range sts {
			st.AtEnd = !f.closed && i == len(sts)-1
			st.Final, st.byComment = finalProse.MatchString(text[prevEnd:f.start]), false
			fs = append(fs, found{pos: f.bodyStart, st: st})
		}
		blank(f.start, f.end)
		prevEnd = f.end
	}
	if blanked != nil {
		text = string(blanked)
		blanked = nil
	}
	raw := scanText(text)
	// JSON values outside every statement hold the reply's content in
	// their strings: read those, and the text without them.
	regions := envelopes(text, raw)
	for _, r := range regions {
		blank(r.start, r.end)
	}
	regionEnd := 0
	for _, r := range regions {
		// Prose before the value may mark what it holds final.
		marked := finalProse.MatchString(text[regionEnd:r.start])
		regionEnd = r.end
		for _, l := range r.leaves {
			v := clean(l.value)
			var sts []Statement
			justQuery := false
			if p := peel(v); looksLikeSQL(p) {
				sts, justQuery = explicit(p, false), true // a string holding just a query
			} else {
				sts = findIn(v, depth+1)
			}
			for _, st := range sts {
				// As for a fenced query, the prose before the value marks
				// a query the string holds alone, not the query's own
				// comment ("-- final answer" copied into a draft).
				st.Final = marked || st.Final && !justQuery
				st.byComment = st.byComment && !marked && !justQuery
				st.keyFinal = st.keyFinal || finalKey.MatchString(l.path)
				fs = append(fs, found{pos: r.start, st: st})
			}
		}
	}
	if blanked != nil {
		raw = scanText(string(blanked))
	}
	fs = append(fs, raw...)
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].pos < fs[j].pos })
	out := make([]Statement, len(fs))
	for i, f := range fs {
		out[i] = f.st
	}
	return out
}

var finalKey = regexp.MustCompile(`(?i)final`)
var finalProse = regexp.MustCompile(`(?i)\bfinal`)
var entity = regexp.MustCompile(`&(?:lt|gt|amp|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);`)

// marksFinal reports whether the text before a statement marks it as the
// reply's final one. Prose there decides when there is any: the comment
// lines right before the statement are its own, and a model copies them
// with it from answer to draft ("-- final answer" on both); they decide
// only when no prose does (byComment). ownMark: the comments say final.
func marksFinal(before string) (final, ownMark, byComment bool) {
	lines := strings.Split(before, "\n")
	i := len(lines)
	for ; i > 0; i-- {
		l := strings.TrimSpace(tagsOff(lines[i-1]))
		if l != "" && !strings.HasPrefix(l, "--") && !(strings.HasPrefix(l, "/*") && strings.HasSuffix(l, "*/")) {
			break
		}
	}
	prose := strings.Join(lines[:i], "\n")
	ownMark = finalProse.MatchString(strings.Join(lines[i:], "\n"))
	if strings.IndexFunc(tagsOff(prose), unicode.IsLetter) >= 0 {
		return finalProse.MatchString(prose), ownMark, false
	}
	final = finalProse.MatchString(before)
	return final, ownMark, final && !finalProse.MatchString(prose)
}

func hasMarkup(s string) bool {
	for i := strings.IndexByte(s, '<'); i >= 0; {
		if tagLen(s[i:]) > 0 {
			return true
		}
		j := strings.IndexByte(s[i+1:], '<')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// inside reports a value that a statement holds (a JSON literal in the
// query's own SQL). A statement the text ends inside holds nothing: it ran
// on past where its envelope closed.
func inside(fs []found, start, end int) bool {
	for _, f := range fs {
		if !f.st.Cut && f.pos <= start && end <= f.pos+len(f.st.SQL)+1 {
			return true
		}
	}
	return false
}

// scanText finds the statements of one text.
func scanText(s string) []found {
	var out []found
	prevEnd, tries := 0, 0
	for i := 0; i < len(s); {
		start := nextStart(s, i)
		if start < 0 || tries >= maxStarts {
			break
		}
		tries++
		sp, ok := readFrom(s, start)
		if !ok {
			q, end, ok := paragraphQuery(s, start)
			if !ok {
				q, end, ok = taggedQuery(s, start)
			}
			if !ok {
				q, end, ok = quotedQuery(s, start)
			}
			if ok {
				// A line that starts with SELECT or WITH in capitals, up to
				// its paragraph's end, or a tag's whole content: the model's
				// query, even misspelt.
				st := Statement{SQL: q, AtEnd: strings.TrimSpace(s[end:]) == ""}
				st.Final, st.ownMark, st.byComment = marksFinal(s[prevEnd:start])
				out = append(out, found{pos: start, st: st})
				prevEnd, i = end, end
				continue
			}
			i = start + 1
			for i < len(s) && isWordByte(s[i]) {
				i++
			}
			continue
		}
		sql := strings.TrimSpace(s[sp.start:sp.end])
		st := Statement{
			SQL:   sql,
			Cut:   sp.cut,
			AtEnd: strings.TrimSpace(s[sp.end:]) == "" || sp.cut,
		}
		st.Final, st.ownMark, st.byComment = marksFinal(s[prevEnd:sp.start])
		out = append(out, found{pos: sp.start, st: st})
		prevEnd = sp.end
		i = sp.end
		if i <= start {
			i = start + 1
		}
	}
	return out
}

// readFrom reads a statement at a SELECT or WITH, or from the brackets
// just before it on its line ("(SELECT …) UNION (SELECT …)").
func readFrom(s string, start int) (span, bool) {
	if p := parensBefore(s, start); p < start {
		if sp, ok := readStatementParen(s, p); ok {
			return sp, true
		}
	}
	return readStatement(s, start)
}

// readStatementParen reads "(SELECT …) …" as one statement: the scanner
// starts inside the first bracket.
func readStatementParen(s string, p int) (span, bool) {
	sp, ok := readStatement(s, p)
	return sp, ok && !sp.cut
}

// parensBefore is the offset of a run of "(" that opens the line before
// start, or start.
func parensBefore(s string, start int) int {
	i := start
	for i > 0 && (s[i-1] == '(' || s[i-1] == ' ' || s[i-1] == '\t') {
		i--
	}
	for i < start && s[i] != '(' {
		i++
	}
	if i == start || (i > 0 && s[i-1] != '\n' && s[i-1] != ' ' && s[i-1] != '\t') {
		return start
	}
	return i
}

var startWord = regexp.MustCompile(`(?i)\b(?:select|with)\b`)

// nextStart is the offset of the next SELECT or WITH at or after i, -1
// if none.
func nextStart(s string, i int) int {
	for i < len(s) {
		loc := startWord.FindStringIndex(s[i:])
		if loc == nil {
			return -1
		}
		at := i + loc[0]
		// \b treats bytes >= 0x80 as non-word; the lexer does not.
		if at > 0 && (isWordByte(s[at-1]) || s[at-1] == '$' || s[at-1] == '.') || midSentence(s, at) {
			i = at + 1
			continue
		}
		if e := i + loc[1]; e < len(s) && (isWordByte(s[e]) || s[e] == '$') {
			i = e
			continue
		}
		return at
	}
	return -1
}

// midSentence reports a lower-case "select" or "with" that a sentence's
// words lead up to on its line ("we only select from…"): a query starts
// a line, follows punctuation ("Query: SELECT"), or is written in
// capitals.
func midSentence(s string, at int) bool {
	if s[at] < 'a' || s[at] > 'z' {
		return false
	}
	i := at
	for i > 0 && (s[i-1] == ' ' || s[i-1] == '\t') {
		i--
	}
	return i > 0 && (isWordByte(s[i-1]) || s[i-1] == ',')
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 0x80 || isASCIILetter(c) || isDigit(c)
}

// clean removes what is never part of a query's tokens: byte order marks
// and zero-width characters; non-breaking spaces become spaces, CRLF and
// lone CR line feeds.
func clean(s string) string {
	if !strings.ContainsAny(s, "\r\u00a0\u202f\u2007\ufeff\u200b\u200c\u200d\u2060") {
		return s
	}
	return cleaner.Replace(s)
}

var cleaner = strings.NewReplacer("\r\n", "\n", "\r", "\n", "\u00a0", " ", "\u202f", " ", "\u2007", " ",
	"\ufeff", "", "\u200b", "", "\u200c", "", "\u200d", "", "\u2060", "")

// region is a JSON value in a text and its string values.
type region struct {
	start, end int
	leaves     []leaf
}

// leaf is one string value and the keys leading to it ("answer.sql").
type leaf struct {
	path, value string
}

// jsonRegions finds the JSON objects and arrays of a text (read
// leniently: Python literals, single quotes, trailing commas) that hold a
// string, outermost first.
func jsonRegions(s string) []region {
	var out []region
	tries := 0
	for i := 0; i < len(s) && tries < maxStarts; i++ {
		if s[i] != '{' && s[i] != '[' {
			continue
		}
		tries++
		end := matchClose(s, i)
		if end < 0 {
			continue
		}
		var v any
		body := s[i:end]
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			if err := json.Unmarshal([]byte(Repair(body)), &v); err != nil {
				continue
			}
		}
		var leaves []leaf
		collect(v, "", &leaves)
		if len(leaves) == 0 {
			continue
		}
		out = append(out, region{start: i, end: end, leaves: leaves})
		i = end - 1
	}
	return out
}

// collect appends the string values of v in document order. encoding/json
// decodes objects into maps, so keys are visited sorted; the order of
// statements inside one object is then alphabetical by key, which only
// matters for a reply with several queries in one object.
func collect(v any, path string, out *[]leaf) {
	switch x := v.(type) {
	case string:
		*out = append(*out, leaf{path: path, value: x})
	case []any:
		for _, e := range x {
			collect(e, path, out)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			collect(x[k], p, out)
		}
	}
}

// matchClose is the offset just past the bracket closing the one at i,
// strings in double or single quotes skipped; -1 if none.
func matchClose(s string, i int) int {
	depth := 0
	for j := i; j < len(s); j++ {
		switch c := s[j]; c {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1
			}
		case '"', '\'':
			k := endOfString(s, j, c)
			if k >= len(s) {
				return -1
			}
			j = k - 1
		}
	}
	return -1
}

// Key is a query's identity wherever an agent compares or keys queries
// (probes run, verdicts given, votes, caches): two writings that differ
// only in spacing, line endings, comments, keyword case or a closing ';'
// have one key.
func Key(sql string) string { return sqltext.Normalize(clean(sql), lexOpt) }

// Readable is the part of a reply to read its answer from: the text,
// unless nothing in it is visible, or it holds no statement and no fenced
// block while the reasoning (reasoning_content) holds a statement — a
// vLLM reasoning parser or a gateway can move a whole reply there.
func Readable(text, reasoning string) string {
	if strings.TrimSpace(reasoning) == "" || len(Find(text)) > 0 {
		return text
	}
	vis := Visible(clean(text))
	if strings.TrimSpace(vis) == "" || len(Blocks(vis)) == 0 && len(Find(reasoning)) > 0 {
		return reasoning
	}
	return text
}

// explicit reads a text an envelope declares to be SQL (a ```sql block,
// a JSON string that starts with a query): the statements the scanner
// finds when they cover it, else the text split at its semicolons as it
// stands, so that a query with a syntax error is still the model's
// query. declared: the envelope says the text is SQL (a ```sql fence, the
// continuation of one).
func explicit(body string, declared bool) []Statement {
	var out []Statement
	fs := scanText(body)
	first := strings.TrimLeft(body, " \t\n")
	leads := len(fs) > 0 && (fs[0].pos == len(body)-len(first) || onlyNoise(body[:fs[0].pos]))
	if leads || !plausibleQuery(body, declared) {
		for _, f := range fs {
			out = append(out, f.st)
		}
	} else {
		for _, q := range splitQueries(body) {
			out = append(out, Statement{SQL: q})
		}
	}
	return out
}

// splitQueries splits a text declared SQL at the semicolons that end a
// query: those followed by another query or by nothing. A semicolon
// followed by code that starts no query ("…; ) AS t LIMIT 1") is a stray
// one inside the model's query, which is read whole, as written.
func splitQueries(body string) []string {
	var lxs []sqltext.Lexeme
	for lx := range sqltext.Lex(body, lexOpt) {
		if lx.Kind != sqltext.KindSpace && lx.Kind != sqltext.KindComment {
			lxs = append(lxs, lx)
		}
	}
	var out []string
	begin := 0
	flush := func(end int) {
		if q := strings.TrimSpace(body[begin:end]); !onlyNoise(q) {
			out = append(out, q)
		}
	}
	for i, lx := range lxs {
		if lx.Kind != sqltext.KindSemicolon {
			continue
		}
		j := i + 1
		for j < len(lxs) && lxs[j].Kind == sqltext.KindSemicolon {
			j++
		}
		if j < len(lxs) && !startsQuery(body, lxs[j:]) {
			continue
		}
		flush(lx.Start)
		begin = lx.End
	}
	flush(len(body))
	return out
}

// startsQuery reports code whose first tokens open a query: SELECT or
// WITH, after any opening brackets.
func startsQuery(body string, lxs []sqltext.Lexeme) bool {
	for _, lx := range lxs {
		if lx.Kind == sqltext.KindOpenParen {
			continue
		}
		w := strings.ToUpper(body[lx.Start:lx.End])
		return lx.Kind == sqltext.KindWord && (w == "SELECT" || w == "WITH")
	}
	return false
}

var withHead = regexp.MustCompile("(?is)^\\s*(?:--[^\\n]*\\n\\s*|/\\*.*?\\*/\\s*)*WITH\\s+(?:RECURSIVE\\s+)?[\\w\"`]+\\s*(?:\\([^)]*\\)\\s*)?AS\\s*(?:NOT\\s+)?(?:MATERIALIZED\\s*)?\\(")
var sentenceBreak = regexp.MustCompile("[A-Za-z0-9_)`'\"][.?!][ \t]+[A-Z][a-z]")
var selectCode = regexp.MustCompile(`(?i)\bFROM\b|[(,=*]`)

// clauseCode is a clause keyword written in capitals, as queries are and
// sentences are not: a query that misspells its FROM still shows one.
var clauseCode = regexp.MustCompile(`\b(?:FROM|WHERE|GROUP BY|ORDER BY|HAVING|LIMIT|JOIN|UNION)\b`)

// plausibleQuery reports whether a text that starts with SELECT or WITH
// starts as a query does (the scanner refused it, perhaps for a syntax
// error): WITH's "name AS (", or a SELECT with a FROM, code punctuation or
// a clause keyword in capitals, and no prose word among its first words.
func plausibleQuery(body string, declared bool) bool {
	if !looksLikeSQL(body) {
		return false
	}
	if withHead.MatchString(body) {
		return true
	}
	if sentenceBreak.MatchString(body[:min(len(body), 400)]) {
		return false // "Select ``x``? It is not …": sentences
	}
	words := strings.Fields(body)
	for i, w := range words {
		if i >= 8 {
			break
		}
		if proseWords[strings.ToLower(strings.Trim(w, ".,:;!?"))] {
			return false
		}
	}
	// In a block declared SQL a query may misspell even its FROM.
	return declared || strings.Contains(strings.ToUpper(body), "SELECT") && (selectCode.MatchString(body) || clauseCode.MatchString(body))
}

// onlyNoise reports text with no token but comments, space and ';'.
func onlyNoise(s string) bool {
	for _, t := range sqltext.Tokens(s, lexOpt) {
		if t.Text != ";" {
			return false
		}
	}
	return true
}

// fence is a fenced block with its place in the text.
type fence struct {
	start, end         int // the whole block, fences included
	bodyStart, bodyEnd int
	lang               string
	closed             bool
}

// fences finds the fenced blocks of text (``` or ~~~, three or more, any
// info string), with offsets.
func fences(text string) []fence {
	var out []fence
	i := 0
	for i < len(text) {
		eol := strings.IndexByte(text[i:], '\n')
		line := text[i:]
		if eol >= 0 {
			line = text[i : i+eol]
		}
		m := fenceOpener(line)
		if m == nil {
			if eol < 0 {
				break
			}
			i += eol + 1
			continue
		}
		f := fence{start: i, lang: strings.ToLower(m[2])}
		rest := m[3]
		if strings.HasPrefix(rest, "=") {
			f.lang, rest = "", m[2]+rest // "``` linenums=\"3\"": attributes, no language
		}
		if k := strings.Index(rest, m[1][:3]); k >= 0 {
			// "```sql SELECT 1 ```": the block opens and closes on its line.
			at := i + len(line) - len(rest)
			f.bodyStart, f.bodyEnd, f.end, f.closed = at, at+k, i+len(line), true
			if f.lang != "" && !IsSQLLang(f.lang) && looksLikeSQL(m[2]+rest) {
				f.bodyStart, f.lang = at-len(m[2]), "" // "```SELECT 1```"
			}
			out = append(out, f)
			if eol < 0 {
				break
			}
			i += eol + 1
			continue
		}
		if eol < 0 {
			break // a fence opening the last line: no body
		}
		f.bodyStart = i + eol + 1
		j := f.bodyStart
		if looksLikeSQL(rest) {
			f.bodyStart = i + len(line) - len(rest) // the code starts on the fence's line
		} else if f.lang != "" && !IsSQLLang(f.lang) && looksLikeSQL(m[2]+rest) {
			f.bodyStart, f.lang = i+len(line)-len(rest)-len(m[2]), ""
		}
		f.bodyEnd, f.end = len(text), len(text)
		for j < len(text) {
			e := strings.IndexByte(text[j:], '\n')
			l := text[j:]
			if e >= 0 {
				l = text[j : j+e]
			}
			if isClosing(l, m[1]) || isClosing(tagsOff(l), m[1]) {
				f.bodyEnd, f.closed = j, true
				f.end = j + len(l)
				break
			}
			if e < 0 {
				break
			}
			j += e + 1
		}
		out = append(out, f)
		i = f.end
		if i < len(text) && text[i] == '\n' {
			i++
		}
		if !f.closed {
			break
		}
	}
	return out
}

// leadingQuery reports a text that starts with a query and closes a fence
// it never opened (the continuation of a prefilled "```sql"): end is
// where the query's part ends (the closing fence's line, or the text's
// end), next where the rest starts.
func leadingQuery(text string) (end, next int, ok bool) {
	if !looksLikeSQL(text) {
		return 0, 0, false
	}
	for i := 0; i < len(text); {
		eol := strings.IndexByte(text[i:], '\n')
		line := text[i:]
		if eol >= 0 {
			line = text[i : i+eol]
		}
		if m := fenceOpener(line); m != nil {
			if m[2] != "" || strings.TrimSpace(m[3]) != "" {
				return 0, 0, false // a fence that opens a block: the lead is no continuation
			}
			return i, i + len(line), true
		}
		if eol < 0 {
			break
		}
		i += eol + 1
	}
	return 0, 0, false
}

// paragraphQuery reads a paragraph that opens a line with SELECT or WITH
// (a query with a syntax error the scanner refused), up to a blank line,
// a fence or tag, or the text's end, if it reads as a query and not as a
// sentence (plausibleQuery; in lower case, only with code in it).
func paragraphQuery(s string, start int) (q string, end int, ok bool) {
	capitals := strings.HasPrefix(s[start:], "SELECT") || strings.HasPrefix(s[start:], "WITH")
	if !capitals && !strings.HasPrefix(s[start:], "select") && !strings.HasPrefix(s[start:], "with") {
		return "", 0, false
	}
	i := start
	for i > 0 && (s[i-1] == ' ' || s[i-1] == '\t') {
		i--
	}
	if i > 0 && s[i-1] != '\n' {
		return "", 0, false
	}
	end = len(s)
	if k := strings.Index(s[start:], "\n\n"); k >= 0 {
		end = start + k
	}
	end = delimiterIn(s, start, end)
	body := s[start:end]
	if !plausibleQuery(body, capitals) {
		return "", 0, false
	}
	sts := sqltext.Split(body, lexOpt)
	if len(sts) != 1 {
		return "", 0, false
	}
	return strings.TrimSpace(sts[0]), end, true
}

// delimiterIn is the offset of the first fence or markup tag in
// s[start:end] outside the literals and comments of the query there
// (what closes the envelope a query the scanner refused was written in),
// else end.
func delimiterIn(s string, start, end int) int {
	for lx := range sqltext.Lex(s[start:end], lexOpt) {
		if lx.Kind == sqltext.KindString || lx.Kind == sqltext.KindComment {
			continue
		}
		if at := start + lx.Start; isDelimiter(s, at) {
			return at
		}
	}
	return end
}

// peel removes what wraps a whole text: markup tags at its start and end,
// backquotes, quotes, CDATA, fences, so that a declared SQL block's query
// inside them is read as declared.
func peel(s string) string {
	for {
		t := strings.TrimSpace(s)
		switch {
		case strings.HasPrefix(t, "<![CDATA[") && strings.HasSuffix(t, "]]>"):
			t = t[len("<![CDATA[") : len(t)-len("]]>")]
		case strings.HasPrefix(t, "<") && tagLen(t) > 0:
			t = t[tagLen(t):]
			if k := strings.LastIndex(t, "</"); k >= 0 && tagLen(t[k:]) == len(t)-k {
				t = t[:k]
			}
		case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
			// Before quotes: a fence begins and ends with backquotes too,
			// and its info string is no code.
			t = fenceBody(t)
		case len(t) >= 2 && strings.IndexByte("`'\"", t[0]) >= 0 && t[len(t)-1] == t[0]:
			t = t[1 : len(t)-1]
		default:
			return t
		}
		if t == strings.TrimSpace(s) {
			return t
		}
		s = t
	}
}

// fenceBody is a text that opens with a fence line without that line
// and the closing fence of the same character and length, if it ends with
// one; the text itself when its first line is no fence opener.
func fenceBody(t string) string {
	nl := strings.IndexByte(t, '\n')
	if nl < 0 {
		return t
	}
	m := fenceLine.FindStringSubmatch(t[:nl])
	if m == nil {
		return t
	}
	body := strings.TrimRight(t[nl+1:], " \t\n")
	last := body[strings.LastIndexByte(body, '\n')+1:]
	switch {
	case isClosing(last, m[1]):
		body = body[:len(body)-len(last)]
	case strings.HasSuffix(body, m[1]):
		body = body[:len(body)-len(m[1])] // "SELECT 1```"
	}
	return body
}

// fenceOpener matches a fence line (fenceLine's groups), after the
// markup tags a line may open with: "<answer>```sql" opens a fence inside
// a tag, as "```</answer>" closes one.
func fenceOpener(line string) []string {
	if m := fenceLine.FindStringSubmatch(line); m != nil {
		return m
	}
	i := 0
	for {
		j := i
		for j < len(line) && (line[j] == ' ' || line[j] == '\t') {
			j++
		}
		n := 0
		if j < len(line) && line[j] == '<' {
			n = tagLen(line[j:])
		}
		if n == 0 {
			break
		}
		i = j + n
	}
	if i == 0 {
		return nil
	}
	return fenceLine.FindStringSubmatch(line[i:])
}

var tagRun = regexp.MustCompile(`</?[A-Za-z][A-Za-z0-9_:.-]*(?:[ \t][^<>\n]*)?>`)

// tagsOff is a line without its markup tags ("~~~</answer>" closes a
// fence).
func tagsOff(line string) string { return tagRun.ReplaceAllString(line, "") }

// quotedQuery reads the whole content of a quote or backquote that
// starts with a query (`SELECT … FORM t`), up to the quote that closes it
// (the lexer reads it as a literal the text ends inside) within its
// paragraph, if it reads as one query (plausibleQuery) that the scanner
// refused.
func quotedQuery(s string, start int) (q string, end int, ok bool) {
	closer := closerOf(s, start)
	if closer == 0 {
		return "", 0, false
	}
	par := len(s)
	if k := strings.Index(s[start:], "\n\n"); k >= 0 {
		par = start + k
	}
	end = -1
	for lx := range sqltext.Lex(s[start:par], lexOpt) {
		if r, _ := utf8.DecodeRuneInString(s[start+lx.Start:]); r == closer && (lx.Open || lx.Kind == sqltext.KindOther) {
			end = start + lx.Start
			break
		}
	}
	if end < 0 {
		return "", 0, false
	}
	body := s[start:end]
	if !plausibleQuery(body, false) {
		return "", 0, false
	}
	sts := sqltext.Split(body, lexOpt)
	if len(sts) != 1 {
		return "", 0, false
	}
	return strings.TrimSpace(sts[0]), end, true
}

// taggedQuery reads the whole content of a markup tag that starts with a
// query (<answer>SELECT … FORM t</answer>), if it reads as one query
// (plausibleQuery) that the scanner refused.
func taggedQuery(s string, start int) (q string, end int, ok bool) {
	// The tag may be followed by the query's own comments.
	k := strings.LastIndexByte(s[:start], '>') + 1
	if k == 0 {
		return "", 0, false
	}
	if gap := strings.TrimSpace(s[k:start]); gap != "" &&
		(len(gap) > 1000 || !strings.HasPrefix(gap, "--") && !strings.HasPrefix(gap, "/*") || !onlyNoise(gap)) {
		return "", 0, false
	}
	lt := strings.LastIndexByte(s[:k], '<')
	if lt < 0 || tagLen(s[lt:]) != k-lt || s[lt+1] == '/' {
		return "", 0, false
	}
	name := s[lt+1 : k-1]
	if i := strings.IndexAny(name, " \t=/>"); i >= 0 {
		name = name[:i]
	}
	closeAt := strings.Index(s[start:], "</"+name+">")
	if closeAt < 0 {
		return "", 0, false
	}
	body := s[start : start+closeAt]
	if !plausibleQuery(body, false) {
		return "", 0, false
	}
	sts := sqltext.Split(body, lexOpt)
	if len(sts) != 1 {
		return "", 0, false
	}
	return strings.TrimSpace(sts[0]), start + closeAt, true
}
