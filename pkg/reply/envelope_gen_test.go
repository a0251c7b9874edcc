package reply_test

// The envelope generator behind TestReaderFindsGoldInEnvelopes, the refusal
// test and FuzzReader. It takes every Spider 2.0 gold query and composes
// random envelopes around it, nested up to three deep, so that the reader
// meets forms nobody listed: markdown fences (``` or ~~~, 3–5 characters, any
// info string and attributes, sometimes indented as a list item's content,
// sometimes left unclosed at the very end of the reply); markup tags with
// random names and attributes, glued to the query or on their own lines,
// sometimes with a CDATA section; JSON documents at any depth with the text
// in a string value under a random key, other keys holding prose, written
// compact, spaced or indented, with the escapes real serializers add (Go's
// \u003c, Python's ensure_ascii \uXXXX, PHP's \/); YAML block scalars; an
// indented code block; inline code around a one-line query; prose before and
// after, with markdown headings, bullets and apostrophes; CRLF, a BOM,
// zero-width spaces and NBSP. It was written against the reader's API only
// (reply.SQL, reply.Statements, sqltext.Normalize), not its implementation.
//
// What the generator guarantees, so that every reply it writes has exactly one
// right answer a human could point at:
//   - the query's own text is never altered, except by transformations that
//     leave its identity (sqltext.Normalize in its dialect) unchanged: joining
//     it onto one line, indenting it, CRLF line endings, a trailing ';';
//   - prose never starts a line with a SQL statement: every sentence starts
//     with a subject ("We", "This query", "Here's"), after at most a bullet
//     or a heading mark; SQL words only appear mid-sentence; no prose
//     mentions a "final" query except the sentence that marks the final block
//     in the draft/final replies;
//   - prose after a query that is not closed by a delimiter starts on a new
//     line, never on the query's last line;
//   - zero-width spaces and NBSP only go into whitespace outside the query
//     (prose, separators around wrappers), never into the query or JSON
//     structure (inside a JSON string they may be \u-escaped, as Python
//     writes them);
//   - markdown stays well-formed: an outer fence is longer than any run of its
//     character inside it, a fence or an indented block starts on its own
//     line, inline code uses a longer backtick run than the query holds.
//
// Forms left out because a human could not tell the answer either:
//   - a query only inside <think>, <reasoning>, <draft>… (reasoningTags): a
//     thought, not an answer;
//   - prose or inline code inside a fence, and anything but the bare query
//     inside an indented block: the markup is then literal text of the code;
//   - in the draft/final replies, a draft wrapped in <final_answer> or under
//     a "final_sql" key, or left in an unclosed fence: the envelope would
//     mark the draft final, or swallow the rest of the reply.

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode/utf16"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

var envelopeSeed = flag.Uint64("envelope.seed", 52, "base seed of the generated reply envelopes (TestReader*)")

// ---------------------------------------------------------------------------
// Gold corpus

// goldGlob is where the Spider 2.0 gold SQL lives, relative to this package
// (the same glob as internal/cli/check_sql_test.go).
const goldGlob = "../../../shared/data/spider2-gold-sql/*/*.sql"

type goldQuery struct {
	name    string // "lite/bq001.sql"
	dialect sqltext.Dialect
	opt     sqltext.Options
	text    string // the file, trimmed, without trailing ';'
	norm    string // sqltext.Normalize(text, opt)
	// oneLine is text joined onto one line when that keeps its identity and
	// it is short enough to write inline; "" otherwise.
	oneLine string
	// indentOK: indenting every line by four spaces keeps the identity (no
	// line break inside a literal). crlfOK: the same for CRLF line endings.
	indentOK, crlfOK bool
}

type goldCorpus struct {
	files   int
	queries []goldQuery
	skipped []string // files left out, with the reason
	byLen   []int    // indices of queries, shortest text first
}

var (
	goldOnce sync.Once
	goldC    *goldCorpus
	goldErr  error
)

// goldDialect maps a gold file to its dialect (see the README next to the
// files): snow/ is Snowflake; in lite/, local* is SQLite, bq* and ga*
// BigQuery, sf* Snowflake.
func goldDialect(path string) (sqltext.Dialect, bool) {
	dir := filepath.Base(filepath.Dir(path))
	base := filepath.Base(path)
	switch {
	case dir == "snow":
		return sqltext.Snowflake, true
	case dir != "lite":
		return "", false
	case strings.HasPrefix(base, "local"):
		return sqltext.SQLite, true
	case strings.HasPrefix(base, "bq"), strings.HasPrefix(base, "ga"):
		return sqltext.BigQuery, true
	case strings.HasPrefix(base, "sf"):
		return sqltext.Snowflake, true
	}
	return "", false
}

func loadGold() (*goldCorpus, error) {
	goldOnce.Do(func() { goldC, goldErr = readGold() })
	return goldC, goldErr
}

func readGold() (*goldCorpus, error) {
	files, err := filepath.Glob(goldGlob)
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	c := &goldCorpus{files: len(files)}
	for _, f := range files {
		name := filepath.Base(filepath.Dir(f)) + "/" + filepath.Base(f)
		d, ok := goldDialect(f)
		if !ok {
			return nil, fmt.Errorf("%s: cannot tell its dialect from its name", name)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		opt := sqltext.DialectOptions(d)
		text := strings.TrimSpace(string(b))
		for strings.HasSuffix(text, ";") {
			text = strings.TrimSpace(strings.TrimSuffix(text, ";"))
		}
		if n := len(sqltext.Split(text, opt)); n != 1 {
			c.skipped = append(c.skipped, fmt.Sprintf("%s: %d statements", name, n))
			continue
		}
		q := goldQuery{name: name, dialect: d, opt: opt, text: text, norm: sqltext.Normalize(text, opt)}
		if q.norm == "" {
			c.skipped = append(c.skipped, name+": empty")
			continue
		}
		var parts []string
		for _, l := range strings.Split(toLF(text), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				parts = append(parts, l)
			}
		}
		if one := strings.Join(parts, " "); len(one) <= 400 && sqltext.Normalize(one, opt) == q.norm {
			q.oneLine = one
		}
		q.indentOK = sqltext.Normalize(indent4(text), opt) == q.norm
		q.crlfOK = sqltext.Normalize(toCRLF(text), opt) == q.norm
		c.queries = append(c.queries, q)
	}
	c.byLen = make([]int, len(c.queries))
	for i := range c.byLen {
		c.byLen[i] = i
	}
	sort.SliceStable(c.byLen, func(a, b int) bool {
		return len(c.queries[c.byLen[a]].text) < len(c.queries[c.byLen[b]].text)
	})
	return c, nil
}

// needGold returns the corpus or skips the test when the gold SQL is absent.
func needGold(tb testing.TB) *goldCorpus {
	tb.Helper()
	c, err := loadGold()
	if err != nil {
		tb.Fatalf("reading the gold SQL: %v", err)
	}
	if c.files == 0 || len(c.queries) == 0 {
		tb.Skipf("no gold SQL at %s (../shared/data/spider2-gold-sql is absent): skipping the envelope test", goldGlob)
	}
	return c
}

