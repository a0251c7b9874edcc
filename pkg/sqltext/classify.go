package sqltext

import (
	"fmt"
	"iter"
	"strings"
	"unicode/utf8"
)

// Verdict is the read-only classifier's decision about one SQL text.
type Verdict struct {
	// Allowed: the text may run on a read-only connection.
	Allowed bool
	// Reason says why the text was refused, naming the statement or the
	// function; for admitted text it says what was admitted.
	Reason string
	// Statements counts the statements found (comment-only fragments do
	// not count).
	Statements int
	// Script: admitted as a BigQuery script (several statements, or a lone
	// DECLARE, SET or CREATE TEMP FUNCTION).
	Script bool
	// Text is what to send to the engine: from the first statement to the
	// end of the last one's code, without trailing semicolons and comments.
	// Empty when refused.
	Text string
}

// MaxSQLBytes bounds the SQL text Classify reads; longer text is refused
// before it is lexed. The longest Spider 2.0 gold query is under 7 KB and
// quorum serve takes 64 KiB of SQL to rerun: a megabyte is far beyond any
// real query, yet model-written SQL reaches the guard uncapped, and this
// bounds what one text costs it (about 12 bytes of memory per byte).
const MaxSQLBytes = 1 << 20

// MaxNesting bounds how deep parentheses may nest. Real queries nest a
// dozen levels (the gold SQL at most 11); the engines' parsers recurse per
// level, and a million levels is only an attack on them.
const MaxNesting = 1000

// Policy is what the read-only guard admits beyond its fixed rules. The
// zero Policy is the strict one Classify applies.
type Policy struct {
	// AllowHistory admits queries of the engines' query history and
	// account usage: Snowflake's SNOWFLAKE.ACCOUNT_USAGE and the other
	// *_USAGE schemas, the INFORMATION_SCHEMA QUERY_HISTORY, LOGIN_HISTORY,
	// ACCESS_HISTORY and TASK_HISTORY views and functions, RESULT_SCAN and
	// LAST_QUERY_ID; BigQuery's INFORMATION_SCHEMA.JOBS* views. Off by
	// default: where tenants share a warehouse identity, these show one
	// tenant another's SQL and results.
	AllowHistory bool
}

// Classify decides whether sql is a read-only request in dialect d under
// the strict Policy (see Policy.Classify).
func Classify(sql string, d Dialect) Verdict { return Policy{}.Classify(sql, d) }

// Classify decides whether sql is a read-only request in dialect d. It
// admits exactly one statement whose first keyword is SELECT, WITH or VALUES
// (after any opening parentheses), with comments and a trailing semicolon;
// in BigQuery also a script made only of DECLARE, SET of a script variable,
// CREATE TEMP FUNCTION and such queries. It refuses everything else: other
// statements, a WITH whose final statement is not a query, a second
// statement (Snowflake's ->> chaining included), unterminated literals or
// comments, and calls of functions with side effects (SQLite
// load_extension and the file functions, Snowflake SYSTEM$ functions other
// than a few read-only ones, BigQuery EXTERNAL_QUERY), as well as EXECUTE
// IMMEDIATE anywhere; and, unless p allows them, reads of query history
// (Policy.AllowHistory). Text over MaxSQLBytes, or nested deeper than
// MaxNesting, is refused unread.
//
// The tokenizer follows each engine's quoting and comments (DialectOptions),
// so a ';' or a keyword inside a string, a quoted identifier or a comment
// counts for nothing, and words such as begin, call, copy, load, replace or
// use are identifiers unless they start a statement.
func (p Policy) Classify(sql string, d Dialect) Verdict {
	if len(sql) > MaxSQLBytes {
		return refusedf(0, "the SQL text is %d bytes, over the limit of %d bytes", len(sql), MaxSQLBytes)
	}
	return classify(sql, d, p)
}

// classify is Classify without the size limit.
func classify(sql string, d Dialect, p Policy) Verdict {
	c := classifier{sql: sql, d: d, policy: p}
	return c.run()
}

