package llmsim

// Personas: the surface forms of real model families and serving stacks.
// llmsim's own (canonical) reply is one intro line and one ```sql block,
// tool arguments exactly as their schema has them. Real models do not
// write that way, and agents that parse only the canonical form fail on
// them; a persona rewrites the canonical reply into a documented real form
// while keeping its content: the same SQL, the same decision, the same tool
// call. The rewrite draws from its own stream (the simulator seed, the
// persona, the request's messages and seed), never from the answer's, so
// canonical replies do not move when personas exist.

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

// Persona names.
const (
	PersonaCanonical        = "canonical"
	PersonaGPT4o            = "gpt-4o"
	PersonaO3               = "o3"
	PersonaClaude           = "claude"
	PersonaDeepSeekR1       = "deepseek-r1"
	PersonaDeepSeekReasoner = "deepseek-reasoner"
	PersonaQwenCoder        = "qwen-coder"
	PersonaTruncating       = "truncating"
	PersonaEnvelopes        = "envelopes"
)

// personaSpecs lists the personas with what each does (a function, so the
// package keeps no mutable table).
func personaSpecs() [][2]string {
	return [][2]string{
		{PersonaCanonical, "llmsim's own shape: an intro line and one ```sql block; tool arguments exactly as their schema has them"},
		{PersonaGPT4o, "OpenAI gpt-4o: prose before and after the block, ```SQL or a one-line ```sql … ``` fence, JSON verdicts in prose; content null and sometimes an extra key beside tool calls"},
		{PersonaO3, "OpenAI o-series: HTTP 400 for temperature, top_p and max_tokens; reasoning tokens in usage; terse replies, bare JSON"},
		{PersonaClaude, "Anthropic's OpenAI-compatible endpoint: markdown headings, a draft query then \"Actually, …\" and the final one (the last block is the answer); text beside tool calls"},
		{PersonaDeepSeekR1, "R1 distill on vLLM without a reasoning parser: <think>…</think> (sometimes without the opening tag) before the answer, a draft block inside it; \"false\" strings in JSON verdicts"},
		{PersonaDeepSeekReasoner, "DeepSeek API deepseek-reasoner: reasoning in reasoning_content (streamed as reasoning deltas), reasoning tokens in usage; content is the answer"},
		{PersonaQwenCoder, "Qwen2.5-Coder: ```sqlite/```bigquery/```googlesql/```snowflake/```postgresql fences, bare fences or no fence; Python literals and trailing commas in JSON; \"false\" strings and sql for sql_query in tool arguments"},
		{PersonaTruncating, "a model that runs out of tokens: about 15% of replies end inside their SQL (finish_reason length), cut where the SQL cannot be complete"},
		{PersonaEnvelopes, "no model in particular: forms composed at random per reply (seeded), not a list; one to three nested wrappers (fences with any info string and attributes, ~~~ and longer runs; tags of random names and attributes, closing tag glued to the query; JSON objects and arrays at random depth under random keys, or the whole reply a JSON object; an indented block; inline backticks), prose before and after, a draft and the answer (last, or the block marked final), CRLF, a BOM, zero-width spaces and NBSPs between SQL tokens; about 10% of replies only in reasoning_content; verdicts nested deeper, sometimes with string booleans; a trailing ; or CRLF in tool arguments' SQL; RAISE commands in <tool_call>, <function=…>, bare JSON calls, backticks, fences or tags, sometimes with a note after; about 2% of SQL answers a refusal in prose that begins with a SQL word (a re-ask gets the answer)"},
	}
}

// PersonaNames lists the personas, canonical first.
func PersonaNames() []string {
	var out []string
	for _, p := range personaSpecs() {
		out = append(out, p[0])
	}
	return out
}

// PersonaDescription says what a persona does ("" for an unknown name).
func PersonaDescription(name string) string {
	for _, p := range personaSpecs() {
		if p[0] == name {
			return p[1]
		}
	}
	return ""
}

