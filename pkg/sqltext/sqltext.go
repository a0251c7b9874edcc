// Package sqltext splits SQL text into statements and classifies them without
// parsing the grammar. It knows where comments, string literals and quoted
// identifiers start and end in each dialect (DialectOptions), which is all
// that splitting on ';', finding a statement's leading keyword and finding
// function calls need. Classify is the read-only guard every warehouse query
// passes.
//
// The reference ReFoRCE code split on every ';', even inside string literals,
// and turned trailing comments into "statements"; both cost LLM correction
// calls. Split here ignores ';' inside quotes and comments and drops
// comment-only fragments.
package sqltext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Options select dialect details of the lexer.
//
// Set Dialect to apply one engine's complete lexical rules (its string and
// identifier quotes, comments and identifier characters); the two flags are
// then ignored. Without a Dialect the flags describe a generic lexer, kept for
// callers that build Options themselves.
type Options struct {
	// BackslashEscapes: a backslash escapes the next character inside string
	// literals (BigQuery, Snowflake); SQLite has no such escape. It also makes
	// '#' start a line comment (BigQuery).
	BackslashEscapes bool
	// DollarStrings: $$...$$ is a string literal (Snowflake).
	DollarStrings bool
	// Dialect selects the full rules of one engine; see DialectOptions.
	Dialect Dialect
}

// Dialect names a SQL engine family: the one dialect type of quorum
// (warehouse.Dialect is this type), kept in this leaf package so that what
// only names a dialect (a dataset's examples) need not import the warehouses.
type Dialect string

// The dialects Spider 2.0 uses, which the lexer and the classifier know.
const (
	SQLite    Dialect = "sqlite"
	Snowflake Dialect = "snowflake"
	BigQuery  Dialect = "bigquery"
)

// ParseDialect accepts a dialect name in any case.
func ParseDialect(s string) (Dialect, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "sqlite", "sqlite3":
		return SQLite, nil
	case "snowflake", "sf":
		return Snowflake, nil
	case "bigquery", "bq":
		return BigQuery, nil
	}
	return "", fmt.Errorf("unknown dialect %q: use sqlite, snowflake or bigquery", s)
}

// LexOptions are the options for d's quotes, comments and identifiers
// (DialectOptions).
func (d Dialect) LexOptions() Options { return DialectOptions(d) }

// Known reports whether d is one of the dialects above.
func (d Dialect) Known() bool { return d == SQLite || d == Snowflake || d == BigQuery }

// DialectOptions are the options that apply d's full lexical rules:
//
//   - SQLite: single-quoted strings (a doubled quote escapes a quote);
//     double-quoted, backquoted and [bracketed] identifiers; -- and /* */
//     comments (not nested).
//   - Snowflake: single-quoted strings with backslash escapes and doubled
//     quotes; $$...$$ strings; double-quoted identifiers; --, // and /* */
//     comments; '$' inside identifiers (SYSTEM$TYPEOF).
//   - BigQuery: single- and double-quoted strings with backslash escapes,
//     triple-quoted strings (three single or three double quotes), r/b/rb
//     prefixes; backquoted identifiers; --, # and /* */ comments.
func DialectOptions(d Dialect) Options {
	switch d {
	case BigQuery:
		return Options{BackslashEscapes: true, Dialect: d}
	case Snowflake:
		return Options{BackslashEscapes: true, DollarStrings: true, Dialect: d}
	case SQLite:
		return Options{Dialect: d}
	}
	return Options{}
}

// quoteRule is how one quote character lexes.
type quoteRule struct {
	kind      tokenKind // tokString or tokQuotedIdent; 0: not a quote
	backslash bool      // a backslash escapes the next character
	doubling  bool      // a doubled quote stands for the quote
}

