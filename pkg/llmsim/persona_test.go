package llmsim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
)

func TestParsePersonas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Personas
		wantErr string
	}{
		{in: "deepseek-r1", want: Personas{"*": "deepseek-r1"}},
		{in: "final_a-model=claude,o3-mini=o3", want: Personas{"final_a-model": "claude", "o3-mini": "o3"}},
		{in: " gpt-4o , r1=deepseek-r1,", want: Personas{"*": "gpt-4o", "r1": "deepseek-r1"}},
		{in: "=qwen-coder", want: Personas{"*": "qwen-coder"}},
		{in: "", want: Personas{}},
		{in: "gpt4", wantErr: `unknown persona "gpt4" (valid: canonical, gpt-4o, o3, claude, deepseek-r1, deepseek-reasoner, qwen-coder, truncating, envelopes)`},
		{in: "m=nobody", wantErr: `personas "m=nobody"`},
		{in: "m=o3,m=claude", wantErr: `model "m" has two personas, o3 and claude`},
	}
	for _, tt := range tests {
		got, err := ParsePersonas(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParsePersonas(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParsePersonas(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			continue
		}
		back, err := ParsePersonas(got.String())
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("ParsePersonas(%q).String() = %q reads back as %v, %v", tt.in, got.String(), back, err)
		}
	}
}

func TestPersonasForAndSet(t *testing.T) {
	t.Parallel()
	var p Personas
	if got := p.For("any"); got != PersonaCanonical {
		t.Errorf("nil Personas gives %q, want canonical", got)
	}
	for _, v := range []string{"claude", "o3-mini=o3,r1=deepseek-r1"} {
		if err := p.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	for model, want := range map[string]string{"o3-mini": "o3", "r1": "deepseek-r1", "gpt-4o": "claude", "": "claude"} {
		if got := p.For(model); got != want {
			t.Errorf("For(%q) = %q, want %q", model, got, want)
		}
	}
	if _, err := New(Config{Dataset: demo(t), Personas: Personas{"m": "nobody"}}); err == nil || !strings.Contains(err.Error(), `"nobody"`) {
		t.Errorf("New with an unknown persona: err = %v, want one naming it", err)
	}
	if len(PersonaNames()) != 9 || PersonaNames()[0] != PersonaCanonical {
		t.Errorf("PersonaNames() = %v, want 9 with canonical first", PersonaNames())
	}
	for _, n := range PersonaNames() {
		if PersonaDescription(n) == "" {
			t.Errorf("persona %s has no description", n)
		}
	}
}

// simReply is a response with what personas vary.
type simReply struct {
	status          int
	content         *string // nil: null
	reasoning       string
	calls           []wireToolCall
	finish, model   string
	reasoningTokens int
	completion      int
	errMsg, param   string
}

func (r simReply) text() string {
	if r.content == nil {
		return ""
	}
	return *r.content
}

func askRaw(t *testing.T, url string, body map[string]any) simReply {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content   *string        `json:"content"`
				Reasoning string         `json:"reasoning_content"`
				ToolCalls []wireToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
			Details          *struct {
				ReasoningTokens int `json:"reasoning_tokens"`
			} `json:"completion_tokens_details"`
		} `json:"usage"`
		Error *struct {
			Message, Param string
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("response: %v", err)
	}
	r := simReply{status: resp.StatusCode, model: out.Model, completion: out.Usage.CompletionTokens}
	if out.Error != nil {
		r.errMsg, r.param = out.Error.Message, out.Error.Param
		return r
	}
	if len(out.Choices) != 1 {
		t.Fatalf("want one choice, got %d", len(out.Choices))
	}
	m := out.Choices[0].Message
	r.content, r.reasoning, r.calls, r.finish = m.Content, m.Reasoning, m.ToolCalls, out.Choices[0].FinishReason
	if out.Usage.Details != nil {
		r.reasoningTokens = out.Usage.Details.ReasoningTokens
	}
	return r
}

const toolRunSQL = `{"type":"function","function":{"name":"run_sql","description":"Run a query.","parameters":{"type":"object","required":["query","dry_run"],"properties":{"query":{"type":"string"},"dry_run":{"type":"boolean"}}}}}`

// personaCase is a request kind the persona tests send.
type personaCase struct {
	name string
	body func(s *Server, e *dataset.Example, seed int64) map[string]any
	// single: the reply's answer is one SQL; json: a JSON verdict.
	single, json, tool bool
}

func userBody(seed int64, prompt string) map[string]any {
	return map[string]any{"model": "m", "seed": seed, "messages": []llm.Message{llm.User(prompt)}}
}

