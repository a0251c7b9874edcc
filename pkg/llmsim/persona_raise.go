package llmsim

// RAISE commands in the personas' forms. Real models write the agent's
// "[RUN] cmd(args)" loosely: a trailing semicolon, the command in
// backticks, a zero-argument command without parentheses, the query of
// run_query fenced or triple-quoted. dressSegment writes those forms;
// canonicalCommands reads them back into the canonical form, so the
// simulator keeps its place in a trajectory it wrote in a persona's forms.

import (
	"math/rand/v2"
	"regexp"
	"strings"
)

// Command forms.
const (
	formSemicolon = "semicolon"   // [RUN] read_table_names();
	formBackticks = "backticks"   // [RUN] `read_table_names()`
	formNoParens  = "noparens"    // [RUN] read_table_names
	formFenced    = "fenced"      // [RUN] run_query(```sql\n…\n```)
	formTriple    = "triplequote" // [RUN] run_query("""…""")
)

// commandForms are the forms each persona writes.
func commandForms(persona string) []string {
	switch persona {
	case PersonaGPT4o:
		return []string{formBackticks, formFenced}
	case PersonaClaude:
		return []string{formNoParens, formFenced}
	case PersonaQwenCoder:
		return []string{formSemicolon, formTriple}
	case PersonaDeepSeekR1:
		return []string{formSemicolon, formNoParens, formTriple}
	case PersonaDeepSeekReasoner:
		return []string{formBackticks, formSemicolon}
	case PersonaO3:
		return []string{formBackticks}
	}
	return nil
}

var segCommand = regexp.MustCompile(`\n\[RUN\] ([a-z_]+)\((.*)\) \[EXECUTE\]$`)

// dressSegment rewrites an agent segment's command (about three times in
// five) in one of the persona's forms, or its final answer's fence.
func dressSegment(rng *rand.Rand, persona, seg, dialect string) string {
	m := segCommand.FindStringSubmatchIndex(seg)
	if m == nil {
		sh, ok := parseShape(seg)
		if !ok || sh.lang != "sql" || rng.IntN(2) == 0 {
			return seg
		}
		switch persona {
		case PersonaQwenCoder:
			return joinParts(sh.intro, fence(dialectLang(rng, dialect), sh.body))
		case PersonaGPT4o:
			return joinParts(sh.intro, fence("SQL", sh.body))
		}
		return seg
	}
	name, args := seg[m[2]:m[3]], seg[m[4]:m[5]]
	cmd := name + "(" + args + ")"
	sql := unquoteArg(args)
	isQuery := name == "run_query" && quoteArg(sql) == args && !strings.Contains(sql, "```")
	var forms []string
	for _, f := range commandForms(persona) {
		switch f {
		case formNoParens:
			if args == "" {
				forms = append(forms, f)
			}
		case formBackticks:
			if !strings.Contains(cmd, "`") {
				forms = append(forms, f)
			}
		case formFenced:
			if isQuery {
				forms = append(forms, f)
			}
		case formTriple:
			if isQuery && !strings.Contains(sql, `"""`) && !strings.HasPrefix(sql, `"`) && !strings.HasSuffix(sql, `"`) {
				forms = append(forms, f)
			}
		default:
			forms = append(forms, f)
		}
	}
	if len(forms) == 0 || rng.IntN(5) >= 3 {
		return seg
	}
	switch pick(rng, forms) {
	case formSemicolon:
		cmd += ";"
	case formBackticks:
		cmd = "`" + cmd + "`"
	case formNoParens:
		cmd = name
	case formFenced:
		cmd = name + "(```sql\n" + sql + "\n```)"
	case formTriple:
		cmd = name + `("""` + sql + `""")`
	}
	return seg[:m[0]] + "\n[RUN] " + cmd + " [EXECUTE]"
}

var (
	fencedQuery   = regexp.MustCompile("(?s)\\[RUN\\] run_query\\(```sql\n(.*?)\n```\\)")
	tripleQuery   = regexp.MustCompile(`(?s)\[RUN\] run_query\("""(.*?)"""\)`)
	backtickCmd   = regexp.MustCompile("\\[RUN\\] `([^`\n]+)`")
	semicolonCmd  = regexp.MustCompile(`(?m)^(\[RUN\] [a-z_]+\(.*\));([ \t]*(?:\[EXECUTE\])?[ \t]*)$`)
	bareNamesCmd  = regexp.MustCompile(`(?m)^\[RUN\] (read_table_names)([ \t]*(?:\[EXECUTE\])?[ \t]*)$`)
	semicolonBare = regexp.MustCompile(`(?m)^(\[RUN\] read_table_names);([ \t]*(?:\[EXECUTE\])?[ \t]*)$`)
)

// canonicalCommands rewrites the personas' command forms in a trajectory
// as "[RUN] cmd(args)"; canonical text comes back unchanged. Calls written
// as envelopes (persona_envelopes.go) become [RUN] lines first, and their
// wrappers come off last, once every [RUN] form is the canonical one.
func canonicalCommands(text string) string {
	text = envelopeCores(text)
	if !strings.Contains(text, "[RUN]") {
		return text
	}
	text = fencedQuery.ReplaceAllStringFunc(text, func(m string) string {
		return "[RUN] run_query(" + quoteArg(fencedQuery.FindStringSubmatch(m)[1]) + ")"
	})
	text = tripleQuery.ReplaceAllStringFunc(text, func(m string) string {
		return "[RUN] run_query(" + quoteArg(tripleQuery.FindStringSubmatch(m)[1]) + ")"
	})
	text = backtickCmd.ReplaceAllString(text, "[RUN] $1")
	text = semicolonBare.ReplaceAllString(text, "$1$2")
	text = semicolonCmd.ReplaceAllString(text, "$1$2")
	text = bareNamesCmd.ReplaceAllString(text, "[RUN] read_table_names()$2")
	return unwrapCommands(text)
}
