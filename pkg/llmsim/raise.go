package llmsim

// RAISE (spec pexa-raise.md §2, §4.1 items 2–4, §4.2): the agent's
// trajectory as a script derived from the gold SQL, the three models' final
// generations and their retries, and the column post-process; and the
// generic prefix continuation the agent's transport relies on. Every reply
// is a pure function of the request (its messages, model and seed), like
// the other kinds.
//
// The agent script. A trajectory is many requests, each with its own seed
// (the agent derives one per call), and llmsim keeps no state, so:
//   - the position is the number of [RESULT] blocks in the conversation
//     (nudges add none, so after a nudge the script stays where it was);
//   - the script's step list is drawn from (simulator seed, example, the
//     trajectory's opening): the text before its first [RESULT], which the
//     first call wrote with its own seed, so each trajectory (round) has
//     its own list and keeps it for all its calls (position 0 needs no
//     list: it is always read_table_names, or the answer when AgentCommands
//     allows fewer than two commands);
//   - each step's own draws (wording, Ramble, the answer query's outcome)
//     come from (simulator seed, example, the opening, the position, whether
//     a nudge preceded) and the request's seed.
// The text the model wrote at this position before the request (a
// continued prefix cut mid-step) does not enter any draw, so a continuation
// returns what follows it. A step is written as the prompt's grammar has
// it, "…\n[RUN] cmd(args) [EXECUTE]": the agent's stop sequence leaves the
// reply ending in ") ", and the [EXECUTE] it appends restores the grammar.

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"

	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/sqltext"
)

// Text the RAISE agent injects into its trajectory, as llmsim recognises it
// (the agent's constants are in pkg/agents/raise, which llmsim does not
// import).
const (
	raiseNudgeMark     = "thinking for too long without interacting with the database"
	raiseTerminateMark = "I will generate my final solution now"
	raiseBeginWith     = "Begin your reasoning with: "
	raiseTagResult     = "[RESULT]"
	raiseTagEnd        = "[/RESULT]"
	raiseQueryLine     = "[RUN] run_query("
	raiseNoRows        = "The query returned no rows."
)

const (
	// rambleTokens is the filler ahead of a rambling step: more than the
	// agent's 1,400-token segment cap.
	rambleTokens = 2000
	// maxDocColumns bounds a read_columns_documentation list.
	maxDocColumns = 12
)

// setRAISEDefaults gives the RAISE fields the spec's defaults: a step in
// ten rambles, 4 to 12 commands ("typically fewer than 15", raise §5.1),
// and a column post-process that fixes half of the select lists it can.
func (n *Noise) setRAISEDefaults() {
	n.Ramble, n.AgentCommands, n.ColumnFix = 0.1, [2]int{4, 12}, 0.5
}

// raiseUnset reports whether none of the RAISE fields is set.
func (n Noise) raiseUnset() bool {
	return n.Ramble == 0 && n.AgentCommands == [2]int{} && n.ColumnFix == 0
}

// agentCommands is the usable range of commands per trajectory.
func (n Noise) agentCommands() (lo, hi int) {
	lo, hi = n.AgentCommands[0], n.AgentCommands[1]
	if lo == 0 && hi == 0 {
		return 4, 12
	}
	lo = max(lo, 0)
	return lo, max(hi, lo)
}

// raiseKind names the RAISE kind of a first user message, "" for none.
func raiseKind(first string) Kind {
	switch {
	case strings.Contains(first, MarkerRAISEFinal):
		if strings.Contains(first, MarkerRAISEAttempts) {
			return KindRAISERefine
		}
		return KindRAISEFinal
	case strings.Contains(first, MarkerRAISEAgent):
		return KindRAISEAgent
	case strings.Contains(first, MarkerRAISEColumns):
		return KindRAISEColumns
	}
	return ""
}