func checkPersona(name string) error {
	if PersonaDescription(name) == "" {
		return fmt.Errorf("unknown persona %q (valid: %s)", name, strings.Join(PersonaNames(), ", "))
	}
	return nil
}

// Personas maps a request's model field to a persona; the key "*" (or "")
// is the default for models not listed. An agent maps each role to a model
// name, so each role can get its own persona. Nil means canonical for all.
type Personas map[string]string

// ParsePersonas reads comma-separated entries, each PERSONA (the default
// for every model) or MODEL=PERSONA: "deepseek-r1",
// "final_a-model=claude,o3-mini=o3".
func ParsePersonas(s string) (Personas, error) {
	p := Personas{}
	if err := p.add(s); err != nil {
		return nil, err
	}
	return p, nil
}

func (p Personas) add(s string) error {
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		model, name, ok := strings.Cut(entry, "=")
		if !ok {
			model, name = "*", entry
		}
		model, name = strings.TrimSpace(model), strings.TrimSpace(name)
		if model == "" {
			model = "*"
		}
		if err := checkPersona(name); err != nil {
			return fmt.Errorf("llmsim: personas %q: %w", s, err)
		}
		if old, dup := p[model]; dup && old != name {
			return fmt.Errorf("llmsim: personas %q: model %q has two personas, %s and %s", s, model, old, name)
		}
		p[model] = name
	}
	return nil
}

// For is the persona of a request for model.
func (p Personas) For(model string) string {
	for _, k := range []string{model, "*", ""} {
		if name, ok := p[k]; ok {
			return name
		}
	}
	return PersonaCanonical
}

// Validate checks every persona name.
func (p Personas) Validate() error {
	for model, name := range p {
		if err := checkPersona(name); err != nil {
			return fmt.Errorf("llmsim: persona for model %q: %w", model, err)
		}
	}
	return nil
}

// String writes p as ParsePersonas reads it: the default first, then the
// models in order.
func (p Personas) String() string {
	var models, out []string
	for m := range p {
		if m != "*" && m != "" {
			models = append(models, m)
		}
	}
	sort.Strings(models)
	if name, ok := p["*"]; ok {
		out = append(out, name)
	} else if name, ok := p[""]; ok {
		out = append(out, name)
	}
	for _, m := range models {
		out = append(out, m+"="+p[m])
	}
	return strings.Join(out, ",")
}

// Set adds entries, so *Personas is a repeatable flag (pflag.Value).
func (p *Personas) Set(s string) error {
	if *p == nil {
		*p = Personas{}
	}
	return p.add(s)
}

// Type names the flag's value (pflag.Value).
func (p *Personas) Type() string { return "personas" }

// modelName is the model field of a persona's responses: always a
// simulator's, canonical's unchanged.
func modelName(persona string) string {
	if persona == PersonaCanonical || persona == "" {
		return ModelName
	}
	return strings.TrimSuffix(ModelName, ")") + "; persona " + persona + ")"
}

// personaRefusal is the 400 an OpenAI reasoning model answers to sampling
// parameters and to max_tokens, word for word; "" when the request passes.
func personaRefusal(persona string, req chatRequest) (param, msg string) {
	if persona != PersonaO3 {
		return "", ""
	}
	switch {
	case req.Temperature != nil:
		return "temperature", "Unsupported parameter: 'temperature' is not supported with this model."
	case req.TopP != nil:
		return "top_p", "Unsupported parameter: 'top_p' is not supported with this model."
	case req.MaxTokens > 0:
		return "max_tokens", "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
	}
	return "", ""
}

func writeParamError(w http.ResponseWriter, param, msg string) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": param, "code": "unsupported_parameter"}})
}

// personaRNG is the surface's draw stream: the simulator seed, the
// persona, the conversation and the request seed.
func personaRNG(seed uint64, req chatRequest, persona string) *rand.Rand {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(persona))
	h.Write([]byte{0})
	h.Write([]byte(conversationText(req)))
	var reqSeed uint64
	if req.Seed != nil {
		reqSeed = uint64(*req.Seed)
	}
	return rand.New(rand.NewPCG(h.Sum64(), reqSeed^0x2545f4914f6cdd1d))
}