// rules are the lexical rules the lexer applies.
type rules struct {
	quotes       [256]quoteRule
	brackets     bool // [...] identifiers (SQLite)
	dollar       bool // $$...$$ strings (Snowflake)
	hash         bool // # line comments (BigQuery)
	slashSlash   bool // // line comments (Snowflake)
	triple       bool // '''...''' and """...""" strings, r/b prefixes (BigQuery)
	dollarInWord bool // '$' continues an identifier (Snowflake, SQLite)
	// strict marks text whose reading differs between engines or versions:
	// a bare '\r' in a line comment (SQLite ends the comment only at '\n',
	// BigQuery also at '\r'), "/*" inside a block comment (an engine that
	// nests would end it later), "$$" touching a name (Snowflake: part of
	// the name, or a $$ string after a number?).
	strict bool
}

func (opt Options) rules() *rules {
	r := &rules{}
	str, ident := tokString, tokQuotedIdent
	switch opt.Dialect {
	case SQLite:
		r.quotes['\''] = quoteRule{str, false, true}
		r.quotes['"'] = quoteRule{ident, false, true}
		r.quotes['`'] = quoteRule{ident, false, true}
		r.brackets, r.dollarInWord, r.strict = true, true, true
	case Snowflake:
		r.quotes['\''] = quoteRule{str, true, true}
		r.quotes['"'] = quoteRule{ident, false, true}
		r.dollar, r.slashSlash, r.dollarInWord, r.strict = true, true, true, true
	case BigQuery:
		r.quotes['\''] = quoteRule{str, true, false}
		r.quotes['"'] = quoteRule{str, true, false}
		r.quotes['`'] = quoteRule{ident, true, false}
		r.hash, r.triple, r.strict = true, true, true
	default:
		r.quotes['\''] = quoteRule{str, opt.BackslashEscapes, true}
		r.quotes['"'] = quoteRule{ident, opt.BackslashEscapes, true}
		r.quotes['`'] = quoteRule{ident, false, true}
		r.dollar, r.hash = opt.DollarStrings, opt.BackslashEscapes
	}
	return r
}

// tokenKind is what the lexer found at a position.
type tokenKind uint8

const (
	tokWord tokenKind = iota + 1
	tokString
	tokQuotedIdent
	tokComment
	tokSemicolon
	tokOpenParen
	tokCloseParen
	tokOther
	tokSpace
)

type token struct {
	kind       tokenKind
	start, end int
	// open: a string, quoted identifier or block comment that the text
	// ends inside.
	open bool
	// ambiguous says why engines may read this token differently (only
	// with a Dialect).
	ambiguous string
}

// lexer walks SQL text one token at a time, so that a caller keeps only
// the tokens it needs (the classifier's memory is linear in what it
// keeps, not in every space and comment).
type lexer struct {
	s string
	r *rules
	i int
}

func newLexer(s string, opt Options) *lexer { return &lexer{s: s, r: opt.rules()} }

// all yields the tokens of the text in order.
func (l *lexer) all(yield func(token) bool) {
	for {
		t, ok := l.next()
		if !ok || !yield(t) {
			return
		}
	}
}

// lex returns every token of s. An unterminated literal or comment runs to
// the end of the text, as the engines would report it, and is marked open.
func lex(s string, opt Options) []token {
	var toks []token
	for t := range newLexer(s, opt).all {
		toks = append(toks, t)
	}
	return toks
}

