package reply

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

// A statement is found by lexing, not by matching wrappers: from a SELECT
// or WITH, tokens are read while they can continue a query, and the
// statement ends at its natural end (a ';', the end of the text, a line
// that does not carry the query on) or at the first token no query can
// hold (a fence, a markup tag, the quote that opened it, a sentence's full
// stop). A start whose tokens read as prose (three bare words in a row, a
// WITH not followed by "name AS (", an English function word) is no
// statement, so a refusal that begins with "With" or "Select" is never a
// query. The rules are about SQL, so they hold whatever surrounds it.

// lexOpt is the lexer the reader uses: the dialect is unknown, so the
// generic rules, with backslash escapes in strings (BigQuery, Snowflake).
var lexOpt = sqltext.Options{BackslashEscapes: true}

// span is one statement found in a text: [start, end) holds its SQL
// (without a closing ';'); final is whether the statement reached a
// natural end; cut whether the text ended inside it.
type span struct {
	start, end int
	cut        bool
}

// word classes.
type wclass uint8

const (
	plain    wclass = iota // an identifier (or a keyword used as one)
	kwNeed                 // a keyword after which more must come (FROM, AND, AS)
	kwEnd                  // a keyword that can end a statement (ASC, NULL, END)
	kwClause               // kwNeed that starts a clause at depth 0
)

// keywords: what the scanner needs to know about SQL words. Words absent
// are plain (identifiers), so a dialect's function names need no entry.
var keywords = func() map[string]wclass {
	m := map[string]wclass{}
	for _, w := range strings.Fields(`SELECT FROM WHERE HAVING QUALIFY LIMIT OFFSET WINDOW UNION INTERSECT
		EXCEPT MINUS JOIN ON USING GROUP ORDER PARTITION FETCH`) {
		m[w] = kwClause
	}
	for _, w := range strings.Fields(`BY AND OR NOT IN IS LIKE ILIKE RLIKE REGEXP GLOB MATCH BETWEEN ESCAPE
		WHEN THEN ELSE CASE AS SIMILAR TO INTERVAL DISTINCT ANY SOME EXISTS WITH RECURSIVE INNER LEFT
		RIGHT FULL OUTER CROSS NATURAL LATERAL OVER FILTER WITHIN COLLATE TOP VALUES TABLESAMPLE SAMPLE
		PIVOT UNPIVOT FOR OF AT ZONE SETS NULLS ASOF SEMI ANTI`) {
		m[w] = kwNeed
	}
	for _, w := range strings.Fields(`END NULL TRUE FALSE ASC DESC FIRST LAST ALL ONLY ROWS ROW TIES NEXT
		TIME DAY DAYS MONTH MONTHS YEAR YEARS HOUR HOURS MINUTE MINUTES SECOND SECONDS WEEK WEEKS QUARTER
		QUARTERS MILLISECOND MICROSECOND DAYOFWEEK DAYOFYEAR ISOWEEK ISOYEAR PRECEDING FOLLOWING
		UNBOUNDED CURRENT`) {
		m[w] = kwEnd
	}
	return m
}()

// proseWords are English function words that no query writes bare: a
// run of tokens holding one is a sentence, not SQL.
var proseWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`the this these those which would should could cannot please you your
		we our because here's there's i'm i'll let's it's isn't doesn't don't won't can't unfortunately sorry`) {
		m[w] = true
	}
	return m
}()

// strictClauses are clauses where no alias can follow an expression: two
// operands in a row there are prose ("where the amount is…").
var strictClauses = map[string]bool{"WHERE": true, "HAVING": true, "ON": true, "QUALIFY": true,
	"GROUP": true, "ORDER": true, "LIMIT": true, "OFFSET": true, "PARTITION": true}

// scanner reads one statement from a start position.
type scanner struct {
	s      string
	closer rune // the quote or bracket that opened the statement, 0 if none

	stack    []byte // open brackets: ( [ {
	need     bool   // the last token requires more (operator, FROM, AND, ',')
	started  bool   // a token after the first keyword was read
	run      int    // operands in a row at depth 0, with nothing between
	clause   string // the clause at depth 0
	lastTok  int    // end of the last significant token
	lastKind sqltext.Kind
	lastWord string // the last word, upper-cased ("" if the last token was no word)

	// WITH's head: "WITH [RECURSIVE] name [(cols)] AS [NOT] [MATERIALIZED] (…)".
	with int // 0: not in a head; else the step expected (see withStep)
	// A SELECT without FROM whose list names a bare column is prose.
	isSelect, sawFrom bool
	bareInList        bool
	afterAS           bool
	selectItems       int // tokens in the SELECT list at depth 0

	checkpoint int // end of the last complete prefix at a line's end; -1: none
	cases      int // CASE … END open
}