// shape is a canonical text reply: an intro, then one fenced block.
type shape struct {
	intro, lang, body string
}

// parseShape reads a canonical reply; false for any other text.
func parseShape(text string) (shape, bool) {
	i := strings.Index(text, "```")
	if i < 0 || !strings.HasSuffix(text, "\n```") {
		return shape{}, false
	}
	rest := text[i+3 : len(text)-len("\n```")]
	nl := strings.IndexByte(rest, '\n')
	if nl < 0 || strings.Contains(rest, "```") {
		return shape{}, false
	}
	return shape{intro: strings.TrimSpace(text[:i]), lang: rest[:nl], body: rest[nl+1:]}, true
}

func fence(lang, body string) string { return "```" + lang + "\n" + body + "\n```" }

func joinParts(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "\n\n")
}

// Reply classes by kind: one answering SQL (a draft can precede it),
// several statements in one block, a JSON verdict, or another block.
func singleSQL(k Kind) bool {
	switch k {
	case KindGenerate, KindReaskSQL, KindRefine, KindCTERefine, KindSelfConsistency, KindExploreCorrect,
		KindRAISEFinal, KindRAISERefine, KindRAISEColumns, KindPExAProposeNext, KindPExAProposeAfterVerify, KindPExAProposeFix:
		return true
	}
	return false
}

func sqlLang(lang string) bool { return lang == "sql" }

// dress rewrites a canonical reply in the persona's surface. continuing
// is a reply that continues a prefix (no cut: the agent is asking for the
// rest).
func (s *Server) dress(persona string, req chatRequest, rep *reply, continuing bool) {
	if persona == PersonaCanonical || rep.kind == KindRAISEAgent && rep.info != nil {
		// The RAISE agent's commands are dressed where they are written
		// (raiseAgent), so its continuations stay consistent.
		return
	}
	rng := personaRNG(s.cfg.Seed, req, persona)
	opt := sqltext.Options{}
	dialect := ""
	if rep.info != nil {
		opt, dialect = rep.info.ex.Dialect.LexOptions(), string(rep.info.ex.Dialect)
	}
	if len(rep.calls) > 0 {
		s.dressCalls(persona, rng, rep, continuing)
		return
	}
	sh, ok := parseShape(rep.text)
	if !ok {
		switch persona {
		case PersonaDeepSeekR1:
			rep.text = think(rng, "", false) + rep.text
		case PersonaDeepSeekReasoner:
			rep.reasoning = reasoningText(rng, "")
		}
		s.reasoningUsage(persona, rng, req, rep)
		return
	}
	single := sqlLang(sh.lang) && singleSQL(rep.kind)
	draft := ""
	if single {
		draft = wrongQuery(rng, sh.body, opt)
		if rep.again {
			// Asked again, a model gives just its answer.
			draft = ""
		}
	}
	switch persona {
	case PersonaGPT4o:
		rep.text = gpt4oText(rng, sh)
	case PersonaO3:
		switch {
		case sh.lang == "json":
			rep.text = sh.body
		case rng.IntN(2) == 0:
			rep.text = fence(sh.lang, sh.body)
		default:
			rep.text = pick(rng, []string{"Query:", "Answer:", "Final:"}) + "\n" + fence(sh.lang, sh.body)
		}
	case PersonaClaude:
		rep.text = claudeText(rng, sh, draft)
	case PersonaDeepSeekR1:
		body := sh.body
		if sh.lang == "json" && rng.IntN(2) == 0 {
			body = stringBooleans(body)
		}
		rep.text = think(rng, draft, rng.IntN(10) < 3) + joinParts(sh.intro, fence(sh.lang, body))
	case PersonaDeepSeekReasoner:
		rep.reasoning = reasoningText(rng, draft)
	case PersonaQwenCoder:
		rep.text = qwenText(rng, sh, dialect, single)
	case PersonaEnvelopes:
		d := dressEnvelopes(rng, sh, single, draft, rep.again, continuing, opt)
		rep.text, rep.refusal = d.text, d.refusal
		if d.reasoning {
			// As a vLLM reasoning parser leaves it: the whole reply in
			// reasoning_content, content empty.
			rep.reasoning, rep.text, rep.inReasoning = d.text, "", true
		}
	case PersonaTruncating:
		// Asked again after a cut ("answer again, briefly"), the answer
		// fits.
		if !continuing && !rep.again && sqlLang(sh.lang) && rng.Float64() < truncateRate {
			if cut, ok := cutSQL(rng, sh.body, opt); ok {
				rep.text = joinParts(sh.intro, "```sql\n"+cut)
				rep.finish = "length"
			}
		}
	}
	s.reasoningUsage(persona, rng, req, rep)
}

