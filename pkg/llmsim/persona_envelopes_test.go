package llmsim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	rd "github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/sqltext"
)

// The envelopes persona's tests read its replies generically, as its
// forms are drawn, not listed: SQL is found by its text up to whitespace
// (in the content, the reasoning, or any JSON string at any depth), a
// verdict by its members in any decoded object.

// squeeze drops whitespace and the invisible characters the persona
// scatters.
func squeeze(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\n', '\r', '\u00a0', '\u200b', '\ufeff':
			return -1
		}
		return r
	}, s)
}

// jsonValues decodes every JSON object or array that starts in text, and,
// inside them, every string that is JSON itself.
func jsonValues(text string, depth int) []any {
	if depth > 4 {
		return nil
	}
	var out []any
	for i := 0; i < len(text); i++ {
		if text[i] != '{' && text[i] != '[' {
			continue
		}
		var v any
		if json.NewDecoder(strings.NewReader(text[i:])).Decode(&v) != nil {
			continue
		}
		out = append(out, v)
		for _, s := range jsonStrings(v) {
			out = append(out, jsonValues(s, depth+1)...)
		}
	}
	return out
}

// jsonStrings are the string values of v, at any depth.
func jsonStrings(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case map[string]any:
		var out []string
		for _, x := range t {
			out = append(out, jsonStrings(x)...)
		}
		return out
	case []any:
		var out []string
		for _, x := range t {
			out = append(out, jsonStrings(x)...)
		}
		return out
	}
	return nil
}

// readings are the texts a reply holds: its content or reasoning and
// every JSON string in them.
func readings(r simReply) []string {
	out := []string{r.text(), r.reasoning}
	for _, t := range []string{r.text(), r.reasoning} {
		for _, v := range jsonValues(t, 0) {
			out = append(out, jsonStrings(v)...)
		}
	}
	return out
}

// holds reports whether sql is in one of the reply's readings, up to
// whitespace.
func holds(r simReply, sql string) bool {
	want := squeeze(sql)
	for _, t := range readings(r) {
		if strings.Contains(squeeze(t), want) {
			return true
		}
	}
	return false
}

// sameVerdict compares a decoded object with canonical's verdict, string
// booleans read as booleans.
func sameVerdict(got, want map[string]any) bool {
	if len(got) != len(want) {
		return false
	}
	for k, w := range want {
		g := got[k]
		if s, ok := g.(string); ok && (s == "true" || s == "false") {
			g = s == "true"
		}
		if !reflect.DeepEqual(g, w) {
			return false
		}
	}
	return true
}

// verdictDepth finds canonical's verdict in the reply: the depth of the
// object that holds it (0: at the top of a JSON value), -1 when absent.
func verdictDepth(r simReply, want map[string]any) int {
	var find func(v any, d int) int
	find = func(v any, d int) int {
		switch t := v.(type) {
		case map[string]any:
			if sameVerdict(t, want) {
				return d
			}
			for _, x := range t {
				if got := find(x, d+1); got >= 0 {
					return got
				}
			}
		case []any:
			for _, x := range t {
				if got := find(x, d+1); got >= 0 {
					return got
				}
			}
		}
		return -1
	}
	best := -1
	for _, t := range []string{r.text(), r.reasoning} {
		for _, v := range jsonValues(t, 0) {
			if d := find(v, 0); d >= 0 && (best < 0 || d > best) {
				best = d
			}
		}
	}
	return best
}

// sameArgs compares tool arguments up to a trailing semicolon and CRLF
// in their SQL values.
func sameArgs(got, want string) bool {
	norm := func(args string) any {
		var v any
		if json.Unmarshal([]byte(args), &v) != nil {
			return nil
		}
		var walk func(x any) any
		walk = func(x any) any {
			switch t := x.(type) {
			case map[string]any:
				for k, y := range t {
					t[k] = walk(y)
				}
			case []any:
				for i := range t {
					t[i] = walk(t[i])
				}
			case string:
				return strings.TrimRight(strings.ReplaceAll(t, "\r\n", "\n"), ";\r\n")
			}
			return x
		}
		return walk(v)
	}
	return reflect.DeepEqual(norm(got), norm(want))
}