func personaCases() []personaCase {
	return []personaCase{
		{name: "generate", single: true, body: func(_ *Server, e *dataset.Example, seed int64) map[string]any {
			return userBody(seed, "DB info...\nTask: "+e.Question+"\nPlease think step by step and "+MarkerGenerate+" in sqlite dialect.")
		}},
		{name: "refine", single: true, body: func(_ *Server, e *dataset.Example, seed int64) map[string]any {
			return userBody(seed, "Task: "+e.Question+"\n"+MarkerInputSQL+"\nSELECT 1\n"+MarkerErrorInfo+":\nno such column\nPlease correct it and output only 1 complete SQL query.")
		}},
		{name: "raise_final", single: true, body: func(_ *Server, e *dataset.Example, seed int64) map[string]any {
			return userBody(seed, MarkerRAISEFinal+" to answer the question.\nQuestion: "+e.Question+"\nOperations:\n[1] read_table_names()\n")
		}},
		{name: "explore", body: func(_ *Server, e *dataset.Example, seed int64) map[string]any {
			return userBody(seed, "Task: "+e.Question+"\n"+MarkerExplore+" sqlite queries")
		}},
		{name: "link", json: true, body: func(_ *Server, e *dataset.Example, seed int64) map[string]any {
			return userBody(seed, "You are doing "+MarkerLink+".\nTable full name: warehouses\nTask: "+e.Question)
		}},
		{name: "verify", json: true, body: func(_ *Server, e *dataset.Example, seed int64) map[string]any {
			return userBody(seed, verifyPrompt(e.Question, "SELECT 1", "1"))
		}},
		{name: "unknown", single: true, body: func(_ *Server, _ *dataset.Example, seed int64) map[string]any {
			return userBody(seed, "hello there")
		}},
		{name: "tool", tool: true, body: func(_ *Server, e *dataset.Example, seed int64) map[string]any {
			b := userBody(seed, "Task: "+e.Question+"\nPlease "+MarkerGenerate+" in sqlite dialect.")
			b["tools"], b["tool_choice"] = tools(toolRunSQL), "required"
			return b
		}},
		{name: "testcase", tool: true, body: func(s *Server, e *dataset.Example, seed int64) map[string]any {
			info := s.know.find("Task: " + e.Question)
			b := userBody(seed, testcasePrompt(s, e, tag(info, "Retrieve a few sample rows from "+s.know.goldTables(info)[0].name)))
			b["tools"], b["tool_choice"] = testcaseTools, "required"
			return b
		}},
	}
}

// fenced is a fenced block: its language and content (inline fences too).
type fenced struct{ lang, body string }

// blocksOf reads every fenced block of a reply, closed or not.
func blocksOf(text string) []fenced {
	var out []fenced
	for {
		i := strings.Index(text, "```")
		if i < 0 {
			return out
		}
		rest := text[i+3:]
		j := 0
		for j < len(rest) && (rest[j] >= 'a' && rest[j] <= 'z' || rest[j] >= 'A' && rest[j] <= 'Z') {
			j++
		}
		lang := rest[:j]
		rest = rest[j:]
		end := strings.Index(rest, "```")
		if end < 0 {
			return append(out, fenced{lang, strings.TrimSpace(rest)})
		}
		out = append(out, fenced{lang, strings.TrimSpace(rest[:end])})
		text = rest[end+3:]
	}
}

// answerOf strips a persona's surface: reasoning before </think>, then
// the last fenced block, else the whole text.
func answerOf(text string) string {
	if i := strings.LastIndex(text, "</think>"); i >= 0 {
		text = text[i+len("</think>"):]
	}
	if b := blocksOf(text); len(b) > 0 {
		return b[len(b)-1].body
	}
	return strings.TrimSpace(text)
}

var pyLiteral = strings.NewReplacer("True", "true", "False", "false", "None", "null")
var trailingComma = regexp.MustCompile(`,(\s*[}\]])`)

// verdictOf reads a JSON verdict leniently: the first {...} of the
// answer, Python literals, trailing commas and string booleans.
func verdictOf(text string) map[string]any {
	a := answerOf(text)
	if i, j := strings.IndexByte(a, '{'), strings.LastIndexByte(a, '}'); i >= 0 && j > i {
		a = a[i : j+1]
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(trailingComma.ReplaceAllString(pyLiteral.Replace(a), "$1")), &v); err != nil {
		return nil
	}
	for k, x := range v {
		if x == "true" || x == "false" {
			v[k] = x == "true"
		}
	}
	return v
}