// truncateRate is the share of the truncating persona's replies that run
// out of tokens.
const truncateRate = 0.15

// reasoningUsage sets the reasoning tokens a reasoning persona reports:
// o-series models hide theirs (a draw that grows with reasoning_effort),
// deepseek-reasoner counts its reasoning_content.
func (s *Server) reasoningUsage(persona string, rng *rand.Rand, req chatRequest, rep *reply) {
	switch persona {
	case PersonaO3:
		scale := map[string]int{"low": 1, "high": 4}[req.ReasoningEffort]
		if scale == 0 {
			scale = 2
		}
		rep.reasoningTokens = 64 * scale * (2 + rng.IntN(7))
	case PersonaDeepSeekReasoner:
		rep.reasoningTokens = s.tok.Count(req.Model, rep.reasoning)
	}
}

func gpt4oText(rng *rand.Rand, sh shape) string {
	intro := pick(rng, []string{"Here's the query:", "Here's the SQL query that answers the question:", "Sure! Here is the query:", "Here is the SQL you need:"})
	after := pick(rng, []string{
		"This query reads the relevant tables, applies the filters the question implies, and returns the requested columns.",
		"### Explanation\n- The query reads the tables the question is about.\n- It filters, groups and orders the rows as asked.",
		"Let me know if you'd like any adjustments to the query!",
	})
	if sh.lang == "json" {
		if rng.IntN(2) == 0 {
			// Embedded in prose, no fence.
			return "Here is my assessment: " + sh.body + "\n\n" + after
		}
		return joinParts("Here is my assessment:", fence("json", sh.body), after)
	}
	block := fence(sh.lang, sh.body)
	switch r := rng.IntN(3); {
	case !sqlLang(sh.lang):
	case r == 1:
		block = fence("SQL", sh.body)
	case r == 2 && !strings.Contains(sh.body, "\n"):
		block = "```sql " + sh.body + " ```"
	case r == 2:
		block = fence("SQL", sh.body)
	}
	return joinParts(intro, block, after)
}

func claudeText(rng *rand.Rand, sh shape, draft string) string {
	approach := joinParts("## Approach", pick(rng, []string{
		"I'll work through this step by step, starting from the tables the question names and the columns they provide, then the filters and the shape of the result.",
		"Let me break the question down: which rows it is about, what it asks to compute over them, and how the result should be ordered or limited.",
	}), sh.intro)
	if draft != "" && rng.IntN(10) < 6 {
		return joinParts(approach, "## Draft", fence(sh.lang, draft),
			"Actually, "+pick(rng, []string{
				"that draft does not quite match the question: it changes what the result contains. Let me correct it.",
				"looking at this again, the draft gets a detail of the question wrong. Here is the corrected version.",
			}),
			"## Final query", fence(sh.lang, sh.body),
			"This final query is the one to use.")
	}
	heading := "## Query"
	if sh.lang == "json" {
		heading = "## Verdict"
	}
	return joinParts(approach, heading, fence(sh.lang, sh.body), "I hope this helps! Let me know if anything needs adjusting.")
}