// next returns the token at the lexer's position and moves past it; ok is
// false at the end of the text.
func (l *lexer) next() (t token, ok bool) {
	s, r := l.s, l.r
	if l.i >= len(s) {
		return token{}, false
	}
	start := l.i
	c := s[start]
	switch {
	case c == '-' && start+1 < len(s) && s[start+1] == '-',
		c == '#' && r.hash,
		c == '/' && r.slashSlash && start+1 < len(s) && s[start+1] == '/':
		return l.lineComment(start), true
	case c == '/' && start+1 < len(s) && s[start+1] == '*':
		j := strings.Index(s[start+2:], "*/")
		open := j < 0
		if open {
			l.i = len(s)
		} else {
			l.i = start + 2 + j + 2
		}
		t = token{kind: tokComment, start: start, end: l.i, open: open}
		if r.strict && strings.Contains(s[start+2:l.i], "/*") {
			t.ambiguous = "a block comment holds /*, which an engine that nests comments reads differently"
		}
		return t, true
	case r.quotes[c].kind != 0:
		q := r.quotes[c]
		end, open := endOfLiteral(s, start, c, q, r.triple)
		l.i = end
		return token{kind: q.kind, start: start, end: end, open: open}, true
	case c == '[' && r.brackets:
		return l.closedBy(start, 1, "]", tokQuotedIdent), true
	case c == '$' && r.dollar && start+1 < len(s) && s[start+1] == '$':
		return l.closedBy(start, 2, "$$", tokString), true
	case c == ';':
		return l.single(tokSemicolon), true
	case c == '(':
		return l.single(tokOpenParen), true
	case c == ')':
		return l.single(tokCloseParen), true
	case isSpace(c):
		l.i++
		for l.i < len(s) && isSpace(s[l.i]) {
			l.i++
		}
		return token{kind: tokSpace, start: start, end: l.i}, true
	case isWordByte(c):
		return l.word(start), true
	}
	return l.single(tokOther), true
}

// single is the one-byte token at the lexer's position.
func (l *lexer) single(k tokenKind) token {
	l.i++
	return token{kind: k, start: l.i - 1, end: l.i}
}

// closedBy is the token from start, whose opening is skip bytes long,
// to the first close after the opening (a [bracketed] identifier, a $$
// string), open when none follows.
func (l *lexer) closedBy(start, skip int, close string, k tokenKind) token {
	from := start + skip
	j := strings.Index(l.s[from:], close)
	open := j < 0
	if open {
		l.i = len(l.s)
	} else {
		l.i = from + j + len(close)
	}
	return token{kind: k, start: start, end: l.i, open: open}
}

// lineComment is the comment from start to the end of its line.
func (l *lexer) lineComment(start int) token {
	s := l.s
	end := strings.IndexByte(s[start:], '\n')
	if end < 0 {
		end = len(s)
	} else {
		end += start
	}
	l.i = end
	t := token{kind: tokComment, start: start, end: end}
	if l.r.strict && loneCR(s[start:end], end < len(s)) {
		t.ambiguous = "a line comment holds a carriage return without a line feed, which engines read differently"
	}
	return t
}

// loneCR reports whether a line comment holds a '\r' that is not the '\r'
// of the "\r\n" ending it (lf: a '\n' follows the comment).
func loneCR(comment string, lf bool) bool {
	for {
		k := strings.IndexByte(comment, '\r')
		if k < 0 {
			return false
		}
		if k < len(comment)-1 || !lf {
			return true
		}
		comment = comment[k+1:]
	}
}

// word is the bare word (or BigQuery prefixed literal) from start.
func (l *lexer) word(start int) token {
	s, r := l.s, l.r
	i := start
	for i < len(s) && (isWordByte(s[i]) || (r.dollarInWord && s[i] == '$')) {
		i++
	}
	if r.triple && i < len(s) && (s[i] == '\'' || s[i] == '"') && isStringPrefix(s[start:i]) {
		// r'...', b"...", rb'''...''': a BigQuery raw or bytes literal.
		end, open := endOfLiteral(s, i, s[i], r.quotes[s[i]], true)
		l.i = end
		return token{kind: tokString, start: start, end: end, open: open}
	}
	l.i = i
	t := token{kind: tokWord, start: start, end: i}
	if r.strict && r.dollar && strings.Contains(s[start:i], "$$") {
		t.ambiguous = "$$ touches a name or number, which could also start a $$ string"
	}
	return t
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 0x80 || unicode.IsLetter(rune(c)) || unicode.IsDigit(rune(c))
}