// TestEnvelopesReproducible: the same seed gives the same reply, byte for
// byte, from two simulators; different request seeds draw different
// envelopes.
func TestEnvelopesReproducible(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	canon := mustNew(t, Config{Dataset: ds, Seed: 3})
	_, a := newSim(t, Config{Dataset: ds, Seed: 3, Personas: Personas{"*": PersonaEnvelopes}})
	_, b := newSim(t, Config{Dataset: ds, Seed: 3, Personas: Personas{"*": PersonaEnvelopes}})
	distinct := map[string]bool{}
	n := 0
	for _, pc := range personaCases() {
		for seed := int64(0); seed < 6; seed++ {
			body := pc.body(canon, ds.Examples[10], seed)
			x, y := askRaw(t, a.URL, body), askRaw(t, b.URL, body)
			if x.text() != y.text() || x.reasoning != y.reasoning || !reflect.DeepEqual(x.calls, y.calls) || x.finish != y.finish {
				t.Errorf("%s seed %d: two simulators with one seed differ:\n%q\n%q", pc.name, seed, x.text()+x.reasoning, y.text()+y.reasoning)
			}
			if pc.name == "generate" || pc.name == "link" {
				n++
				distinct[x.text()+"\x00"+x.reasoning] = true
			}
		}
	}
	if len(distinct) < n-1 {
		t.Errorf("%d distinct replies of %d: the envelopes are not drawn per request", len(distinct), n)
	}
}

// TestEnvelopesKeepTheAnswer: every dressed reply holds canonical's
// answer: its SQL up to whitespace (each statement of a batch), or it is
// a refusal; its verdict in some decoded object; its call with the same
// arguments up to a trailing ";" or CRLF.
func TestEnvelopesKeepTheAnswer(t *testing.T) {
	t.Parallel()
	ds, canon, canonURL, urls := personaSims(t)
	url := urls[PersonaEnvelopes]
	seeds := int64(10)
	if raceEnabled {
		seeds = 3
	}
	for _, pc := range personaCases() {
		for _, e := range []*dataset.Example{ds.Examples[0], ds.Examples[10], ds.Examples[20]} {
			opt := e.Dialect.LexOptions()
			for seed := int64(0); seed < seeds; seed++ {
				body := pc.body(canon, e, seed)
				want, got := askRaw(t, canonURL, body), askRaw(t, url, body)
				label := fmt.Sprintf("%s %s seed %d", pc.name, e.ID, seed)
				if got.status != http.StatusOK || !strings.Contains(got.model, "persona "+PersonaEnvelopes) {
					t.Fatalf("%s: status %d (%s), model %q", label, got.status, got.errMsg, got.model)
				}
				if got.text() != "" && got.reasoning != "" {
					t.Errorf("%s: both content and reasoning: %q / %q", label, got.text(), got.reasoning)
				}
				switch {
				case pc.tool:
					if len(got.calls) != 1 || got.calls[0].Function.Name != want.calls[0].Function.Name ||
						!sameArgs(got.calls[0].Function.Arguments, want.calls[0].Function.Arguments) {
						t.Errorf("%s: call %+v, canonical %+v", label, got.calls, want.calls)
					}
				case pc.json:
					if verdictDepth(got, verdictOf(want.text())) < 0 {
						t.Errorf("%s: canonical verdict %v not in\n%q%q", label, verdictOf(want.text()), got.text(), got.reasoning)
					}
				case isRefusalText(got.text()):
					if !pc.single {
						t.Errorf("%s: a refusal where no single SQL was asked for: %q", label, got.text())
					}
				default:
					sql := answerOf(want.text())
					stmts := []string{sql}
					if !pc.single {
						stmts = sqltext.Split(sql, opt)
					}
					for _, st := range stmts {
						if !holds(got, st) {
							t.Errorf("%s: canonical SQL %q not in\n%q%q", label, st, got.text(), got.reasoning)
						}
					}
				}
			}
		}
	}
}