func (c *goldCorpus) logSummary(tb testing.TB) {
	tb.Helper()
	one, ind, crlf := 0, 0, 0
	for _, q := range c.queries {
		if q.oneLine != "" {
			one++
		}
		if q.indentOK {
			ind++
		}
		if q.crlfOK {
			crlf++
		}
	}
	tb.Logf("gold SQL: %d files, %d queries used, %d skipped (more than one statement); %d can be written on one line, %d indented, %d with CRLF",
		c.files, len(c.queries), len(c.skipped), one, ind, crlf)
	for _, s := range c.skipped {
		tb.Logf("  skipped %s", s)
	}
}

func toLF(s string) string   { return strings.ReplaceAll(s, "\r\n", "\n") }
func toCRLF(s string) string { return strings.ReplaceAll(toLF(s), "\n", "\r\n") }

func indent4(s string) string { return indentWith(s, "    ") }

// indentWith prefixes every line of s (an indented code block: four spaces,
// a tab, or more).
func indentWith(s, prefix string) string {
	lines := strings.Split(toLF(s), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

func (l layer) indentPrefix() string {
	if l.indent == "" {
		return "    "
	}
	return l.indent
}

// ---------------------------------------------------------------------------
// Envelopes

type layerKind uint8

const (
	kFence  layerKind = iota // markdown fence, ``` or ~~~, any info string
	kTag                     // <name attrs>…</name>
	kJSON                    // a JSON document with the text in a string value
	kIndent                  // an indented (4 spaces) code block; innermost only
	kInline                  // inline code around a one-line query; innermost only
	kProse                   // prose before and/or after
	kYAML                    // a YAML block scalar (key: |); innermost only
)

var kindNames = [...]string{"fence", "tag", "json", "indent", "inline", "prose", "yaml"}

func (k layerKind) String() string { return kindNames[k] }

// layer is one wrapper with every random choice already made, so that
// rendering is deterministic and a failing envelope can be simplified.
type layer struct {
	kind layerKind

	// kFence
	fenceChar  byte
	fenceLen   int
	closeExtra int
	info       string

	// kTag
	tagOpen, tagClose string // names as written: "x", "function=run_sql" / "function"
	attrs             string
	glueOpen          bool
	glueClose         bool

	// kJSON
	json      *jnode
	jsonStyle int   // 0 compact, 1 spaced, 2 indented
	jsonEsc   uint8 // escHTML | escASCII | escSlash

	// kIndent
	indent string // "    ", "\t", ...

	// kFence: the reply ends inside the fence (no closing line).
	unclosed bool
	// kFence: the fence and its content are indented (a list item's
	// content), 0–3 spaces.
	fenceIndent int

	// kTag: the content is a CDATA section.
	cdata bool

	// kYAML
	yamlKey, yamlStyle string // "sql", "|" or "|-"
	yamlIndent         int
	yamlBefore         []string // "key: value" lines around the block
	yamlAfter          []string

	// kProse
	before, after string
	sepB, sepA    int // choices among the separators the neighbours allow
}

// envelope is one generated reply around gold query gold.
type envelope struct {
	gold   int
	semi   bool // the query ends with ';'
	layers []layer
	bom    bool
	crlf   int // 0: LF; 1: CRLF in the reply's text; 2: CRLF everywhere, JSON strings included
	zw     bool
	zwSeed uint64
}

func (e envelope) clone() envelope {
	e.layers = slices.Clone(e.layers)
	return e
}

// edge says how a rendered fragment begins or ends, which decides how its
// neighbours may be joined to it.
type edge uint8

const (
	eRaw    edge = iota // the query's own text
	eLine               // a fence: needs lines of its own
	eIndent             // an indented block: needs a blank line before it
	eInline             // a tag or inline code: may share a line with prose
	eJSON
	eProse
)

type frag struct {
	text       string
	start, end edge
}

// renderer applies the zero-width/NBSP noise of one envelope.
type renderer struct {
	zw  bool
	rng *rand.Rand
}

// sep returns separator s (whitespace outside the query), possibly with
// zero-width spaces or an NBSP added.
func (r *renderer) sep(s string) string {
	if !r.zw || s == "" || r.rng.IntN(3) == 0 {
		return s
	}
	switch r.rng.IntN(5) {
	case 0:
		return "\u200b" + s
	case 1:
		return s + "\u200b"
	case 2:
		return "\u200b" + s + "\u200b"
	case 3:
		if s == " " {
			return "\u00a0"
		}
		return " \u00a0" + s
	default:
		if strings.HasPrefix(s, "\n\n") {
			return "\n\u00a0\u200b\n" + s[2:]
		}
		return s + "\u200b\u200b"
	}
}

// spice puts zero-width spaces and NBSP into prose.
func (r *renderer) spice(p string) string {
	if !r.zw || p == "" {
		return p
	}
	var b strings.Builder
	for _, c := range p {
		if c == ' ' {
			switch r.rng.IntN(8) {
			case 0:
				b.WriteString("\u00a0")
				continue
			case 1:
				b.WriteString(" \u200b")
				continue
			}
		}
		b.WriteRune(c)
	}
	return b.String()
}

func longestRun(s string, c byte) int {
	best, cur := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			cur++
			best = max(best, cur)
		} else {
			cur = 0
		}
	}
	return best
}

var (
	sepsBefore = map[edge][]string{
		eRaw: {"\n", "\n\n"}, eLine: {"\n", "\n\n"}, eIndent: {"\n\n"},
		eInline: {" ", "\n", "\n\n"}, eJSON: {"\n", "\n\n"}, eProse: {"\n\n"},
	}
	// After a query that no delimiter closes, prose starts on a new line.
	sepsAfter = map[edge][]string{
		eRaw: {"\n", "\n\n"}, eLine: {"\n", "\n\n"}, eIndent: {"\n", "\n\n"},
		eInline: {" ", "\n", "\n\n"}, eJSON: {"\n", "\n\n"}, eProse: {"\n\n"},
	}
	sepNames = map[string]string{" ": "sp", "\n": "nl", "\n\n": "blank"}
)