// continuation splits a request whose last message is the assistant's
// (with continue_final_message, a "prefix": true message, or neither; spec
// §4.1 item 4) into the request before it and the prefix to continue. A
// RAISE agent's prefix is its trajectory, which its script reads, so it is
// not split off.
func continuation(req chatRequest) (chatRequest, string, bool) {
	n := len(req.Messages)
	if n < 2 {
		return req, "", false
	}
	last := req.Messages[n-1]
	if last.Role != "assistant" || len(last.ToolCalls) > 0 {
		return req, "", false
	}
	for _, m := range req.Messages {
		if m.Role == "user" {
			if raiseKind(m.Content) == KindRAISEAgent {
				return req, "", false
			}
			break
		}
	}
	base := req
	base.Messages = req.Messages[:n-1]
	return base, last.Content, true
}

// continueText is what follows prefix in the intended text full: the rest
// of full when it starts with prefix; else, when full contains the last
// line of prefix, what follows that line there (a prefilled "```sql\n"
// continues with the query); else all of full, as a model that goes its
// own way after a prefill it would not have written.
func continueText(full, prefix string) string {
	if strings.HasPrefix(full, prefix) {
		return full[len(prefix):]
	}
	body := strings.TrimRight(prefix, " \t\r\n")
	line := body[strings.LastIndexByte(body, '\n')+1:]
	if strings.TrimSpace(line) == "" {
		return full
	}
	i := strings.Index(full, line)
	if i < 0 {
		return full
	}
	rest := full[i+len(line):]
	if ws := prefix[len(body):]; ws != "" {
		if r, ok := strings.CutPrefix(rest, ws); ok {
			return r
		}
		return strings.TrimLeft(rest, " \t\r\n")
	}
	return rest
}

// raiseRNG is a draw stream from the simulator seed, the parts and the
// request seed.
func raiseRNG(seed, reqSeed uint64, parts ...string) *rand.Rand {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return rand.New(rand.NewPCG(h.Sum64(), reqSeed^0x9e3779b97f4a7c15))
}

// DefaultAnswerModel is the model a persona's request answers as when its
// model field names the persona itself: quorum's default model (--model),
// which a canonical run names.
const DefaultAnswerModel = "gpt-4o"

// answerModel is the model name the draws use. A client that names the
// persona as its model (quorum bench does, so an o-series persona gets a
// reasoning model's request) wears it as part of the surface; its answers
// are the default model's, as in the same run without the persona.
func answerModel(req chatRequest) string {
	if req.persona != PersonaCanonical && req.persona != "" && strings.EqualFold(req.Model, req.persona) {
		return DefaultAnswerModel
	}
	return req.Model
}

// raiseReply fills a RAISE reply (always text: RAISE uses no tools). The
// final and column replies draw from a stream that includes the model
// name, so the three final models differ (spec §4.2).
func (s *Server) raiseReply(rep *reply, req chatRequest, msgs []llm.Message, all string) {
	var reqSeed uint64
	if req.Seed != nil {
		reqSeed = uint64(*req.Seed)
	}
	first := 0
	for first < len(msgs) && msgs[first].Role != "user" {
		first++
	}
	prompt := msgs[first].Content
	model := answerModel(req)
	rng := raiseRNG(s.cfg.Seed, reqSeed, string(rep.kind), model, all)
	switch rep.kind {
	case KindRAISEAgent:
		text, inReasoning := s.raiseAgent(reqSeed, rep.info, msgs, first, model, req.persona)
		rep.text = text
		if inReasoning {
			rep.reasoning, rep.text, rep.inReasoning = text, "", true
		}
	case KindRAISEFinal:
		boost := 0.6 + 0.4*s.raiseCoverage(rep.info, prompt)
		rep.text = sqlBlock("Using what the operations show about the tables and values, the query is:", s.sqlFor(rng, rep.info, s.drawBoosted(rng, rep.info, boost)))
	case KindRAISERefine:
		rep.text = sqlBlock("The previous attempts failed; here is a corrected query.", s.revise(rng, rep.info))
	case KindRAISEColumns:
		rep.text = "```sql\n" + s.raiseColumns(rng, rep.info, prompt) + "\n```"
	}
}