// withStep values.
const (
	withName = iota + 1 // a CTE's name (or RECURSIVE)
	withAfterName
	withAS
	withBody // the body's "(" (or NOT / MATERIALIZED)
	withNext // "," for another CTE or the main query
)

// readStatement reads the statement starting at start (at a SELECT, WITH
// or an opening parenthesis before one). ok is false when the text from
// start is not a statement (prose).
func readStatement(s string, start int) (sp span, ok bool) {
	sc := &scanner{s: s, closer: closerOf(s, start), checkpoint: -1}
	for lx := range sqltext.Lex(s[start:], lexOpt) {
		lx.Start += start
		lx.End += start
		stop, bad := sc.feed(lx)
		if bad {
			return sc.fallback(start)
		}
		if stop >= 0 {
			if !sc.complete() {
				return sc.fallback(start)
			}
			return span{start: start, end: stop}, true
		}
	}
	if sc.complete() {
		return span{start: start, end: sc.lastTok}, true
	}
	// The text ends inside the statement: a cut reply, or prose.
	if sc.checkpoint > start {
		return span{start: start, end: sc.checkpoint}, true
	}
	if sc.started && sc.isOpenAtEnd() {
		return span{start: start, end: len(s), cut: true}, true
	}
	return span{}, false
}

// fallback ends the statement at the last line that completed it, if any:
// what followed on later lines was prose.
func (sc *scanner) fallback(start int) (span, bool) {
	if sc.checkpoint > start {
		return span{start: start, end: sc.checkpoint}, true
	}
	return span{}, false
}

// isOpenAtEnd reports a statement the text ends inside: an open bracket,
// string or comment, or a token that needs more. Only such a statement can
// be a cut one; anything else is prose.
func (sc *scanner) isOpenAtEnd() bool {
	return len(sc.stack) > 0 || sc.need || sc.with != 0 || sc.lastKind == 0
}

// complete reports whether the statement read so far could end here.
func (sc *scanner) complete() bool {
	if !sc.started || sc.need || len(sc.stack) > 0 || sc.with != 0 || sc.cases > 0 {
		return false
	}
	if sc.isSelect && !sc.sawFrom && sc.bareInList {
		return false
	}
	return true
}

// feed reads one lexeme. stop >= 0 ends the statement before that offset;
// bad says the lexeme cannot be part of a query here.
func (sc *scanner) feed(lx sqltext.Lexeme) (stop int, bad bool) {
	s := sc.s
	text := s[lx.Start:lx.End]
	depth := len(sc.stack)
	switch lx.Kind {
	case sqltext.KindSpace:
		if strings.Contains(text, "\n") && sc.complete() {
			sc.checkpoint = sc.lastTok
			// A line after a complete query carries it on only with a
			// clause keyword, an operator or a bracket; a bare word
			// there is the prose after it.
			if !continuesLine(s, lx.End, sc.closer) && !sc.aliasLine(lx.End) {
				return sc.lastTok, false
			}
		}
		return -1, false
	case sqltext.KindComment:
		if lx.Open {
			// "/*" never closed: prose such as "*/" or a cut.
			return -1, !sc.complete()
		}
		return -1, false
	}
	if lx.Open && lx.Kind != sqltext.KindWord {
		// An unterminated quote: the envelope's own quote (a closing one
		// the query is wrapped in) when the query is complete, else a
		// string the text ends inside.
		if sc.complete() {
			return lx.Start, false
		}
		sc.lastKind, sc.need = 0, true
		return -1, false
	}
	if sc.closer != 0 && sc.complete() {
		if r, _ := utf8.DecodeRuneInString(text); r == sc.closer {
			return lx.Start, false
		}
	}
	if sc.started && sc.isDelimiter(lx.Start, depth) {
		return lx.Start, false
	}
	switch lx.Kind {
	case sqltext.KindSemicolon:
		if depth > 0 {
			return -1, true
		}
		return lx.Start, false
	case sqltext.KindOpenParen:
		sc.push('(')
		return -1, false
	case sqltext.KindCloseParen:
		return sc.pop('(', lx)
	case sqltext.KindWord:
		return sc.word(lx)
	case sqltext.KindString, sqltext.KindQuotedIdent:
		return -1, sc.operand(lx, false)
	}
	return sc.other(lx)
}