// argsOf reads tool arguments leniently: sql for sql_query, string
// booleans, and without the extra reasoning key.
func argsOf(args string) any {
	var v any
	if json.Unmarshal([]byte(args), &v) != nil {
		return nil
	}
	var norm func(any) any
	norm = func(x any) any {
		switch t := x.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, e := range t {
				switch k {
				case "reasoning":
					continue
				case "sql":
					k = "sql_query"
				}
				out[k] = norm(e)
			}
			return out
		case []any:
			for i := range t {
				t[i] = norm(t[i])
			}
		case string:
			if t == "true" || t == "false" {
				return t == "true"
			}
		}
		return x
	}
	return norm(v)
}

// listedPersonas are the personas that write a documented list of forms
// (all but canonical and envelopes, whose forms are drawn: its tests read
// replies generically, persona_envelopes_test.go).
func listedPersonas() []string {
	var out []string
	for _, p := range PersonaNames()[1:] {
		if p != PersonaEnvelopes {
			out = append(out, p)
		}
	}
	return out
}

// personaSims are a canonical simulator and one per persona, same seed.
func personaSims(t *testing.T) (ds *dataset.Dataset, canon *Server, canonURL string, urls map[string]string) {
	t.Helper()
	ds = demo(t)
	canon, ts := newSim(t, Config{Dataset: ds, Seed: 3})
	urls = map[string]string{}
	for _, p := range PersonaNames()[1:] {
		_, pts := newSim(t, Config{Dataset: ds, Seed: 3, Personas: Personas{"*": p}})
		urls[p] = pts.URL
	}
	return ds, canon, ts.URL, urls
}

// TestPersonaKeepsTheAnswer: for the same request, a persona's reply
// stripped of its surface is canonical's: the same SQL, verdict or call.
func TestPersonaKeepsTheAnswer(t *testing.T) {
	t.Parallel()
	ds, canon, canonURL, urls := personaSims(t)
	examples := []*dataset.Example{ds.Examples[0], ds.Examples[10], ds.Examples[20]}
	seeds := int64(8)
	if raceEnabled {
		seeds = 2
	}
	for _, p := range listedPersonas() {
		cut := 0
		total := 0
		for _, pc := range personaCases() {
			for _, e := range examples {
				for seed := int64(0); seed < seeds; seed++ {
					body := pc.body(canon, e, seed)
					want, got := askRaw(t, canonURL, body), askRaw(t, urls[p], body)
					label := fmt.Sprintf("%s %s %s seed %d", p, pc.name, e.ID, seed)
					if got.status != http.StatusOK || want.status != http.StatusOK {
						t.Fatalf("%s: status %d (%s), canonical %d", label, got.status, got.errMsg, want.status)
					}
					total++
					if !strings.Contains(got.model, "simulated") || !strings.Contains(got.model, "persona "+p) {
						t.Errorf("%s: model %q does not say simulator and persona", label, got.model)
					}
					if got.finish == "length" && p == PersonaTruncating {
						cut++
						checkCut(t, label, want, got, pc)
						continue
					}
					switch {
					case pc.tool:
						if len(got.calls) != 1 || got.calls[0].Function.Name != want.calls[0].Function.Name ||
							!reflect.DeepEqual(argsOf(got.calls[0].Function.Arguments), argsOf(want.calls[0].Function.Arguments)) {
							t.Errorf("%s: call %+v, canonical %+v", label, got.calls, want.calls)
						}
					case pc.json:
						if v, w := verdictOf(got.text()), verdictOf(want.text()); v == nil || !reflect.DeepEqual(v, w) {
							t.Errorf("%s: verdict %v from %q, canonical %v", label, v, got.text(), w)
						}
					default:
						if a, w := answerOf(got.text()), answerOf(want.text()); a != w {
							t.Errorf("%s: answer %q from\n%s\ncanonical %q", label, a, got.text(), w)
						}
					}
				}
			}
		}
		// The share needs every seed's replies to be measured.
		if p == PersonaTruncating && !raceEnabled && (cut*100 < total*5 || cut*100 > total*30) {
			t.Errorf("truncating cut %d of %d replies, want about 15%%", cut, total)
		}
	}
}