// isStringPrefix reports whether w is a BigQuery literal prefix: r, b, rb or
// br in any case.
func isStringPrefix(w string) bool {
	switch strings.ToLower(w) {
	case "r", "b", "rb", "br":
		return true
	}
	return false
}

// endOfLiteral returns the index just past the literal opened by quote at i,
// and whether the text ends inside it. With triple, three quotes open a
// literal that only three quotes close.
func endOfLiteral(s string, i int, quote byte, q quoteRule, triple bool) (int, bool) {
	if triple && i+2 < len(s) && s[i+1] == quote && s[i+2] == quote {
		for j := i + 3; j < len(s); {
			switch {
			case q.backslash && s[j] == '\\':
				j += 2
			case s[j] == quote && j+2 < len(s) && s[j+1] == quote && s[j+2] == quote:
				return j + 3, false
			default:
				j++
			}
		}
		return len(s), true
	}
	i++
	for i < len(s) {
		switch {
		case q.backslash && s[i] == '\\':
			i += 2
		case s[i] == quote:
			if q.doubling && i+1 < len(s) && s[i+1] == quote {
				i += 2
				continue
			}
			return i + 1, false
		default:
			i++
		}
	}
	return len(s), true
}

// Split returns the statements in s, each trimmed, without the separating
// semicolons. Fragments that hold only comments and space are dropped; a
// comment that precedes a statement stays with it (exploration queries carry
// their "--Description:" that way).
func Split(s string, opt Options) []string {
	var out []string
	begin := 0
	hasCode := false
	flush := func(end int) {
		if hasCode {
			out = append(out, strings.TrimSpace(s[begin:end]))
		}
		hasCode = false
	}
	for t := range newLexer(s, opt).all {
		switch t.kind {
		case tokSemicolon:
			flush(t.start)
			begin = t.end
		case tokComment, tokSpace:
		default:
			hasCode = true
		}
	}
	flush(len(s))
	return out
}

// Statement describes one statement found by Inspect.
type Statement struct {
	// Text is the statement with surrounding space, trailing semicolons and
	// trailing comments removed.
	Text string
	// Keyword is the first keyword, upper-cased (SELECT, WITH, INSERT...).
	Keyword string
	// Writes lists the write or DDL keywords found outside parentheses after
	// the first keyword, e.g. the INSERT of "WITH x AS (...) INSERT ...".
	Writes []string
}

// writeKeywords are statement-starting keywords that change data, schema or
// session state.
var writeKeywords = map[string]bool{
	"INSERT": true, "UPDATE": true, "DELETE": true, "MERGE": true, "REPLACE": true,
	"UPSERT": true, "CREATE": true, "DROP": true, "ALTER": true, "TRUNCATE": true,
	"GRANT": true, "REVOKE": true, "ATTACH": true, "DETACH": true, "PRAGMA": true,
	"VACUUM": true, "REINDEX": true, "ANALYZE": true, "COPY": true, "PUT": true,
	"REMOVE": true, "CALL": true, "EXECUTE": true, "USE": true, "SET": true,
	"UNSET": true, "BEGIN": true, "COMMIT": true, "ROLLBACK": true, "DECLARE": true,
	"EXPORT": true, "LOAD": true, "UNDROP": true,
}

// Inspect returns the statements of s with their leading keyword. The
// caller decides what to allow; the read-only guard is Classify.
func Inspect(s string, opt Options) []Statement {
	var out []Statement
	for _, text := range Split(s, opt) {
		out = append(out, inspectOne(text, opt))
	}
	return out
}