// wrap applies l around f.
func (r *renderer) wrap(l layer, f frag) (frag, string, []string) {
	switch l.kind {
	case kFence:
		n := max(l.fenceLen, longestRun(f.text, l.fenceChar)+1)
		fc := string(l.fenceChar)
		ind := strings.Repeat(" ", l.fenceIndent)
		open := ind + strings.Repeat(fc, n) + l.info
		closing := ind + strings.Repeat(fc, n+l.closeExtra)
		feats := []string{"fence", "fence" + strings.Repeat(fc, 3)}
		if ind != "" {
			f.text = indentWith(f.text, ind)
			feats = append(feats, "fence-indented")
		}
		if l.info != "" {
			feats = append(feats, "fence-info")
			if strings.ContainsAny(strings.TrimSpace(l.info), " {=") {
				feats = append(feats, "fence-info-attrs")
			}
		}
		if l.unclosed {
			// The reply ends inside the fence: the model stopped (finish
			// "stop") without writing the closing line.
			return frag{open + r.sep("\n") + f.text + pick(r.rng, "", "\n"), eLine, eLine},
				fmt.Sprintf("unclosed-fence%q", open), append(feats, "fence-unclosed-at-end")
		}
		return frag{open + r.sep("\n") + f.text + r.sep("\n") + closing, eLine, eLine},
			fmt.Sprintf("fence%q", open), feats
	case kTag:
		gOpen := l.glueOpen && f.start != eLine && f.start != eIndent
		gClose := l.glueClose && f.end != eLine && f.end != eIndent
		s1, s2 := "", ""
		if !gOpen {
			s1 = r.sep("\n")
		}
		if !gClose {
			s2 = r.sep("\n")
		}
		feats := []string{"tag"}
		d := fmt.Sprintf("tag%q", "<"+l.tagOpen+l.attrs+">")
		if l.cdata {
			nl1, nl2 := "", ""
			if f.start == eLine || f.start == eIndent {
				nl1 = "\n"
			}
			if f.end == eLine || f.end == eIndent {
				nl2 = "\n"
			}
			f = frag{"<![CDATA[" + nl1 + f.text + nl2 + "]]>", eInline, eInline}
			feats = append(feats, "tag-cdata")
			d += "cdata"
		}
		if gOpen {
			feats = append(feats, "tag-glued-open")
			d += "glued-open"
		}
		if gClose {
			feats = append(feats, "tag-glued-close")
			d += "glued-close"
			if f.end == eRaw {
				feats = append(feats, "tag-glued-to-query")
			}
		}
		if l.attrs != "" {
			feats = append(feats, "tag-attrs")
		}
		return frag{"<" + l.tagOpen + l.attrs + ">" + s1 + f.text + s2 + "</" + l.tagClose + ">", eInline, eInline}, d, feats
	case kJSON:
		var b strings.Builder
		l.json.write(&b, f.text, l.jsonStyle, l.jsonEsc, 0)
		out := b.String()
		if !json.Valid([]byte(out)) {
			panic("envelope generator wrote invalid JSON: " + out)
		}
		feats := []string{"json", fmt.Sprintf("json-style%d", l.jsonStyle)}
		if l.jsonEsc&escHTML != 0 && strings.ContainsAny(f.text, "<>&") {
			feats = append(feats, "json-escaped-html")
		}
		if l.jsonEsc&escASCII != 0 && strings.ContainsFunc(f.text, func(c rune) bool { return c > 0x7f }) {
			feats = append(feats, "json-escaped-non-ascii")
		}
		if l.jsonEsc&escSlash != 0 && strings.Contains(f.text, "/") {
			feats = append(feats, "json-escaped-slash")
		}
		if strings.Count(l.json.path(), ".")+strings.Count(l.json.path(), "[") > 1 {
			feats = append(feats, "json-nested")
		}
		var esc []string
		for bit, name := range map[uint8]string{escHTML: "html", escASCII: "ascii", escSlash: "slash"} {
			if l.jsonEsc&bit != 0 {
				esc = append(esc, name)
			}
		}
		sort.Strings(esc)
		d := "json" + l.json.path()
		if len(esc) > 0 {
			d += "/escape:" + strings.Join(esc, ",")
		}
		return frag{out, eJSON, eJSON}, d, feats
	case kYAML:
		var b strings.Builder
		for _, kv := range l.yamlBefore {
			b.WriteString(kv + "\n")
		}
		b.WriteString(l.yamlKey + ": " + l.yamlStyle + "\n")
		b.WriteString(indentWith(f.text, strings.Repeat(" ", l.yamlIndent)))
		for _, kv := range l.yamlAfter {
			b.WriteString("\n" + kv)
		}
		return frag{b.String(), eLine, eLine}, fmt.Sprintf("yaml.%s%s", l.yamlKey, l.yamlStyle), []string{"yaml"}
	case kIndent:
		return frag{indentWith(f.text, l.indentPrefix()), eIndent, eIndent}, fmt.Sprintf("indent%q", l.indentPrefix()), []string{"indent", fmt.Sprintf("indent%q", l.indentPrefix())}
	case kInline:
		n := longestRun(f.text, '`') + 1
		pad := ""
		if n > 1 || strings.HasPrefix(f.text, "`") || strings.HasSuffix(f.text, "`") {
			pad = " "
		}
		d := strings.Repeat("`", n)
		return frag{d + pad + f.text + pad + d, eInline, eInline}, "inline" + d, []string{"inline"}
	case kProse:
		out := f
		var desc []string
		feats := []string{"prose"}
		if l.before != "" {
			seps := sepsBefore[f.start]
			s := seps[l.sepB%len(seps)]
			out.text = r.spice(l.before) + r.sep(s) + out.text
			out.start = eProse
			desc = append(desc, "before/"+sepNames[s])
			feats = append(feats, "prose-before")
			if strings.HasSuffix(l.before, ":") {
				feats = append(feats, "prose-before-colon")
			}
		}
		if l.after != "" {
			seps := sepsAfter[f.end]
			s := seps[l.sepA%len(seps)]
			out.text = out.text + r.sep(s) + r.spice(l.after)
			out.end = eProse
			desc = append(desc, "after/"+sepNames[s])
			feats = append(feats, "prose-after")
			if f.end == eRaw {
				feats = append(feats, "prose-after-bare-query/"+sepNames[s])
			}
		}
		return out, "prose(" + strings.Join(desc, ",") + ")", feats
	}
	panic("unknown layer kind")
}

// render writes e: the reply text, the query as embedded (the answer the
// reader must return), the construction, and its features for the tallies.
func (c *goldCorpus) render(e envelope) (text, want, desc string, feats []string) {
	q := &c.queries[e.gold]
	body := q.text
	if len(e.layers) > 0 && e.layers[0].kind == kInline {
		body = q.oneLine
	}
	if e.semi {
		body += ";"
		feats = append(feats, "semicolon")
	}
	want = body
	r := &renderer{zw: e.zw, rng: rand.New(rand.NewPCG(e.zwSeed, 0x5eed))}
	if e.crlf == 2 {
		body = toCRLF(body)
	}
	f := frag{body, eRaw, eRaw}
	desc = "Q"
	if e.semi {
		desc = "Q;"
	}
	for _, l := range e.layers {
		var d string
		var fs []string
		f, d, fs = r.wrap(l, f)
		if e.crlf == 2 {
			f.text = toCRLF(f.text)
		}
		desc = d + "{" + desc + "}"
		feats = append(feats, fs...)
	}
	feats = append(feats, fmt.Sprintf("depth%d", len(e.layers)))
	text = f.text
	for _, p := range trickyPhrases {
		if strings.Contains(text, p) {
			feats = append(feats, "prose-has:"+p)
		}
	}
	var flags []string
	if e.crlf == 1 {
		text = toCRLF(text)
		flags = append(flags, "crlf")
	}
	if e.crlf == 2 {
		flags = append(flags, "crlf-everywhere")
	}
	if e.zw {
		flags = append(flags, "zw+nbsp")
	}
	if e.bom {
		text = "\ufeff" + text
		flags = append(flags, "bom")
	}
	feats = append(feats, flags...)
	for _, p := range trickyPhrases[:1] {
		if strings.Contains(text, p) {
			flags = append(flags, fmt.Sprintf("prose has %q", p))
		}
	}
	if len(flags) > 0 {
		desc = "[" + strings.Join(flags, " ") + "] " + desc
	}
	return text, want, desc, feats
}

// valid reports whether e keeps the generator's rules (see the top of the
// file); simplifying a failing envelope must not break them.
func (c *goldCorpus) valid(e envelope) bool {
	q := &c.queries[e.gold]
	if e.crlf != 0 && !q.crlfOK {
		return false
	}
	for i, l := range e.layers {
		var prev layerKind = 255
		if i > 0 {
			prev = e.layers[i-1].kind
		}
		switch l.kind {
		case kInline:
			if i != 0 || q.oneLine == "" {
				return false
			}
		case kIndent, kYAML:
			if i != 0 || !q.indentOK {
				return false
			}
		case kFence:
			// Prose inside a code fence is not prose, and inline code
			// inside a fence is literal backticks.
			if prev == kProse || prev == kInline {
				return false
			}
			if l.fenceIndent > 0 && !q.indentOK {
				return false
			}
			// An unclosed fence runs to the end of the reply: only prose
			// before it may wrap it.
			if l.unclosed {
				n := len(e.layers)
				if i != n-1 && !(i == n-2 && e.layers[n-1].kind == kProse && e.layers[n-1].after == "") {
					return false
				}
			}
		case kProse:
			if prev == kProse || (l.before == "" && l.after == "") {
				return false
			}
		}
	}
	return true
}