// opLine is one operation's command line in the final prompt.
var opLine = regexp.MustCompile(`(?m)^\[\d+\] (.*)$`)

// digitRun collapses a table family (events_20240301, events_20240302, …).
var digitRun = regexp.MustCompile(`[0-9]+`)

// familyKey names a table's digit family.
func familyKey(name string) string { return strings.ToLower(digitRun.ReplaceAllString(name, "#")) }

// raiseCoverage is the fraction of the gold tables (digit families count
// once) that the final prompt's operations name in their commands. Outputs
// do not count: read_table_names lists every table, so after it every
// table would be "named" and the depth effect (raise §5.1) would vanish.
// 1 when no gold table is known.
func (s *Server) raiseCoverage(info *exampleInfo, prompt string) float64 {
	ops := prompt
	if _, rest, ok := strings.Cut(prompt, "\nOperations:\n"); ok {
		ops = rest
	}
	if i := strings.Index(ops, MarkerRAISEAttempts); i >= 0 {
		ops = ops[:i]
	}
	var cmds strings.Builder
	for _, m := range opLine.FindAllStringSubmatch(ops, -1) {
		cmds.WriteString(m[1])
		cmds.WriteByte('\n')
	}
	families := map[string]*regexp.Regexp{}
	for _, t := range s.know.goldTables(info) {
		pat := digitRun.ReplaceAllString(regexp.QuoteMeta(t.name), "[0-9]+")
		families[familyKey(t.name)] = regexp.MustCompile(`(?i)(^|[^A-Za-z0-9_])` + pat + `($|[^A-Za-z0-9_])`)
	}
	if len(families) == 0 {
		return 1
	}
	named := 0
	for _, re := range families {
		if re.MatchString(cmds.String()) {
			named++
		}
	}
	return float64(named) / float64(len(families))
}

var columnsSQL = regexp.MustCompile("(?s)SQL:\n```sql\n(.*?)\n```")

// raiseColumns is the column post-process: a query that differs from the
// gold SQL only in its select list, and selects every expression the
// gold's does, gets with probability ColumnFix its own expressions in the
// gold's order without the ones the gold lacks; any other query comes back
// unchanged. The agent accepts only such a rewrite (a permutation or
// subset of the original's expressions, its D-R9), so the fix never adds
// a column.
func (s *Server) raiseColumns(rng *rand.Rand, info *exampleInfo, prompt string) string {
	m := columnsSQL.FindStringSubmatch(prompt)
	if m == nil {
		return "SELECT 1"
	}
	given := strings.TrimSpace(m[1])
	opt := info.ex.Dialect.LexOptions()
	g, ok1 := splitSelect(given, opt)
	gold, ok2 := splitSelect(info.gold, opt)
	if !ok1 || !ok2 || !sameTokens(g.outside, gold.outside) || rng.Float64() >= s.cfg.Noise.ColumnFix {
		return given
	}
	list, ok := reorderColumns(g.text[g.start:g.end], gold.text[gold.start:gold.end], opt)
	if !ok {
		return given
	}
	q := g.text
	return strings.TrimRight(q[:g.start]+" "+list+" "+q[g.end:], " ")
}

// reorderColumns writes the expressions of the select list have in the
// order of the select list want, each in have's text (its alias kept);
// false when want selects an expression have does not, or changes the
// list's DISTINCT.
func reorderColumns(have, want string, opt sqltext.Options) (string, bool) {
	hLead, hItems := selectItems(have)
	wLead, wItems := selectItems(want)
	if !strings.EqualFold(hLead, wLead) || len(wItems) == 0 {
		return "", false
	}
	used := make([]bool, len(hItems))
	var out []string
	for _, w := range wItems {
		found := false
		for i, h := range hItems {
			if !used[i] && sameExpr(h, w, opt) {
				used[i], found = true, true
				out = append(out, strings.TrimSpace(h))
				break
			}
		}
		if !found {
			return "", false
		}
	}
	list := strings.Join(out, ", ")
	if hLead != "" {
		list = hLead + " " + list
	}
	return list, true
}