func (sc *scanner) push(b byte) {
	sc.stack = append(sc.stack, b)
	if sc.with == withBody && b == '(' && len(sc.stack) == 1 {
		sc.with = withNext
	}
	if sc.with == withNext && b == '(' && len(sc.stack) == 1 {
		sc.with, sc.isSelect = 0, false // the main query in parentheses
	}
	if sc.with == withAfterName && b == '(' && len(sc.stack) == 1 {
		sc.with = withAS // the column list: AS follows it
	}
	sc.need, sc.run, sc.started = true, 0, true
	sc.lastWord = ""
}

// pop closes a bracket; one the statement did not open ends it (the
// envelope's: "run_query(SELECT …)").
func (sc *scanner) pop(open byte, lx sqltext.Lexeme) (int, bool) {
	if len(sc.stack) == 0 {
		return lx.Start, false
	}
	if sc.stack[len(sc.stack)-1] != open {
		return -1, true
	}
	sc.stack = sc.stack[:len(sc.stack)-1]
	sc.need = false
	sc.lastTok, sc.lastKind, sc.lastWord = lx.End, sqltext.KindCloseParen, ""
	if len(sc.stack) == 0 {
		sc.run++ // "(…) alias", "COUNT(*) total"
		if sc.run > 2 {
			return -1, true
		}
	}
	return -1, false
}

// operand reads a word used as an identifier, a literal or a quoted name.
func (sc *scanner) operand(lx sqltext.Lexeme, bareWord bool) bool {
	prevWord, prevKind := sc.lastWord, sc.lastKind
	depth0 := len(sc.stack) == 0
	if depth0 && sc.with != 0 {
		if sc.with != withName {
			return true
		}
		sc.with = withAfterName
	} else if depth0 {
		if !sc.need {
			sc.run++
		} else {
			sc.run = 1
		}
		if sc.run > 2 {
			return true
		}
		if sc.run == 2 && strictClauses[sc.clause] {
			// Only a typed literal puts two operands together there
			// (DATE '2020-01-01', TIMESTAMP "…").
			if !(prevKind == sqltext.KindWord && lx.Kind == sqltext.KindString && keywords[prevWord] != kwNeed) {
				return true
			}
		}
		if sc.clause == "SELECT" {
			sc.selectItems++
			if bareWord && sc.run == 1 && !sc.afterAS && !followedBy(sc.s, lx.End, "(.") {
				sc.bareInList = true
			}
		}
	}
	sc.afterAS = false
	sc.need, sc.started = false, true
	sc.lastTok, sc.lastKind, sc.lastWord = lx.End, lx.Kind, ""
	return false
}