// genEnvelope composes a random envelope (depth 0–3 wrappers, optional prose
// between them and around all) around gold query gi.
func (c *goldCorpus) genEnvelope(r *rand.Rand, gi int) envelope {
	q := &c.queries[gi]
	e := envelope{gold: gi, semi: r.IntN(2) == 0, zwSeed: r.Uint64()}
	depth := r.IntN(4)
	for i := 0; i < depth; i++ {
		var prev layerKind = 255
		if n := len(e.layers); n > 0 {
			prev = e.layers[n-1].kind
		}
		kinds := []layerKind{kTag, kJSON}
		if prev != kProse && prev != kInline {
			kinds = append(kinds, kFence, kFence)
		}
		if i == 0 {
			if q.oneLine != "" {
				kinds = append(kinds, kInline)
			}
			if q.indentOK {
				kinds = append(kinds, kIndent, kYAML)
			}
		}
		e.layers = append(e.layers, genLayer(r, kinds[r.IntN(len(kinds))]))
		if i < depth-1 && r.IntN(4) == 0 {
			e.layers = append(e.layers, genProseLayer(r))
		}
	}
	if (len(e.layers) == 0 || e.layers[len(e.layers)-1].kind != kProse) && r.IntN(10) < 6 {
		e.layers = append(e.layers, genProseLayer(r))
	}
	for i := len(e.layers) - 1; i >= 0; i-- {
		if e.layers[i].kind == kFence {
			if r.IntN(10) == 0 {
				e.layers[i].unclosed = true
				if !c.valid(e) {
					e.layers[i].unclosed = false
				}
			}
			break
		}
	}
	if r.IntN(7) == 0 {
		e.bom = true
	}
	if q.crlfOK && r.IntN(5) == 0 {
		e.crlf = 1 + r.IntN(2)
	}
	e.zw = r.IntN(4) == 0
	if !c.valid(e) {
		panic("genEnvelope broke its own rules")
	}
	return e
}

func genLayer(r *rand.Rand, k layerKind) layer {
	l := layer{kind: k}
	switch k {
	case kFence:
		l.fenceChar = '`'
		if r.IntN(10) < 3 {
			l.fenceChar = '~'
		}
		l.fenceLen = 3 + r.IntN(3)
		if r.IntN(5) == 0 {
			l.closeExtra = 1 + r.IntN(2)
		}
		l.info = genInfo(r)
		if r.IntN(8) == 0 {
			l.fenceIndent = 1 + r.IntN(3)
		}
	case kTag:
		l.tagOpen = genTagName(r)
		l.tagClose = l.tagOpen
		if r.IntN(12) == 0 {
			// Hermes/Qwen-style function blocks: <function=run_sql>…</function>.
			base := pick(r, "function", "parameter", "tool")
			l.tagOpen = base + "=" + pick(r, "execute_sql", "run_sql", "sql", "query", randWord(r))
			l.tagClose = base
		}
		for n := r.IntN(4); n > 0; n-- {
			l.attrs += " " + genAttr(r)
		}
		l.glueOpen = r.IntN(2) == 0
		l.glueClose = r.IntN(2) == 0
		l.cdata = r.IntN(10) == 0
	case kIndent:
		l.indent = pick(r, "    ", "    ", "\t", "      ", "        ")
	case kYAML:
		l.yamlKey = pick(r, "sql", "query", "answer", "final_sql", randWord(r))
		l.yamlStyle = pick(r, "|", "|-", "|+")
		l.yamlIndent = 2 + 2*r.IntN(2)
		kv := func() string {
			return pick(r, "explanation", "reasoning", "dialect", "tables", randWord(r)) + ": " + jsonString(genSentence(r), 0)
		}
		for n := r.IntN(3); n > 0; n-- {
			l.yamlBefore = append(l.yamlBefore, kv())
		}
		for n := r.IntN(3); n > 0; n-- {
			l.yamlAfter = append(l.yamlAfter, kv())
		}
	case kJSON:
		l.json = genJSON(r, 1+r.IntN(3))
		l.jsonStyle = r.IntN(3)
		l.jsonEsc = uint8(r.IntN(8))
	case kProse:
		return genProseLayer(r)
	}
	return l
}

func genProseLayer(r *rand.Rand) layer {
	l := layer{kind: kProse, sepB: r.IntN(6), sepA: r.IntN(6)}
	switch r.IntN(4) {
	case 0:
		l.after = genProse(r, 1+r.IntN(2), false)
	case 1:
		l.before = genProse(r, 1+r.IntN(3), r.IntN(2) == 0)
		l.after = genProse(r, 1+r.IntN(2), false)
	default:
		l.before = genProse(r, 1+r.IntN(3), r.IntN(2) == 0)
	}
	return l
}

func pick(r *rand.Rand, xs ...string) string { return xs[r.IntN(len(xs))] }