// selectItems splits a select list at its top-level commas, after a
// leading DISTINCT or ALL.
func selectItems(list string) (lead string, items []string) {
	list = strings.TrimSpace(list)
	for _, kw := range []string{"DISTINCT", "ALL"} {
		if len(list) > len(kw) && strings.EqualFold(list[:len(kw)], kw) && (list[len(kw)] == ' ' || list[len(kw)] == '\n' || list[len(kw)] == '\t') {
			lead, list = list[:len(kw)], strings.TrimSpace(list[len(kw):])
			break
		}
	}
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(list); i++ {
		c := list[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '(' || c == '[':
			depth++
		case c == ')' || c == ']':
			depth--
		case c == ',' && depth == 0:
			items = append(items, list[start:i])
			start = i + 1
		}
	}
	return lead, append(items, list[start:])
}

// sameExpr reports whether two select items select the same expression,
// up to case, spacing and an AS alias.
func sameExpr(a, b string, opt sqltext.Options) bool {
	norm := func(item string) []sqltext.Token {
		toks := sqltext.Tokens(item, opt)
		if n := len(toks); n >= 3 && toks[n-2].Word && strings.EqualFold(toks[n-2].Text, "as") {
			toks = toks[:n-2]
		}
		return toks
	}
	x, y := norm(a), norm(b)
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if !strings.EqualFold(x[i].Text, y[i].Text) {
			return false
		}
	}
	return len(x) > 0
}

// selectSplit is a query cut around the select list of its final query
// block: the tokens between its top-level SELECT and FROM, after any WITH
// clause, whose SELECTs sit in parentheses. It is the agent's
// SameOutsideSelect contract (spec D-R9), with byte offsets.
type selectSplit struct {
	text       string // the query, trimmed, without a final semicolon
	start, end int    // the select list's bytes
	outside    []sqltext.Token
}

func splitSelect(q string, opt sqltext.Options) (selectSplit, bool) {
	sp := selectSplit{text: strings.TrimRight(strings.TrimSpace(q), "; \t\r\n")}
	toks := sqltext.Tokens(sp.text, opt)
	words := sqltext.Words(sp.text, opt)
	sel, from, word := -1, len(toks), -1
	selWord, fromWord := -1, -1
	for i, t := range toks {
		if t.Word {
			word++
		}
		if t.Depth != 0 || !t.Word {
			continue
		}
		if sel < 0 && t.Text == "select" {
			sel, selWord = i, word
		} else if sel >= 0 && t.Text == "from" {
			from, fromWord = i, word
			break
		}
	}
	if sel < 0 || selWord >= len(words) || fromWord >= len(words) {
		return sp, false
	}
	sp.start, sp.end = words[selWord].End, len(sp.text)
	if fromWord >= 0 {
		sp.end = words[fromWord].Start
	}
	for i, t := range toks {
		if i <= sel || i >= from {
			sp.outside = append(sp.outside, t)
		}
	}
	return sp, true
}

func sameTokens(a, b []sqltext.Token) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Text != b[i].Text {
			return false
		}
	}
	return true
}

// trail is what the agent's conversation says about its trajectory.
type trail struct {
	// position is the number of [RESULT] blocks: the commands executed.
	position int
	// opening is the text before the first [RESULT] (all of it before
	// one): written by the trajectory's first calls.
	opening string
	// nudged and terminated: the text since the last result holds the
	// nudge, or the termination phrase.
	nudged, terminated bool
	// partial is the model's own text at this position when the request
	// continues an assistant message.
	partial string
	// query is the last run_query's SQL; queryOK says it ran with rows.
	query   string
	queryOK bool
	// assistant: the model has written something already.
	assistant bool
}