func (sc *scanner) word(lx sqltext.Lexeme) (int, bool) {
	s := sc.s
	text := s[lx.Start:lx.End]
	// A word holding a non-ASCII mark (a curly quote, a dash) ends there.
	if k := markIndex(text); k >= 0 {
		if k == 0 {
			if sc.complete() {
				return lx.Start, false
			}
			return -1, true
		}
		lx.End = lx.Start + k
		if _, bad := sc.word(lx); bad {
			return -1, true
		}
		if sc.complete() {
			return lx.End, false
		}
		return -1, true
	}
	up := strings.ToUpper(text)
	if proseWords[strings.ToLower(text)] && !followedBy(s, lx.End, "(.") && sc.lastKindNotDot() {
		return -1, true
	}
	cls, isKW := keywords[up]
	if sc.lastKind == sqltext.KindOther && s[sc.lastTok-1] == '.' {
		cls, isKW = plain, false // t.date, x.end: a name after a dot
	}
	if isKW && followedBy(s, lx.End, "(") && cls != kwClause && up != "IN" && up != "EXISTS" && up != "OVER" &&
		up != "AS" && up != "AND" && up != "OR" && up != "NOT" && up != "FILTER" && up != "WITHIN" && up != "USING" &&
		up != "VALUES" && up != "ANY" && up != "SOME" && up != "ALL" && up != "ON" && up != "PIVOT" && up != "UNPIVOT" &&
		up != "LATERAL" && up != "FROM" && up != "BETWEEN" && up != "THEN" && up != "ELSE" && up != "WHEN" &&
		up != "CASE" && up != "LIKE" && up != "IS" && up != "SAMPLE" && up != "TABLESAMPLE" {
		// LEFT(x, 2), DATE(ts), TIME(…): a function named like a keyword.
		cls, isKW = plain, false
	}
	if len(sc.stack) == 0 && sc.with != 0 {
		return -1, sc.withWord(up, isKW)
	}
	if !sc.started {
		// The statement's first word: SELECT or WITH.
		sc.started = true
		switch up {
		case "SELECT":
			sc.isSelect, sc.clause, sc.need = true, "SELECT", true
		case "WITH":
			sc.with = withName
		default:
			return -1, true
		}
		sc.lastTok, sc.lastKind, sc.lastWord = lx.End, lx.Kind, up
		return -1, false
	}
	if !isKW || cls == plain {
		if sc.operand(lx, !isDigit(text[0])) {
			return -1, true
		}
		sc.lastWord = up
		return -1, false
	}
	if len(sc.stack) == 0 {
		sc.run = 0
		if cls == kwClause || up == "BY" {
			if sc.clause == "SELECT" && sc.selectItems == 0 && up != "SELECT" {
				return -1, true // "select from …": the list is missing
			}
			if up != "BY" {
				sc.clause = up
			}
			if up == "FROM" {
				sc.sawFrom = true
			}
		}
		if up == "AS" && sc.clause == "SELECT" {
			sc.afterAS = true
		}
	}
	switch up {
	case "CASE":
		sc.cases++
	case "END":
		if sc.cases == 0 {
			return -1, true // "End of the query."
		}
		sc.cases--
	case "WHEN", "THEN", "ELSE":
		if sc.cases == 0 && up != "WHEN" {
			return -1, true // "Then we …": a sentence, no CASE is open
		}
	}
	switch cls {
	case kwEnd:
		sc.need = false
		if len(sc.stack) == 0 && sc.clause == "SELECT" {
			sc.selectItems++
		}
	default:
		sc.need = true
	}
	// "GROUP" and "ORDER" need "BY" next; "BY" needs them before.
	if up == "BY" && sc.lastWord != "GROUP" && sc.lastWord != "ORDER" && sc.lastWord != "PARTITION" &&
		sc.lastWord != "CONNECT" && sc.lastWord != "ALL" && sc.lastWord != "NAME" && len(sc.stack) == 0 {
		return -1, true
	}
	if (sc.lastWord == "GROUP" || sc.lastWord == "ORDER") && up != "BY" && len(sc.stack) == 0 {
		return -1, true
	}
	sc.lastTok, sc.lastKind, sc.lastWord = lx.End, lx.Kind, up
	return -1, false
}

// aliasLine reports a line that names the subquery just closed on the
// line before: ")\n  t1\n  JOIN …".
func (sc *scanner) aliasLine(i int) bool {
	if sc.lastKind != sqltext.KindCloseParen || sc.clause != "FROM" && sc.clause != "JOIN" {
		return false
	}
	for i < len(sc.s) && (sc.s[i] == ' ' || sc.s[i] == '\t') {
		i++
	}
	j := i
	for j < len(sc.s) && (isASCIILetter(sc.s[j]) || isDigit(sc.s[j]) || sc.s[j] == '_') {
		j++
	}
	if j == i || proseWords[strings.ToLower(sc.s[i:j])] {
		return false
	}
	_, kw := keywords[strings.ToUpper(sc.s[i:j])]
	if kw || !followedBy(sc.s, j, "\n") || strings.Count(sc.s[sc.lastTok:i], "\n") != 1 {
		return false
	}
	// The alias is on the line right after the ")" and the query goes on
	// after it ("JOIN …"); a word alone between blank lines is a heading.
	k := strings.IndexByte(sc.s[j:], '\n') + j + 1
	return strings.IndexByte(sc.s[k:min(len(sc.s), k+1)], '\n') < 0 && continuesLine(sc.s, k, sc.closer)
}

func (sc *scanner) lastKindNotDot() bool {
	return !(sc.lastKind == sqltext.KindOther && sc.lastTok > 0 && sc.s[sc.lastTok-1] == '.')
}