const (
	lower  = "abcdefghijklmnopqrstuvwxyz"
	letter = lower + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

func randWord(r *rand.Rand) string {
	n := 2 + r.IntN(8)
	b := make([]byte, n)
	for i := range b {
		b[i] = lower[r.IntN(len(lower))]
	}
	return string(b)
}

func genInfo(r *rand.Rand) string {
	lang := pick(r, "", "sql", "sql", "SQL", "Sql", "sqlite", "bigquery", "snowflake", "googlesql",
		"postgresql", "mysql", "tsql", "text", "plaintext", randWord(r), randWord(r))
	var attrs []string
	for n := r.IntN(3); n > 0; n-- {
		attrs = append(attrs, pick(r,
			`title="`+randWord(r)+`"`, `{.numberLines}`, `linenos`, `{.sql .numberLines startFrom="10"}`,
			`hl_lines="1 3"`, `filename="answer.sql"`, `caption='`+randWord(r)+`'`, `data-lang=sql`,
			`{#lst:query}`, randWord(r)+"="+randWord(r)))
	}
	info := strings.Join(append([]string{lang}, attrs...), " ")
	info = strings.TrimSpace(info)
	if info != "" && r.IntN(4) == 0 {
		info = " " + info
	}
	return info
}

// Tag names that mark a model's reasoning rather than its answer: a query
// written only inside <think> is a thought, not an answer, and a human could
// not say whether the model meant it (the reader may rightly skip such
// blocks). The generator never uses them.
var reasoningTags = []string{"think", "thinking", "thought", "thoughts", "reasoning", "reflection",
	"scratchpad", "draft", "analysis", "plan", "reason"}

func genTagName(r *rand.Rand) string {
	for {
		var name string
		if r.IntN(2) == 0 {
			name = pick(r, "sql", "SQL", "answer", "final_answer", "query", "tool_call", "code", "output",
				"result", "solution", "execute", "ns:sql", "Answer", "sql-query", "response", "x")
		} else {
			const rest = letter + "0123456789-_:"
			n := r.IntN(11)
			b := []byte{letter[r.IntN(len(letter))]}
			for ; n > 0; n-- {
				b = append(b, rest[r.IntN(len(rest))])
			}
			name = string(b)
		}
		if !slices.Contains(reasoningTags, strings.ToLower(name)) {
			return name
		}
	}
}

func genAttr(r *rand.Rand) string {
	const rest = lower + "-:_"
	b := []byte{lower[r.IntN(len(lower))]}
	for n := r.IntN(8); n > 0; n-- {
		b = append(b, rest[r.IntN(len(rest))])
	}
	name := string(b)
	val := pick(r, "sql", "1", "true", randWord(r), randWord(r)+" "+randWord(r))
	switch r.IntN(4) {
	case 0:
		return name
	case 1:
		return name + "='" + val + "'"
	default:
		return name + `="` + val + `"`
	}
}

// jnode is a JSON value with one hole where the wrapped text goes.
type jnode struct {
	kind  byte // 'o' object, 'a' array, 'h' hole, 's' string, 'n' number, 'b' bool, 'z' null
	keys  []string
	elems []*jnode
	s     string
}

func genJSON(r *rand.Rand, depth int) *jnode {
	var inner *jnode
	if depth <= 1 {
		inner = &jnode{kind: 'h'}
	} else {
		inner = genJSON(r, depth-1)
	}
	if r.IntN(10) < 7 {
		n := &jnode{kind: 'o'}
		used := map[string]bool{}
		key := pick(r, "sql", "query", "SQL", "answer", "final_sql", "code", "content", "text", "arguments",
			"statement", "result", "output", randWord(r), fmt.Sprintf("k%d", r.IntN(10)))
		used[key] = true
		extras := r.IntN(3)
		at := r.IntN(extras + 1)
		for i := 0; i <= extras; i++ {
			if i == at {
				n.keys = append(n.keys, key)
				n.elems = append(n.elems, inner)
				continue
			}
			k := pick(r, "explanation", "reasoning_summary", "name", "confidence", "tables", "notes", "dialect", randWord(r))
			if used[k] {
				k += fmt.Sprint(i)
			}
			used[k] = true
			n.keys = append(n.keys, k)
			n.elems = append(n.elems, genJSONFiller(r))
		}
		return n
	}
	n := &jnode{kind: 'a'}
	m := 1 + r.IntN(3)
	at := r.IntN(m)
	for i := 0; i < m; i++ {
		if i == at {
			n.elems = append(n.elems, inner)
		} else {
			n.elems = append(n.elems, genJSONFiller(r))
		}
	}
	return n
}

// genJSONFiller returns a value that holds no SQL statement.
func genJSONFiller(r *rand.Rand) *jnode {
	switch r.IntN(6) {
	case 0:
		return &jnode{kind: 'n', s: fmt.Sprint(r.IntN(1000))}
	case 1:
		return &jnode{kind: 'b', s: pick(r, "true", "false")}
	case 2:
		return &jnode{kind: 'z'}
	case 3:
		return &jnode{kind: 'a', elems: []*jnode{{kind: 's', s: pick(r, "orders", "customers", "sales")}, {kind: 's', s: randWord(r)}}}
	default:
		return &jnode{kind: 's', s: genProse(r, 1, false)}
	}
}

// JSON string escapes beyond the required ones, as serializers write them:
// Go's <, >, & as \u003c…; Python's ensure_ascii (every non-ASCII
// character as \uXXXX); PHP's \/.
const (
	escHTML uint8 = 1 << iota
	escASCII
	escSlash
)

func jsonString(s string, esc uint8) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(esc&escHTML != 0)
	if err := enc.Encode(s); err != nil {
		panic(err)
	}
	out := strings.TrimSuffix(b.String(), "\n")
	if esc&escSlash != 0 {
		out = strings.ReplaceAll(out, "/", `\/`)
	}
	if esc&escASCII != 0 {
		var a strings.Builder
		for _, c := range out {
			if c < 0x80 {
				a.WriteRune(c)
				continue
			}
			if c > 0xffff {
				c1, c2 := utf16.EncodeRune(c)
				fmt.Fprintf(&a, `\u%04x\u%04x`, c1, c2)
				continue
			}
			fmt.Fprintf(&a, `\u%04x`, c)
		}
		out = a.String()
	}
	return out
}

func (n *jnode) write(b *strings.Builder, hole string, style int, esc uint8, depth int) {
	nl := func(d int) {
		if style == 2 {
			b.WriteString("\n" + strings.Repeat("  ", d))
		}
	}
	comma, colon := ",", ":"
	if style > 0 {
		colon = ": "
	}
	if style == 1 {
		comma = ", "
	}
	switch n.kind {
	case 'h':
		b.WriteString(jsonString(hole, esc))
	case 's':
		b.WriteString(jsonString(n.s, esc))
	case 'n', 'b':
		b.WriteString(n.s)
	case 'z':
		b.WriteString("null")
	case 'o', 'a':
		open, closing := "{", "}"
		if n.kind == 'a' {
			open, closing = "[", "]"
		}
		b.WriteString(open)
		for i, el := range n.elems {
			if i > 0 {
				b.WriteString(comma)
			}
			nl(depth + 1)
			if n.kind == 'o' {
				b.WriteString(jsonString(n.keys[i], esc) + colon)
			}
			el.write(b, hole, style, esc, depth+1)
		}
		nl(depth)
		b.WriteString(closing)
	}
}

// path names where the hole is: ".sql", "[1].args".
func (n *jnode) path() string {
	for i, el := range n.elems {
		p := el.path()
		if p == "" && el.kind != 'h' {
			continue
		}
		if n.kind == 'o' {
			return "." + n.keys[i] + p
		}
		return fmt.Sprintf("[%d]", i) + p
	}
	return ""
}

// ---------------------------------------------------------------------------
// Prose

// Sentences start with a subject, never with a SQL keyword, so that no line
// of prose starts a SQL statement; SQL words appear mid-sentence. None says
// "final" (that word marks the final block of the draft/final replies).
var (
	pluralSubjects   = []string{"We", "I", "Here we", "First we", "Then we", "Next, we", "To answer this, we", "Now we"}
	singularSubjects = []string{"This query", "The query", "It", "The result", "Our approach", "The inner query",
		"The subquery", "This version", "The join", "That step", "The outer query", "Each row", "My answer"}
	pluralVerbs = []string{
		"select the rows from the table where the date is recent",
		"join the orders with the customers on their id",
		"group the sales by region and order them by total",
		"count the distinct users per day",
		"filter on the year with a where clause",
		"take the top ten products by revenue",
		"use a with clause to keep things readable",
		"compute the average price from the products table",
		"union the two result sets and limit the output to ten rows",
		"read each customer's orders and sum their values",
		"don't need a subquery for this",
		"keep only the rows where the status is active",
		"select from the sessions table and group by country",
		"cast the timestamp to a date before grouping",
		"partition the rows by user and order them by time",
		"look at the `orders` table and its `status` column",
		"rely on `GROUP BY` and `ORDER BY` to rank the regions",
		"insert nothing and update nothing, since we only read",
		"create no tables; we only select from existing ones",
	}
	singularVerbs = []string{
		"selects the rows from the table where the date is recent",
		"joins the orders with the customers on their id",
		"groups the sales by region and orders them by total",
		"counts the distinct users per day",
		"filters on the year with a where clause",
		"returns the top ten products by revenue",
		"uses a with clause to keep things readable",
		"computes the average price from the products table",
		"unions the two result sets and limits the output",
		"reads each customer's orders and sums their values",
		"doesn't need a subquery",
		"keeps only the rows where the status is active",
		"selects from the sessions table and groups by country",
		"casts the timestamp to a date before grouping",
		"ranks the regions with `ROW_NUMBER()` over the totals",
		"reads the `region` column of the `sales` table",
		"is what the question asks for",
		"has one row per region, ordered by revenue",
	}
	clauses = []string{
		"", "", "", "",
		", so the output has one row per region",
		" because the question asks for it",
		", which matches the question",
		" as the schema suggests",
		" and orders the result by the total in descending order",
		" (see the `created_at` column)",
		" since it's the only table with that column",
		", where the year is 2020 or later",
		" from the start of the month to the end",
		" with a left join on the id",
	}
	fixedSentences = []string{
		"Here's the query:", "Here is the SQL:", "Here is the query that answers the question:",
		"Let me write the query.", "Below is the answer:", "This should work.", "I hope this helps!",
		"Let me know if you need changes.", "The query below answers the question:",
		"Sure, here it is:", "Based on the schema, here's what I came up with:",
		"Okay, I think I've got it.", "Good question!", "This runs on the warehouse as is.",
		"Note: the dates are stored as strings.", "It's a bit long, but it works.",
	}
)