// TestEnvelopesForms: over many requests, each part of the generator
// shows.
func TestEnvelopesForms(t *testing.T) {
	t.Parallel()
	ds, canon, canonURL, urls := personaSims(t)
	sqlCase := func(pc personaCase) bool { return !pc.json && !pc.tool }
	forms := []struct {
		name string
		ok   func(pc personaCase, want, got simReply) bool
	}{
		{"fence with attributes", func(pc personaCase, _, r simReply) bool {
			return regexp.MustCompile("(?m)^(?:`{3,}|~{3,}) ?[^\\s`]* +[^\\n`]*[={]").MatchString(r.text() + r.reasoning)
		}},
		{"~~~ fence", func(_ personaCase, _, r simReply) bool {
			return regexp.MustCompile("(?m)^~{3,}").MatchString(r.text() + r.reasoning)
		}},
		{"fence of 4+ backticks", func(_ personaCase, _, r simReply) bool {
			return regexp.MustCompile("(?m)^`{4,}").MatchString(r.text() + r.reasoning)
		}},
		{"closing tag glued to the query", func(pc personaCase, _, r simReply) bool {
			return pc.single && regexp.MustCompile(`[\w)'";]</[A-Za-z][\w-]*>`).MatchString(r.text()+r.reasoning)
		}},
		{"tag with attributes", func(_ personaCase, _, r simReply) bool {
			return regexp.MustCompile(`<[A-Za-z][\w-]* [\w-]+=['"]?\w`).MatchString(r.text() + r.reasoning)
		}},
		{"SQL in JSON two levels deep", func(pc personaCase, want, r simReply) bool {
			if !pc.single {
				return false
			}
			sql := squeeze(answerOf(want.text()))
			for _, v := range jsonValues(r.text()+r.reasoning, 0) {
				if m, ok := v.(map[string]any); ok {
					for _, x := range m {
						if _, nested := x.(map[string]any); nested && strings.Contains(squeeze(fmt.Sprint(x)), sql) {
							return true
						}
						if _, nested := x.([]any); nested && strings.Contains(squeeze(fmt.Sprint(x)), sql) {
							return true
						}
					}
				}
			}
			return false
		}},
		{"JSON mode", func(pc personaCase, _, r simReply) bool {
			t := strings.Trim(r.text()+r.reasoning, "\ufeff\u200b")
			return pc.single && strings.HasPrefix(t, "{") && json.Valid([]byte(t))
		}},
		{"indented block", func(pc personaCase, _, r simReply) bool {
			return sqlCase(pc) && regexp.MustCompile(`(?m)^    (?i:select|with|--)`).MatchString(r.text()+r.reasoning)
		}},
		{"CRLF", func(_ personaCase, _, r simReply) bool { return strings.Contains(r.text()+r.reasoning, "\r\n") }},
		{"BOM", func(_ personaCase, _, r simReply) bool { return strings.HasPrefix(r.text()+r.reasoning, bom) }},
		{"zero-width space in the SQL", func(pc personaCase, _, r simReply) bool {
			return sqlCase(pc) && regexp.MustCompile(`\w`+zwsp+`\s`).MatchString(r.text()+r.reasoning)
		}},
		{"NBSP", func(_ personaCase, _, r simReply) bool { return strings.Contains(r.text()+r.reasoning, nbsp) }},
		{"prose before and after", func(pc personaCase, _, r simReply) bool {
			t := r.text() + r.reasoning
			return sqlCase(pc) && regexp.MustCompile(`^(Here|Below|This|I wrote|Okay|Sure|Done|Based)`).MatchString(t) &&
				regexp.MustCompile(`(needed\)\.|adjusting\.|nothing else\.|implies\.)$`).MatchString(t)
		}},
		{"draft, then the answer last", func(pc personaCase, _, r simReply) bool {
			return pc.single && regexp.MustCompile(`(Actually|Wait|On second thought|Hmm), `).MatchString(r.text()+r.reasoning)
		}},
		{"answer marked final, then a draft", func(pc personaCase, _, r simReply) bool {
			return pc.single && regexp.MustCompile(`For comparison|An earlier draft|I first tried`).MatchString(r.text()+r.reasoning)
		}},
		{"only in reasoning_content", func(pc personaCase, _, r simReply) bool {
			return !pc.tool && r.text() == "" && r.reasoning != "" && r.reasoningTokens > 0
		}},
		{"verdict nested deeper", func(pc personaCase, want, r simReply) bool {
			return pc.json && verdictDepth(r, verdictOf(want.text())) >= 1
		}},
		{"string booleans", func(pc personaCase, _, r simReply) bool {
			return pc.json && regexp.MustCompile(`\\?"correct\\?":\s*\\?"(true|false)`).MatchString(r.text()+r.reasoning)
		}},
		{"trailing ; in tool arguments", func(pc personaCase, _, r simReply) bool {
			return pc.tool && strings.Contains(r.calls[0].Function.Arguments, `;"`)
		}},
		{"CRLF in tool arguments", func(pc personaCase, _, r simReply) bool {
			return pc.tool && strings.Contains(r.calls[0].Function.Arguments, `\r\n`)
		}},
	}
	seen := map[string]bool{}
	for _, pc := range personaCases() {
		for _, e := range []*dataset.Example{ds.Examples[0], ds.Examples[10], ds.Examples[20]} {
			for seed := int64(0); seed < 40 && len(seen) < len(forms); seed++ {
				body := pc.body(canon, e, seed)
				want, got := askRaw(t, canonURL, body), askRaw(t, urls[PersonaEnvelopes], body)
				for _, f := range forms {
					if !seen[f.name] && f.ok(pc, want, got) {
						seen[f.name] = true
					}
				}
			}
		}
	}
	for _, f := range forms {
		if !seen[f.name] {
			t.Errorf("the envelopes persona never wrote: %s", f.name)
		}
	}
}

