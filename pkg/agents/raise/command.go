package raise

import (
	"regexp"
	"strings"

	"github.com/quorumsql/quorum/pkg/reply"
)

// Command is one command the agent wrote: its canonical name (or the name
// as written, for a command the tools do not know) and its arguments as
// written between the parentheses.
type Command struct {
	Name string
	Args string
}

// Text is the command as the final prompt lists it, in one form whatever
// form the agent model wrote it in (D-R19): the final models read the
// same operations log from every model. A query or a table name written
// fenced, triple-quoted, as sql=… or in a JSON object is one double-quoted
// string, escaped (and the final prompt shows its own ```sql blocks); a
// column list is ["t.c", …]; read_table_names takes nothing. A command
// whose argument cannot be read is listed as written.
func (c Command) Text() string {
	args := strings.TrimSpace(c.Args)
	switch c.Name {
	case CmdTableNames:
		args = ""
	case CmdQuery, CmdColumns:
		if !isPlainQuoted(args) {
			names := []string{"sql", "query"}
			if c.Name == CmdColumns {
				names = []string{"table_name", "table"}
			}
			args = quoteArg(unquote(argument(args, names...)))
		}
	case CmdDocs:
		if cols := parseList(argument(args, "column_names", "columns")); len(cols) > 0 {
			q := make([]string, len(cols))
			for i, col := range cols {
				q[i] = quoteArg(col)
			}
			args = "[" + strings.Join(q, ", ") + "]"
		}
	}
	return c.Name + "(" + args + ")"
}

// quoteArg writes one string argument double-quoted (unquote reads it
// back).
func quoteArg(s string) string { return `"` + argEscaper.Replace(s) + `"` }

// argEscaper writes a query as one double-quoted argument (unquote reads
// it back).
var argEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)

// isPlainQuoted reports whether s is one "…" string (not """…""").
func isPlainQuoted(s string) bool {
	return len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' && !strings.HasPrefix(s, `"""`)
}

// Segment is how the loop reads one agent segment (D-R5, D-R17).
type Segment struct {
	// Text is the segment as a server honouring stop=[EXECUTE] would have
	// returned it: cut at the first [EXECUTE] (or [RESULT]) the model wrote.
	Text string
	// Cut: the model wrote [EXECUTE] or [RESULT] itself (the server ignored
	// the stop, or the model invented a result).
	Cut bool
	// Cmd is the command the segment stops at, if HasCmd.
	Cmd    Command
	HasCmd bool
	// Mention: the segment asks for a command that cannot be parsed (a
	// [RUN] or [EXECUTE] with no runnable command, or a tool named at the
	// end); Tool is the tool it names ("" when none). Such a segment gets
	// the corrective nudge instead of ending the trajectory.
	Mention bool
	Tool    string
}

var (
	// execTag is where a server honouring the stop would have cut; a
	// [RESULT] the model writes itself means it expected one there.
	execTag = regexp.MustCompile(`(?i)\[\s*(?:EXECUTE|RESULT)\s*\]`)
	runTag  = regexp.MustCompile(`(?i)\[\s*RUN\s*\]`)
	// toolName finds a known tool in text, spelled with underscores,
	// spaces (the paper's PDF) or hyphens, in any case.
	toolName = regexp.MustCompile(`(?i)\b(read[ _-]table[ _-]names|read[ _-]table[ _-]columns|read[ _-]columns[ _-]documentation|run[ _-]query)\b`)
	nameWord = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`)
)

var knownTools = map[string]bool{CmdTableNames: true, CmdColumns: true, CmdDocs: true, CmdQuery: true}

// trailing is what may follow a command at the end of a segment: the
// model's punctuation, the backticks or quotes it wrapped the command in,
// markdown emphasis.
const trailing = " \t\r\n;.`'\"*"

// ReadSegment reads an agent segment the model wrote (never injected text:
// the nudges show the syntax too). It stops at a command when its last
// non-space content is one, possibly followed by punctuation, backticks,
// quotes or the [EXECUTE] tag; think sections are read like the rest (an
// R1 model issues its commands while thinking).
func ReadSegment(seg string) Segment {
	s := Segment{Text: seg}
	if loc := execTag.FindStringIndex(seg); loc != nil {
		s.Text, s.Cut = seg[:loc[0]], true
	}
	if cmd, ok := commandAtEnd(s.Text); ok {
		s.Cmd, s.HasCmd = cmd, true
		return s
	}
	if cmd, ok := calledAtEnd(s.Text); ok {
		s.Cmd, s.HasCmd = cmd, true
		return s
	}
	s.Mention, s.Tool = mention(s.Text, s.Cut)
	return s
}

// calledAtEnd reads the last command written as a function call in an
// envelope (a <tool_call> JSON object, a bare {"name", "arguments"}
// object, a <function=…> block; reply.Calls), if no answer follows it.
func calledAtEnd(text string) (Command, bool) {
	cs := reply.Calls(text)
	if len(cs) == 0 {
		return Command{}, false
	}
	c := cs[len(cs)-1]
	if !noteOnly(text[c.End:]) {
		return Command{}, false
	}
	name := c.Name
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:] // "functions.run_query"
	}
	return Command{Name: canonical(name), Args: c.Args}, true
}