// think is R1's inline reasoning; vLLM's newer R1 templates put the
// opening tag in the prompt, so the reply then has only the closing one.
func think(rng *rand.Rand, draft string, noOpen bool) string {
	open := "<think>\n"
	if noOpen {
		open = ""
	}
	return open + reasoningText(rng, draft) + "\n</think>\n\n"
}

func reasoningText(rng *rand.Rand, draft string) string {
	lines := []string{pick(rng, []string{
		"Okay, let me figure out what the question is asking.",
		"Alright, so I need to work out which tables and columns answer this.",
		"Hmm, let me start by understanding the request.",
	}), pick(rng, []string{
		"The schema shows the tables involved, so I should join them on their keys and filter as the question says.",
		"I need to be careful about the filters and the ordering the question implies.",
	})}
	if draft != "" && rng.IntN(2) == 0 {
		lines = append(lines, "Maybe something like this:\n```sql\n"+draft+"\n```\nWait, no, that is not right; let me reconsider the details.")
	}
	lines = append(lines, pick(rng, []string{"Okay, I think I have it now.", "Yes, that should be it."}))
	return strings.Join(lines, "\n\n")
}

func qwenText(rng *rand.Rand, sh shape, dialect string, single bool) string {
	if sh.lang == "json" {
		return fence("json", pythonJSON(sh.body))
	}
	if !sqlLang(sh.lang) {
		return joinParts(sh.intro, fence(sh.lang, sh.body))
	}
	switch rng.IntN(4) {
	case 0:
		return joinParts(sh.intro, fence(dialectLang(rng, dialect), sh.body))
	case 1:
		return joinParts(sh.intro, fence("", sh.body))
	case 2:
		if single {
			// Plain SQL, no fence and no prose.
			return sh.body
		}
	}
	return joinParts(sh.intro, fence(sh.lang, sh.body))
}

// dialectLang is the fence language Qwen writes for a dialect: its name
// (BigQuery's also as GoogleSQL), postgresql when none is known.
func dialectLang(rng *rand.Rand, dialect string) string {
	langs := map[string][]string{"sqlite": {"sqlite"}, "bigquery": {"bigquery", "googlesql"}, "snowflake": {"snowflake"}}[dialect]
	if len(langs) == 0 {
		return "postgresql"
	}
	return pick(rng, langs)
}

// rewriteJSON walks JSON text and rewrites its literals and closers
// outside strings: lit maps true/false/null, closer may add text before a
// closing brace or bracket.
func rewriteJSON(js string, lit func(string) string, closer string) string {
	var b strings.Builder
	inStr, esc := false, false
	last := byte(0) // last significant byte outside strings
	for i := 0; i < len(js); i++ {
		c := js[i]
		if inStr {
			b.WriteByte(c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				last = '"'
			}
			continue
		}
		switch {
		case c == '"':
			inStr = true
		case c == '}' || c == ']':
			if closer != "" && last != '{' && last != '[' && last != 0 {
				b.WriteString(closer)
			}
		default:
			for _, w := range []string{"true", "false", "null"} {
				if strings.HasPrefix(js[i:], w) {
					b.WriteString(lit(w))
					i += len(w) - 1
					last = 'l'
					c = 0
					break
				}
			}
		}
		if c != 0 {
			b.WriteByte(c)
			if c != ' ' && c != '\n' && c != '\t' {
				last = c
			}
		}
	}
	return b.String()
}

// pythonJSON is JSON as a Python-minded model writes it: True, False,
// None and trailing commas.
func pythonJSON(js string) string {
	return rewriteJSON(js, func(w string) string {
		return map[string]string{"true": "True", "false": "False", "null": "None"}[w]
	}, ",")
}

// stringBooleans quotes JSON booleans: "correct": "false".
func stringBooleans(js string) string {
	return rewriteJSON(js, func(w string) string {
		if w == "null" {
			return w
		}
		return `"` + w + `"`
	}, "")
}

var sqlQueryKey = regexp.MustCompile(`"sql_query":`)

