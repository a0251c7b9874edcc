package llmsim_test

// RAISE through the simulator (spec pexa-raise.md §4.1 items 2–4, §4.2,
// §5.2 item 12, §5.3 item 4): the generic protocol features through the
// real client (pkg/llm), whole trajectories driven by a loop that mirrors
// the agent's (pkg/agents/raise: its prompts, parser and tools) on the demo
// SQLite database, and each RAISE kind's reply.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/agents/pexa"
	"github.com/quorumsql/quorum/pkg/agents/raise"
	"github.com/quorumsql/quorum/pkg/agents/reforce"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

const agentModel = "r1-distill"

func demoSet(t *testing.T) *dataset.Dataset {
	t.Helper()
	ds, err := dataset.Load("../../examples/demo", dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// raiseNoise is the default skill with some fields changed.
func raiseNoise(change func(*llmsim.Noise)) llmsim.Noise {
	n := llmsim.DefaultNoise()
	if change != nil {
		change(&n)
	}
	return n
}

func startSim(t *testing.T, ds *dataset.Dataset, seed uint64, noise llmsim.Noise) (*llmsim.Server, string) {
	t.Helper()
	s, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: seed, Noise: noise})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

// raiseClient is the real client, with RAISE's roles on three models.
func raiseClient(t *testing.T, url string) llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{BaseURL: url + "/v1", APIKey: "x", MaxAttempts: 1, Default: llm.ModelConfig{Name: agentModel},
		Models: map[llm.Role]llm.ModelConfig{
			raise.RoleFinalA: {Name: "r1-distill"}, raise.RoleFinalB: {Name: "o3-mini"}, raise.RoleColumns: {Name: "o3-mini"},
			raise.RoleFinalC: {Name: "claude-3-7-sonnet"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func chat(t *testing.T, c llm.Client, req llm.Request) *llm.Response {
	t.Helper()
	resp, err := c.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// wireReply is a raw HTTP answer.
type wireReply struct {
	status             int
	text, finish, err  string
	completion, prompt int
}

func postChat(t *testing.T, url string, body map[string]any) wireReply {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	w := wireReply{status: resp.StatusCode, err: out.Error.Message, completion: out.Usage.Completion, prompt: out.Usage.Prompt}
	if len(out.Choices) == 1 {
		w.text, w.finish = out.Choices[0].Message.Content, out.Choices[0].FinishReason
	}
	return w
}

func generatePrompt(q string) string {
	return "DB info...\nTask: " + q + "\nPlease think step by step and " + llmsim.MarkerGenerate + " in sqlite dialect."
}

var sqlComment = regexp.MustCompile(`--[^\n]*|/\*(?s:.*?)\*/`)

// squash is a query up to comments, white space, letter case and
// semicolons: how the simulator's gold answers differ from the gold SQL.
func squash(s string) string {
	s = sqlComment.ReplaceAllString(s, " ")
	return strings.Map(func(r rune) rune {
		if r == ';' || r == ' ' || r == '\n' || r == '\t' || r == '\r' {
			return -1
		}
		return r
	}, strings.ToLower(s))
}

func example(t *testing.T, ds *dataset.Dataset, id string) *dataset.Example {
	t.Helper()
	for _, e := range ds.Examples {
		if e.ID == id {
			return e
		}
	}
	t.Fatalf("no example %s", id)
	return nil
}

// TestStopMaxTokensThroughClient: stop cuts at the earliest stop string
// (excluded, finish "stop"); max_tokens cuts at N tokens of llmsim's
// tokenizer (finish "length", usage = the cut count); a bound the reply
// does not reach, as a model config's max_completion_tokens, changes
// nothing.
func TestStopMaxTokensThroughClient(t *testing.T) {
	t.Parallel()
	ds := demoSet(t)
	_, url := startSim(t, ds, 3, llmsim.Noise{})
	c := raiseClient(t, url)
	tok := llm.NewTokenizer()
	seed := int64(5)
	req := llm.Request{Messages: []llm.Message{llm.User(generatePrompt(ds.Examples[4].Question))}, Seed: &seed}
	full := chat(t, c, req)
	if full.FinishReason != "stop" || !strings.Contains(full.Text, "```sql") {
		t.Fatalf("full answer %+v", full)
	}
	stop := req
	stop.Stop = []string{"never there", "```sql"}
	cut := chat(t, c, stop)
	if intro, _, _ := strings.Cut(full.Text, "```sql"); cut.Text != intro || cut.FinishReason != "stop" ||
		cut.Usage.CompletionTokens != tok.Count(agentModel, intro) {
		t.Errorf("stop: %q (%s, %d tokens), want %q", cut.Text, cut.FinishReason, cut.Usage.CompletionTokens, intro)
	}
	for _, n := range []int{1, 6, 13} {
		bound := req
		bound.MaxTokens = n
		r := chat(t, c, bound)
		if r.FinishReason != "length" || !strings.HasPrefix(full.Text, r.Text) || r.Text == "" ||
			r.Usage.CompletionTokens != tok.Count(agentModel, r.Text) || r.Usage.CompletionTokens > n {
			t.Errorf("max_tokens %d: %q (%s, usage %d)", n, r.Text, r.FinishReason, r.Usage.CompletionTokens)
		}
	}
	// A model config's bound, far above the reply: nothing is cut.
	cfgd, err := llm.New(llm.Config{BaseURL: url + "/v1", APIKey: "x", MaxAttempts: 1, Default: llm.ModelConfig{Name: agentModel, MaxCompletionTokens: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	if r := chat(t, cfgd, req); r.Text != full.Text || r.FinishReason != "stop" || r.Usage.CompletionTokens != full.Usage.CompletionTokens {
		t.Errorf("a generous max_completion_tokens changed the reply: %+v", r)
	}
}

// TestPrefixContinuation: with the last message the assistant's, the reply
// is what follows it in the full answer, with continue_final_message (the
// client's ContinueFinal), with a bare trailing assistant message, and
// after a prefilled "```sql"; usage counts the continuation only; and
// both continue_final_message and add_generation_prompt true are refused,
// as vLLM refuses them.
func TestPrefixContinuation(t *testing.T) {
	t.Parallel()
	ds := demoSet(t)
	_, url := startSim(t, ds, 8, llmsim.Noise{})
	c := raiseClient(t, url)
	tok := llm.NewTokenizer()
	for _, e := range ds.Examples[:6] {
		seed := int64(11)
		user := llm.User(generatePrompt(e.Question))
		full := chat(t, c, llm.Request{Messages: []llm.Message{user}, Seed: &seed}).Text
		for _, k := range []int{0, 1, len(full) / 3, len(full) - 1} {
			prefix := full[:k]
			r := chat(t, c, llm.Request{Messages: []llm.Message{user, llm.Assistant(prefix)}, Seed: &seed, ContinueFinal: true})
			if r.Text != full[k:] || r.FinishReason != "stop" || r.Usage.CompletionTokens != tok.CountCompletion(agentModel, full[k:], nil) {
				t.Errorf("%s: prefix %q continued with %q, want %q", e.ID, prefix, r.Text, full[k:])
			}
			w := postChat(t, url, map[string]any{"model": agentModel, "seed": seed, "messages": []map[string]string{
				{"role": "user", "content": user.Content}, {"role": "assistant", "content": prefix}}})
			if w.text != full[k:] {
				t.Errorf("%s: a bare trailing assistant message %q continued with %q", e.ID, prefix, w.text)
			}
		}
		sql := llm.Blocks(full, "sql")
		r := chat(t, c, llm.Request{Messages: []llm.Message{user, llm.Assistant("```sql\n")}, Seed: &seed, ContinueFinal: true})
		if len(sql) != 1 || r.Text != sql[0]+"\n```" {
			t.Errorf("%s: prefilled fence continued with %q, want %q", e.ID, r.Text, sql)
		}
	}
	w := postChat(t, url, map[string]any{"model": agentModel, "continue_final_message": true, "add_generation_prompt": true,
		"messages": []map[string]string{{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}}})
	if w.status != http.StatusBadRequest || !strings.Contains(w.err, "continue_final_message") {
		t.Errorf("both flags: status %d %q", w.status, w.err)
	}
}

// op is one executed command with the position it ran at.
type op struct {
	name, args, output string
}

// run is one trajectory as the loop saw it.
type run struct {
	ops            []op
	calls, nudges  int
	tokens         int
	end, answer    string
	finishes       []string
	segments       []string
	lastPrefix     []llm.Message // the messages of the last request
	positionsAfter []int         // [RESULT] blocks before each call
}

// endsAtCommand and lastSQL are the agent's (pkg/agents/raise).
func endsAtCommand(seg string) bool {
	s := strings.TrimRight(seg, " \t\n")
	return strings.Contains(s, raise.TagRun) && !strings.HasSuffix(s, "```") && strings.HasSuffix(s, ")")
}

func lastSQL(text string) string {
	b := llm.Blocks(text, "sql")
	if len(b) == 0 {
		return ""
	}
	return strings.TrimSpace(b[len(b)-1])
}

// trajectory drives one agent run as raise.Steps.Run does: the prefilled
// start phrase (or the multi-turn emulation), segments that stop at
// [EXECUTE] with max_tokens 1,400, the command run and its result
// appended, the nudge after a "length" segment, the end at a natural stop.
func trajectory(t *testing.T, c llm.Client, tools *raise.Tools, e *dataset.Example, multi bool, round int) run {
	t.Helper()
	ctx := context.Background()
	prompt := raise.AgentPrompt(e.Dialect, e.Question, e.ExternalKnowledge, false)
	msgs := []llm.Message{llm.User(prompt), llm.Assistant(raise.PhraseStart + "\n")}
	if multi {
		msgs = []llm.Message{llm.User(prompt + raise.MultiTurnStart())}
	}
	appendText := func(text string) {
		if multi {
			msgs = append(msgs, llm.User(strings.TrimSpace(text)))
			return
		}
		msgs[1].Content += text
	}
	var r run
	for r.calls < 60 {
		sd := agent.Seed(7, e.ID, 0, round, fmt.Sprintf("raise/r%d/agent/%d", round, r.calls))
		r.lastPrefix = append([]llm.Message(nil), msgs...)
		r.positionsAfter = append(r.positionsAfter, len(r.ops))
		resp := chat(t, c, llm.Request{Role: raise.RoleAgent, Messages: append([]llm.Message(nil), msgs...), Stop: []string{raise.TagExecute},
			MaxTokens: 1400, Seed: &sd, ContinueFinal: !multi})
		r.calls++
		seg := resp.Text
		r.tokens += resp.Usage.CompletionTokens
		r.finishes = append(r.finishes, resp.FinishReason)
		r.segments = append(r.segments, seg)
		if multi {
			msgs = append(msgs, llm.Assistant(seg))
		} else {
			msgs[1].Content += seg
		}
		name, args, has := raise.LastCommand(seg)
		switch {
		case resp.FinishReason == "length":
			r.nudges++
			appendText("\n" + raise.Nudge + "\n")
		case has && endsAtCommand(seg):
			if !multi {
				msgs[1].Content += raise.TagExecute
			}
			out, err := tools.Run(ctx, name, args)
			if err != nil {
				t.Fatal(err)
			}
			r.ops = append(r.ops, op{name, args, out})
			appendText("\n" + raise.TagResult + "\n" + out + "\n" + raise.TagEnd + "\n")
		case strings.TrimSpace(seg) == "":
			r.end = raise.EndEmpty
			return r
		default:
			r.end, r.answer = raise.EndAnswer, lastSQL(seg)
			return r
		}
	}
	r.end = raise.EndCalls
	return r
}

// demoTools are the agent's tools on the demo database.
func demoTools(t *testing.T, ds *dataset.Dataset) (*raise.Tools, warehouse.Warehouse) {
	t.Helper()
	e := ds.Examples[0]
	db, ok := ds.Database(e)
	if !ok || db.SQLitePath == "" {
		t.Fatal("the demo has no SQLite database")
	}
	wh, err := sqlite.Open(sqlite.Config{Path: db.SQLitePath, Immutable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	info, err := dbinfo.ForExample(context.Background(), ds, e, nil, dbinfo.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return &raise.Tools{Info: info, WH: wh}, wh
}

// argUnescaper reads a double-quoted argument as the agent does.
var argUnescaper = strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\"`, `"`, `\'`, `'`, `\\`, `\`)

var commands = map[string]bool{raise.CmdTableNames: true, raise.CmdColumns: true, raise.CmdDocs: true, raise.CmdQuery: true}

// checkRun checks a trajectory's shape: it ends with an answer after
// least..most commands, read_table_names first and a run_query last, every
// command known and (but for the answer query, which may be a drawn
// mistake) run without error.
func checkRun(t *testing.T, label string, r run, least, most int) {
	t.Helper()
	if r.end != raise.EndAnswer || r.answer == "" {
		t.Errorf("%s: ended %q with answer %q after %d calls", label, r.end, r.answer, r.calls)
		return
	}
	if n := len(r.ops); n < least || n > most {
		t.Errorf("%s: %d commands, want %d..%d", label, n, least, most)
	}
	if len(r.ops) == 0 {
		return
	}
	if most >= 2 && r.ops[0].name != raise.CmdTableNames {
		t.Errorf("%s: first command %s", label, r.ops[0].name)
	}
	if last := r.ops[len(r.ops)-1]; last.name != raise.CmdQuery {
		t.Errorf("%s: last command %s(%s)", label, last.name, last.args)
	}
	for i, o := range r.ops {
		if !commands[o.name] {
			t.Errorf("%s: command %d is %q", label, i, o.name)
		}
		bad := strings.HasPrefix(o.output, "Error") || strings.Contains(o.output, "(no such column)") || strings.Contains(o.output, "The query returned no rows.")
		if bad && i < len(r.ops)-1 {
			t.Errorf("%s: command %d %s(%s) gave %q", label, i, o.name, o.args, o.output)
		}
	}
}

// TestRAISETrajectories: whole trajectories on demo examples, both
// transports, two rounds each: every command parses and runs on the demo
// database, each ends with an answer after 4 to 12 commands; the final,
// retry and column prompts get one SQL block each; /stats counts every
// request under its RAISE kind and none as unknown. Every fourth example;
// every eighth under the race detector (its requests are several times
// slower), the run without it (make slow) asks them all.
func TestRAISETrajectories(t *testing.T) {
	t.Parallel()
	ds := demoSet(t)
	sim, url := startSim(t, ds, 21, llmsim.Noise{})
	c := raiseClient(t, url)
	tools, _ := demoTools(t, ds)
	agentCalls, finals, refines, columns := 0, 0, 0, 0
	distinctRuns := map[string]bool{}
	total, runs := 0, 0
	step := 4
	if llmsim.RaceEnabled {
		step = 8
	}
	for i := 0; i < len(ds.Examples); i += step {
		e := ds.Examples[i]
		for _, multi := range []bool{false, true} {
			for round := range 2 {
				label := fmt.Sprintf("%s multi=%v round %d", e.ID, multi, round)
				r := trajectory(t, c, tools, e, multi, round)
				checkRun(t, label, r, 4, 12)
				agentCalls += r.calls
				total += len(r.ops)
				runs++
				var cmds []string
				for _, o := range r.ops {
					cmds = append(cmds, o.name+"("+o.args+")")
				}
				distinctRuns[strings.Join(cmds, "\n")] = true
				// The answer is the answer query the agent ran, when that
				// gave rows.
				if n := len(r.ops); n > 0 {
					last := r.ops[n-1]
					ran := !strings.HasPrefix(last.output, "Error") && last.output != "The query returned no rows."
					if sql := argUnescaper.Replace(last.args[1 : len(last.args)-1]); ran && r.answer != sql {
						t.Errorf("%s: answered %q after running %q", label, r.answer, sql)
					}
				}
				if multi && round == 0 && !strings.HasPrefix(r.segments[0], raise.PhraseStart+"\n") {
					t.Errorf("%s: the multi-turn start does not begin with the start phrase: %q", label, r.segments[0])
				}
				for j, seg := range r.segments[:len(r.segments)-1] {
					if r.finishes[j] == "stop" && !strings.HasSuffix(seg, ") ") {
						t.Errorf("%s: segment %d does not end at its command: %q", label, j, seg)
					}
				}
				if multi || round > 0 {
					continue
				}
				ops := make([]raise.Op, len(r.ops))
				for j, o := range r.ops {
					ops[j] = raise.Op{Command: o.name + "(" + o.args + ")", Output: o.output}
				}
				for j, role := range raise.FinalRoles {
					sd := int64(j)
					resp := chat(t, c, llm.Request{Role: role, Messages: []llm.Message{llm.User(raise.FinalPrompt(e.Dialect, e.Question, e.ExternalKnowledge, ops, nil))}, Seed: &sd})
					finals++
					if b := llm.Blocks(resp.Text, "sql"); len(b) != 1 || resp.FinishReason != "stop" {
						t.Errorf("%s: final %s answered %q", label, role, resp.Text)
					}
				}
				retry := raise.FinalPrompt(e.Dialect, e.Question, e.ExternalKnowledge, ops, []raise.Attempt{{SQL: "SELECT nope", Result: "Error: no such column: nope"}})
				sd := int64(1)
				if resp := chat(t, c, llm.Request{Role: raise.RoleFinalB, Messages: []llm.Message{llm.User(retry)}, Seed: &sd}); len(llm.Blocks(resp.Text, "sql")) != 1 {
					t.Errorf("%s: retry answered %q", label, resp.Text)
				}
				refines++
				resp := chat(t, c, llm.Request{Role: raise.RoleColumns, Messages: []llm.Message{llm.User(raise.ColumnsPrompt(e.Question, r.answer))}, Seed: &sd})
				if b := llm.Blocks(resp.Text, "sql"); len(b) != 1 {
					t.Errorf("%s: columns answered %q", label, resp.Text)
				}
				columns++
			}
		}
	}
	if mean := float64(total) / float64(runs); mean < 4 || mean > 12 {
		t.Errorf("mean commands %.1f", mean)
	}
	if len(distinctRuns) < runs/2 {
		t.Errorf("only %d distinct command sequences in %d trajectories", len(distinctRuns), runs)
	}
	st := sim.Stats()
	want := map[llmsim.Kind]int64{llmsim.KindRAISEAgent: int64(agentCalls), llmsim.KindRAISEFinal: int64(finals),
		llmsim.KindRAISERefine: int64(refines), llmsim.KindRAISEColumns: int64(columns)}
	for k, n := range want {
		if st.ByKind[k] != n {
			t.Errorf("by_kind[%s] = %d, want %d (%v)", k, st.ByKind[k], n, st.ByKind)
		}
	}
	if st.Unknown != 0 || st.UnknownExample != 0 || len(st.ByKind) != len(want) {
		t.Errorf("stats %+v", st)
	}
	// /stats over HTTP names the kinds too.
	resp, err := http.Get(url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		ByKind map[string]int64 `json:"by_kind"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.ByKind["raise_agent"] != int64(agentCalls) {
		t.Errorf("/stats by_kind %v (%v)", got.ByKind, err)
	}
}

// TestRAISEAgentCommandsBound: the script keeps within AgentCommands,
// padding short scripts and cutting long ones (local025 reads 14 tables).
// Under the race detector (its requests are several times slower) the
// shortest and the longest script only; the run without it (make slow)
// adds local008.
func TestRAISEAgentCommandsBound(t *testing.T) {
	t.Parallel()
	ds := demoSet(t)
	tools, _ := demoTools(t, ds)
	noises := map[string]llmsim.Noise{
		// A Noise written before RAISE gets RAISE's defaults; [0, 0] is
		// never a usable range.
		"ReFoRCE-only": {Gold: 0.5, Wrong: 1, Fix: 0.5},
		"[0, 0]":       {Gold: 0.5, Wrong: 1, ColumnFix: 0.3},
	}
	for _, bound := range [][2]int{{2, 3}, {7, 9}, {12, 12}, {1, 1}} {
		noises[fmt.Sprint(bound)] = raiseNoise(func(n *llmsim.Noise) { n.AgentCommands = bound; n.Ramble = 0 })
	}
	for name, noise := range noises {
		bound := noise.AgentCommands
		if bound == [2]int{} {
			bound = [2]int{4, 12}
		}
		_, url := startSim(t, ds, 4, noise)
		c := raiseClient(t, url)
		ids := []string{"local001", "local008", "local025"}
		if llmsim.RaceEnabled {
			ids = []string{"local001", "local025"}
		}
		for _, id := range ids {
			r := trajectory(t, c, tools, example(t, ds, id), false, 0)
			checkRun(t, fmt.Sprintf("%s with %s", id, name), r, bound[0], bound[1])
		}
	}
}

// TestRAISERamble: with Ramble 1 every step is first cut at 1,400 tokens
// ("length", usage = the cut count, no command in it); after the nudge the
// script continues at the same position, without rambling again, so the
// commands are those of the script and each position has one nudge. Each
// example through both transports; under the race detector (its requests
// are several times slower) through one, alternating, so both are still
// run; the run without it (make slow) runs both for each.
func TestRAISERamble(t *testing.T) {
	t.Parallel()
	ds := demoSet(t)
	_, url := startSim(t, ds, 5, raiseNoise(func(n *llmsim.Noise) { n.Ramble = 1 }))
	c := raiseClient(t, url)
	tools, _ := demoTools(t, ds)
	tok := llm.NewTokenizer()
	for i, id := range []string{"local002", "local007", "local016"} {
		for _, multi := range []bool{false, true} {
			if llmsim.RaceEnabled && multi != (i%2 == 1) {
				continue
			}
			label := fmt.Sprintf("%s multi=%v", id, multi)
			r := trajectory(t, c, tools, example(t, ds, id), multi, 0)
			checkRun(t, label, r, 4, 12)
			if r.nudges != len(r.ops)+1 {
				t.Errorf("%s: %d nudges for %d commands and the answer", label, r.nudges, len(r.ops))
			}
			for i, f := range r.finishes {
				seg := r.segments[i]
				if want := []string{"length", "stop"}[i%2]; f != want {
					t.Errorf("%s: call %d finished %q, want %q", label, i, f, want)
				}
				if f == "length" {
					if n := tok.Count(agentModel, seg); n > 1400 || n < 1300 || strings.Contains(seg, raise.TagRun) {
						t.Errorf("%s: cut segment %d has %d tokens", label, i, n)
					}
					// The call after the nudge is at the same position.
					if i+1 < len(r.positionsAfter) && r.positionsAfter[i+1] != r.positionsAfter[i] {
						t.Errorf("%s: the nudge moved the script", label)
					}
				}
			}
		}
	}
}

// TestRAISEAgentContinuation: a trajectory's segment is the same when the
// request's prefix already holds part of it, and the reply is the rest;
// the termination phrase gets the final answer; the same request gets the
// same reply.
func TestRAISEAgentContinuation(t *testing.T) {
	t.Parallel()
	ds := demoSet(t)
	_, url := startSim(t, ds, 6, raiseNoise(func(n *llmsim.Noise) { n.Ramble = 0 }))
	c := raiseClient(t, url)
	tools, _ := demoTools(t, ds)
	for _, id := range []string{"local003", "local011", "local019"} {
		e := example(t, ds, id)
		r := trajectory(t, c, tools, e, false, 1)
		checkRun(t, id, r, 4, 12)
		// Replay each call with part of its segment already written.
		prefix := raise.PhraseStart + "\n"
		for i, seg := range r.segments {
			sd := agent.Seed(7, e.ID, 0, 1, fmt.Sprintf("raise/r%d/agent/%d", 1, i))
			ask := func(p string) string {
				return chat(t, c, llm.Request{Messages: []llm.Message{llm.User(raise.AgentPrompt(e.Dialect, e.Question, "", false)), llm.Assistant(p)},
					Stop: []string{raise.TagExecute}, Seed: &sd, ContinueFinal: true}).Text
			}
			if again := ask(prefix); again != seg {
				t.Errorf("%s call %d: replay %q, first %q", id, i, again, seg)
			}
			for _, k := range []int{1, len(seg) / 2, len(seg) - 2} {
				if got := ask(prefix + seg[:k]); got != seg[k:] {
					t.Errorf("%s call %d: after %q got %q, want %q", id, i, seg[:k], got, seg[k:])
				}
			}
			if i < len(r.ops) {
				prefix += seg + raise.TagExecute + "\n" + raise.TagResult + "\n" + r.ops[i].output + "\n" + raise.TagEnd + "\n"
			}
		}
		// Told to finish early: the answer, no command.
		sd := int64(3)
		msgs := append([]llm.Message(nil), r.lastPrefix...)
		msgs[1].Content = raise.PhraseStart + "\n" + r.segments[0] + raise.TagExecute + "\n" + raise.TagResult + "\n" + r.ops[0].output + "\n" + raise.TagEnd + "\n\n" + raise.PhraseTerminate + "\n"
		resp := chat(t, c, llm.Request{Messages: msgs, Stop: []string{raise.TagExecute}, Seed: &sd, ContinueFinal: true})
		if strings.Contains(resp.Text, raise.TagRun) || lastSQL(resp.Text) == "" {
			t.Errorf("%s: after the termination phrase: %q", id, resp.Text)
		}
	}
}

// TestRAISEFinalCoverage: the final models' gold rate grows with the gold
// tables the operations' commands name (read_table_names' output, which
// lists every table, does not count), and the three models answer
// differently. 60 seeds an example; 20 under the race detector (its
// requests are several times slower), the run without it (make slow) asks
// all 60.
func TestRAISEFinalCoverage(t *testing.T) {
	t.Parallel()
	ds := demoSet(t)
	_, url := startSim(t, ds, 9, raiseNoise(func(n *llmsim.Noise) { n.Gold = 0.6 }))
	c := raiseClient(t, url)
	tables := map[string]string{"local001": "customers", "local002": "products", "local003": "categories", "local005": "orders"}
	var names []string
	for _, tb := range tables {
		names = append(names, tb)
	}
	listing := raise.Op{Command: "read_table_names()", Output: strings.Join(names, "\n")}
	gold := map[bool]int{}
	differ := 0
	seeds := 60
	if llmsim.RaceEnabled {
		seeds = 20
	}
	for id, table := range tables {
		e := example(t, ds, id)
		for i := range seeds {
			sd := int64(i)
			for _, covered := range []bool{false, true} {
				ops := []raise.Op{listing}
				if covered {
					ops = append(ops, raise.Op{Command: `read_table_columns("` + table + `")`, Output: "id INTEGER"})
				}
				p := raise.FinalPrompt(e.Dialect, e.Question, "", ops, nil)
				var texts []string
				for _, role := range raise.FinalRoles {
					resp := chat(t, c, llm.Request{Role: role, Messages: []llm.Message{llm.User(p)}, Seed: &sd})
					texts = append(texts, resp.Text)
					if squash(lastSQL(resp.Text)) == squash(e.Gold.SQL) {
						gold[covered]++
					}
				}
				if texts[0] != texts[1] || texts[1] != texts[2] {
					differ++
				}
			}
		}
	}
	if gold[true] <= gold[false]*5/4 {
		t.Errorf("gold answers: %d with the gold tables explored, %d without", gold[true], gold[false])
	}
	if differ == 0 {
		t.Error("the three final models always answer alike")
	}
}

// TestRAISERefine: a retry gives the gold SQL only through Fix.
func TestRAISERefine(t *testing.T) {
	t.Parallel()
	ds := demoSet(t)
	e := example(t, ds, "local004")
	p := raise.FinalPrompt(e.Dialect, e.Question, "", []raise.Op{{Command: "read_table_names()", Output: "orders"}},
		[]raise.Attempt{{SQL: "SELECT x FROM orders", Result: "Error: no such column: x"}})
	if k := llmsim.ClassifyConversation([]llm.Message{llm.User(p)}); k != llmsim.KindRAISERefine {
		t.Fatalf("retry classified %s", k)
	}
	for _, fix := range []float64{0, 1} {
		_, url := startSim(t, ds, 2, raiseNoise(func(n *llmsim.Noise) { n.Gold, n.Fix = 0, fix }))
		c := raiseClient(t, url)
		gold := 0
		for i := range 40 {
			sd := int64(i)
			if resp := chat(t, c, llm.Request{Role: raise.RoleFinalA, Messages: []llm.Message{llm.User(p)}, Seed: &sd}); squash(lastSQL(resp.Text)) == squash(e.Gold.SQL) {
				gold++
			}
		}
		if (fix == 0) != (gold == 0) {
			t.Errorf("Fix %v: %d of 40 retries gold", fix, gold)
		}
	}
}

// TestRAISEColumns: a query that differs from the gold only in its select
// list, and selects every expression the gold's does, gets its own
// expressions in the gold's order without the extra ones with probability
// ColumnFix (after a WITH clause too), and the agent's contract
// (CheckColumns: a permutation or subset) accepts every rewrite; any other
// query, one that lacks a gold column included, comes back unchanged.
func TestRAISEColumns(t *testing.T) {
	t.Parallel()
	ds := demoSet(t)
	type tc struct {
		id, sql string
		fixable bool
	}
	cases := []tc{
		{"local006", "select COUNT(*) AS customers, country from customers group by country order by customers desc limit 1", true},
		{"local006", "SELECT country, COUNT(*) AS customers, MIN(customer_id) AS first_id FROM customers GROUP BY country ORDER BY customers DESC LIMIT 1;", true},
		{"local019", "WITH daily AS (SELECT order_date, SUM(total) AS amount FROM orders WHERE order_date BETWEEN '2024-03-01' AND '2024-03-31' GROUP BY order_date)\nSELECT ROUND(SUM(amount) OVER (ORDER BY order_date), 2) AS running_total, order_date, ROUND(amount, 2) AS amount, amount AS raw FROM daily ORDER BY order_date", true},
		// Fixing these would add a column: the agent refuses that.
		{"local006", "SELECT country FROM customers GROUP BY country ORDER BY customers DESC LIMIT 1;", false},
		{"local019", "WITH daily AS (SELECT order_date, SUM(total) AS amount FROM orders WHERE order_date BETWEEN '2024-03-01' AND '2024-03-31' GROUP BY order_date)\nSELECT order_date, amount FROM daily ORDER BY order_date", false},
		{"local006", "SELECT country, COUNT(*) AS customers FROM customers GROUP BY country ORDER BY customers DESC LIMIT 2", false},
		{"local014", "SELECT s.name FROM products p JOIN suppliers s ON s.supplier_id = p.supplier_id", false},
	}
	for _, fix := range []float64{0, 1, 0.5} {
		_, url := startSim(t, ds, 3, raiseNoise(func(n *llmsim.Noise) { n.ColumnFix = fix }))
		c := raiseClient(t, url)
		for _, tt := range cases {
			e := example(t, ds, tt.id)
			fixed := 0
			for i := range 20 {
				sd := int64(i)
				resp := chat(t, c, llm.Request{Role: raise.RoleColumns, Messages: []llm.Message{llm.User(raise.ColumnsPrompt(e.Question, tt.sql))}, Seed: &sd})
				b := llm.Blocks(resp.Text, "sql")
				if len(b) != 1 {
					t.Fatalf("%s: %q", tt.id, resp.Text)
				}
				got := strings.TrimSpace(b[0])
				if !raise.SameOutsideSelect(tt.sql, got, e.Dialect) {
					t.Errorf("%s: the rewrite %q changes more than the select list of %q", tt.id, got, tt.sql)
				}
				if err := raise.CheckColumns(tt.sql, got, e.Dialect); err != nil {
					t.Errorf("%s: the agent refuses the rewrite %q of %q: %v", tt.id, got, tt.sql, err)
				}
				switch {
				case squash(got) == squash(e.Gold.SQL) && squash(got) != squash(tt.sql):
					fixed++
				case got != tt.sql:
					t.Errorf("%s: %q came back as %q", tt.id, tt.sql, got)
				}
			}
			switch {
			case !tt.fixable || fix == 0:
				if fixed != 0 {
					t.Errorf("%s ColumnFix %v: %d fixed, want none", tt.id, fix, fixed)
				}
			case fix == 1 && fixed != 20, fix == 0.5 && (fixed == 0 || fixed == 20):
				t.Errorf("%s ColumnFix %v: %d of 20 fixed", tt.id, fix, fixed)
			}
		}
	}
}

// TestRAISEMarkersAreExclusive: each RAISE prompt is classified as its
// kind and carries no ReFoRCE or PExA marker; no ReFoRCE or PExA prompt is
// taken for a RAISE one; the RAISE noise fields get their defaults.
func TestRAISEMarkersAreExclusive(t *testing.T) {
	t.Parallel()
	reforceMarkers := []string{llmsim.MarkerFormat, llmsim.MarkerGenerate, llmsim.MarkerInputSQL, llmsim.MarkerErrorInfo,
		llmsim.MarkerPreviousContext, llmsim.MarkerExplore, llmsim.MarkerCorrectedTo, llmsim.MarkerCorrectOthers, llmsim.MarkerLink,
		llmsim.MarkerVote, llmsim.MarkerSelfConsistency, llmsim.MarkerCTE, llmsim.MarkerReaskOne, llmsim.MarkerReaskFence, llmsim.MarkerReaskThinking}
	pexaMarkers := []string{llmsim.MarkerPExAPlan, llmsim.MarkerPExATestcase, llmsim.MarkerPExAPropose, llmsim.MarkerPExAVerify}
	raiseMarkers := []string{llmsim.MarkerRAISEAgent, llmsim.MarkerRAISEFinal, llmsim.MarkerRAISEColumns}
	ops := []raise.Op{{Command: "read_table_names()", Output: "t"}, {Command: `run_query("SELECT 1")`, Output: "1\n1"}}
	raisePrompts := map[string]llmsim.Kind{}
	for _, d := range []warehouse.Dialect{warehouse.SQLite, warehouse.BigQuery, warehouse.Snowflake} {
		for _, static := range []bool{false, true} {
			raisePrompts[raise.AgentPrompt(d, "How many rows?", "", static)] = llmsim.KindRAISEAgent
			raisePrompts[raise.AgentPrompt(d, "How many rows?", "", static)+raise.MultiTurnStart()] = llmsim.KindRAISEAgent
		}
		raisePrompts[raise.FinalPrompt(d, "How many rows?", "x", ops, nil)] = llmsim.KindRAISEFinal
		raisePrompts[raise.FinalPrompt(d, "How many rows?", "", nil, nil)] = llmsim.KindRAISEFinal
		raisePrompts[raise.FinalPrompt(d, "How many rows?", "", ops, []raise.Attempt{{SQL: "SELECT 1", Result: "The query returned no rows."}})] = llmsim.KindRAISERefine
	}
	raisePrompts[raise.ColumnsPrompt("How many rows?", "SELECT COUNT(*) FROM t")] = llmsim.KindRAISEColumns
	for p, want := range raisePrompts {
		if got := llmsim.ClassifyConversation([]llm.Message{llm.User(p)}); got != want {
			t.Errorf("classified %s, want %s: %q", got, want, p)
		}
		if k := llmsim.Classify(p); k != llmsim.KindUnknown {
			t.Errorf("Classify finds %s in the RAISE prompt %q", k, p)
		}
		for _, m := range append(append([]string(nil), reforceMarkers...), pexaMarkers...) {
			if strings.Contains(p, m) {
				t.Errorf("the RAISE prompt %q carries marker %q", p, m)
			}
		}
		owns := map[string]bool{llmsim.MarkerRAISEAgent: want == llmsim.KindRAISEAgent, llmsim.MarkerRAISEColumns: want == llmsim.KindRAISEColumns,
			llmsim.MarkerRAISEFinal: want == llmsim.KindRAISEFinal || want == llmsim.KindRAISERefine}
		for m, own := range owns {
			if strings.Contains(p, m) != own {
				t.Errorf("RAISE marker %q in the %s prompt: %v", m, want, !own)
			}
		}
	}
	for _, r := range raiseMarkers {
		for _, m := range append(append([]string(nil), reforceMarkers...), pexaMarkers...) {
			if strings.Contains(r, m) || strings.Contains(m, r) {
				t.Errorf("RAISE marker %q and marker %q overlap", r, m)
			}
		}
	}
	ex := reforce.Example{ID: "x", Question: "How many rows?", Dialect: warehouse.SQLite}
	others := []string{
		pexa.PlannerPrompt("How many rows?"), pexa.PlannerPromptNoProposer("How many rows?", true),
		pexa.TestcasePrompt(pexa.TestcaseInput{Dialect: warehouse.SQLite, TableInfo: "t", Structure: "{}", Probe: "Retrieve t"}),
		pexa.ProposerPrompt("How many rows?", warehouse.SQLite, nil), pexa.VerifierPrompt("How many rows?", "SELECT 1", "1"),
		reforce.GeneratePrompt(reforce.CandidateInput{Example: ex, TableInfo: "t"}), reforce.RefinePrompt("SELECT 1", "error"),
		reforce.FormatPrompt("How many rows?"), reforce.SelfConsistencyPrompt("a", "a\n1", "SELECT 1"), reforce.CTEPrompt("SELECT 1", "x"),
		reforce.ExplorePrompt(reforce.ExploreInput{Example: ex, TableInfo: "t"}), reforce.CorrectPrompt("SELECT 1", "error", false),
		reforce.FixOthersPrompt("SELECT 1", "SELECT 2", []string{"SELECT 3"}), reforce.VotePrompt("t", "How many rows?", nil),
	}
	for _, p := range others {
		k := llmsim.ClassifyConversation([]llm.Message{llm.User(p)})
		for _, r := range llmsim.RAISEKinds() {
			if k == r {
				t.Errorf("a ReFoRCE or PExA prompt is classified %s: %q", k, p)
			}
		}
		for _, m := range raiseMarkers {
			if strings.Contains(p, m) {
				t.Errorf("RAISE marker %q in %q", m, p)
			}
		}
	}
	if d := llmsim.DefaultNoise(); d.Ramble != 0.1 || d.AgentCommands != [2]int{4, 12} || d.ColumnFix != 0.5 {
		t.Errorf("DefaultNoise %+v", d)
	}
}