type classifier struct {
	sql    string
	d      Dialect
	policy Policy
}

// tok is a significant token as the classifier keeps it: 12 bytes, so a
// text's tokens cost at most 12 bytes per byte of text (the input is at
// most MaxSQLBytes, far below int32's range).
type tok struct {
	start, end int32
	kind       tokenKind
}

// stmt is one statement: its significant tokens (no space, no comments)
// and where its fragment begins (just after the previous semicolon).
type stmt struct {
	toks  []tok
	begin int
}

// statement kinds.
type kind int

const (
	kindQuery kind = iota + 1
	kindDeclare
	kindSet
	kindTempFunction
	kindOther
)

func refusedf(n int, format string, args ...any) Verdict {
	return Verdict{Statements: n, Reason: fmt.Sprintf(format, args...)}
}

func (c *classifier) run() Verdict {
	if !c.d.Known() {
		return refusedf(0, "unknown dialect %q", string(c.d))
	}
	if strings.IndexByte(c.sql, 0) >= 0 {
		return refusedf(0, "the text contains a NUL byte")
	}
	toks, why := c.tokens()
	if why != "" {
		return refusedf(0, "%s", why)
	}
	sv := c.survey(toks)
	n := sv.n
	switch {
	case n == 0:
		return refusedf(0, "the SQL text is empty")
	case n == 1 && sv.why != "":
		return refusedf(n, "%s", sv.why)
	case n > 1 && c.d != BigQuery:
		return refusedf(n, "found %d statements (%s); only one may run", n, strings.Join(labelList(sv.labels, n), ", "))
	case n > 1 && sv.other > 0:
		return refusedf(n, "found %d statements, and statement %d (%s) may not run in a BigQuery script: %s; a script may hold only DECLARE, SET of a variable, CREATE TEMP FUNCTION and SELECT/WITH queries",
			n, sv.other, sv.otherLabel, sv.otherWhy)
	}
	for st := range statements(toks) {
		if why := c.calls(st.toks); why != "" {
			return refusedf(n, "%s", why)
		}
	}
	v := Verdict{Allowed: true, Statements: n, Script: n > 1 || sv.first != kindQuery,
		Text: strings.Trim(c.sql[sv.begin:sv.end], spaceBytes)}
	if n == 1 {
		v.Reason = "one " + sv.labels[0] + " statement"
		if sv.first == kindQuery {
			v.Reason = "one " + sv.labels[0] + " query"
		}
	} else {
		v.Reason = fmt.Sprintf("a BigQuery script of %d statements (%s)", n, strings.Join(labelList(sv.labels, n), ", "))
	}
	return v
}

// calls returns why a statement may not run for what it calls or reads:
// a second statement chained to it, a function with side effects, query
// history the policy does not allow; or "".
func (c *classifier) calls(toks []tok) string {
	if why := c.chained(toks); why != "" {
		return why
	}
	if why := c.sideEffects(toks); why != "" {
		return why
	}
	if c.policy.AllowHistory {
		return ""
	}
	return c.history(toks)
}

// tokens returns the text's significant tokens (no space, no comments) in
// a slice of exactly their number, lexing twice rather than growing it,
// or why the text is refused: an unterminated literal or comment, text
// engines read differently, parentheses nested deeper than MaxNesting.
func (c *classifier) tokens() ([]tok, string) {
	opt := DialectOptions(c.d)
	n, depth := 0, 0
	for t := range newLexer(c.sql, opt).all {
		switch {
		case t.open:
			return nil, fmt.Sprintf("unterminated %s starting with %s", describe(t.kind), clip(c.sql[t.start:t.end]))
		case t.ambiguous != "":
			return nil, fmt.Sprintf("%s (at %s)", t.ambiguous, clip(c.sql[t.start:t.end]))
		case t.kind == tokSpace || t.kind == tokComment:
			continue
		case t.kind == tokOpenParen:
			if depth++; depth > MaxNesting {
				return nil, fmt.Sprintf("parentheses nest deeper than %d levels (at byte %d)", MaxNesting, t.start)
			}
		case t.kind == tokCloseParen:
			depth = max(0, depth-1)
		}
		n++
	}
	toks := make([]tok, 0, n)
	for t := range newLexer(c.sql, opt).all {
		if t.kind != tokSpace && t.kind != tokComment {
			toks = append(toks, tok{start: int32(t.start), end: int32(t.end), kind: t.kind})
		}
	}
	return toks, ""
}

