package llmsim

// The envelopes persona: every reply wrapped in envelopes composed at
// random from a generator, not picked from a list of known forms. The
// other personas each reproduce one model family's habits, and a reader
// tuned to them is always one form behind the next serving stack; this
// persona draws, per reply, a chain of one to three wrappers (fences with
// any info string and attributes, markup tags with random names, JSON
// objects and arrays at random depth, an indented code block, inline
// backticks), nests them, and surrounds the result with prose, several
// blocks, CRLF line endings, a BOM, zero-width spaces and NBSPs, or moves
// the whole reply into reasoning_content. RAISE commands get command
// envelopes (a Hermes <tool_call>, a Qwen <function=…> block, a bare JSON
// call, backticks, a fence, a tag, a note after the command), read back
// by canonicalCommands so a trajectory continues. The content is
// canonical's: the same SQL (byte for byte between its tokens), verdict
// or command. About 2% of SQL answers are refusals in prose that begins
// with a SQL word; a re-ask gets canonical's answer (memory.go).

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

// Rates of the envelopes persona's rarer surfaces.
const (
	// envRefusalRate is the share of SQL answers written as refusals.
	envRefusalRate = 0.02
	// envReasoningRate is the share of replies written entirely in
	// reasoning_content, content empty.
	envReasoningRate = 0.1
)

// Invisible characters the persona scatters outside SQL tokens.
const (
	bom  = "\ufeff"
	zwsp = "\u200b"
	nbsp = "\u00a0"
)

// envelope is one reply's drawn surface: its line ending and whether it
// scatters invisible characters. Wrappers write their own text with nl,
// so a CRLF reply is CRLF throughout, its SQL's line breaks included
// (those between tokens; a line break inside a literal is the literal's).
type envelope struct {
	rng *rand.Rand
	nl  string
	zw  bool
	opt sqltext.Options
}

func newEnvelope(rng *rand.Rand, opt sqltext.Options) *envelope {
	e := &envelope{rng: rng, nl: "\n", opt: opt}
	if rng.IntN(6) == 0 {
		e.nl = "\r\n"
	}
	e.zw = rng.IntN(4) == 0
	return e
}

// chance is true with probability 1/n.
func (e *envelope) chance(n int) bool { return e.rng.IntN(n) == 0 }

// wrapper puts an envelope around its inner text.
type wrapper func(inner string) string

// Payload kinds the wrappers treat differently.
const (
	payloadSQL   = iota // one statement
	payloadBatch        // several statements (an exploration batch)
	payloadJSON         // a JSON object (a verdict)
	payloadValue        // a short value (a CSV header, a file name)
)

// sqlPayload is sql as the persona writes it: its line breaks in the
// reply's line ending and, when the reply scatters them, a zero-width
// space or an NBSP in a few of the gaps between tokens. Literals, quoted
// identifiers and comments are left as they are.
func (e *envelope) sqlPayload(sql string) string {
	type gap struct{ start, end int }
	var gaps []gap
	for lx := range sqltext.Lex(sql, e.opt) {
		if lx.Kind == sqltext.KindSpace && lx.Start > 0 && lx.End < len(sql) {
			gaps = append(gaps, gap{lx.Start, lx.End})
		}
	}
	marked := map[int]int{} // gap index -> 1 zero-width space, 2 NBSP
	if e.zw && len(gaps) > 0 {
		for range 1 + e.rng.IntN(2) {
			marked[e.rng.IntN(len(gaps))] = 1 + e.rng.IntN(2)
		}
	}
	var b strings.Builder
	last := 0
	for i, g := range gaps {
		b.WriteString(sql[last:g.start])
		space := sql[g.start:g.end]
		switch marked[i] {
		case 1:
			b.WriteString(zwsp)
		case 2:
			if j := strings.IndexByte(space, ' '); j >= 0 {
				space = space[:j] + nbsp + space[j+1:]
			} else {
				b.WriteString(zwsp)
			}
		}
		if e.nl != "\n" {
			space = strings.ReplaceAll(strings.ReplaceAll(space, "\r\n", "\n"), "\n", e.nl)
		}
		b.WriteString(space)
		last = g.end
	}
	b.WriteString(sql[last:])
	return b.String()
}

// multiLineLiteral reports whether a line break of sql lies inside a
// literal or quoted identifier, where indenting the lines would change
// the query.
func multiLineLiteral(sql string, opt sqltext.Options) bool {
	for lx := range sqltext.Lex(sql, opt) {
		if (lx.Kind == sqltext.KindString || lx.Kind == sqltext.KindQuotedIdent || lx.Kind == sqltext.KindComment) &&
			strings.ContainsAny(sql[lx.Start:lx.End], "\r\n") {
			return true
		}
	}
	return false
}