// noteOnly reports whether what follows a command is at most a note: no
// statement, no other command. A model often says what it expects
// ("Let me look at the columns first."); that is no reason to nudge.
func noteOnly(rest string) bool {
	if strings.Trim(rest, trailing) == "" {
		return true
	}
	return len(reply.Statements(rest)) == 0 && !runTag.MatchString(rest) && !toolName.MatchString(rest) &&
		len(reply.Calls(rest)) == 0
}

// LastCommand is the command a segment stops at (see ReadSegment).
func LastCommand(segment string) (name, args string, ok bool) {
	s := ReadSegment(segment)
	return s.Cmd.Name, s.Cmd.Args, s.HasCmd
}

// commandAtEnd finds the command text ends with. The last [RUN] is tried
// first (its name may lack parentheses for a zero-argument tool, and an
// unknown name is still a command, answered with an error); then a known
// tool written with parentheses but without [RUN], latest first.
func commandAtEnd(text string) (Command, bool) {
	if locs := runTag.FindAllStringIndex(text, -1); len(locs) > 0 {
		if c, ok := parseCommand(text, locs[len(locs)-1][1], true); ok {
			return c, true
		}
	}
	locs := toolName.FindAllStringIndex(text, -1)
	for i := len(locs) - 1; i >= 0; i-- {
		if c, ok := parseCommand(text, locs[i][0], false); ok {
			return c, true
		}
	}
	return Command{}, false
}

// parseCommand reads a command starting at text[at:] that runs to the end
// of text (up to trailing characters).
func parseCommand(text string, at int, run bool) (Command, bool) {
	rest := text[at:]
	if run {
		rest = strings.TrimLeft(rest, " \t\r\n`'\"*:")
	}
	name, n := commandName(rest)
	if name == "" || (!run && !knownTools[name]) {
		return Command{}, false
	}
	after := strings.TrimLeft(rest[n:], " \t")
	if !strings.HasPrefix(after, "(") {
		// "[RUN] read_table_names": the zero-argument tool needs none.
		if run && name == CmdTableNames && noteOnly(after) {
			return Command{Name: name}, true
		}
		return Command{}, false
	}
	args, ok := argsAtEnd(after, run)
	if !ok || isPlaceholder(args) {
		return Command{}, false
	}
	return Command{Name: name, Args: args}, true
}

// commandName reads a command's name: words joined by spaces or hyphens
// when they spell a known tool ("run query"), else the first word.
func commandName(s string) (string, int) {
	first := nameWord.FindString(s)
	if first == "" {
		return "", 0
	}
	if m := toolName.FindStringIndex(s); m != nil && m[0] == 0 {
		return canonical(s[:m[1]]), m[1]
	}
	return canonical(first), len(first)
}

func canonical(name string) string {
	return strings.ToLower(strings.NewReplacer(" ", "_", "-", "_").Replace(name))
}

// argsAtEnd reads "(args)" at the start of s, which must be followed only
// by trailing characters. The parenthesis is matched past string literals
// (quotes, triple quotes, fences) so that SQL holding parentheses reads
// whole; a closed fence or triple-quoted string that ends the text closes
// an unclosed parenthesis. With lenient (after [RUN]), text the matcher
// cannot follow (an apostrophe in bare SQL) runs to the last ')'.
func argsAtEnd(s string, lenient bool) (string, bool) {
	end, closed := matchParen(s)
	if closed {
		if rest := s[end+1:]; strings.Trim(tagsRemoved(rest), trailing) == "" || lenient && noteOnly(rest) {
			return strings.TrimSpace(s[1:end]), true
		}
	} else if end < 0 {
		a := strings.TrimSpace(s[1:])
		if strings.HasSuffix(a, "```") || strings.HasSuffix(a, `"""`) || strings.HasSuffix(a, "'''") {
			return a, true
		}
	}
	if !lenient {
		return "", false
	}
	t := strings.TrimRight(s, trailing)
	if !strings.HasSuffix(t, ")") {
		return "", false
	}
	return strings.TrimSpace(t[1 : len(t)-1]), true
}