// TestEnvelopeGenerator runs the generator itself over the demo's gold
// SQL and a few hard cases: the SQL is held up to whitespace, it keeps its
// literals and identifiers whole, prose after it never joins its last
// line with a space, and the same draws give the same text.
func TestEnvelopeGenerator(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	type gold struct {
		sql string
		opt sqltext.Options
	}
	var golds []gold
	for _, e := range ds.Examples {
		golds = append(golds, gold{strings.TrimSpace(e.Gold.SQL), e.Dialect.LexOptions()})
	}
	golds = append(golds,
		gold{"SELECT 'a  b\nc' AS x, \"odd  name\" FROM t -- note\nWHERE y = 1;", sqltext.Options{}},
		gold{"SELECT `p.d.t`.a FROM `p.d.t` WHERE s = 'x`y'", sqltext.DialectOptions(sqltext.BigQuery)},
		gold{"WITH a AS (SELECT 1 AS v)\nSELECT v FROM a", sqltext.Options{}})
	draws := 60
	if raceEnabled {
		draws = 15
	}
	// The last token of every query here is a word: what follows it in
	// a reply must be a delimiter (a line break, ";", a tag, a fence, a
	// quote ending a JSON string, its escape), never a space and prose.
	endMark := " AND zz_end_of_query = 1"
	bad := regexp.MustCompile(`zz_end_of_query = 1[ \t]*[A-Za-z(]`)
	for gi, g := range golds {
		base := strings.TrimRight(g.sql, "; \n")
		for _, sql := range []string{g.sql, base + endMark} {
			for i := range draws {
				for _, single := range []bool{true, false} {
					sh := shape{intro: "Intro.", lang: "sql", body: sql}
					d := dressEnvelopes(rand.New(rand.NewPCG(uint64(gi), uint64(i))), sh, single, "SELECT 0 AS draft", false, false, g.opt)
					again := dressEnvelopes(rand.New(rand.NewPCG(uint64(gi), uint64(i))), sh, single, "SELECT 0 AS draft", false, false, g.opt)
					if d != again {
						t.Fatalf("gold %d draw %d: the same draws gave two texts", gi, i)
					}
					if d.refusal {
						continue
					}
					r := simReply{content: &d.text}
					stmts := []string{sql}
					if !single {
						stmts = sqltext.Split(sql, g.opt)
					}
					for _, st := range stmts {
						if !holds(r, st) {
							t.Errorf("gold %d draw %d: %q not in %q", gi, i, st, d.text)
						}
					}
					if bad.MatchString(d.text) {
						t.Errorf("gold %d draw %d: prose glued to the query's last line: %q", gi, i, d.text)
					}
					// Literals and quoted identifiers are whole: no
					// invisible character or line break entered them.
					for lx := range sqltext.Lex(sql, g.opt) {
						if lx.Kind != sqltext.KindString && lx.Kind != sqltext.KindQuotedIdent {
							continue
						}
						lit, whole := sql[lx.Start:lx.End], false
						for _, rd := range readings(r) {
							whole = whole || strings.Contains(rd, lit)
						}
						if !whole {
							t.Errorf("gold %d draw %d: literal %q is not whole in %q", gi, i, lit, d.text)
						}
					}
				}
			}
		}
	}
}