// checkCut checks a truncated reply: a strict prefix of canonical's SQL
// (or arguments) that ends on a word a query cannot end on.
func checkCut(t *testing.T, label string, want, got simReply, pc personaCase) {
	t.Helper()
	var cut, full string
	if pc.tool {
		cut, full = got.calls[0].Function.Arguments, want.calls[0].Function.Arguments
		if json.Valid([]byte(cut)) {
			t.Errorf("%s: cut arguments %q are valid JSON", label, cut)
		}
	} else {
		b := blocksOf(got.text())
		cut, full = b[len(b)-1].body, answerOf(want.text())
		if strings.HasSuffix(strings.TrimSpace(got.text()), "```") {
			t.Errorf("%s: cut reply %q closes its block", label, got.text())
		}
	}
	last := regexp.MustCompile(`[A-Za-z_]+$`).FindString(cut)
	if !strings.HasPrefix(full, cut) || cut == full || !danglers[strings.ToUpper(last)] {
		t.Errorf("%s: cut %q is not a dangling prefix of %q", label, cut, full)
	}
}

// TestPersonaForms: over many seeds every documented form of each
// persona appears.
func TestPersonaForms(t *testing.T) {
	t.Parallel()
	ds, canon, _, urls := personaSims(t)
	thinkDraft := regexp.MustCompile("(?s)^(<think>)?[^`]*```sql.*</think>")
	type form struct {
		name string
		ok   func(pc personaCase, r simReply) bool
	}
	txt := func(pc personaCase, r simReply) string {
		if pc.tool || pc.json {
			return ""
		}
		return r.text()
	}
	forms := map[string][]form{
		PersonaGPT4o: {
			{"prose after the block", func(pc personaCase, r simReply) bool { return regexp.MustCompile("```\n\n\\S").MatchString(txt(pc, r)) }},
			{"```SQL", func(pc personaCase, r simReply) bool { return strings.Contains(txt(pc, r), "```SQL\n") }},
			{"one-line ```sql … ```", func(pc personaCase, r simReply) bool {
				return regexp.MustCompile("```sql [^\n]+ ```").MatchString(txt(pc, r))
			}},
			{"JSON in prose", func(pc personaCase, r simReply) bool { return pc.json && strings.Contains(r.text(), "assessment: {") }},
			{"content null beside calls", func(pc personaCase, r simReply) bool { return pc.tool && r.content == nil && len(r.calls) == 1 }},
			{"extra argument key", func(pc personaCase, r simReply) bool {
				return pc.tool && strings.Contains(r.calls[0].Function.Arguments, `"reasoning":`)
			}},
		},
		PersonaO3: {
			{"no prose", func(pc personaCase, r simReply) bool { return strings.HasPrefix(txt(pc, r), "```sql") }},
			{"bare JSON", func(pc personaCase, r simReply) bool { return pc.json && strings.HasPrefix(r.text(), "{") }},
			{"reasoning tokens", func(_ personaCase, r simReply) bool { return r.reasoningTokens > 0 && r.completion > r.reasoningTokens }},
			{"content null beside calls", func(pc personaCase, r simReply) bool { return pc.tool && r.content == nil }},
		},
		PersonaClaude: {
			{"markdown headings", func(pc personaCase, r simReply) bool { return strings.Contains(txt(pc, r), "## Approach") }},
			{"draft, Actually, final", func(pc personaCase, r simReply) bool {
				return strings.Contains(txt(pc, r), "\n\nActually, ") && len(blocksOf(txt(pc, r))) == 2
			}},
			{"text beside calls", func(pc personaCase, r simReply) bool { return pc.tool && r.text() != "" && len(r.calls) == 1 }},
			{"fenced JSON in prose", func(pc personaCase, r simReply) bool {
				return pc.json && strings.Contains(r.text(), "## Verdict\n\n```json")
			}},
		},
		PersonaDeepSeekR1: {
			{"<think> first", func(_ personaCase, r simReply) bool { return strings.HasPrefix(r.text(), "<think>\n") }},
			{"no opening tag", func(_ personaCase, r simReply) bool {
				return !strings.HasPrefix(r.text(), "<think>") && strings.Contains(r.text(), "</think>")
			}},
			{"draft block inside think", func(pc personaCase, r simReply) bool { return thinkDraft.MatchString(txt(pc, r)) }},
			{`"correct": "false" strings`, func(pc personaCase, r simReply) bool {
				return pc.json && regexp.MustCompile(`"correct":"(true|false)"`).MatchString(r.text())
			}},
		},
		PersonaDeepSeekReasoner: {
			{"reasoning_content", func(_ personaCase, r simReply) bool {
				return r.reasoning != "" && !strings.Contains(r.text(), "<think>") && r.reasoningTokens > 0
			}},
			{"reasoning beside calls", func(pc personaCase, r simReply) bool { return pc.tool && r.reasoning != "" }},
		},
		PersonaQwenCoder: {
			{"```sqlite", func(pc personaCase, r simReply) bool { return strings.Contains(txt(pc, r), "```sqlite\n") }},
			{"```postgresql", func(pc personaCase, r simReply) bool { return strings.Contains(txt(pc, r), "```postgresql\n") }},
			{"bare fence", func(pc personaCase, r simReply) bool {
				b := blocksOf(txt(pc, r))
				return len(b) == 1 && b[0].lang == ""
			}},
			{"no fence", func(pc personaCase, r simReply) bool {
				return pc.single && !strings.Contains(txt(pc, r), "```") && r.text() != ""
			}},
			{"Python literals, trailing commas", func(pc personaCase, r simReply) bool {
				return pc.json && regexp.MustCompile(`:(True|False)`).MatchString(r.text()) && regexp.MustCompile(`,\s*}`).MatchString(r.text())
			}},
			{`"false" string argument`, func(pc personaCase, r simReply) bool {
				return pc.tool && regexp.MustCompile(`":"(false|true)"`).MatchString(r.calls[0].Function.Arguments)
			}},
			{"sql for sql_query", func(pc personaCase, r simReply) bool {
				return pc.tool && strings.Contains(r.calls[0].Function.Arguments, `"sql":`)
			}},
		},
		PersonaTruncating: {
			{"text cut, finish length", func(pc personaCase, r simReply) bool { return !pc.tool && r.finish == "length" }},
			{"arguments cut, finish length", func(pc personaCase, r simReply) bool { return pc.tool && r.finish == "length" }},
		},
	}
	for p, fs := range forms {
		seen := map[string]bool{}
		// A persona's requests stop once it has written every form: the
		// rest could only find forms already seen.
		all := func() bool { return len(seen) == len(fs) }
		for _, pc := range personaCases() {
			for _, e := range []*dataset.Example{ds.Examples[0], ds.Examples[10], ds.Examples[20]} {
				for seed := int64(0); seed < 20 && !all(); seed++ {
					r := askRaw(t, urls[p], pc.body(canon, e, seed))
					for _, f := range fs {
						if len(r.calls) == 0 && (f.name == "content null beside calls") {
							continue
						}
						if f.ok(pc, r) {
							seen[f.name] = true
						}
					}
				}
			}
		}
		for _, f := range fs {
			if !seen[f.name] {
				t.Errorf("persona %s never wrote %s", p, f.name)
			}
		}
	}
}