// matchParen finds the ')' closing the '(' at s[0]. closed is false when
// the text ends first; end is then -1 if it ended outside any literal and
// -2 inside one.
func matchParen(s string) (end int, closed bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case strings.HasPrefix(s[i:], "```"), strings.HasPrefix(s[i:], `"""`), strings.HasPrefix(s[i:], "'''"):
			d := s[i : i+3]
			j := strings.Index(s[i+3:], d)
			if j < 0 {
				return -2, false
			}
			i += 3 + j + 2
		case c == '\'' || c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' {
					j++
				}
			}
			if j >= len(s) {
				return -2, false
			}
			i = j
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return i, true
			}
		}
	}
	return -1, false
}

// isPlaceholder tells the syntax the nudges show ("run_query(...)") from
// an argument.
func isPlaceholder(args string) bool {
	a := strings.TrimSpace(args)
	return a == "..." || a == "…"
}

// mention reports whether a segment with no runnable command asked for
// one: it wrote [EXECUTE] or [RESULT]; or a [RUN] with no SQL answer
// after it; or its last line names a tool and it holds no SQL answer (a
// final answer may mention the tools it used).
func mention(text string, cut bool) (bool, string) {
	tool := ""
	if locs := toolName.FindAllStringIndex(text, -1); len(locs) > 0 {
		l := locs[len(locs)-1]
		tool = canonical(text[l[0]:l[1]])
	}
	if cut {
		return true, tool
	}
	if locs := runTag.FindAllStringIndex(text, -1); len(locs) > 0 {
		if fencedSQL(text[locs[len(locs)-1][0]:]) == 0 {
			return true, tool
		}
	}
	t := strings.TrimRight(text, " \t\r\n")
	last := t[strings.LastIndexByte(t, '\n')+1:]
	if toolName.MatchString(last) && fencedSQL(text) == 0 {
		return true, tool
	}
	return false, ""
}

// toolSyntax is each tool's exact form, as the corrective nudge shows it.
var toolSyntax = map[string]string{
	CmdTableNames: "[RUN] read_table_names() [EXECUTE]",
	CmdColumns:    `[RUN] read_table_columns("table_name") [EXECUTE]`,
	CmdDocs:       `[RUN] read_columns_documentation(["table.column"]) [EXECUTE]`,
	CmdQuery:      `[RUN] run_query("""SELECT ...""") [EXECUTE]`,
}

// Correction is the corrective nudge after a segment that asked for a
// command in a form that cannot be run (ours, D-R17): the exact syntax of
// the tool it named, or of every tool. Written in the agent's voice like
// the paper's nudge, since it is appended to the same message.
func Correction(tool string, static bool) string {
	if syn, ok := toolSyntax[tool]; ok && !(static && tool == CmdQuery) {
		return "Wait, I cannot run that command as I wrote it. I must write it alone on its own line, exactly as " + syn +
			", and stop right after " + TagExecute + "."
	}
	names := []string{CmdTableNames, CmdColumns, CmdDocs}
	if !static {
		names = append(names, CmdQuery)
	}
	forms := make([]string, len(names))
	for i, n := range names {
		forms[i] = toolSyntax[n]
	}
	return "Wait, I cannot run that command as I wrote it. A command goes alone on its own line, exactly in one of these forms: " +
		strings.Join(forms, " ; ") + ", and I stop right after " + TagExecute + "."
}

// fencedSQL counts the complete fenced SQL blocks of text: an answer, as
// opposed to a query written as a command's argument.
func fencedSQL(text string) int {
	n := 0
	for _, b := range reply.Blocks(reply.Visible(text)) {
		if b.Closed && (reply.IsSQLLang(b.Lang) || b.Lang == "" && len(reply.Statements(b.Body)) > 0) {
			n++
		}
	}
	return n
}

var markupTag = regexp.MustCompile("</?[A-Za-z][A-Za-z0-9_:.=-]*(?:\\s[^<>\\n]*)?>|```+|~~~+")

// tagsRemoved is text without its markup tags and fences: what closes an
// envelope a command was written in (<tool_call>run_query(…)</tool_call>).
func tagsRemoved(s string) string { return markupTag.ReplaceAllString(s, "") }