// TestEnvelopeRefusals: about 2% of SQL answers are refusals, never an
// answer to a re-ask; each begins with a SQL word and holds no query.
func TestEnvelopeRefusals(t *testing.T) {
	t.Parallel()
	sh := shape{intro: "Intro.", lang: "sql", body: "SELECT a FROM t"}
	keyword := map[string]bool{"WITH": true, "SELECT": true, "FROM": true, "WHERE": true, "WHEN": true, "VALUES": true,
		"ORDER": true, "UPDATE": true, "SHOW": true, "JOIN": true}
	n, refusals := 4000, 0
	texts := map[string]bool{}
	for i := range n {
		d := dressEnvelopes(rand.New(rand.NewPCG(7, uint64(i))), sh, true, "", false, false, sqltext.Options{})
		if !d.refusal {
			continue
		}
		refusals++
		texts[d.text] = true
		first := strings.ToUpper(strings.Fields(d.text)[0])
		if !keyword[strings.TrimRight(first, ":,")] || strings.Contains(d.text, "`") || !strings.HasSuffix(d.text, "?") || !isRefusalText(d.text) {
			t.Errorf("refusal %q: want prose that begins with a SQL word and asks back", d.text)
		}
		if d.reasoning {
			t.Errorf("refusal %q moved to reasoning", d.text)
		}
		if again := dressEnvelopes(rand.New(rand.NewPCG(7, uint64(i))), sh, true, "", true, false, sqltext.Options{}); again.refusal {
			t.Errorf("draw %d: the answer to a re-ask is a refusal", i)
		}
		if batch := dressEnvelopes(rand.New(rand.NewPCG(7, uint64(i))), sh, false, "", false, false, sqltext.Options{}); batch.refusal {
			t.Errorf("draw %d: a batch reply is a refusal", i)
		}
	}
	if refusals*100 < n*1 || refusals*100 > n*3 {
		t.Errorf("%d refusals in %d SQL answers, want about 2%%", refusals, n)
	}
	if len(texts) < refusals/2 {
		t.Errorf("%d distinct refusals of %d: not composed from parts", len(texts), refusals)
	}
}

// TestEnvelopeRefusalReasked: an agent that re-asks after a refusal (in
// the agents' words or its own) gets canonical's answer, and the next
// turn of the conversation is canonical's too.
func TestEnvelopeRefusalReasked(t *testing.T) {
	t.Parallel()
	ds, _, canonURL, urls := personaSims(t)
	url := urls[PersonaEnvelopes]
	e := ds.Examples[10]
	first := "DB info...\nTask: " + e.Question + "\nPlease think step by step and " + MarkerGenerate + " in sqlite dialect."
	refine := MarkerInputSQL + "\nSELECT 1\n" + MarkerErrorInfo + ":\nno such column\nPlease correct it and output only 1 complete SQL query."
	found := 0
	for seed := int64(0); seed < 600 && found < 2; seed++ {
		msgs := []llm.Message{llm.User(first)}
		r := askRaw(t, url, bodyOf(seed, msgs, nil))
		if !isRefusalText(r.text()) {
			continue
		}
		want := askRaw(t, canonURL, bodyOf(seed, msgs, nil))
		reask := []string{"Your reply has no SQL query. Answer with one SQL query.", "Please write the query itself."}[found]
		found++
		msgs = append(msgs, llm.Assistant(r.text()), llm.User(reask))
		again := askRaw(t, url, bodyOf(seed+1, msgs, nil))
		if isRefusalText(again.text()) || !holds(again, answerOf(want.text())) {
			t.Errorf("seed %d, re-asked %q: %q%q, want canonical's %q", seed, reask, again.text(), again.reasoning, answerOf(want.text()))
		}
		// The pair drops out: the next turn is answered as canonical's
		// conversation without it.
		msgs = append(msgs, llm.Assistant(again.text()+again.reasoning), llm.User(refine))
		next := askRaw(t, url, bodyOf(seed+2, msgs, nil))
		cmsgs := []llm.Message{llm.User(first), llm.Assistant(want.text()), llm.User(refine)}
		cnext := askRaw(t, canonURL, bodyOf(seed+2, cmsgs, nil))
		if !isRefusalText(next.text()) && !holds(next, answerOf(cnext.text())) {
			t.Errorf("seed %d: the turn after the re-ask %q%q, canonical's %q", seed, next.text(), next.reasoning, answerOf(cnext.text()))
		}
	}
	if found == 0 {
		t.Fatal("no refusal in 600 requests")
	}
}