// withWord advances WITH's head over a word.
func (sc *scanner) withWord(up string, isKW bool) bool {
	switch sc.with {
	case withName:
		if up == "RECURSIVE" {
			return false
		}
		if isKW && keywords[up] != kwEnd {
			return true
		}
		sc.with = withAfterName
		return false
	case withAfterName, withAS:
		if up == "AS" {
			sc.with = withBody
			return false
		}
		return true
	case withBody:
		return up != "NOT" && up != "MATERIALIZED"
	case withNext:
		if up == "SELECT" {
			sc.with, sc.isSelect, sc.clause, sc.need = 0, true, "SELECT", true
			sc.selectItems, sc.bareInList, sc.sawFrom = 0, false, false
			sc.lastWord = "SELECT"
			return false
		}
		return true
	}
	return true
}

// other reads one byte of punctuation.
func (sc *scanner) other(lx sqltext.Lexeme) (int, bool) {
	s := sc.s
	c := s[lx.Start]
	next := byte(0)
	if lx.End < len(s) {
		next = s[lx.End]
	}
	endOfWord := sc.lastTok == lx.Start && (sc.lastKind == sqltext.KindWord || sc.lastKind == sqltext.KindQuotedIdent ||
		sc.lastKind == sqltext.KindCloseParen)
	spaceNext := next == 0 || next == ' ' || next == '\n' || next == '\t'
	depth0 := len(sc.stack) == 0
	if sc.with != 0 && depth0 {
		switch {
		case c == ',' && sc.with == withNext:
			sc.with = withName
			return -1, false
		case c == '[' || c == '{':
		default:
			return -1, true
		}
	}
	switch c {
	case '.':
		if spaceNext && endOfWord {
			// A full stop: the sentence the query ended.
			if sc.complete() {
				return lx.Start, false
			}
			return -1, true
		}
	case ':', '?', '!':
		if spaceNext && endOfWord {
			return -1, true // "Results:", "ok?", "done!": prose
		}
	case '[', '{':
		sc.push(c)
		return -1, false
	case ']':
		return sc.pop('[', lx)
	case '}':
		return sc.pop('{', lx)
	case '*':
		if sc.need {
			// SELECT *, t.*, COUNT(*): an operand here.
			sc.need = false
			if depth0 {
				sc.run = 1
				if sc.clause == "SELECT" {
					sc.selectItems++
				}
			}
			sc.lastTok, sc.lastKind, sc.lastWord = lx.End, lx.Kind, ""
			return -1, false
		}
	}
	if depth0 {
		sc.run = 0
	}
	sc.afterAS = false
	sc.need, sc.started = true, true
	sc.lastTok, sc.lastKind, sc.lastWord = lx.End, lx.Kind, ""
	return -1, false
}

// isDelimiter reports a token at i that no query holds: a fence (three
// backquotes or tildes), a closing markup tag, an opening one outside
// brackets (not a type's "ARRAY<STRING>").
func (sc *scanner) isDelimiter(i, depth int) bool {
	rest := sc.s[i:]
	if !isDelimiter(sc.s, i) {
		return false
	}
	if rest[0] != '<' || rest[1] == '/' {
		return true
	}
	switch sc.lastWord {
	case "ARRAY", "STRUCT", "RANGE", "MAP", "TABLE":
		return false
	}
	return depth == 0
}

// isDelimiter reports a fence or a markup tag at i.
func isDelimiter(s string, i int) bool {
	rest := s[i:]
	if strings.HasPrefix(rest, "```") || strings.HasPrefix(rest, "~~~") {
		return true
	}
	return rest[0] == '<' && tagLen(rest) > 0
}