// trickyPhrases are pieces of prose the failure tallies name separately.
var trickyPhrases = []string{"; we only select from existing ones", "we only read", "'s ", "n't "}

func genSentence(r *rand.Rand) string {
	if r.IntN(4) == 0 {
		return pick(r, fixedSentences...)
	}
	var s string
	if r.IntN(2) == 0 {
		s = pick(r, pluralSubjects...) + " " + pick(r, pluralVerbs...)
	} else {
		s = pick(r, singularSubjects...) + " " + pick(r, singularVerbs...)
	}
	s += pick(r, clauses...)
	if r.IntN(5) == 0 {
		s = strings.ReplaceAll(s, "'", "’") // typographic apostrophes
	}
	switch r.IntN(20) {
	case 0:
		return s + "!"
	case 1:
		return s + "…"
	case 2:
		return s + "..."
	default:
		return s + "."
	}
}

// genProse writes n sentences; colon: the last one ends with ':' (it
// introduces what follows).
func genProse(r *rand.Rand, n int, colon bool) string {
	var b strings.Builder
	if r.IntN(8) == 0 {
		// A markdown heading or label on a line of its own.
		b.WriteString(pick(r, "## Query", "### SQL", "**Answer:**", "**Query**", "#### Solution", "Answer:",
			"SQL query:", "# Approach", "_Note_", "**Explanation:**", "### Explanation", "Explanation:",
			"**How it works**") + pick(r, "\n", "\n\n"))
	}
	bullets := r.IntN(6) == 0
	for i := 0; i < n; i++ {
		s := genSentence(r)
		if i == n-1 && colon {
			s = strings.TrimRight(s, ".!…:") + ":"
		}
		if i > 0 {
			sep := pick(r, " ", " ", " ", "\n", "\n\n")
			if bullets {
				sep = pick(r, "\n", "\n\n")
			}
			b.WriteString(sep)
		}
		if bullets {
			b.WriteString(pick(r, "- ", "* ", fmt.Sprintf("%d. ", i+1)))
		}
		b.WriteString(s)
	}
	return b.String()
}

// genFinalProse is the prose between a draft and the real query: a
// critique of the draft and a sentence that marks what follows as final.
func genFinalProse(r *rand.Rand) string {
	crit := pick(r,
		"That draft double counts the orders.",
		"This misses the customers without orders.",
		"Wait, the join above drops the null regions.",
		"Hmm, that version groups by the wrong column.",
		"On second thought, the date filter is off by one.",
		"That one would not run: the alias is undefined.",
		"Looking again, we need the distinct users only.",
		"",
	)
	fin := pick(r,
		"The final query is:", "Here is the final version:", "Final answer:", "So the final SQL becomes:",
		"This gives the final query below.", "Here's the final, corrected query:", "My final query:",
		"Final SQL:", "The corrected, final query:")
	if crit == "" {
		return fin
	}
	return crit + pick(r, " ", "\n", "\n\n") + fin
}

func genDraftIntro(r *rand.Rand) string {
	return pick(r, "", "", "Let me start with a first attempt:", "A first draft:",
		"I'll begin with a simple version.", "Here is a rough first try:", "Let me try this first.")
}

// ---------------------------------------------------------------------------
// Refusals: prose that begins with a SQL keyword and holds no query.

var (
	refusalOpeners = []string{
		"With the schema given I cannot tell which table to select from…",
		"With the schema given, I can't tell which table to select from.",
		"With only the {T} table, I cannot compute {A}.",
		"With these tables I cannot find where {A} is stored.",
		"Select statements alone cannot answer this, because no table holds {A}.",
		"Select which of the {T} tables you mean, and I will write the query.",
		"From the schema alone, I cannot determine {A}.",
		"From what I see, the {T} table has no {C} column.",
		"Where the question asks for {A}, the tables hold no such data.",
		"Where {A} should come from is unclear to me.",
		"Order dates are missing from every table, so I cannot sort by them.",
		"Group totals would need a {C} column, which the schema lacks.",
		"Values for {C} are not stored anywhere in the schema.",
		"Values, dates and totals are all absent for {T}.",
		"Show me the {T} table's columns and I will write the query.",
		"Update: I could not find a {C} column in any table.",
		"Explain which {C} you mean, please; the schema has three of them.",
		"Describe the expected output, and I can write the query.",
		"Use of the {T} table would be a guess, so I stop here.",
		"Table {T} is missing from the schema, so I cannot answer.",
		"Set the dialect first, please: I cannot tell BigQuery from Snowflake here.",
		"Declare which year you mean and I will write it.",
		"Insert the missing table name and I will try again.",
		"Delete nothing, change nothing: I only read data, and this question needs data I lack.",
		"Begin by telling me which database to use; I see none.",
		"Call it a limitation of the schema: {A} is not recorded.",
		"Create a view? No, I can only read, and {A} is not there.",
		"Join keys between {T} and {T2} are missing, so I cannot relate them.",
		"Limit the question to {T} and I can answer it.",
		"Merge of {T} and {T2} is not possible without a shared key.",
		"Copy the column list here and I will try again.",
		"Having looked at every table, I cannot find {A}.",
		"Case by case, none of the tables records {A}.",
		"Union of {T} and {T2} would double count, so I give no query.",
		"Explain plans aside, the data for {A} simply is not there.",
		"Drop me a hint about {C}, and I will try again.",
		"With `GROUP BY` alone I cannot compute {A}: no table has {C}.",
		"From `{T}` alone I cannot tell {A}.",
		"Select `{C}`? It is not in {T}, so there is nothing to select from.",
		"Where clauses cannot help: {T} has no {C} column at all.",
		"With the tables you listed (`{T}`, `{T2}`), the question cannot be answered.",
	}
	refusalFollowUps = []string{
		"Could you tell me which table holds it?",
		"Please share the column list.",
		"I need more information about the schema.",
		"I'd rather not guess and run a wrong query.",
		"Sorry about that.",
		"If you give me the table name, I will write the query.",
		"There is no {C} column in {T} or {T2}.",
	}
	refusalTables  = []string{"orders", "customers", "sales", "events", "sessions", "products", "trips"}
	refusalColumns = []string{"region", "revenue", "created_at", "country", "price", "user_id", "status"}
	refusalAsks    = []string{"the revenue per region", "the monthly churn", "the average basket size",
		"the top customers", "the share of repeat buyers", "the trip duration"}
)