func inspectOne(text string, opt Options) Statement {
	st := Statement{}
	depth := 0
	lastCode := 0
	for t := range newLexer(text, opt).all {
		switch t.kind {
		case tokComment, tokSpace:
			continue
		case tokOpenParen:
			if st.Keyword == "" {
				// "(SELECT ...)" keeps looking for the first keyword.
				lastCode = t.end
				continue
			}
			depth++
		case tokCloseParen:
			if depth > 0 {
				depth--
			}
		case tokWord:
			w := strings.ToUpper(text[t.start:t.end])
			if st.Keyword == "" {
				st.Keyword = w
			} else if depth == 0 && writeKeywords[w] {
				st.Writes = append(st.Writes, w)
			}
		}
		lastCode = t.end
	}
	st.Text = strings.TrimSpace(text[:lastCode])
	return st
}

// Word is one bare word of SQL text (keyword, identifier or number), outside
// strings, quoted identifiers and comments.
type Word struct {
	Text       string
	Start, End int
}

// Words returns the bare words of s in order.
func Words(s string, opt Options) []Word {
	var out []Word
	for t := range newLexer(s, opt).all {
		if t.kind == tokWord {
			out = append(out, Word{Text: s[t.start:t.end], Start: t.start, End: t.end})
		}
	}
	return out
}

// ReplaceWord returns s with word w replaced by repl.
func ReplaceWord(s string, w Word, repl string) string {
	return s[:w.Start] + repl + s[w.End:]
}

// CTE is one common table expression of a WITH query.
type CTE struct {
	Name string
	// Text is "name [(cols)] AS (body)" as written.
	Text string
}

// WithQuery is a statement split into its CTEs and its final query.
type WithQuery struct {
	// Prefix is "WITH" or "WITH RECURSIVE" as written.
	Prefix string
	CTEs   []CTE
	Main   string
}

// SplitCTEs splits a WITH statement into its CTEs and final query; ok is
// false when s is not a WITH statement the lexer can follow.
func SplitCTEs(s string, opt Options) (WithQuery, bool) {
	var q WithQuery
	toks := lex(s, opt)
	i := 0
	next := func() (token, bool) {
		for i < len(toks) && (toks[i].kind == tokSpace || toks[i].kind == tokComment) {
			i++
		}
		if i >= len(toks) {
			return token{}, false
		}
		t := toks[i]
		i++
		return t, true
	}
	word := func(t token) string { return strings.ToUpper(s[t.start:t.end]) }
	// closeParen consumes tokens through the parenthesis matching one just
	// read and returns where it ends.
	closeParen := func() (int, bool) {
		for depth := 1; ; {
			t, ok := next()
			if !ok {
				return 0, false
			}
			switch t.kind {
			case tokOpenParen:
				depth++
			case tokCloseParen:
				if depth--; depth == 0 {
					return t.end, true
				}
			}
		}
	}
	t, ok := next()
	if !ok || t.kind != tokWord || word(t) != "WITH" {
		return q, false
	}
	prefixEnd := t.end
	save := i
	if t2, ok := next(); ok && t2.kind == tokWord && word(t2) == "RECURSIVE" {
		prefixEnd = t2.end
	} else {
		i = save
	}
	q.Prefix = s[toks[0].start:prefixEnd]
	if toks[0].kind == tokSpace || toks[0].kind == tokComment {
		q.Prefix = strings.TrimSpace(s[:prefixEnd])
	}
	for {
		nameTok, ok := next()
		if !ok || (nameTok.kind != tokWord && nameTok.kind != tokQuotedIdent) {
			return q, false
		}
		name := s[nameTok.start:nameTok.end]
		t, ok := next()
		if ok && t.kind == tokOpenParen { // column list
			if _, ok = closeParen(); !ok {
				return q, false
			}
			t, ok = next()
		}
		if !ok || t.kind != tokWord || word(t) != "AS" {
			return q, false
		}
		t, ok = next()
		for ok && t.kind == tokWord && (word(t) == "MATERIALIZED" || word(t) == "NOT") {
			t, ok = next()
		}
		if !ok || t.kind != tokOpenParen {
			return q, false
		}
		end, ok := closeParen()
		if !ok {
			return q, false
		}
		q.CTEs = append(q.CTEs, CTE{Name: strings.Trim(name, "\"`"), Text: s[nameTok.start:end]})
		save := i
		t, ok = next()
		if ok && t.kind == tokOther && s[t.start:t.end] == "," {
			continue
		}
		i = save
		rest := ""
		if i < len(toks) {
			rest = s[toks[i].start:]
		}
		q.Main = strings.TrimSpace(rest)
		return q, q.Main != ""
	}
}