// TestEnvelopeCommands: every command envelope reads back, after the
// agent's cut at [EXECUTE] and what either transport appends, as the
// canonical command; each envelope appears.
func TestEnvelopeCommands(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s := mustNew(t, Config{Dataset: ds})
	info := s.know.find("Task: " + ds.Examples[10].Question)
	rng := rand.New(rand.NewPCG(1, 2))
	var segs []string
	for _, st := range s.raisePlan(rng, info) {
		segs = append(segs, s.raiseCommand(rng, info, st))
	}
	segs = append(segs, "Reasoning.\n[RUN] run_query(\"SELECT `a` FROM t WHERE b = \\\"x)\\\" AND c < 2\") [EXECUTE]",
		"Reasoning.\n[RUN] read_columns_documentation([\"t.a\"]) [EXECUTE]")
	forms := map[string]*regexp.Regexp{
		"<tool_call> JSON":       regexp.MustCompile(`<tool_call>\s*\{`),
		"<function=…>":           regexp.MustCompile(`<function=[a-z_]+>`),
		"bare JSON call":         regexp.MustCompile(`\n\{\s*"name"`),
		`"parameters"`:           regexp.MustCompile(`"parameters"`),
		"arguments as a string":  regexp.MustCompile(`"arguments": "\{`),
		"[RUN] `cmd`":            regexp.MustCompile("\\[RUN\\] `"),
		"fence":                  regexp.MustCompile("\n(```|~~~)"),
		"tag around the call":    regexp.MustCompile(`\n<[a-zA-Z][\w-]*[ >][^\n]*\n?(<tool_call>|<function=|\{|\[RUN\])`),
		"a note after":           regexp.MustCompile(`\n(Let me see|I'll wait|\(This tells|Once I have|Running it|The output)`),
		"[EXECUTE] in a fence":   regexp.MustCompile("\n```[^\n]*\n[^\n]* \\[EXECUTE\\]\n```$"),
		"no [EXECUTE]":           regexp.MustCompile(`[^\]]$`),
		"command left canonical": regexp.MustCompile(`\n\[RUN\] [a-z_]+\(.*\) \[EXECUTE\]$`),
	}
	seen := map[string]bool{}
	for i := range 300 {
		for _, seg := range segs {
			d := envelopeSegment(rand.New(rand.NewPCG(uint64(i), 11)), seg, sqltext.Options{})
			for f, re := range forms {
				if re.MatchString(d) {
					seen[f] = true
				}
			}
			// What the model wrote up to the stop, as the agent keeps it.
			cut, _, _ := strings.Cut(d, "[EXECUTE]")
			want, _, _ := strings.Cut(seg, "[EXECUTE]")
			result := "[RESULT]\nrow\n[/RESULT]\n"
			if got := canonicalCommands(cut + "[EXECUTE]\n" + result); got != want+"[EXECUTE]\n"+result {
				t.Fatalf("continue transport: %q reads back as %q, want %q", d, got, want+"[EXECUTE]\n"+result)
			}
			if got := canonicalCommands(cut + "\n" + result); got != want+"\n"+result {
				t.Fatalf("multi-turn transport: %q reads back as %q, want %q", d, got, want+"\n"+result)
			}
		}
	}
	for f := range forms {
		if !seen[f] {
			t.Errorf("no command was written as %s", f)
		}
	}
	answer := "The query ran. This is my final answer.\n\n```sql\nSELECT 1\n```"
	for i := range 20 {
		d := envelopeSegment(rand.New(rand.NewPCG(uint64(i), 3)), answer, sqltext.Options{})
		if !holds(simReply{content: &d}, "SELECT 1") || strings.Contains(canonicalCommands(d), "[RUN]") {
			t.Errorf("final answer %q: want SELECT 1 and no command", d)
		}
	}
}