// statementKeywords are words that can start a statement in some dialect;
// refusals start with one, prose never does.
var statementKeywords = []string{"with", "select", "from", "values", "table", "where", "order", "group",
	"show", "describe", "desc", "explain", "use", "update", "insert", "delete", "merge", "create", "alter",
	"drop", "truncate", "grant", "revoke", "set", "unset", "declare", "call", "begin", "commit", "rollback",
	"execute", "exec", "copy", "put", "get", "list", "ls", "remove", "rm", "undrop", "pragma", "attach",
	"detach", "vacuum", "analyze", "reindex", "replace", "upsert", "load", "export", "import", "limit",
	"join", "union", "case", "having", "fetch", "pivot"}

func fillRefusal(r *rand.Rand, s string) string {
	t1 := pick(r, refusalTables...)
	t2 := pick(r, refusalTables...)
	for t2 == t1 {
		t2 = pick(r, refusalTables...)
	}
	tick := func(x string) string {
		if r.IntN(3) == 0 {
			return "`" + x + "`"
		}
		return x
	}
	s = strings.ReplaceAll(s, "{T2}", tick(t2))
	s = strings.ReplaceAll(s, "{T}", tick(t1))
	s = strings.ReplaceAll(s, "{C}", tick(pick(r, refusalColumns...)))
	return strings.ReplaceAll(s, "{A}", pick(r, refusalAsks...))
}

// refusal is a generated reply with no query.
type refusal struct {
	text, desc string
}

func genRefusal(r *rand.Rand) refusal {
	var parts []string
	var desc []string
	first := fillRefusal(r, pick(r, refusalOpeners...))
	if r.IntN(7) == 0 {
		first = strings.ToLower(first[:1]) + first[1:]
		desc = append(desc, "lower-case")
	}
	parts = append(parts, first)
	for n := r.IntN(4); n > 0; n-- {
		switch r.IntN(3) {
		case 0:
			parts = append(parts, fillRefusal(r, pick(r, refusalOpeners...)))
		case 1:
			parts = append(parts, fillRefusal(r, pick(r, refusalFollowUps...)))
		default:
			parts = append(parts, genSentence(r))
		}
	}
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteString(pick(r, " ", "\n", "\n\n"))
		}
		b.WriteString(p)
	}
	text := b.String()
	desc = append(desc, fmt.Sprintf("%d sentences", len(parts)))
	if r.IntN(8) == 0 {
		text = pick(r, "### Answer", "**Answer:**", "## Result", "Answer:") + pick(r, "\n", "\n\n") + text
		desc = append(desc, "heading")
	}
	if r.IntN(5) == 0 {
		text = (&renderer{zw: true, rng: r}).spice(text)
		desc = append(desc, "zw+nbsp")
	}
	switch r.IntN(8) {
	case 0:
		var jb strings.Builder
		(&jnode{kind: 'o', keys: []string{"sql", "explanation"}, elems: []*jnode{{kind: 'z'}, {kind: 'h'}}}).write(&jb, text, r.IntN(3), uint8(r.IntN(8)), 0)
		text = jb.String()
		desc = append(desc, "json{sql: null, explanation}")
	case 1:
		var jb strings.Builder
		genJSON(r, 1+r.IntN(2)).write(&jb, text, r.IntN(3), uint8(r.IntN(8)), 0)
		text = jb.String()
		desc = append(desc, "json")
	case 2:
		name := genTagName(r)
		text = "<" + name + ">" + pick(r, "", "\n") + text + pick(r, "", "\n") + "</" + name + ">"
		desc = append(desc, "tag")
	}
	if r.IntN(5) == 0 {
		text = toCRLF(text)
		desc = append(desc, "crlf")
	}
	if r.IntN(6) == 0 {
		text = "\ufeff" + text
		desc = append(desc, "bom")
	}
	return refusal{text: text, desc: strings.Join(desc, ", ")}
}

// ---------------------------------------------------------------------------
// Draft and final: two blocks, the real query marked final and last.

type twoBlocks struct {
	draft, real envelope
	intro, mid  string
	sep1, sep2  int
	bom         bool
}

func (c *goldCorpus) genTwoBlocks(r *rand.Rand, gi int) twoBlocks {
	di := r.IntN(len(c.queries))
	for c.queries[di].norm == c.queries[gi].norm {
		di = r.IntN(len(c.queries))
	}
	t := twoBlocks{
		draft: c.genEnvelope(r, di),
		real:  c.genEnvelope(r, gi),
		intro: genDraftIntro(r),
		mid:   genFinalProse(r),
		sep1:  r.IntN(6),
		sep2:  r.IntN(6),
		bom:   r.IntN(8) == 0,
	}
	// One BOM at most, at the very start; line endings per block. The
	// draft's fences are closed (else the rest of the reply is inside it).
	t.draft.bom, t.real.bom = false, false
	for i := range t.draft.layers {
		t.draft.layers[i].unclosed = false
	}
	// A draft wrapped in <final_answer> or under a "final_sql" key is marked
	// final by its envelope: a human could not tell which block the reply
	// means. Only the prose after the draft says "final".
	for i, l := range t.draft.layers {
		switch l.kind {
		case kTag:
			if strings.Contains(strings.ToLower(l.tagOpen), "final") {
				t.draft.layers[i].tagOpen, t.draft.layers[i].tagClose = "answer", "answer"
			}
		case kJSON:
			t.draft.layers[i].json = l.json.renameKeys("final", "draft_")
		case kYAML:
			if strings.Contains(l.yamlKey, "final") {
				t.draft.layers[i].yamlKey = "sql"
			}
		}
	}
	return t
}

// renameKeys returns n with every key containing word (any case) replaced by
// prefix + its position.
func (n *jnode) renameKeys(word, prefix string) *jnode {
	if n == nil {
		return nil
	}
	m := *n
	m.keys = slices.Clone(n.keys)
	m.elems = make([]*jnode, len(n.elems))
	for i, el := range n.elems {
		m.elems[i] = el.renameKeys(word, prefix)
	}
	for i, k := range m.keys {
		if strings.Contains(strings.ToLower(k), word) {
			m.keys[i] = fmt.Sprintf("%s%d", prefix, i)
		}
	}
	return &m
}

func startEdge(e envelope) edge {
	for i := len(e.layers) - 1; i >= 0; i-- {
		switch l := e.layers[i]; l.kind {
		case kProse:
			if l.before != "" {
				return eProse
			}
		case kFence, kYAML:
			return eLine
		case kIndent:
			return eIndent
		case kJSON:
			return eJSON
		default:
			return eInline
		}
	}
	return eRaw
}