// readTrail reads the conversation after the agent prompt: one assistant
// message (continue transport) or alternating turns (multi-turn).
func readTrail(msgs []llm.Message, first int) trail {
	var tr trail
	var parts []string
	for _, m := range msgs[first+1:] {
		if m.Role == "user" || m.Role == "assistant" {
			parts = append(parts, m.Content)
			tr.assistant = tr.assistant || m.Role == "assistant"
		}
	}
	// Commands in a persona's forms read as the canonical ones, so the
	// script's position, opening and last query are canonical's.
	text := canonicalCommands(strings.Join(parts, "\n"))
	tailFrom, open := 0, -1
	awaiting := false
	for off := 0; off <= len(text); {
		end := len(text)
		if j := strings.IndexByte(text[off:], '\n'); j >= 0 {
			end = off + j
		}
		line := strings.TrimSpace(text[off:end])
		switch {
		case line == raiseTagResult:
			if tr.position == 0 {
				tr.opening = text[:off]
			}
			tr.position++
			open = min(end+1, len(text))
		case line == raiseTagEnd && open >= 0:
			res := strings.TrimSpace(text[open:off])
			if awaiting {
				tr.queryOK = res != "" && res != raiseNoRows && !strings.HasPrefix(res, "Error")
				awaiting = false
			}
			open = -1
			tailFrom = min(end+1, len(text))
		case open < 0 && strings.HasPrefix(line, raiseQueryLine) && !strings.Contains(line, raiseNudgeMark):
			args := line[len(raiseQueryLine):]
			if i := strings.LastIndexByte(args, ')'); i >= 0 {
				args = args[:i]
			}
			tr.query, tr.queryOK, awaiting = unquoteArg(args), false, true
		}
		off = end + 1
	}
	if tr.position == 0 {
		tr.opening = text
	}
	tail := text[tailFrom:]
	tr.nudged = strings.Contains(tail, raiseNudgeMark)
	tr.terminated = strings.Contains(tail, raiseTerminateMark)
	if n := len(msgs); n > first+1 && msgs[n-1].Role == "assistant" {
		p := msgs[n-1].Content
		for _, mark := range []string{raiseTagEnd, raiseNudgeMark, raiseTerminateMark} {
			if i := strings.LastIndex(p, mark); i >= 0 {
				p = p[i:]
				if j := strings.IndexByte(p, '\n'); j >= 0 {
					p = p[j+1:]
				} else {
					p = ""
				}
			}
		}
		tr.partial = p
	}
	return tr
}

// argEscaper writes a string argument as the agent's unquote reads it.
var argEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\r", "")

func quoteArg(s string) string { return `"` + argEscaper.Replace(s) + `"` }