// TestEnvelopesRAISETrajectory drives RAISE agent trajectories under the
// envelopes persona with a reader that takes commands in any envelope
// (canonicalCommands) and a reply in reasoning_content when content is
// empty, over both transports: the commands and the final SQL are
// canonical's, so the simulator recognised its own commands throughout.
func TestEnvelopesRAISETrajectory(t *testing.T) {
	t.Parallel()
	ds, _, canonURL, urls := personaSims(t)
	type step struct {
		cmds    []string
		answer  simReply
		inReasn int
	}
	run := func(url string, e *dataset.Example, seed int64, multi bool) step {
		prompt := "Answer with commands.\n" + MarkerRAISEAgent + "\nTask: " + e.Question
		msgs := []llm.Message{llm.User(prompt)}
		traj := ""
		var out step
		for call := range 40 {
			req := map[string]any{"model": "r1", "seed": seed*100 + int64(call), "stop": []string{"[EXECUTE]"}}
			if multi {
				req["messages"] = wireMsgs(msgs)
			} else {
				m := []llm.Message{llm.User(prompt)}
				if traj != "" {
					m = append(m, llm.Assistant(traj))
				}
				req["messages"], req["continue_final_message"], req["add_generation_prompt"] = wireMsgs(m), traj != "", false
			}
			r := askRaw(t, url, req)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.errMsg)
			}
			seg := r.text()
			if seg == "" {
				seg, out.inReasn = r.reasoning, out.inReasn+1
			}
			norm := canonicalCommands(seg)
			at := strings.LastIndex(norm, "[RUN] ")
			if at < 0 || at > 0 && norm[at-1] != '\n' {
				out.answer = r
				return out
			}
			out.cmds = append(out.cmds, strings.TrimSpace(norm[at:]))
			if multi {
				msgs = append(msgs, llm.Assistant(seg), llm.User("[RESULT]\nrow 1\n[/RESULT]"))
			} else {
				traj += seg + "[EXECUTE]\n[RESULT]\nrow 1\n[/RESULT]\n"
			}
		}
		t.Fatalf("no answer after 40 calls")
		return out
	}
	seeds := int64(4)
	if raceEnabled {
		seeds = 1
	}
	reasoning := 0
	for _, e := range []*dataset.Example{ds.Examples[0], ds.Examples[10], ds.Examples[20]} {
		for seed := int64(1); seed <= seeds; seed++ {
			for _, multi := range []bool{false, true} {
				want, got := run(canonURL, e, seed, multi), run(urls[PersonaEnvelopes], e, seed, multi)
				reasoning += got.inReasn
				if !reflect.DeepEqual(got.cmds, want.cmds) || !holds(got.answer, answerOf(want.answer.text())) {
					t.Errorf("%s seed %d multi %v: commands %q answer %q%q; canonical %q answer %q", e.ID, seed, multi,
						got.cmds, got.answer.text(), got.answer.reasoning, want.cmds, answerOf(want.answer.text()))
				}
			}
		}
	}
	if reasoning == 0 && !raceEnabled {
		t.Error("no segment was written in reasoning_content")
	}
}