func (c *goldCorpus) renderTwo(t twoBlocks) (text, draft, want, desc string) {
	dt, dw, dd, _ := c.render(t.draft)
	rt, rw, rd, _ := c.render(t.real)
	sepTo := func(next edge, choice int) string {
		if next == eIndent {
			return "\n\n"
		}
		return []string{"\n", "\n\n"}[choice%2]
	}
	text = dt + sepTo(eProse, t.sep1) + t.mid + sepTo(startEdge(t.real), t.sep2) + rt
	if t.intro != "" {
		text = t.intro + sepTo(startEdge(t.draft), t.sep1) + text
	}
	if t.bom {
		text = "\ufeff" + text
	}
	desc = fmt.Sprintf("draft %s (%s) / %q / final %s", dd, c.queries[t.draft.gold].name, t.mid, rd)
	if t.intro != "" {
		desc = fmt.Sprintf("%q / ", t.intro) + desc
	}
	if t.bom {
		desc = "[bom] " + desc
	}
	return text, dw, rw, desc
}

// ---------------------------------------------------------------------------
// Checking and simplifying

// trunc shortens s for a failure message, keeping its head and tail.
func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head, tail := n*2/3, n/3
	return strings.ToValidUTF8(s[:head], "") + fmt.Sprintf(" …[%d bytes]… ", len(s)-head-tail) + strings.ToValidUTF8(s[len(s)-tail:], "")
}

// simpler lists envelopes one step simpler than e.
func (c *goldCorpus) simpler(e envelope) []envelope {
	var out []envelope
	add := func(f func(*envelope)) {
		x := e.clone()
		f(&x)
		out = append(out, x)
	}
	for i := range e.layers {
		add(func(x *envelope) { x.layers = slices.Delete(x.layers, i, i+1) })
	}
	if e.bom {
		add(func(x *envelope) { x.bom = false })
	}
	if e.crlf != 0 {
		add(func(x *envelope) { x.crlf = 0 })
	}
	if e.crlf == 2 {
		add(func(x *envelope) { x.crlf = 1 })
	}
	if e.zw {
		add(func(x *envelope) { x.zw = false })
	}
	if e.semi {
		add(func(x *envelope) { x.semi = false })
	}
	for i, l := range e.layers {
		switch l.kind {
		case kProse:
			if l.before != "" && l.after != "" {
				add(func(x *envelope) { x.layers[i].before = "" })
				add(func(x *envelope) { x.layers[i].after = "" })
			}
			if strings.ContainsAny(l.before, "\n") || strings.Count(l.before, ". ") > 0 {
				add(func(x *envelope) { x.layers[i].before = "Here is the query:" })
			}
			if strings.ContainsAny(l.after, "\n") || strings.Count(l.after, ". ") > 0 {
				add(func(x *envelope) { x.layers[i].after = "This returns the rows." })
			}
		case kTag:
			if l.attrs != "" {
				add(func(x *envelope) { x.layers[i].attrs = "" })
			}
			if l.cdata {
				add(func(x *envelope) { x.layers[i].cdata = false })
			}
			if l.glueOpen {
				add(func(x *envelope) { x.layers[i].glueOpen = false })
			}
			if l.glueClose {
				add(func(x *envelope) { x.layers[i].glueClose = false })
			}
			if l.tagOpen != "x" {
				add(func(x *envelope) { x.layers[i].tagOpen, x.layers[i].tagClose = "x", "x" })
			}
		case kFence:
			if l.info != "" && l.info != "sql" {
				add(func(x *envelope) { x.layers[i].info = "sql" })
				add(func(x *envelope) { x.layers[i].info = "" })
			}
			if l.closeExtra != 0 || l.fenceLen != 3 {
				add(func(x *envelope) { x.layers[i].closeExtra, x.layers[i].fenceLen = 0, 3 })
			}
			if l.fenceChar != '`' {
				add(func(x *envelope) { x.layers[i].fenceChar = '`' })
			}
			if l.unclosed {
				add(func(x *envelope) { x.layers[i].unclosed = false })
			}
			if l.fenceIndent != 0 {
				add(func(x *envelope) { x.layers[i].fenceIndent = 0 })
			}
		case kIndent:
			if l.indentPrefix() != "    " {
				add(func(x *envelope) { x.layers[i].indent = "" })
			}
		case kYAML:
			if len(l.yamlBefore)+len(l.yamlAfter) > 0 {
				add(func(x *envelope) { x.layers[i].yamlBefore, x.layers[i].yamlAfter = nil, nil })
			}
			if l.yamlStyle != "|" || l.yamlKey != "sql" {
				add(func(x *envelope) { x.layers[i].yamlStyle, x.layers[i].yamlKey = "|", "sql" })
			}
		case kJSON:
			if l.json.path() != ".sql" || len(l.json.elems) > 1 {
				add(func(x *envelope) {
					x.layers[i].json = &jnode{kind: 'o', keys: []string{"sql"}, elems: []*jnode{{kind: 'h'}}}
				})
			}
			if l.jsonStyle != 1 {
				add(func(x *envelope) { x.layers[i].jsonStyle = 1 })
			}
			if l.jsonEsc != 0 {
				add(func(x *envelope) { x.layers[i].jsonEsc = 0 })
				for _, bit := range []uint8{escHTML, escASCII, escSlash} {
					if l.jsonEsc&bit != 0 {
						add(func(x *envelope) { x.layers[i].jsonEsc &^= bit })
					}
				}
			}
		}
	}
	return out
}

// shrink simplifies a failing envelope while it still fails: fewer layers
// and flags, plainer wrappers, then the shortest gold query that fails.
func (c *goldCorpus) shrink(e envelope, fails func(envelope) bool) envelope {
	pass := func() {
		for changed := true; changed; {
			changed = false
			for _, x := range c.simpler(e) {
				if c.valid(x) && fails(x) {
					e, changed = x, true
					break
				}
			}
		}
	}
	pass()
	for _, gi := range c.byLen {
		if gi == e.gold {
			break
		}
		x := e.clone()
		x.gold = gi
		if c.valid(x) && fails(x) {
			e = x
			break
		}
	}
	pass()
	return e
}

// envRand is the random source of envelope k around gold query gi.
func envRand(base uint64, gi, k int) *rand.Rand {
	return rand.New(rand.NewPCG(base, uint64(gi)<<32|uint64(k)))
}

// byteSource lets a fuzzer steer the generator: each draw takes its top byte
// from the fuzzer's bytes while they last, the rest from a seeded PCG.
type byteSource struct {
	b   []byte
	pcg *rand.PCG
}

func (s *byteSource) Uint64() uint64 {
	v := s.pcg.Uint64()
	if len(s.b) > 0 {
		v = uint64(s.b[0])<<56 | v>>8
		s.b = s.b[1:]
	}
	return v
}

// tally counts envelopes and failures per feature.
type tally struct {
	total, failed map[string]int
}

func newTally() *tally { return &tally{total: map[string]int{}, failed: map[string]int{}} }

func (t *tally) add(feats []string, failed bool) {
	seen := map[string]bool{}
	for _, f := range feats {
		if seen[f] {
			continue
		}
		seen[f] = true
		t.total[f]++
		if failed {
			t.failed[f]++
		}
	}
}

func (t *tally) log(tb testing.TB) {
	tb.Helper()
	keys := make([]string, 0, len(t.total))
	for k := range t.total {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		ri := float64(t.failed[keys[i]]) / float64(t.total[keys[i]])
		rj := float64(t.failed[keys[j]]) / float64(t.total[keys[j]])
		if ri != rj {
			return ri > rj
		}
		return keys[i] < keys[j]
	})
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-36s %5d failed of %5d (%3.0f%%)", k, t.failed[k], t.total[k], 100*float64(t.failed[k])/float64(t.total[k]))
	}
	tb.Logf("failures by feature (an envelope counts once under each feature it has):%s", b.String())
}