// dressCalls rewrites a tool-call reply: gpt-4o and o3 answer content null
// beside calls (gpt-4o sometimes adds a key the schema lacks), Claude
// writes a sentence beside them, R1 its reasoning, deepseek-reasoner its
// reasoning_content, Qwen quotes booleans and says sql for sql_query, the
// truncating persona may run out of tokens inside the SQL argument, and
// the envelopes persona ends some SQL arguments with ";" or CRLF.
func (s *Server) dressCalls(persona string, rng *rand.Rand, rep *reply, continuing bool) {
	c := &rep.calls[0]
	args := c.Function.Arguments
	switch persona {
	case PersonaGPT4o:
		rep.nullContent = true
		if rng.IntN(2) == 0 && strings.HasPrefix(args, "{") && strings.HasSuffix(args, "}") {
			extra := `"reasoning":"` + pick(rng, []string{"Calling the tool is the next step.", "This follows from the question."}) + `"`
			if args == "{}" {
				args = "{" + extra + "}"
			} else {
				args = args[:len(args)-1] + "," + extra + "}"
			}
		}
	case PersonaO3:
		rep.nullContent = true
	case PersonaClaude:
		rep.text = pick(rng, []string{"I'll call " + c.Function.Name + " for this step.", "Let me use the " + c.Function.Name + " tool."})
	case PersonaDeepSeekR1:
		rep.text = strings.TrimSuffix(think(rng, "", false), "\n\n")
	case PersonaDeepSeekReasoner:
		rep.reasoning = reasoningText(rng, "")
	case PersonaQwenCoder:
		args = stringBooleans(sqlQueryKey.ReplaceAllString(args, `"sql":`))
	case PersonaEnvelopes:
		args = dressEnvelopeArgs(rng, args)
	case PersonaTruncating:
		if !continuing && !rep.again && rng.Float64() < truncateRate {
			if cut, ok := cutArguments(rng, args); ok {
				args, rep.finish = cut, "length"
			}
		}
	}
	c.Function.Arguments = args
}

// danglers are words after which a statement cannot end.
var danglers = map[string]bool{"SELECT": true, "FROM": true, "WHERE": true, "AND": true, "OR": true, "JOIN": true,
	"ON": true, "BY": true, "HAVING": true, "WITH": true, "AS": true, "IN": true, "NOT": true, "CASE": true,
	"WHEN": true, "THEN": true, "ELSE": true, "LIMIT": true, "UNION": true, "DISTINCT": true}

// cutSQL cuts sql right after a word it cannot end on, so the cut is
// never a complete query; false when there is none.
func cutSQL(rng *rand.Rand, sql string, opt sqltext.Options) (string, bool) {
	var at []int
	for _, w := range sqltext.Words(sql, opt) {
		if danglers[strings.ToUpper(w.Text)] && w.End < len(sql) {
			at = append(at, w.End)
		}
	}
	if len(at) == 0 {
		return "", false
	}
	return sql[:at[rng.IntN(len(at))]], true
}

// cutArguments cuts tool arguments inside their first SQL string, so
// they are not valid JSON and their SQL is not complete.
func cutArguments(rng *rand.Rand, args string) (string, bool) {
	var v any
	if json.Unmarshal([]byte(args), &v) != nil {
		return "", false
	}
	sql := firstSQLValue(v)
	if sql == "" {
		return "", false
	}
	cut, ok := cutSQL(rng, sql, sqltext.Options{})
	if !ok {
		return "", false
	}
	full, part := jsonString(sql), jsonString(cut)
	i := strings.Index(args, full)
	if i < 0 {
		return "", false
	}
	return args[:i] + strings.TrimSuffix(part, `"`), true
}

func firstSQLValue(v any) string {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if s, ok := t[k].(string); ok && sqlLike(k) && s != "" {
				return s
			}
		}
		for _, k := range keys {
			if s := firstSQLValue(t[k]); s != "" {
				return s
			}
		}
	case []any:
		for _, e := range t {
			if s := firstSQLValue(e); s != "" {
				return s
			}
		}
	}
	return ""
}

// jsonString encodes s as the simulator's arguments do (no HTML escaping).
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