var argUnescaper = strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\"`, `"`, `\'`, `'`, `\\`, `\`)

func unquoteArg(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return argUnescaper.Replace(s[1 : len(s)-1])
	}
	return s
}

// Script step kinds.
const (
	stepNames    = "names"
	stepColumns  = "columns"
	stepDocs     = "docs"
	stepDistinct = "distinct"
	stepSample   = "sample"
	stepCount    = "count"
	stepAnswer   = "answer"
)

// raiseStep is one command of the agent's script.
type raiseStep struct {
	kind  string
	table *tableInfo
	cols  []string // docs: "table.column"; distinct: the column
}

// raisePlan is a trajectory's script (spec §4.2): read_table_names; the
// columns of each gold table (one per digit family); the documentation of
// their columns; 1–2 distinct-value queries on gold columns; the answer
// query. Padded with more value, sample-row and row-count queries up to
// AgentCommands' least, and cut (extra value queries, documentation, column
// reads beyond the first, …) down to its most.
func (s *Server) raisePlan(rng *rand.Rand, info *exampleInfo) []raiseStep {
	lo, hi := s.cfg.Noise.agentCommands()
	var gold []*tableInfo
	seen := map[string]bool{}
	for _, t := range s.know.goldTables(info) {
		if k := familyKey(t.name); !seen[k] {
			seen[k] = true
			gold = append(gold, t)
		}
	}
	type pair struct {
		t *tableInfo
		c string
	}
	var pairs []pair
	var docs []string
	for _, t := range gold {
		for _, c := range t.columns {
			pairs = append(pairs, pair{t, c})
			if len(docs) < maxDocColumns {
				docs = append(docs, t.name+"."+c)
			}
		}
	}
	rng.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
	q := min(1+rng.IntN(2), len(pairs))
	steps := []raiseStep{{kind: stepNames}}
	for _, t := range gold {
		steps = append(steps, raiseStep{kind: stepColumns, table: t})
	}
	if len(docs) > 0 {
		steps = append(steps, raiseStep{kind: stepDocs, cols: docs})
	}
	for _, p := range pairs[:q] {
		steps = append(steps, raiseStep{kind: stepDistinct, table: p.t, cols: []string{p.c}})
	}
	// Padding: the other gold columns' values, the gold tables' sample
	// rows, their other columns' values and row counts, then the other
	// tables' columns and sample rows.
	var extra []raiseStep
	for _, p := range pairs[q:] {
		extra = append(extra, raiseStep{kind: stepDistinct, table: p.t, cols: []string{p.c}})
	}
	for _, t := range gold {
		extra = append(extra, raiseStep{kind: stepSample, table: t})
	}
	for _, t := range gold {
		full := s.know.table(info, t.name)
		if full == nil {
			continue
		}
		used := map[string]bool{}
		for _, c := range t.columns {
			used[c] = true
		}
		for _, c := range full.columns {
			if !used[c] {
				extra = append(extra, raiseStep{kind: stepDistinct, table: t, cols: []string{c}})
			}
		}
	}
	for _, t := range gold {
		extra = append(extra, raiseStep{kind: stepCount, table: t})
	}
	var others []*tableInfo
	for _, t := range s.know.tables(info.ex) {
		if k := familyKey(t.name); !seen[k] {
			seen[k] = true
			others = append(others, t)
		}
	}
	for _, t := range others {
		extra = append(extra, raiseStep{kind: stepColumns, table: t})
	}
	for _, t := range others {
		extra = append(extra, raiseStep{kind: stepSample, table: t})
	}
	for len(steps)+1 < lo && len(extra) > 0 {
		steps, extra = append(steps, extra[0]), extra[1:]
	}
	steps = append(steps, raiseStep{kind: stepAnswer})
	count := func(kind string) int {
		n := 0
		for _, st := range steps {
			if st.kind == kind {
				n++
			}
		}
		return n
	}
	drops := []func(raiseStep) bool{
		func(st raiseStep) bool { return st.kind == stepDistinct && count(stepDistinct) > 1 },
		func(st raiseStep) bool { return st.kind == stepDocs },
		func(st raiseStep) bool { return st.kind == stepColumns && count(stepColumns) > 1 },
		func(st raiseStep) bool {
			return st.kind == stepDistinct || st.kind == stepSample || st.kind == stepCount
		},
		func(st raiseStep) bool { return st.kind == stepColumns },
		func(st raiseStep) bool { return st.kind == stepNames },
		func(st raiseStep) bool { return st.kind == stepAnswer },
	}
	for len(steps) > hi {
		for _, drop := range drops {
			i := len(steps) - 1
			for i >= 0 && !drop(steps[i]) {
				i--
			}
			if i >= 0 {
				steps = append(steps[:i], steps[i+1:]...)
				break
			}
		}
	}
	return steps
}

// raiseAgent is the agent's next segment: the script's step at this
// position (after ~2,000 tokens of filler with probability Ramble, never
// right after a nudge), or its final answer once the script is done or the
// trajectory was told to finish; continued after the model's own partial
// text when there is one. inReasoning: the persona writes the segment in
// reasoning_content (the envelopes persona, sometimes).
func (s *Server) raiseAgent(reqSeed uint64, info *exampleInfo, msgs []llm.Message, first int, model, persona string) (text string, inReasoning bool) {
	tr := readTrail(msgs, first)
	opening := ""
	if tr.position > 0 {
		opening = tr.opening
	}
	rng := raiseRNG(s.cfg.Seed, reqSeed, "raise_agent", info.ex.ID, opening, strconv.Itoa(tr.position), strconv.FormatBool(tr.nudged))
	plan := s.raisePlan(raiseRNG(s.cfg.Seed, 0, "raise_plan", info.ex.ID, opening), info)
	ramble := rng.Float64() < s.cfg.Noise.Ramble && !tr.nudged && !tr.terminated
	var seg string
	if done := tr.position >= len(plan); done || tr.terminated {
		seg = s.raiseAnswer(rng, info, tr, done)
	} else {
		seg = s.raiseCommand(rng, info, plan[tr.position])
	}
	if persona != PersonaCanonical && persona != "" {
		prng := raiseRNG(s.cfg.Seed, reqSeed, "raise_persona", persona, info.ex.ID, opening, strconv.Itoa(tr.position), strconv.FormatBool(tr.nudged))
		if persona == PersonaEnvelopes {
			seg = envelopeSegment(prng, seg, info.ex.Dialect.LexOptions())
			// A segment that continues the model's own text stays where
			// that text is.
			inReasoning = tr.partial == "" && prng.Float64() < envReasoningRate
		} else {
			seg = dressSegment(prng, persona, seg, string(info.ex.Dialect))
		}
	}
	if ramble {
		seg = s.filler(rng, model) + "\n\n" + seg
	}
	if tr.position == 0 && !tr.assistant {
		// The multi-turn transport asks for the start phrase in its
		// prompt instead of prefilling it.
		if _, rest, ok := strings.Cut(msgs[first].Content, raiseBeginWith); ok {
			phrase, _, _ := strings.Cut(rest, "\n")
			seg = strings.TrimSpace(phrase) + "\n" + seg
		}
	}
	return continueSegment(seg, tr.partial), inReasoning
}

// continueSegment is what follows the model's partial text in seg. The
// partial text may start with injected lines (the prefilled start phrase),
// so it is matched from each of its line starts: the first suffix that seg
// starts with is what the model has written of seg already.
func continueSegment(seg, partial string) string {
	for off := 0; ; {
		if rest := partial[off:]; strings.HasPrefix(seg, rest) {
			return seg[len(rest):]
		}
		j := strings.IndexByte(partial[off:], '\n')
		if j < 0 {
			return seg
		}
		off += j + 1
	}
}

// Openers vary the steps' wording.
var raiseOpeners = []string{"", "Okay. ", "Good. ", "Right. ", "So far so good. "}

func pick(rng *rand.Rand, list []string) string { return list[rng.IntN(len(list))] }

// raiseCommand is one step: a reasoning sentence of 30 to 60 tokens, then
// the command. The text goes on to " [EXECUTE]", which the agent's stop
// sequence cuts.
func (s *Server) raiseCommand(rng *rand.Rand, info *exampleInfo, st raiseStep) string {
	var why, cmd string
	switch st.kind {
	case stepNames:
		why = pick(rng, []string{
			"I should first find out which tables this database has, so that I work from what is really there instead of assuming a structure for the data the question is about.",
			"Let me start by listing the tables of the database. I do not know its structure yet, and their names will tell me where the data for this question is likely to be.",
			"The first thing to do is to look at the tables that exist, since I have never seen this database and should not guess where the relevant information is stored.",
		})
		cmd = "read_table_names()"
	case stepColumns:
		why = fmt.Sprintf(pick(rng, []string{
			"The table %s looks relevant to the question. Before I use it I want to see its columns and their types, so that I refer to the fields by their exact names.",
			"Next I will check the columns of %s. Knowing exactly which fields it has, and their types, keeps me from assuming columns that do not exist.",
			"%s seems to hold part of what the question asks about, so let me read its column list and types before I write any query against it.",
		}), st.table.name)
		cmd = "read_table_columns(" + quoteArg(st.table.name) + ")"
	case stepDocs:
		names := strings.Join(st.cols[:min(3, len(st.cols))], ", ")
		if len(st.cols) > 3 {
			names += " and the others"
		}
		why = fmt.Sprintf(pick(rng, []string{
			"Now I want to read the documentation of the columns that seem to matter, %s, to make sure they mean what I think they mean before I rely on them.",
			"Before relying on %s, let me check their documentation, because column names can be misleading about units, codes or how the values are recorded.",
		}), names)
		quoted := make([]string, len(st.cols))
		for i, c := range st.cols {
			quoted[i] = quoteArg(c)
		}
		cmd = "read_columns_documentation([" + strings.Join(quoted, ", ") + "])"
	case stepDistinct:
		why = fmt.Sprintf(pick(rng, []string{
			"I should not assume how the values of %s in %s are stored. Let me look at a few distinct values to see their format, spelling and case.",
			"To write the right filters I need to know what %s in %s actually contains, so I will list some of its distinct values first.",
		}), st.cols[0], st.table.name)
		cmd = "run_query(" + quoteArg("SELECT DISTINCT "+quoteCol(info, st.cols[0])+" FROM "+st.table.ref+" LIMIT 10") + ")"
	case stepSample:
		why = fmt.Sprintf("Let me look at a few complete rows of %s to see how its columns relate to each other before I combine them in a query.", st.table.name)
		cmd = "run_query(" + quoteArg("SELECT * FROM "+st.table.ref+" LIMIT 5") + ")"
	case stepCount:
		why = fmt.Sprintf("I also want to know how many rows %s has, which tells me how much data the question is about and whether a filter will leave anything.", st.table.name)
		cmd = "run_query(" + quoteArg("SELECT COUNT(*) AS row_count FROM "+st.table.ref) + ")"
	default:
		why = pick(rng, []string{
			"I think I understand the data well enough now. Let me write a query that answers the question and run it to check that its result looks sensible.",
			"I have what I need about the tables and the values involved. I will now run a query for the whole question and look at its result before answering.",
		})
		cmd = "run_query(" + quoteArg(s.sqlFor(rng, info, s.draw(rng, info))) + ")"
	}
	return pick(rng, raiseOpeners) + why + "\n[RUN] " + cmd + " [EXECUTE]"
}

// raiseAnswer is the trajectory's final text. After the whole script, the
// answer query it ran when that gave rows, else a revision of it (the Fix
// probability gives the gold SQL); told to finish before the script's
// answer query (its last run_query was exploration), a fresh draw.
func (s *Server) raiseAnswer(rng *rand.Rand, info *exampleInfo, tr trail, done bool) string {
	switch {
	case done && tr.query != "" && tr.queryOK:
		return sqlBlock("The query ran and its result answers the question, so this is my final answer.", tr.query)
	case done && tr.query != "":
		return sqlBlock("The last query did not give a usable result, so I corrected it. This is my final answer.", s.revise(rng, info))
	}
	return sqlBlock("I have seen enough of the data to answer the question. This is my final answer.", s.sqlFor(rng, info, s.draw(rng, info)))
}

// rambleSentences are thinking without a command.
var rambleSentences = []string{
	"Wait, let me think again about what the question really asks before I touch the data.",
	"Maybe the answer depends on how the rows are grouped, or maybe on a filter I have not considered yet.",
	"I could count the rows first, but that might not tell me anything about the values themselves.",
	"There might be several tables with similar information, and I should be careful to pick the right one.",
	"Hmm, but then again, the question could be read in more than one way, so I should keep both readings in mind.",
	"If the values are stored as text, a comparison might behave differently than I expect.",
	"Let me reconsider the wording once more and what each part of it implies for the query.",
	"Perhaps I am overcomplicating this, but it is better to be careful than to assume something wrong.",
}

// filler is at least rambleTokens tokens of thinking without a command.
func (s *Server) filler(rng *rand.Rand, model string) string {
	var b strings.Builder
	start := rng.IntN(len(rambleSentences))
	for k := 0; ; k++ {
		if k > 0 {
			if k%4 == 0 {
				b.WriteString("\n\n")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(rambleSentences[(start+k)%len(rambleSentences)])
		if k%len(rambleSentences) == len(rambleSentences)-1 && s.tok.Count(model, b.String()) >= rambleTokens {
			return b.String()
		}
	}
}