// statements yields the statements of toks, split at every ';', empty
// ones dropped; each is a window on toks, not a copy.
func statements(toks []tok) iter.Seq[stmt] {
	return func(yield func(stmt) bool) {
		from, begin := 0, 0
		for i, t := range toks {
			if t.kind != tokSemicolon {
				continue
			}
			if i > from && !yield(stmt{toks: toks[from:i], begin: begin}) {
				return
			}
			from, begin = i+1, int(t.end)
		}
		if from < len(toks) {
			yield(stmt{toks: toks[from:], begin: begin})
		}
	}
}

// maxLabels is how many statements a message names.
const maxLabels = 6

// survey is what the statements of a text are, as the verdict needs it.
type survey struct {
	n int
	// first is the first statement's kind, why why it may not run.
	first kind
	why   string
	// labels name the first maxLabels statements.
	labels []string
	// other numbers (from 1) the first statement a BigQuery script may
	// not hold, 0 for none.
	other                int
	otherLabel, otherWhy string
	// begin and end bound the text to run.
	begin, end int
}

func (c *classifier) survey(toks []tok) survey {
	var sv survey
	for st := range statements(toks) {
		sv.n++
		sv.end = int(st.toks[len(st.toks)-1].end)
		if sv.n > maxLabels && (c.d != BigQuery || sv.other > 0) {
			// The verdict names no further statement: counted only, so
			// that many statements cost no message each.
			continue
		}
		k, label, why := c.statement(st.toks)
		if sv.n == 1 {
			sv.first, sv.why, sv.begin = k, why, st.begin
		}
		if sv.n <= maxLabels {
			sv.labels = append(sv.labels, label)
		}
		if k == kindOther && sv.other == 0 {
			sv.other, sv.otherLabel, sv.otherWhy = sv.n, label, why
		}
	}
	return sv
}

func describe(k tokenKind) string {
	switch k {
	case tokString:
		return "string literal"
	case tokQuotedIdent:
		return "quoted identifier"
	case tokComment:
		return "comment"
	}
	return "token"
}