// TestEnvelopesConversation: a conversation that re-sends the envelopes
// persona's replies as it received them (content, or the reasoning when
// the content is empty; calls with their dressed arguments) gets
// canonical's answer at every turn: the simulator recognises its own
// envelopes in the history. A refusal is re-asked and answered.
func TestEnvelopesConversation(t *testing.T) {
	t.Parallel()
	ds, canon, canonURL, urls := personaSims(t)
	url := urls[PersonaEnvelopes]
	refine := MarkerInputSQL + "\nSELECT 1\n" + MarkerErrorInfo + ":\nno such column\nPlease correct it and output only 1 complete SQL query."
	type convCase struct {
		name  string
		first func(e *dataset.Example) string
		next  []string
		tools []json.RawMessage
	}
	cases := []convCase{
		{name: "refine twice", first: func(e *dataset.Example) string {
			return "DB info...\nTask: " + e.Question + "\nPlease think step by step and " + MarkerGenerate + " in sqlite dialect."
		}, next: []string{refine, refine + " "}},
		{name: "testcase fix", tools: testcaseTools, first: func(e *dataset.Example) string {
			info := canon.know.find("Task: " + e.Question)
			return testcasePrompt(canon, e, tag(info, "Retrieve a few sample rows from "+canon.know.goldTables(info)[0].name))
		}, next: []string{"Query 1 (sample): Compilation Error: no such column"}},
	}
	seeds := int64(8)
	if raceEnabled {
		seeds = 2
	}
	for _, tc := range cases {
		for _, e := range []*dataset.Example{ds.Examples[0], ds.Examples[10], ds.Examples[20]} {
			for seed := int64(0); seed < seeds; seed++ {
				cmsgs := []llm.Message{llm.User(tc.first(e))}
				msgs := []llm.Message{llm.User(tc.first(e))}
				for turn := 0; turn <= len(tc.next); turn++ {
					s := seed*1000 + int64(100*turn)
					want := askRaw(t, canonURL, bodyOf(s, cmsgs, tc.tools))
					got := askRaw(t, url, bodyOf(s, msgs, tc.tools))
					label := fmt.Sprintf("%s %s seed %d turn %d", tc.name, e.ID, seed, turn)
					sent := turnOf(got).msg
					if sent.Content == "" && len(sent.ToolCalls) == 0 {
						sent.Content = got.reasoning
					}
					msgs = append(msgs, sent)
					if isRefusalText(got.text()) {
						msgs = append(msgs, llm.User("Your reply has no SQL query. Answer with one SQL query."))
						got = askRaw(t, url, bodyOf(s+1, msgs, tc.tools))
						msgs = append(msgs, llm.Message{Role: "assistant", Content: got.text() + got.reasoning})
					}
					switch {
					case len(want.calls) > 0:
						if len(got.calls) != 1 || got.calls[0].Function.Name != want.calls[0].Function.Name ||
							!sameArgs(got.calls[0].Function.Arguments, want.calls[0].Function.Arguments) {
							t.Errorf("%s: call %+v, canonical %+v", label, got.calls, want.calls)
						}
					case !holds(got, answerOf(want.text())):
						t.Errorf("%s: canonical SQL %q not in %q%q", label, answerOf(want.text()), got.text(), got.reasoning)
					}
					cmsgs = append(cmsgs, turnOf(want).msg)
					if turn == len(tc.next) {
						break
					}
					if len(want.calls) > 0 {
						cmsgs = append(cmsgs, llm.ToolResult(want.calls[0].ID, tc.next[turn]))
						msgs = append(msgs, llm.ToolResult(got.calls[0].ID, tc.next[turn]))
					} else {
						cmsgs, msgs = append(cmsgs, llm.User(tc.next[turn])), append(msgs, llm.User(tc.next[turn]))
					}
				}
			}
		}
	}
}

// TestEnvelopesReadAsCanonical: the one reader the agents use reads every
// single-SQL reply the persona draws as canonical's answer, or as a
// refusal when it wrote one: over many draws and the shapes canonical's
// SQL takes (a leading "-- final answer" comment, which a draft copies; a
// misspelt FROM, llmsim's noise; a closing ";"), with drafts, whose
// wrappers are the answer's, so no key names the draft final alone.
func TestEnvelopesReadAsCanonical(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s := mustNew(t, Config{Dataset: ds})
	var bodies []string
	for _, e := range ds.Examples[:12] {
		gold := s.know.find("Task: " + e.Question).gold
		bodies = append(bodies, gold, "-- final answer\n"+gold, gold+";")
		for _, w := range sqltext.Words(gold, sqltext.Options{}) {
			if strings.EqualFold(w.Text, "FROM") {
				typo := sqltext.ReplaceWord(gold, w, "FORM")
				bodies = append(bodies, typo, "-- final answer\n"+typo)
				break
			}
		}
	}
	n := 3000
	if raceEnabled {
		n = 300
	}
	for i := range n {
		body := bodies[i%len(bodies)]
		sh, ok := parseShape(sqlBlock("Using what the operations show about the tables and values, the query is:", body))
		if !ok {
			t.Fatalf("no shape in canonical's reply of %q", body)
		}
		want, err := rd.SQL(sqlBlock("Using what the operations show about the tables and values, the query is:", body), "stop")
		if err != nil {
			t.Fatalf("canonical's reply of %q unread: %v", body, err)
		}
		rng := rand.New(rand.NewPCG(52, uint64(i)))
		d := dressEnvelopes(rng, sh, true, wrongQuery(rng, body, sqltext.Options{}), false, false, sqltext.Options{})
		text, reasoning := d.text, ""
		if d.reasoning {
			text, reasoning = "", d.text
		}
		got, err := rd.SQLWithReasoning(text, reasoning, "stop")
		switch {
		case d.refusal:
			if !rd.IsRefusal(err) {
				t.Errorf("draw %d: a refusal read as %q (%v)\n%q", i, got, err, d.text)
			}
		case err != nil || rd.Key(got) != rd.Key(want):
			t.Errorf("draw %d: read %q (%v), canonical's answer %q\nreply %q", i, got, err, want, d.text)
		}
	}
}