func TestO3Refusals(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := newSim(t, Config{Dataset: ds, Personas: Personas{"o3-mini": PersonaO3}})
	q := ds.Examples[0].Question
	tests := []struct {
		name, model string
		set         map[string]any
		param       string // "" = 200
	}{
		{"temperature", "o3-mini", map[string]any{"temperature": 1}, "temperature"},
		{"top_p", "o3-mini", map[string]any{"top_p": 0.5}, "top_p"},
		{"max_tokens", "o3-mini", map[string]any{"max_tokens": 100}, "max_tokens"},
		{"max_completion_tokens", "o3-mini", map[string]any{"max_completion_tokens": 4000, "reasoning_effort": "low"}, ""},
		{"another model keeps canonical", "gpt-4o", map[string]any{"temperature": 0.2, "max_tokens": 4000}, ""},
	}
	for _, tt := range tests {
		body := generateBody(q, 1)
		body["model"] = tt.model
		for k, v := range tt.set {
			body[k] = v
		}
		r := askRaw(t, ts.URL, body)
		switch {
		case tt.param != "" && (r.status != http.StatusBadRequest || r.param != tt.param || !strings.HasPrefix(r.errMsg, "Unsupported parameter: '"+tt.param+"' is not supported with this model.")):
			t.Errorf("%s: status %d param %q message %q, want 400 refusing %s", tt.name, r.status, r.param, r.errMsg, tt.param)
		case tt.param == "" && r.status != http.StatusOK:
			t.Errorf("%s: status %d (%s), want 200", tt.name, r.status, r.errMsg)
		case tt.param == "" && tt.model == "o3-mini" && r.reasoningTokens == 0:
			t.Errorf("%s: no reasoning tokens in usage", tt.name)
		case tt.param == "" && tt.model == "gpt-4o" && (r.reasoningTokens != 0 || r.model != ModelName):
			t.Errorf("%s: model %q reasoning tokens %d, want canonical's", tt.name, r.model, r.reasoningTokens)
		}
	}
}