func clip(s string) string {
	if len(s) > 12 {
		s = s[:12] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// labelList is the labels of a message naming n statements, the first
// maxLabels of which labels names.
func labelList(labels []string, n int) []string {
	if n <= len(labels) {
		return labels
	}
	return append(append([]string{}, labels...), fmt.Sprintf("and %d more", n-len(labels)))
}

func (c *classifier) text(t tok) string { return c.sql[t.start:t.end] }

func (c *classifier) isWord(toks []tok, i int, words ...string) bool {
	if i >= len(toks) || toks[i].kind != tokWord {
		return false
	}
	w := c.text(toks[i])
	for _, x := range words {
		if strings.EqualFold(w, x) {
			return true
		}
	}
	return false
}

func (c *classifier) isOther(toks []tok, i int, s string) bool {
	return i < len(toks) && toks[i].kind == tokOther && c.text(toks[i]) == s
}

// closeParen returns the index of the parenthesis that closes the one at
// toks[i], or -1.
func closeParen(toks []tok, i int) int {
	depth := 0
	for j := i; j < len(toks); j++ {
		switch toks[j].kind {
		case tokOpenParen:
			depth++
		case tokCloseParen:
			if depth--; depth == 0 {
				return j
			}
		}
	}
	return -1
}

// statement classifies one statement and returns its kind, a label naming
// it (SELECT, WITH, DELETE, CREATE TABLE...) and, when it may not run, why.
func (c *classifier) statement(toks []tok) (kind, string, string) {
	i := 0
	for i < len(toks) && toks[i].kind == tokOpenParen {
		i++
	}
	if i >= len(toks) {
		return kindOther, "()", "the statement has no keyword"
	}
	if toks[i].kind != tokWord {
		return kindOther, clip(c.text(toks[i])), fmt.Sprintf("the statement starts with %s, not a keyword", clip(c.text(toks[i])))
	}
	// The read keywords first, matched without an upper-case copy: a
	// script of many statements allocates nothing for its queries.
	switch w := c.text(toks[i]); {
	case strings.EqualFold(w, "SELECT"):
		return kindQuery, "SELECT", ""
	case strings.EqualFold(w, "VALUES"):
		return kindQuery, "VALUES", ""
	case strings.EqualFold(w, "WITH"):
		return c.with(toks, i)
	}
	kw := strings.ToUpper(c.text(toks[i]))
	label := c.label(toks, i)
	notRead := func() (kind, string, string) {
		return kindOther, label, label + " is not a read statement"
	}
	if c.d != BigQuery || i > 0 {
		return notRead()
	}
	switch kw {
	case "DECLARE":
		return kindDeclare, kw, ""
	case "SET":
		switch {
		case c.isOther(toks, 1, "@"):
			return kindOther, "SET @@", "SET of a system variable (@@...) is not allowed; only SET of a script variable may run"
		case len(toks) > 1 && (toks[1].kind == tokWord || toks[1].kind == tokQuotedIdent || toks[1].kind == tokOpenParen):
			return kindSet, kw, ""
		}
		return notRead()
	case "CREATE":
		j := 1
		if c.isWord(toks, j, "OR") && c.isWord(toks, j+1, "REPLACE") {
			j += 2
		}
		if c.isWord(toks, j, "TEMP", "TEMPORARY") {
			j++
			if c.isWord(toks, j, "AGGREGATE") {
				j++
			}
			if c.isWord(toks, j, "FUNCTION") {
				return kindTempFunction, "CREATE TEMP FUNCTION", ""
			}
		}
	}
	return notRead()
}

// createModifiers may stand between CREATE/DROP/ALTER and the object type.
var createModifiers = map[string]bool{
	"OR": true, "REPLACE": true, "TEMP": true, "TEMPORARY": true, "TRANSIENT": true,
	"VOLATILE": true, "LOCAL": true, "GLOBAL": true, "SECURE": true, "UNIQUE": true,
	"VIRTUAL": true, "EXTERNAL": true, "MATERIALIZED": true, "RECURSIVE": true,
	"AGGREGATE": true, "IF": true, "NOT": true, "EXISTS": true, "SNAPSHOT": true,
	"DYNAMIC": true, "HYBRID": true, "ICEBERG": true, "EVENT": true,
}

// label names the statement starting at toks[i]: its keyword, with the
// object type for CREATE/DROP/ALTER and the second word of EXECUTE IMMEDIATE.
func (c *classifier) label(toks []tok, i int) string {
	kw := strings.ToUpper(c.text(toks[i]))
	switch kw {
	case "CREATE", "DROP", "ALTER", "UNDROP":
		parts := []string{kw}
		for j := i + 1; j < len(toks) && j <= i+6 && toks[j].kind == tokWord; j++ {
			w := strings.ToUpper(c.text(toks[j]))
			parts = append(parts, w)
			if !createModifiers[w] {
				break
			}
		}
		return strings.Join(parts, " ")
	case "EXECUTE", "EXEC":
		if c.isWord(toks, i+1, "IMMEDIATE") {
			return "EXECUTE IMMEDIATE"
		}
	case "SET":
		if c.isOther(toks, i+1, "@") {
			return "SET @@"
		}
	}
	return kw
}

// with follows "WITH [RECURSIVE] name [(cols)] AS [[NOT] MATERIALIZED]
// (...), ..." and checks that the statement after it is a query.
func (c *classifier) with(toks []tok, i int) (kind, string, string) {
	fail := func(what string) (kind, string, string) {
		return kindOther, "WITH", "could not follow the WITH clause: " + what
	}
	i++
	if c.isWord(toks, i, "RECURSIVE") {
		i++
	}
	for {
		if i >= len(toks) || (toks[i].kind != tokWord && toks[i].kind != tokQuotedIdent) {
			return fail("expected a CTE name")
		}
		name := c.text(toks[i])
		i++
		if i < len(toks) && toks[i].kind == tokOpenParen { // column list
			j := closeParen(toks, i)
			if j < 0 {
				return fail("unbalanced parentheses after " + name)
			}
			i = j + 1
		}
		if !c.isWord(toks, i, "AS") {
			return fail("expected AS after " + name)
		}
		i++
		for c.isWord(toks, i, "NOT", "MATERIALIZED") {
			i++
		}
		if i >= len(toks) || toks[i].kind != tokOpenParen {
			return fail("expected ( after " + name + " AS")
		}
		j := closeParen(toks, i)
		if j < 0 {
			return fail("unbalanced parentheses in " + name)
		}
		i = j + 1
		if c.isOther(toks, i, ",") {
			i++
			continue
		}
		break
	}
	for i < len(toks) && toks[i].kind == tokOpenParen {
		i++
	}
	if i >= len(toks) {
		return kindOther, "WITH", "the WITH clause has no final query"
	}
	if toks[i].kind == tokWord {
		switch strings.ToUpper(c.text(toks[i])) {
		case "SELECT", "VALUES":
			return kindQuery, "WITH", ""
		}
	}
	label := clip(c.text(toks[i]))
	if toks[i].kind == tokWord {
		label = c.label(toks, i)
	}
	return kindOther, "WITH ... " + label, "WITH ... " + label + " is not a read statement: the statement after the CTEs must be a query"
}

// sqliteSideEffects are SQLite functions that load code or touch files
// (the fileio extension of the sqlite3 shell, FTS3's tokenizer hook).
var sqliteSideEffects = map[string]string{
	"LOAD_EXTENSION": "loads native code",
	"WRITEFILE":      "writes a file",
	"READFILE":       "reads a file outside the database",
	"EDIT":           "starts an editor",
	"FSDIR":          "lists files outside the database",
	"ZIPFILE":        "reads or writes a zip archive",
	"FTS3_TOKENIZER": "registers native code",
}

// snowflakeSystemRead are the Snowflake SYSTEM$ functions known to only
// read; every other SYSTEM$ function is refused.
var snowflakeSystemRead = map[string]bool{
	"SYSTEM$TYPEOF":                   true,
	"SYSTEM$CLUSTERING_DEPTH":         true,
	"SYSTEM$CLUSTERING_INFORMATION":   true,
	"SYSTEM$CLUSTERING_RATIO":         true,
	"SYSTEM$EXPLAIN_PLAN_JSON":        true,
	"SYSTEM$EXPLAIN_JSON_TO_TEXT":     true,
	"SYSTEM$GET_TAG":                  true,
	"SYSTEM$GET_TAG_ALLOWED_VALUES":   true,
	"SYSTEM$GET_TAG_ON_CURRENT_TABLE": true,
}

// snowflakeSystemWrite are Snowflake SYSTEM$ control functions that change
// state; they get a precise reason (the rest of SYSTEM$ is refused too).
var snowflakeSystemWrite = map[string]bool{
	"SYSTEM$WAIT": true, "SYSTEM$SET_RETURN_VALUE": true, "SYSTEM$PIPE_FORCE_RESUME": true,
	"SYSTEM$TASK_DEPENDENTS_ENABLE": true, "SYSTEM$USER_TASK_CANCEL_ONGOING_EXECUTIONS": true,
	"SYSTEM$ENABLE_BEHAVIOR_CHANGE_BUNDLE": true, "SYSTEM$DISABLE_BEHAVIOR_CHANGE_BUNDLE": true,
	"SYSTEM$GLOBAL_ACCOUNT_SET_PARAMETER": true, "SYSTEM$AUTHORIZE_PRIVATELINK": true,
	"SYSTEM$REVOKE_PRIVATELINK": true, "SYSTEM$SEND_EMAIL": true, "SYSTEM$ADD_EVENT": true,
	"SYSTEM$LOG": true, "SYSTEM$SET_SPAN_ATTRIBUTES": true, "SYSTEM$CREATE_BILLING_EVENT": true,
	"SYSTEM$MIGRATE_SAML_IDP_REGISTRATION": true, "SYSTEM$SET_EVENT_SHARING_ACCOUNT_FOR_REGION": true,
	"SYSTEM$BLOCK_INTERNAL_STAGES_PUBLIC_ACCESS": true, "SYSTEM$UNBLOCK_INTERNAL_STAGES_PUBLIC_ACCESS": true,
}

// funcName returns the name a word or quoted identifier gives a function:
// quotes removed, the last part of a dotted quoted name, upper-cased; ""
// for a name that cannot be one the guard knows, which is not copied (a
// query calls many functions).
func (c *classifier) funcName(t tok) string {
	s := c.text(t)
	if t.kind == tokQuotedIdent && len(s) >= 2 {
		s = s[1 : len(s)-1]
		if i := strings.LastIndexByte(s, '.'); i >= 0 {
			s = s[i+1:]
		}
	}
	s = strings.TrimSpace(s)
	if isASCII(s) && !c.mayName(s) {
		return ""
	}
	return strings.ToUpper(s)
}

// mayName reports whether the ASCII name s may be a function sideEffects
// knows in the dialect, in any case.
func (c *classifier) mayName(s string) bool {
	switch c.d {
	case SQLite:
		for name := range sqliteSideEffects {
			if strings.EqualFold(s, name) {
				return true
			}
		}
	case Snowflake:
		return hasPrefixAny(s, []string{"SYSTEM$"})
	case BigQuery:
		return strings.EqualFold(s, "EXTERNAL_QUERY")
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// sideEffects returns why a statement calls something with side effects, or
// "". A call is a name (word or quoted identifier) followed by '('.
func (c *classifier) sideEffects(toks []tok) string {
	for i, t := range toks {
		if t.kind == tokWord && c.isWord(toks, i, "EXECUTE", "EXEC") && c.isWord(toks, i+1, "IMMEDIATE") {
			return "EXECUTE IMMEDIATE runs dynamic SQL, which quorum cannot check"
		}
		if (t.kind != tokWord && t.kind != tokQuotedIdent) || i+1 >= len(toks) || toks[i+1].kind != tokOpenParen {
			continue
		}
		name := c.funcName(t)
		switch c.d {
		case SQLite:
			if what, ok := sqliteSideEffects[name]; ok {
				return fmt.Sprintf("the query calls %s, which %s", strings.ToLower(name), what)
			}
		case Snowflake:
			if !strings.HasPrefix(name, "SYSTEM$") || snowflakeSystemRead[name] {
				continue
			}
			if strings.HasPrefix(name, "SYSTEM$CANCEL_") || strings.HasPrefix(name, "SYSTEM$ABORT_") ||
				strings.HasPrefix(name, "SYSTEM$LOG") || snowflakeSystemWrite[name] {
				return fmt.Sprintf("the query calls %s, a Snowflake system function that changes state", name)
			}
			return fmt.Sprintf("the query calls %s, a Snowflake system function not known to be read-only", name)
		case BigQuery:
			if name == "EXTERNAL_QUERY" {
				return "the query calls EXTERNAL_QUERY, which runs SQL on an external database"
			}
		}
	}
	return ""
}

// spaceBytes are the bytes the lexer reads as space; Text is trimmed of
// these only (strings.TrimSpace would also cut Unicode spaces the lexer
// reads as part of a word).
const spaceBytes = " \t\n\r\f\v"