// PrefixQuery returns the query that runs the first n CTEs and selects from the
// n-th: how CTE-based refinement inspects intermediate results.
func (q WithQuery) PrefixQuery(n int, limit int) string {
	parts := make([]string, n)
	for i := 0; i < n; i++ {
		parts[i] = q.CTEs[i].Text
	}
	name := q.CTEs[n-1].Name
	return q.Prefix + " " + strings.Join(parts, ",\n") + "\nSELECT * FROM \"" + strings.ReplaceAll(name, `"`, `""`) + "\" LIMIT " + strconv.Itoa(limit)
}

// Token is one significant token of SQL text: comments and space are left
// out, bare words are lower-cased (SQL keywords and unquoted identifiers
// are case-insensitive), literals and quoted identifiers kept as written.
// Depth counts the parentheses it sits in.
type Token struct {
	Text  string
	Word  bool
	Depth int
}

// Tokens returns the significant tokens of s.
func Tokens(s string, opt Options) []Token {
	var out []Token
	depth := 0
	for t := range newLexer(s, opt).all {
		text := s[t.start:t.end]
		switch t.kind {
		case tokComment, tokSpace:
			continue
		case tokCloseParen:
			depth = max(0, depth-1)
		}
		tok := Token{Text: text, Depth: depth}
		if t.kind == tokWord {
			tok.Text, tok.Word = strings.ToLower(text), true
		}
		out = append(out, tok)
		if t.kind == tokOpenParen {
			depth++
		}
	}
	return out
}

// Normalize is a statement's identity: its significant tokens (Tokens)
// joined by one space, so that two writings of one query compare equal
// whatever their spacing, line endings, comments, keyword case or
// trailing semicolons. Literals and quoted identifiers keep their case.
func Normalize(s string, opt Options) string {
	toks := Tokens(s, opt)
	for len(toks) > 0 && toks[len(toks)-1].Text == ";" {
		toks = toks[:len(toks)-1]
	}
	var b strings.Builder
	for i, t := range toks {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.Text)
	}
	return b.String()
}

// Kind is what a Lexeme is.
type Kind uint8

// The kinds of lexemes.
const (
	KindWord        = Kind(tokWord)        // a keyword, identifier or number
	KindString      = Kind(tokString)      // a string literal
	KindQuotedIdent = Kind(tokQuotedIdent) // "x", `x` or [x]
	KindComment     = Kind(tokComment)
	KindSemicolon   = Kind(tokSemicolon)
	KindOpenParen   = Kind(tokOpenParen)
	KindCloseParen  = Kind(tokCloseParen)
	KindOther       = Kind(tokOther) // one byte of punctuation or an operator
	KindSpace       = Kind(tokSpace)
)

// Lexeme is one token of SQL text, space and comments included, as byte
// offsets into the text. Open marks a string, quoted identifier or block
// comment the text ends inside.
type Lexeme struct {
	Kind       Kind
	Start, End int
	Open       bool
}

// Lex yields the lexemes of s in order, lazily: a reader that stops early
// (at the end of a statement inside a longer text) lexes no further.
func Lex(s string, opt Options) func(yield func(Lexeme) bool) {
	return func(yield func(Lexeme) bool) {
		for t := range newLexer(s, opt).all {
			if !yield(Lexeme{Kind: Kind(t.kind), Start: t.start, End: t.end, Open: t.open}) {
				return
			}
		}
	}
}