// langWords are fence info strings' first words; a made-up word is drawn
// too, so no reader can list them.
var langWords = []string{"sql", "SQL", "Sql", "sqlite", "postgresql", "postgres", "mysql", "bigquery", "googlesql", "snowflake",
	"tsql", "plsql", "ansi-sql", "text", "query", "code", "sql92", "duckdb"}

var jsonLangWords = []string{"json", "JSON", "jsonc", "json5", "javascript", "text", "output"}

// word is a random lower-case identifier of 2 to 7 letters, sometimes
// with a digit.
func (e *envelope) word() string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	n := 2 + e.rng.IntN(6)
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[e.rng.IntN(len(letters))]
	}
	w := string(b)
	if e.chance(3) {
		w += strconv.Itoa(e.rng.IntN(10))
	}
	return w
}

// fenceAttrs are attributes a fence's info string carries after the
// language (Pandoc, MkDocs, Docusaurus, plain key=value).
func (e *envelope) fenceAttrs() string {
	var out []string
	for range e.rng.IntN(4) {
		switch e.rng.IntN(7) {
		case 0:
			out = append(out, `title="`+e.word()+`.sql"`)
		case 1:
			out = append(out, "{."+e.word()+"}")
		case 2:
			out = append(out, "{#"+e.word()+" ."+e.word()+" "+e.word()+"="+strconv.Itoa(e.rng.IntN(9))+"}")
		case 3:
			out = append(out, `linenums="`+strconv.Itoa(1+e.rng.IntN(3))+`"`)
		case 4:
			out = append(out, e.word()+"="+e.word())
		case 5:
			out = append(out, `hl_lines="`+strconv.Itoa(1+e.rng.IntN(3))+" "+strconv.Itoa(2+e.rng.IntN(5))+`"`)
		default:
			out = append(out, e.word())
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " " + strings.Join(out, " ")
}

// longestRun is the longest run of c in s.
func longestRun(s string, c byte) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// fence is a fenced block of backticks or tildes, longer than any run of
// its character inside, with a drawn info string.
func (e *envelope) fence(kind int) wrapper {
	ch := byte('`')
	if e.chance(4) {
		ch = '~'
	}
	extra := 0
	if e.chance(4) {
		extra = 1 + e.rng.IntN(2)
	}
	lang := ""
	switch {
	case e.chance(8):
	case e.chance(6):
		lang = e.word()
	case kind == payloadJSON:
		lang = pick(e.rng, jsonLangWords)
	case kind == payloadValue:
		lang = pick(e.rng, []string{"text", "plaintext", "csv", "txt", "output"})
	default:
		lang = pick(e.rng, langWords)
	}
	info := lang + e.fenceAttrs()
	if info != "" && e.chance(5) {
		info = " " + info
	}
	return func(inner string) string {
		run := strings.Repeat(string(ch), max(3, longestRun(inner, ch)+1)+extra)
		return run + info + e.nl + inner + e.nl + run
	}
}

// tagNames are markup names models wrap answers in; a made-up name is
// drawn too.
var tagNames = []string{"answer", "sql", "sql_query", "query", "final", "final_answer", "solution", "output", "result",
	"code", "response", "SQL", "Answer", "FINAL_SQL"}

// tagName is a drawn markup name (never one a reader drops as reasoning).
func (e *envelope) tagName() string {
	for {
		var n string
		switch e.rng.IntN(3) {
		case 0:
			n = pick(e.rng, tagNames)
		case 1:
			n = "x-" + strconv.Itoa(e.rng.IntN(100))
		default:
			n = e.word()
			if e.chance(2) {
				n += "_" + e.word()
			}
		}
		if !strings.Contains(strings.ToLower(n), "think") && !strings.Contains(strings.ToLower(n), "reason") {
			return n
		}
	}
}

// tagAttrs are a tag's drawn attributes, quoted either way or not.
func (e *envelope) tagAttrs() string {
	var b strings.Builder
	for range e.rng.IntN(3) {
		k, v := e.word(), e.word()
		if e.chance(2) {
			v = strconv.Itoa(e.rng.IntN(20))
		}
		switch e.rng.IntN(3) {
		case 0:
			b.WriteString(" " + k + `="` + v + `"`)
		case 1:
			b.WriteString(" " + k + "='" + v + "'")
		default:
			b.WriteString(" " + k + "=" + v)
		}
	}
	return b.String()
}

// tag is a markup element; its closing tag is often glued to the inner
// text's last character.
func (e *envelope) tag() wrapper {
	name := e.tagName()
	open, end := "<"+name+e.tagAttrs()+">", "</"+name+">"
	style := e.rng.IntN(3)
	return func(inner string) string {
		switch style {
		case 0:
			return open + inner + end
		case 1:
			return open + e.nl + inner + end
		}
		return open + e.nl + inner + e.nl + end
	}
}

// indent is an indented (four-space) code block.
func (e *envelope) indent() wrapper {
	return func(inner string) string {
		lines := strings.Split(inner, "\n")
		for i, l := range lines {
			if strings.TrimSpace(l) != "" {
				lines[i] = "    " + l
			}
		}
		return strings.Join(lines, "\n")
	}
}

// inline is inner in single backticks (one line only).
func (e *envelope) inline() wrapper {
	return func(inner string) string { return "`" + inner + "`" }
}

// jsonKeys are keys models put answers under; a made-up key is drawn too.
var jsonKeys = []string{"sql", "query", "sql_query", "answer", "final_sql", "result", "q", "statement", "output", "code",
	"response", "data", "solution", "text", "content", "final", "SQL"}

func (e *envelope) jsonKey() string {
	if e.chance(4) {
		return e.word()
	}
	return pick(e.rng, jsonKeys)
}

// jsonSibling is a member beside the answer that holds no query: a
// number, a boolean, a dialect name or a sentence that does not begin
// with a SQL word.
func (e *envelope) jsonSibling() string {
	switch e.rng.IntN(4) {
	case 0:
		return jsonString("confidence") + ": 0." + strconv.Itoa(5+e.rng.IntN(5))
	case 1:
		return jsonString(e.word()) + ": " + strconv.FormatBool(e.chance(2))
	case 2:
		return jsonString("dialect") + ": " + jsonString(pick(e.rng, []string{"sqlite", "bigquery", "snowflake", "ansi"}))
	}
	return jsonString(pick(e.rng, []string{"explanation", "reasoning", "notes", "comment"})) + ": " + jsonString(e.proseAfter(payloadSQL))
}

// jsonAround nests an encoded JSON value depth levels deep in objects
// (with siblings) and arrays, drawn per level.
func (e *envelope) jsonAround(leaf string, depth int) string {
	v := leaf
	for range depth {
		if e.chance(4) {
			v = "[" + v + "]"
			continue
		}
		members := []string{jsonString(e.jsonKey()) + ": " + v}
		for range e.rng.IntN(3) {
			s := e.jsonSibling()
			if e.chance(2) {
				members = append(members, s)
			} else {
				members = append([]string{s}, members...)
			}
		}
		v = "{" + strings.Join(members, ", ") + "}"
	}
	return v
}

// layoutJSON writes compact JSON pretty or compact, in the reply's line
// ending.
func (e *envelope) layoutJSON(js string) string {
	switch e.rng.IntN(3) {
	case 0:
		var b bytes.Buffer
		if json.Indent(&b, []byte(js), "", strings.Repeat(" ", 2+2*e.rng.IntN(2))) == nil {
			return strings.ReplaceAll(b.String(), "\n", e.nl)
		}
	case 1:
		var b bytes.Buffer
		if json.Compact(&b, []byte(js)) == nil {
			return b.String()
		}
	}
	return js
}

// jsonWrap holds its inner text as a string at a drawn depth; around a
// batch itself (innermost), sometimes each statement as an array element.
// Its keys, siblings and layout are drawn once, from a stream of its own,
// like a fence's or a tag's: a draft and its answer wrapped by one chain
// (blocks) get the same keys, so a key naming the answer final never
// lands on the draft alone.
func (e *envelope) jsonWrap(kind int, innermost bool) wrapper {
	depth := 1 + e.rng.IntN(3)
	split := kind == payloadBatch && innermost && e.chance(3)
	seed := e.rng.Uint64()
	return func(inner string) string {
		j := *e
		j.rng = rand.New(rand.NewPCG(seed, 0x6a736f6e))
		leaf := jsonString(inner)
		if split {
			var parts []string
			for _, st := range sqltext.Split(inner, e.opt) {
				parts = append(parts, jsonString(st))
			}
			if len(parts) > 1 {
				leaf = "[" + strings.Join(parts, ", ") + "]"
			}
		}
		return j.layoutJSON(j.jsonAround(leaf, depth))
	}
}

// chain draws one to three wrappers for a payload, innermost first. An
// indented block and inline backticks only go around the payload itself
// (inline backticks around one line); JSON is kept from the payload of a
// JSON verdict, which is nested rather than quoted (verdictPayload).
func (e *envelope) chain(kind int, payload string) []wrapper {
	n := 1 + e.rng.IntN(3)
	var out []wrapper
	oneLine := !strings.ContainsAny(payload, "\r\n") && !strings.Contains(payload, "`")
	lastJSON := false
	for i := range n {
		r := e.rng.IntN(10)
		if lastJSON && r >= 8 {
			// JSON quoted in a JSON string is no model's habit: a model
			// nests objects instead (jsonAround's depth).
			r = 5
		}
		lastJSON = r >= 8 && kind != payloadJSON
		switch {
		case i == 0 && r == 0 && oneLine && kind != payloadJSON:
			out = append(out, e.inline())
		case i == 0 && r == 1 && (kind == payloadSQL || kind == payloadBatch) && !multiLineLiteral(payload, e.opt):
			out = append(out, e.indent())
		case r < 5:
			out = append(out, e.fence(kind))
		case r < 8 || kind == payloadJSON:
			out = append(out, e.tag())
		default:
			out = append(out, e.jsonWrap(kind, i == 0))
		}
	}
	return out
}

func wrap(ws []wrapper, inner string) string {
	for _, w := range ws {
		inner = w(inner)
	}
	return inner
}

// Prose from parts. No sentence begins with a SQL word, so only the
// refusals do.
var (
	proseLead = []string{"Here is", "Below is", "This is", "I wrote", "Okay, here is", "Sure! Here is", "Done. Here is", "Based on the schema, here is"}
	proseWhat = map[int][]string{payloadSQL: {"the query", "the SQL", "my answer", "the statement", "a query", "the solution"},
		payloadBatch: {"the queries", "the exploration queries", "a few queries", "my queries"},
		payloadJSON:  {"my assessment", "the verdict", "my answer", "the result", "the evaluation"},
		payloadValue: {"the answer", "my choice", "the result"}}
	proseTail  = []string{":", ".", " that answers the question:", " for the task:", " (tested against the schema):"}
	afterStart = map[int][]string{payloadSQL: {"This query", "It", "The query above", "That", "Note that it", "Hopefully this", "This"},
		payloadBatch: {"These", "They", "Together they", "Each of them"},
		payloadJSON:  {"This", "It", "The verdict above", "That"},
		payloadValue: {"This", "It", "That"}}
	afterVerb = map[int][]string{payloadSQL: {"reads the tables the question is about", "applies the filters the question implies",
		"returns the requested columns", "keeps the ordering the question asks for", "should run as is on the database"},
		payloadBatch: {"look at the values the question depends on", "go from simple to complex", "read the tables the question is about"},
		payloadJSON:  {"follows from the schema and the question", "rests on the columns the question names", "is my reading of the task"},
		payloadValue: {"follows from the task", "is what the question asks for"}}
	afterEnd = []string{".", "; let me know if anything needs adjusting.", ", and nothing else.", " (no other changes needed)."}
)

func (e *envelope) proseBefore(kind int) string {
	return pick(e.rng, proseLead) + " " + pick(e.rng, proseWhat[kind]) + pick(e.rng, proseTail)
}

func (e *envelope) proseAfter(kind int) string {
	return pick(e.rng, afterStart[kind]) + " " + pick(e.rng, afterVerb[kind]) + pick(e.rng, afterEnd)
}

// nbspProse puts an NBSP for one of the prose's spaces, when the reply
// scatters invisible characters.
func (e *envelope) nbspProse(p string) string {
	if !e.zw || !strings.Contains(p, " ") || !e.chance(2) {
		return p
	}
	idx := []int{}
	for i := 0; i < len(p); i++ {
		if p[i] == ' ' {
			idx = append(idx, i)
		}
	}
	i := idx[e.rng.IntN(len(idx))]
	return p[:i] + nbsp + p[i+1:]
}

// join writes the reply's parts, a blank line apart (an indented block
// needs one before it), a zero-width space at some seams.
func (e *envelope) join(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	sep := e.nl + e.nl
	var b strings.Builder
	for i, p := range out {
		if i > 0 {
			if e.zw && e.chance(3) {
				b.WriteString(e.nl + zwsp + e.nl)
			} else {
				b.WriteString(sep)
			}
		}
		b.WriteString(p)
	}
	return b.String()
}

// envDressed is a dressed text reply.
type envDressed struct {
	text      string
	refusal   bool
	reasoning bool
}

// dressEnvelopes writes a canonical text reply in drawn envelopes. single:
// one answering SQL (draft is a wrong query to show first, "" for none);
// again: the reply answers a re-ask; continuing: it continues a prefix
// (no refusal, no move to reasoning: the prefix fixes the form).
func dressEnvelopes(rng *rand.Rand, sh shape, single bool, draft string, again, continuing bool, opt sqltext.Options) envDressed {
	e := newEnvelope(rng, opt)
	var d envDressed
	if single && !again && !continuing && rng.Float64() < envRefusalRate {
		d.text, d.refusal = refusalText(rng), true
		return d
	}
	pk := payloadValue
	switch {
	case sh.lang == "json":
		pk = payloadJSON
	case sqlLang(sh.lang) && single:
		pk = payloadSQL
	case sqlLang(sh.lang):
		pk = payloadBatch
	}
	body := sh.body
	switch pk {
	case payloadSQL, payloadBatch:
		body = e.sqlPayload(body)
		draft = e.sqlPayload(draft)
	case payloadJSON:
		body = e.verdictPayload(body)
	}
	intro := ""
	if sh.intro != "" && e.chance(3) {
		intro = sh.intro
	} else if e.chance(2) {
		intro = e.proseBefore(pk)
	}
	after := ""
	if e.chance(2) {
		after = e.proseAfter(pk)
	}
	intro, after = e.nbspProse(intro), e.nbspProse(after)
	switch {
	case pk == payloadJSON && e.chance(4):
		// JSON mode: the whole reply is the verdict object.
		d.text = e.layoutJSON(body)
	case pk == payloadSQL && e.chance(8):
		// JSON mode: the whole reply is one object holding the query.
		js := e.jsonAround(jsonString(body), 1+e.rng.IntN(2))
		if strings.HasPrefix(js, "[") {
			js = "{" + jsonString(e.jsonKey()) + ": " + js + "}"
		}
		d.text = e.layoutJSON(js)
	case pk == payloadSQL && draft != "" && !again && e.chance(4):
		d.text = e.blocks(body, draft, intro, after)
	case (pk == payloadSQL || pk == payloadBatch) && e.chance(10):
		// No envelope: the query bare, prose after it on its own line,
		// or after its own semicolon.
		if after != "" && strings.HasSuffix(strings.TrimRight(body, " \t\r\n"), ";") && e.chance(2) {
			d.text = e.join(intro, strings.TrimRight(body, " \t\r\n")+" "+after)
		} else {
			d.text = e.join(intro, body, after)
		}
	default:
		d.text = e.join(intro, wrap(e.chain(pk, body), body), after)
	}
	if e.zw && e.chance(2) {
		d.text = zwsp + d.text
	}
	if e.zw && e.chance(2) {
		d.text += zwsp
	}
	if e.chance(8) {
		d.text = bom + d.text
	}
	d.reasoning = !continuing && rng.Float64() < envReasoningRate
	return d
}

// blocks writes several blocks with one envelope chain: a draft, then the
// answer last; or the answer introduced as final, then the draft.
func (e *envelope) blocks(body, draft, intro, after string) string {
	ws := e.chain(payloadSQL, body+e.nl+draft)
	for try := 0; try < 8 && strings.Contains(strings.ToLower(wrap(ws, "")), "final"); try++ {
		// The draft shares the answer's wrappers: one named "final" would
		// mark the draft final too, which no model means.
		ws = e.chain(payloadSQL, body+e.nl+draft)
	}
	if e.chance(2) {
		return e.join(intro, wrap(ws, draft),
			pick(e.rng, []string{"Actually, ", "Wait, ", "On second thought, ", "Hmm, "})+
				pick(e.rng, []string{"that draft gets a detail of the question wrong. Corrected:", "this is not quite right. The corrected version:", "a better version is:"}),
			wrap(ws, body), after)
	}
	return e.join(pick(e.rng, []string{"Final answer:", "Here is the final query:", "My final SQL:", "FINAL:"}), wrap(ws, body),
		pick(e.rng, []string{"For comparison, my first attempt (not the answer) was:", "An earlier draft, kept for reference only:", "I first tried this, which is wrong:"}),
		wrap(ws, draft))
}

// verdictPayload is a JSON verdict nested zero to two levels deeper, its
// booleans sometimes strings, and sometimes held as a JSON string.
func (e *envelope) verdictPayload(body string) string {
	if e.chance(3) {
		body = stringBooleans(body)
	}
	for range e.rng.IntN(3) {
		body = "{" + jsonString(pick(e.rng, []string{"response", "verdict", "result", "output", "data", "evaluation", "assessment"})) + ": " + body + "}"
	}
	if e.chance(8) {
		body = e.jsonAround(jsonString(body), 1)
	}
	return body
}

// Refusals from parts: each begins with a word a SQL lexer reads as a
// keyword, says why no query is given, and asks back.
var (
	refusalOpen = []string{
		"With the schema given I cannot tell which table to select from",
		"Select statements alone cannot answer this",
		"From the tables listed I cannot tell which one holds %s",
		"Where %s are stored is not clear from the schema",
		"When I look at the schema I see no table for %s",
		"Values for %s do not appear in any listed column",
		"Order and grouping aside, I cannot find %s in this database",
		"Update: after reading the schema twice I still cannot place %s",
		"Show me where %s live and I will write the query",
		"Join keys between the tables are not given, so I cannot relate %s",
	}
	refusalThing = []string{"the orders", "these values", "the requested measure", "the dates the question means", "the customers",
		"the amounts", "the entities the question names"}
	refusalWhy = []string{"; the question names data that no column seems to hold.", ", since the schema does not say how the tables relate.",
		". I would rather ask than guess.", ": guessing would give a wrong answer."}
	refusalAsk = []string{"Could you say which table holds %s?", "Which table should I use?", "Can you share the columns of the relevant table?",
		"Could you confirm where %s are recorded?"}
)

// refusalText is a refusal composed from parts.
func refusalText(rng *rand.Rand) string {
	thing := pick(rng, refusalThing)
	fill := func(s string) string {
		if strings.Contains(s, "%s") {
			return strings.Replace(s, "%s", thing, 1)
		}
		return s
	}
	return fill(pick(rng, refusalOpen)) + pick(rng, refusalWhy) + " " + fill(pick(rng, refusalAsk))
}

// isRefusalText reports whether text is one of refusalText's.
func isRefusalText(text string) bool {
	for _, o := range refusalOpen {
		head, _, _ := strings.Cut(o, "%s")
		if strings.HasPrefix(text, head) {
			return true
		}
	}
	return false
}

// dressEnvelopeArgs adds, to some SQL values of tool arguments, a
// trailing semicolon or CRLF (or CRLF line endings throughout).
func dressEnvelopeArgs(rng *rand.Rand, args string) string {
	var v any
	if json.Unmarshal([]byte(args), &v) != nil {
		return args
	}
	var sqls []string
	var walk func(x any, key string)
	walk = func(x any, key string) {
		switch t := x.(type) {
		case map[string]any:
			// In key order: the draws must not follow map order.
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(t[k], k)
			}
		case []any:
			for _, y := range t {
				walk(y, key)
			}
		case string:
			if sqlLike(key) && strings.TrimSpace(t) != "" {
				sqls = append(sqls, t)
			}
		}
	}
	walk(v, "")
	for _, sql := range sqls {
		if rng.IntN(2) == 0 {
			continue
		}
		var to string
		switch rng.IntN(4) {
		case 0:
			to = strings.TrimRight(sql, " ;") + ";"
		case 1:
			to = sql + "\r\n"
		case 2:
			to = strings.TrimRight(sql, " ;") + ";\r\n"
		default:
			to = strings.ReplaceAll(sql, "\n", "\r\n") + "\r\n"
		}
		if from := jsonString(sql); to != sql && strings.Contains(args, from) {
			args = strings.Replace(args, from, jsonString(to), 1)
		}
	}
	return args
}

// RAISE commands in envelopes. A command's core is written as the paper
// has it ([RUN] cmd(args), the command in backticks or not), as a Hermes
// <tool_call> holding a JSON call, as a Qwen <function=…> block (in a
// <tool_call> or not), or as a bare JSON call with "arguments" or
// "parameters"; the core is put in a fence or a tag at random, and ended
// by [EXECUTE], by a note on its own line, or by nothing.

// cmdArgs are a canonical command's arguments as named parameters; false
// when they do not read back to exactly the same canonical text.
func cmdArgs(name, args string) (map[string]any, bool) {
	switch name {
	case "read_table_names":
		return map[string]any{}, args == ""
	case "read_table_columns":
		v := unquoteArg(args)
		return map[string]any{"table_name": v}, quoteArg(v) == args
	case "run_query":
		v := unquoteArg(args)
		return map[string]any{"query": v}, quoteArg(v) == args && !strings.Contains(v, "```")
	case "read_columns_documentation":
		var cols []string
		if json.Unmarshal([]byte(args), &cols) != nil || docArgs(cols) != args {
			return nil, false
		}
		return map[string]any{"columns": cols}, true
	}
	return nil, false
}

func docArgs(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = quoteArg(c)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// canonicalArgs is the canonical argument text of a command from named
// parameters (any names: a model may call them otherwise); false when
// they do not fit the command.
func canonicalArgs(name string, params map[string]any) (string, bool) {
	var vals []any
	for _, v := range params {
		vals = append(vals, v)
	}
	switch name {
	case "read_table_names":
		return "", len(vals) == 0
	case "read_table_columns", "run_query":
		if len(vals) != 1 {
			return "", false
		}
		s, ok := vals[0].(string)
		return quoteArg(s), ok
	case "read_columns_documentation":
		if len(vals) != 1 {
			return "", false
		}
		list, ok := vals[0].([]any)
		var cols []string
		for _, x := range list {
			s, isStr := x.(string)
			if !isStr {
				return "", false
			}
			cols = append(cols, s)
		}
		return docArgs(cols), ok
	}
	return "", false
}

// jsonCall is a command as a JSON function call.
func (e *envelope) jsonCall(name string, params map[string]any) string {
	argsKey := "arguments"
	if e.chance(3) {
		argsKey = "parameters"
	}
	// Parameter names are renamed sometimes (sql for query, table for
	// table_name): the reader takes the one value.
	renamed := map[string]any{}
	for k, v := range params {
		if e.chance(3) {
			k = map[string]string{"query": "sql", "table_name": "table", "columns": "column_names"}[k]
		}
		renamed[k] = v
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(renamed)
	argsJSON := strings.TrimSuffix(b.String(), "\n")
	if e.chance(6) {
		// OpenAI's wire form: the arguments as a JSON string.
		argsJSON = jsonString(argsJSON)
	}
	js := `{"name": ` + jsonString(name) + `, "` + argsKey + `": ` + argsJSON + `}`
	return e.layoutJSON(js)
}

// xmlCall is a command as a Qwen-style <function=…> block.
func (e *envelope) xmlCall(name string, params map[string]any) string {
	var b strings.Builder
	b.WriteString("<function=" + name + ">")
	for k, v := range params {
		s, ok := v.(string)
		if !ok {
			j, _ := json.Marshal(v)
			s = string(j)
		}
		b.WriteString("\n<parameter=" + k + ">\n" + s + "\n</parameter>")
	}
	b.WriteString("\n</function>")
	return b.String()
}

// cmdNotes are what a model writes after its command.
var cmdNotes = []string{"Let me see what this returns.", "I'll wait for the result before going on.",
	"(This tells me what the data looks like.)", "Once I have the output I can continue.", "Running it now.",
	"The output should settle the question of the format."}

// envelopeSegment writes a RAISE agent segment's command (about three
// times in four) in a drawn command envelope, or its final answer in
// drawn text envelopes.
func envelopeSegment(rng *rand.Rand, seg string, opt sqltext.Options) string {
	m := segCommand.FindStringSubmatchIndex(seg)
	if m == nil {
		sh, ok := parseShape(seg)
		if !ok || !sqlLang(sh.lang) {
			return seg
		}
		d := dressEnvelopes(rng, sh, true, "", true, false, opt)
		return d.text
	}
	name, args := seg[m[2]:m[3]], seg[m[4]:m[5]]
	params, ok := cmdArgs(name, args)
	if !ok || rng.IntN(4) == 0 {
		return seg
	}
	e := &envelope{rng: rng, nl: "\n", opt: opt}
	cmd := name + "(" + args + ")"
	var core string
	run := false
	switch rng.IntN(5) {
	case 0:
		core, run = "[RUN] "+cmd, true
		if e.chance(2) && !strings.Contains(cmd, "`") {
			core = "[RUN] `" + cmd + "`"
		}
	case 1:
		core = "<tool_call>" + e.nl + e.jsonCall(name, params) + e.nl + "</tool_call>"
	case 2:
		core = e.xmlCall(name, params)
		if e.chance(2) {
			core = "<tool_call>" + e.nl + core + e.nl + "</tool_call>"
		}
	default:
		core = e.jsonCall(name, params)
	}
	// An envelope around the core: a fence (any info string) or a tag, or
	// inline backticks around a one-line JSON call.
	open, closing := "", ""
	switch r := rng.IntN(6); {
	case r < 2:
		ch := "```"
		if e.chance(4) {
			ch = "~~~"
		}
		open = ch + pick(rng, []string{"", "json", "xml", "tool_code", "text", "python", e.word()}) + e.fenceAttrs() + e.nl
		closing = e.nl + ch
	case r == 2:
		name := e.tagName()
		if strings.HasPrefix(core, "<tool_call>") && name == "tool_call" {
			name = "call"
		}
		open, closing = "<"+name+e.tagAttrs()+">", "</"+name+">"
		if e.chance(2) {
			open += e.nl
			closing = e.nl + closing
		}
	case r == 3 && !strings.ContainsAny(core, "\n`") && !run:
		open, closing = "`", "`"
	}
	// The end: [EXECUTE] as the prompt asks (inside an open fence too,
	// where the stop cuts the reply before the fence closes), a note on
	// its own line, or nothing.
	text := open + core + closing
	end := rng.IntN(3)
	if run && end == 2 {
		// "[RUN] cmd(args)" and nothing after it is canonical's cut but
		// for its space before [EXECUTE]; a model writes the tag.
		end = 0
	}
	switch r := end; {
	case r == 0 && open != "" && strings.HasPrefix(open, "`") && len(open) > 1 && e.chance(2):
		text = open + core + " [EXECUTE]" + closing
	case r == 0:
		text += " [EXECUTE]"
	case r == 1:
		text += e.nl + pick(rng, cmdNotes)
	}
	return seg[:m[0]] + "\n" + text
}

var (
	// toolCallBlock is a Hermes-style call: a JSON call or a <function=…>
	// block between <tool_call> tags.
	toolCallBlock = regexp.MustCompile(`(?s)<tool_call>\s*(.*?)\s*</tool_call>`)
	functionBlock = regexp.MustCompile(`(?s)<function=([a-z_]+)>(.*?)</function>`)
	paramBlock    = regexp.MustCompile(`(?s)<parameter=([A-Za-z_]+)>\n?(.*?)\n?</parameter>`)
	jsonCallStart = regexp.MustCompile(`\{\s*"name"\s*:\s*"(?:read_table_names|read_table_columns|read_columns_documentation|run_query)"`)
	// A fence opener, a tag or a backtick right before a command at the
	// start of a line.
	cmdOpener = regexp.MustCompile("(?m)^(?:(?:`{3,}|~{3,})[^\n`]*\n|<[A-Za-z][\\w-]*(?:\\s[^<>\n]*)?>\n?|`)(\\[RUN\\] [a-z_]+\\()")
	// What may follow a command at the end of its line: the mark of a
	// call read as one, a closing backtick or tag, a closing fence line, a
	// note line (one without a bracket, so never [RESULT]), then spaces
	// and the [EXECUTE] the agent appended.
	cmdTrailer = regexp.MustCompile("(?m)^(\\[RUN\\] [a-z_]+\\(.*\\))(\x00?(?:`|\n?</[A-Za-z][\\w-]*>)?(?:\n(?:`{3,}|~{3,})[ \t]*)?(?:\n[^\n\\[<`~][^\n\\[]*)?)[ \t]*(\\[EXECUTE\\])?")
)

// coreMark follows a call envelopeCores rewrote, until unwrapCommands
// gives it the canonical space (NUL: never in a model's text).
const coreMark = "\x00"

// runLine is a parsed call as the canonical "[RUN] cmd(args)", "" when it
// is not a command llmsim writes.
func runLine(name string, params map[string]any) string {
	args, ok := canonicalArgs(name, params)
	if !ok {
		return ""
	}
	return "[RUN] " + name + "(" + args + ")" + coreMark
}

// parseJSONCall reads a JSON function call.
func parseJSONCall(js string) string {
	var c struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if json.Unmarshal([]byte(js), &c) != nil {
		return ""
	}
	raw := c.Arguments
	if len(raw) == 0 {
		raw = c.Parameters
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	params := map[string]any{}
	if json.Unmarshal(raw, &params) != nil {
		return ""
	}
	return runLine(c.Name, params)
}

// parseXMLCall reads a <function=…> block.
func parseXMLCall(block string) string {
	m := functionBlock.FindStringSubmatch(block)
	if m == nil {
		return ""
	}
	params := map[string]any{}
	for _, p := range paramBlock.FindAllStringSubmatch(m[2], -1) {
		var list []any
		if p[1] == "columns" && json.Unmarshal([]byte(p[2]), &list) == nil {
			params[p[1]] = list
		} else {
			params[p[1]] = p[2]
		}
	}
	return runLine(m[1], params)
}

// envelopeCores rewrites the command cores written as calls (a
// <tool_call> block, a <function=…> block, a bare JSON call) as
// "[RUN] cmd(args)"; unwrapCommands then takes their envelopes off.
func envelopeCores(text string) string {
	if !strings.Contains(text, `"name"`) && !strings.Contains(text, "<function=") && !strings.Contains(text, "<tool_call>") {
		return text
	}
	text = toolCallBlock.ReplaceAllStringFunc(text, func(m string) string {
		inner := toolCallBlock.FindStringSubmatch(m)[1]
		run := parseJSONCall(inner)
		if run == "" {
			run = parseXMLCall(inner)
		}
		if run == "" {
			return m
		}
		return run
	})
	text = functionBlock.ReplaceAllStringFunc(text, func(m string) string {
		if run := parseXMLCall(m); run != "" {
			return run
		}
		return m
	})
	// Bare JSON calls: decoded one value at a time from each start.
	for from := 0; ; {
		loc := jsonCallStart.FindStringIndex(text[from:])
		if loc == nil {
			break
		}
		at := from + loc[0]
		dec := json.NewDecoder(strings.NewReader(text[at:]))
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			from = at + 1
			continue
		}
		end := at + int(dec.InputOffset())
		run := parseJSONCall(string(raw))
		if run == "" {
			from = at + 1
			continue
		}
		text = text[:at] + run + text[end:]
		from = at + len(run)
	}
	return text
}

// unwrapCommands takes the fence, tag or backtick from around each
// "[RUN] cmd(args)" line and what follows it (a closer, a note) up to its
// [EXECUTE], leaving "[RUN] cmd(args) " and the [EXECUTE]. A command
// followed by nothing but spaces is left as it is (an [EXECUTE] right
// after its parenthesis gets the space), so canonical text does not
// change.
func unwrapCommands(text string) string {
	text = cmdOpener.ReplaceAllString(text, "$1")
	text = cmdTrailer.ReplaceAllStringFunc(text, func(m string) string {
		g := cmdTrailer.FindStringSubmatch(m)
		cmd, extra, exec := g[1], g[2], g[3]
		if extra == "" && (exec == "" || strings.HasSuffix(strings.TrimSuffix(m, exec), " ")) {
			return m
		}
		return cmd + " " + exec
	})
	return strings.ReplaceAll(text, coreMark, "")
}