// tagLen is the length of a markup tag at the start of s ("<answer>",
// "</sql>", `<q id="3">`, "<function=run_query>", "<br/>"), 0 if none.
// Attributes must have values, so "<b AND c>" is no tag.
func tagLen(s string) int {
	i := 1
	if i < len(s) && s[i] == '/' {
		i++
	}
	if i >= len(s) || !isASCIILetter(s[i]) {
		return 0
	}
	for i < len(s) && (isASCIILetter(s[i]) || isDigit(s[i]) || strings.IndexByte("_-:.", s[i]) >= 0) {
		i++
	}
	if i < len(s) && s[i] == '=' {
		// <function=name>, <parameter=query>
		i++
		for i < len(s) && s[i] != '>' && s[i] != '\n' && s[i] != '<' && s[i] != ' ' {
			i++
		}
	}
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			return 0
		}
		switch {
		case s[i] == '>':
			return i + 1
		case s[i] == '/' && i+1 < len(s) && s[i+1] == '>':
			return i + 2
		case isASCIILetter(s[i]) || s[i] == '_' || s[i] == ':' || s[i] == '@':
			// An attribute: name=value, the value quoted or bare.
			for i < len(s) && (isASCIILetter(s[i]) || isDigit(s[i]) || strings.IndexByte("_-:.@", s[i]) >= 0) {
				i++
			}
			if i >= len(s) || s[i] != '=' {
				return 0
			}
			i++
			if i < len(s) && (s[i] == '"' || s[i] == '\'') {
				q := s[i]
				j := strings.IndexByte(s[i+1:], q)
				if j < 0 || strings.Contains(s[i+1:i+1+j], "\n") {
					return 0
				}
				i += j + 2
			} else {
				for i < len(s) && s[i] != ' ' && s[i] != '>' && s[i] != '\n' {
					i++
				}
			}
		default:
			return 0
		}
	}
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool       { return c >= '0' && c <= '9' }

// continuesLine reports whether the text at i (after a line break that
// follows a complete query) carries the query on: its first token is a
// clause keyword, an operator, a bracket or a comment, not a bare word or
// a delimiter.
func continuesLine(s string, i int, closer rune) bool {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
		i++
	}
	if i >= len(s) {
		return false
	}
	if isDelimiter(s, i) {
		return false
	}
	c := s[i]
	if closer != 0 {
		if r, _ := utf8.DecodeRuneInString(s[i:]); r == closer {
			return false
		}
	}
	switch {
	case c == '-' && i+1 < len(s) && s[i+1] == '-', c == '/' && i+1 < len(s) && s[i+1] == '*', c == '#':
		return true // a comment; the line after it decides
	case c == ')' || c == ',' || c == '|' || c == '=' || c == '<' || c == '>' || c == '+' || c == '/' ||
		c == '(' || c == '.' || c == ':' || c == '%' || c == '^':
		return true
	case c == '-' || c == '*':
		// An operator ("- SUM(b)", "-\n(SELECT …)") or markdown (a bullet
		// "- The query…", "**Note**").
		if i+1 < len(s) && s[i+1] == '*' {
			return false // "**Note**"
		}
		return !(i+2 < len(s) && s[i+1] == ' ' && (s[i+2] >= 'A' && s[i+2] <= 'Z' || s[i+2] == '*' || s[i+2] == '['))
	}
	j := i
	for j < len(s) && (isASCIILetter(s[j]) || isDigit(s[j]) || s[j] == '_') {
		j++
	}
	if j == i {
		return false
	}
	up := strings.ToUpper(s[i:j])
	cls, ok := keywords[up]
	if cls == kwEnd && up != "END" && up != "ASC" && up != "DESC" {
		return false // "Next, …", "First, …": a sentence
	}
	return ok && cls != plain && !proseAfter(s, j)
}

// proseAfter reports a keyword that starts a sentence, not a clause: "As
// you can see", "With this query", "Order matters": followed by a prose
// word.
func proseAfter(s string, j int) bool {
	for j < len(s) && s[j] == ' ' {
		j++
	}
	k := j
	for k < len(s) && (isASCIILetter(s[k]) || s[k] == '\'') {
		k++
	}
	return proseWords[strings.ToLower(s[j:k])]
}

// followedBy reports whether the first non-space byte at or after i is
// one of chars.
func followedBy(s string, i int, chars string) bool {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i < len(s) && strings.IndexByte(chars, s[i]) >= 0
}

// markIndex is the offset of the first rune in a word that is neither a
// letter, a digit, '_' nor '$' (a curly quote or a dash glued to a word),
// -1 if none.
func markIndex(w string) int {
	for i, r := range w {
		if r < utf8.RuneSelf {
			continue
		}
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			return i
		}
	}
	return -1
}

// closerOf is the rune that closes the quote or bracket just before start
// on its line (the envelope's: `SELECT 1`, "SELECT 1", “SELECT 1”), 0 if
// none.
func closerOf(s string, start int) rune {
	i := start
	for i > 0 && (s[i-1] == ' ' || s[i-1] == '\t') {
		i--
	}
	if i == 0 {
		return 0
	}
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	switch r {
	case '"', '\'', '`':
		return r
	case '“', '”':
		return '”'
	case '‘', '’':
		return '’'
	case '«':
		return '»'
	}
	return 0
}