// TestReasoningPersonasThroughClient: pkg/llm with a reasoning-model
// config talks to an o3-persona llmsim; a non-reasoning config gets its
// 400; deepseek-reasoner's reasoning_content reaches Response.Reasoning.
func TestReasoningPersonasThroughClient(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := newSim(t, Config{Dataset: ds, Personas: Personas{"sim-o3": PersonaO3, "sim-reasoner": PersonaDeepSeekReasoner}})
	_, cts := newSim(t, Config{Dataset: ds})
	yes, no, temp := true, false, 0.3
	req := llm.Request{Messages: []llm.Message{llm.User("Task: " + ds.Examples[0].Question + "\nPlease " + MarkerGenerate + " in sqlite dialect.")}, MaxTokens: 3000}
	tests := []struct {
		name    string
		url     string
		model   llm.ModelConfig
		wantErr string
	}{
		{"o3 reasoning config", ts.URL, llm.ModelConfig{Name: "sim-o3", Reasoning: &yes, Temperature: &temp, ReasoningEffort: "high"}, ""},
		{"o3 non-reasoning config", ts.URL, llm.ModelConfig{Name: "sim-o3", Reasoning: &no, Temperature: &temp}, "Unsupported parameter: 'temperature'"},
		{"deepseek-reasoner", ts.URL, llm.ModelConfig{Name: "sim-reasoner", Temperature: &temp}, ""},
		{"canonical", cts.URL, llm.ModelConfig{Name: "sim-reasoner", Temperature: &temp}, ""},
	}
	for _, tt := range tests {
		c, err := llm.New(llm.Config{BaseURL: tt.url + "/v1", APIKey: "x", MaxAttempts: 2, BaseBackoff: 1, Default: tt.model})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Chat(t.Context(), req)
		if tt.wantErr != "" {
			var ce *llm.CallError
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !asCallError(err, &ce) || ce.Status != http.StatusBadRequest || ce.Attempts != 1 {
				t.Errorf("%s: err = %v, want one 400 attempt saying %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if len(llm.Blocks(resp.Text, "sql")) != 1 {
			t.Errorf("%s: text %q has no sql block", tt.name, resp.Text)
		}
		switch tt.name {
		case "o3 reasoning config":
			if resp.Usage.ReasoningTokens == 0 || resp.Reasoning != "" {
				t.Errorf("%s: reasoning tokens %d, reasoning %q; want hidden reasoning counted", tt.name, resp.Usage.ReasoningTokens, resp.Reasoning)
			}
		case "deepseek-reasoner":
			if resp.Reasoning == "" || strings.Contains(resp.Text, resp.Reasoning) || resp.Usage.ReasoningTokens == 0 {
				t.Errorf("%s: reasoning %q (%d tokens) beside text %q", tt.name, resp.Reasoning, resp.Usage.ReasoningTokens, resp.Text)
			}
		case "canonical":
			if resp.Reasoning != "" || resp.Model != ModelName {
				t.Errorf("%s: reasoning %q model %q, want none and %q", tt.name, resp.Reasoning, resp.Model, ModelName)
			}
		}
	}
}

func asCallError(err error, ce **llm.CallError) bool {
	e, ok := err.(*llm.CallError)
	*ce = e
	return ok
}

// streamed reassembles a streamed reply.
type streamed struct {
	content, reasoning, args string
	nullContent              bool
	models                   map[string]bool
	finish                   string
	order                    []string // the delta kinds, deduplicated in a row
}

func askStreamRaw(t *testing.T, url string, body map[string]any) streamed {
	t.Helper()
	sb := map[string]any{"stream": true}
	for k, v := range body {
		sb[k] = v
	}
	b, _ := json.Marshal(sb)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := streamed{models: map[string]bool{}}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var chunk struct {
			Model   string `json:"model"`
			Choices []struct {
				Delta        map[string]json.RawMessage `json:"delta"`
				FinishReason *string                    `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			t.Fatalf("chunk %s: %v", line, err)
		}
		out.models[chunk.Model] = true
		for _, ch := range chunk.Choices {
			if ch.FinishReason != nil {
				out.finish = *ch.FinishReason
			}
			note := func(kind string) {
				if len(out.order) == 0 || out.order[len(out.order)-1] != kind {
					out.order = append(out.order, kind)
				}
			}
			if raw, ok := ch.Delta["content"]; ok {
				if string(raw) == "null" {
					out.nullContent = true
				}
				var s string
				_ = json.Unmarshal(raw, &s)
				if s != "" {
					out.content += s
					note("content")
				}
			}
			if raw, ok := ch.Delta["reasoning_content"]; ok {
				var s string
				_ = json.Unmarshal(raw, &s)
				out.reasoning += s
				note("reasoning")
			}
			if raw, ok := ch.Delta["tool_calls"]; ok {
				var calls []wireToolCall
				_ = json.Unmarshal(raw, &calls)
				for _, c := range calls {
					out.args += c.Function.Arguments
				}
				note("tool_calls")
			}
		}
	}
	return out
}

// TestPersonaStreams: a streamed persona reply is its plain reply.
func TestPersonaStreams(t *testing.T) {
	t.Parallel()
	ds, canon, _, urls := personaSims(t)
	e := ds.Examples[10]
	for _, p := range PersonaNames()[1:] {
		for _, pc := range personaCases() {
			if pc.name != "generate" && pc.name != "tool" {
				continue
			}
			for seed := int64(0); seed < 4; seed++ {
				body := pc.body(canon, e, seed)
				plain, st := askRaw(t, urls[p], body), askStreamRaw(t, urls[p], body)
				label := fmt.Sprintf("%s %s seed %d", p, pc.name, seed)
				args := ""
				if len(plain.calls) > 0 {
					args = plain.calls[0].Function.Arguments
				}
				if st.content != plain.text() || st.reasoning != plain.reasoning || st.args != args || st.finish != plain.finish ||
					st.nullContent != (plain.content == nil) || len(st.models) != 1 || !st.models[plain.model] {
					t.Errorf("%s: stream %+v differs from plain %+v", label, st, plain)
				}
				if plain.reasoning != "" && st.order[0] != "reasoning" {
					t.Errorf("%s: deltas in order %v, want reasoning first", label, st.order)
				}
			}
		}
	}
}

// TestRAISECommandForms: every persona's command forms read back as the
// canonical command, and each form appears.
func TestRAISECommandForms(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s := mustNew(t, Config{Dataset: ds})
	info := s.know.find("Task: " + ds.Examples[10].Question)
	var segs []string
	rng := rand.New(rand.NewPCG(1, 2))
	for _, st := range s.raisePlan(rng, info) {
		segs = append(segs, s.raiseCommand(rng, info, st))
	}
	segs = append(segs, "Reasoning.\n[RUN] run_query(\"SELECT `a` FROM t WHERE b = \\\"x\\\"\") [EXECUTE]")
	want := map[string]*regexp.Regexp{
		formSemicolon: regexp.MustCompile(`\);? \[EXECUTE\]$`),
		formBackticks: regexp.MustCompile("\\[RUN\\] `[^`]+` \\[EXECUTE\\]$"),
		formNoParens:  regexp.MustCompile(`\[RUN\] read_table_names \[EXECUTE\]$`),
		formFenced:    regexp.MustCompile("run_query\\(```sql\n(?s:.*)\n```\\) \\[EXECUTE\\]$"),
		formTriple:    regexp.MustCompile(`run_query\("""(?s:.*)"""\) \[EXECUTE\]$`),
	}
	for _, p := range listedPersonas() {
		seen := map[string]bool{}
		for i := range 60 {
			for _, seg := range segs {
				d := dressSegment(rand.New(rand.NewPCG(uint64(i), 7)), p, seg, "sqlite")
				// The agent cuts at [EXECUTE] and appends it and a result.
				traj := strings.TrimSuffix(d, "[EXECUTE]") + "[EXECUTE]\n[RESULT]\nx\n[/RESULT]\n"
				if got := canonicalCommands(traj); got != strings.TrimSuffix(seg, "[EXECUTE]")+"[EXECUTE]\n[RESULT]\nx\n[/RESULT]\n" {
					t.Fatalf("%s: %q reads back as %q, want %q", p, d, got, seg)
				}
				if d == seg {
					continue
				}
				for f, re := range want {
					if re.MatchString(d) && (f != formSemicolon || strings.HasSuffix(d, "); [EXECUTE]") || strings.Contains(d, "\"); [EXECUTE]")) {
						seen[f] = true
					}
				}
			}
		}
		for _, f := range commandForms(p) {
			if !seen[f] {
				t.Errorf("persona %s never wrote the %s form", p, f)
			}
		}
	}
	if canonicalCommands(segs[0]) != segs[0] {
		t.Errorf("canonical text changed: %q", segs[0])
	}
}

// TestRAISETrajectoryUnderPersonas drives RAISE agent trajectories (the
// continue transport, every command answered with a row) under each
// persona: the commands, read canonically, and the final SQL are
// canonical's.
func TestRAISETrajectoryUnderPersonas(t *testing.T) {
	t.Parallel()
	ds, _, canonURL, urls := personaSims(t)
	run := func(url string, e *dataset.Example, seed int64) (cmds []string, answer string) {
		prompt := "Answer with commands.\n" + MarkerRAISEAgent + "\nTask: " + e.Question
		traj := ""
		for call := range 40 {
			msgs := []llm.Message{llm.User(prompt)}
			if traj != "" {
				msgs = append(msgs, llm.Assistant(traj))
			}
			r := askRaw(t, url, map[string]any{"model": "r1", "seed": seed*100 + int64(call), "messages": msgs,
				"stop": []string{"[EXECUTE]"}, "continue_final_message": traj != "", "add_generation_prompt": false})
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.errMsg)
			}
			seg := r.text()
			traj += seg
			// A command, in any form, ends the segment; an answer ends
			// with its block.
			if strings.Contains(seg, "\n[RUN] ") && !strings.HasSuffix(strings.TrimSpace(seg), "```") {
				norm := canonicalCommands(seg)
				cmds = append(cmds, strings.TrimSpace(norm[strings.LastIndex(norm, "[RUN] "):]))
				traj += "[EXECUTE]\n[RESULT]\nrow 1\n[/RESULT]\n"
				continue
			}
			return cmds, answerOf(seg)
		}
		t.Fatalf("no answer after 40 calls")
		return nil, ""
	}
	seeds := int64(3)
	if raceEnabled {
		seeds = 1
	}
	for _, e := range []*dataset.Example{ds.Examples[0], ds.Examples[10]} {
		for seed := int64(1); seed <= seeds; seed++ {
			wantCmds, want := run(canonURL, e, seed)
			for _, p := range listedPersonas() {
				cmds, got := run(urls[p], e, seed)
				if !reflect.DeepEqual(cmds, wantCmds) || got != want {
					t.Errorf("%s %s seed %d: commands %q answer %q; canonical %q answer %q", p, e.ID, seed, cmds, got, wantCmds, want)
				}
			}
		}
	}
}

func TestSelfReadersAcceptPersonaForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, args string
		sql        string
		queries    []sqlQuery
	}{
		{"canonical", `{"sql_query":"SELECT 1"}`, "SELECT 1", nil},
		{"sql key", `{"sql":"SELECT 2"}`, "SELECT 2", nil},
		{"extra key", `{"sql_query":"SELECT 3","reasoning":"x"}`, "SELECT 3", nil},
		{"qwen batch", `{"queries":[{"description":"d","sql":"SELECT 4","exploration":"false"},{"description":"e","sql_query":"SELECT 5","exploration":"true"}]}`, "",
			[]sqlQuery{{"d", "SELECT 4", false, false}, {"e", "SELECT 5", true, false}}},
	}
	for _, tt := range tests {
		if got := argSQL(llm.ToolCall{Arguments: tt.args}); got != tt.sql {
			t.Errorf("%s: argSQL = %q, want %q", tt.name, got, tt.sql)
		}
		if got := batchQueries(tt.args); tt.queries != nil && !reflect.DeepEqual(got, tt.queries) {
			t.Errorf("%s: batchQueries = %+v, want %+v", tt.name, got, tt.queries)
		}
	}
	for _, text := range []string{"<think>\n```sql\nSELECT 0\n```\n</think>\n\nCurrent sql:\n```sqlite\nSELECT 9\n```", "Current sql:\n```SQL\nSELECT 9\n```"} {
		if got := lastBlock(text, "Current sql:"); got != "SELECT 9" {
			t.Errorf("lastBlock(%q) = %q, want SELECT 9", text, got)
		}
	}
}

// TestCanonicalPersonaIsCanonical: naming the canonical persona (or a
// persona for another model) leaves the golden replies as they were.
func TestCanonicalPersonaIsCanonical(t *testing.T) {
	t.Parallel()
	recs := readRecords(t, "testdata/canonical.jsonl.gz")
	sims := map[string]*Server{}
	every := 3
	if raceEnabled {
		every = 12
	}
	for i, rec := range recs {
		if i%every != 0 {
			continue
		}
		key := fmt.Sprint(rec.Seed, rec.Noise)
		s, ok := sims[key]
		if !ok {
			s = mustNew(t, Config{Dataset: demo(t), Seed: rec.Seed, Noise: rec.Noise, Personas: Personas{"*": PersonaCanonical, "not-sent": PersonaClaude}})
			sims[key] = s
		}
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(rec.Body))
		s.ServeHTTP(w, r)
		if got := volatile.ReplaceAllString(w.Body.String(), `"$1":0`); w.Code != rec.Status || got != rec.Reply {
			t.Errorf("record %d: status %d reply\n%s\nwant %d\n%s", i, w.Code, got, rec.Status, rec.Reply)
		}
	}
}
