package raise

import (
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/internal/testutil/golden"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

var update = flag.Bool("update", false, "rewrite the golden prompt files")

// script is the agent's model in a test: reply answers each request, n
// counting the calls; a reply that says nothing of its tokens cost 50.
func script(reply func(req llm.Request, n int) *llm.Response) *agenttest.Model {
	m := agenttest.Script(reply)
	m.Usage = llm.Usage{CompletionTokens: 50}
	return m
}

// tSQL is the small database of the tool tests (agenttest.SQLite): a
// table and a sharded one.
const tSQL = `CREATE TABLE t (id INTEGER, name TEXT);
	INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c');
	CREATE TABLE events_20200101 (id INTEGER); CREATE TABLE events_20200102 (id INTEGER)`

func tools(t *testing.T, wh warehouse.Warehouse) *Tools {
	t.Helper()
	info, err := dbinfo.FromSQLite(context.Background(), wh, "t", dbinfo.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, bl := range info.Blocks {
		if bl.Name == "t" {
			bl.Columns[0].Description = "the row's identifier"
		}
	}
	return &Tools{Info: info, WH: wh, Cost: &cost.Cost{}}
}

func seeds(int) int64 { return 1 }

// TestPromptsArePinned: the agent, final and column prompts and the
// corrective nudges match their golden files; the agent prompt carries the command syntax and no
// run_query for the static agent.
func TestPromptsArePinned(t *testing.T) {
	t.Parallel()
	ops := []Op{{"read_table_names()", "t"}, {`run_query("SELECT 1")`, "1\n1"}}
	cases := map[string]string{
		"agent":        AgentPrompt(warehouse.SQLite, "How many rows?", "", false),
		"agent.static": AgentPrompt(warehouse.Snowflake, "How many rows?", "rows are records", true),
		"final":        FinalPrompt(warehouse.SQLite, "How many rows?", "", ops, nil),
		"final.retry":  FinalPrompt(warehouse.BigQuery, "How many rows?", "", ops, []Attempt{{"SELECT x", "Error: no such column: x"}, {"SELECT 1 WHERE 0", noRows}}),
		"columns":      ColumnsPrompt("How many rows?", "SELECT COUNT(*) FROM t"),
		// The corrective nudges (D-R17), for one tool and for none.
		"correction.read_table_columns": Correction(CmdColumns, false),
		"correction.static":             Correction("", true),
	}
	golden.Check(t, cases, *update, "go test ./pkg/agents/raise -run TestPromptsArePinned -update")
	if strings.Contains(cases["agent.static"], "run_query") || !strings.Contains(cases["agent"], "[RUN] command(arguments) [EXECUTE]") {
		t.Error("agent prompt: the static agent must not offer run_query; the command syntax must be shown")
	}
}

// TestTools: each command's output, arguments in the forms models write
// them, and only run_query reaching the warehouse.
func TestTools(t *testing.T) {
	t.Parallel()
	tl := tools(t, agenttest.SQLite(t, tSQL))
	ctx := context.Background()
	for _, tt := range []struct{ seg, want string }{
		{"Let me look.\n[RUN] read_table_names()", "t\nevents_20200101\nevents_20200102"},
		{`[RUN] read_table_columns(table_name="t")`, "id INTEGER\nname TEXT"},
		{`[RUN] read_table_columns('nope')`, "Error: table nope not found"},
		{`[RUN] read_columns_documentation(["t.id", 'name'])`, "t.id: the row's identifier\nt.name: (no documentation)"},
		{`[RUN] run_query("SELECT name FROM t ORDER BY id")`, "name\na\nb\nc"},
		{`[RUN] run_query(sql="SELECT nope FROM t")`, "Error: "},
		{`[RUN] run_query('SELECT * FROM t WHERE id > 9')`, noRows},
		{`[RUN] run query("SELECT 1 AS one")`, "one\n1"},
		{`[RUN] drop_everything()`, "Error: unknown command drop_everything"},
	} {
		name, args, ok := LastCommand(tt.seg)
		if !ok {
			t.Fatalf("%q: no command found", tt.seg)
		}
		out, err := tl.Run(ctx, name, args)
		if err != nil || !strings.HasPrefix(out, tt.want) {
			t.Errorf("%s: %q (%v), want %q", tt.seg, out, err, tt.want)
		}
	}
	if tl.Cost.Queries != 4 {
		t.Errorf("%d warehouse queries, want 4 (only run_query queries)", tl.Cost.Queries)
	}
	tl.Static = true
	if out, _ := tl.Run(ctx, CmdQuery, `"SELECT 1"`); out != "Error: unknown command run_query" {
		t.Errorf("static agent ran a query: %q", out)
	}
}

// TestTrajectoryControls: a segment cut at the token cap gets the nudge,
// whose own "[RUN] run_query(...)" is never run; the next command is; the
// total cap ends the trajectory; a natural end records the answer.
func TestTrajectoryControls(t *testing.T) {
	t.Parallel()
	wh := agenttest.SQLite(t, tSQL)
	m := script(func(req llm.Request, n int) *llm.Response {
		switch n {
		case 0:
			return &llm.Response{Text: strings.Repeat("thinking ", 300), FinishReason: "length", Usage: llm.Usage{CompletionTokens: 1400}}
		case 1:
			return &llm.Response{Text: "Right, let me look.\n[RUN] read_table_names()"}
		}
		return &llm.Response{Text: "Done.\n```sql\nSELECT COUNT(*) FROM t\n```"}
	})
	s := &Steps{cfg: DefaultConfig(), llm: m}
	c := &cost.Cost{}
	tr, err := s.Run(context.Background(), tools(t, wh), warehouse.SQLite, "How many rows?", "", seeds, c)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Nudges != 1 || len(tr.Ops) != 1 || tr.Ops[0].Command != "read_table_names()" || tr.End != EndAnswer || tr.Answer != "SELECT COUNT(*) FROM t" || c.LLMCalls != 3 {
		t.Fatalf("trajectory %+v, %d calls", tr, c.LLMCalls)
	}
	second := m.Request(1)
	prefix := second.Messages[1].Content
	if !second.ContinueFinal || second.Messages[1].Role != "assistant" || !strings.HasPrefix(prefix, PhraseStart) || !strings.HasSuffix(prefix, "\n"+Nudge+"\n") {
		t.Errorf("the request after the cap does not continue with the nudge: %q", prefix[max(0, len(prefix)-200):])
	}
	if m.Request(0).MaxTokens != 1400 || m.Request(0).Stop[0] != TagExecute {
		t.Errorf("segment request: max tokens %d, stop %v", m.Request(0).MaxTokens, m.Request(0).Stop)
	}
	third := m.Request(2).Messages[1].Content
	if !strings.HasSuffix(third, "[RUN] read_table_names()[EXECUTE]\n[RESULT]\nt\nevents_20200101\nevents_20200102\n[/RESULT]\n") {
		t.Errorf("the command's result is not appended: %q", third[max(0, len(third)-300):])
	}
	// 10,000 generated tokens end it.
	m = script(func(llm.Request, int) *llm.Response {
		return &llm.Response{Text: "hmm", FinishReason: "length", Usage: llm.Usage{CompletionTokens: 1400}}
	})
	s = &Steps{cfg: DefaultConfig(), llm: m}
	tr, err = s.Run(context.Background(), tools(t, wh), warehouse.SQLite, "Q?", "", seeds, &cost.Cost{})
	if err != nil || tr.End != EndTokens || tr.Calls != 8 || tr.Tokens != 8*1400 {
		t.Errorf("token limit: %+v (%v); want the end after 8 segments of 1,400", tr, err)
	}
	// The multi-turn fallback: segments are assistant turns, results user turns.
	m = script(func(_ llm.Request, n int) *llm.Response {
		if n == 0 {
			return &llm.Response{Text: "[RUN] read_table_columns(t)"}
		}
		return &llm.Response{Text: "```sql\nSELECT 1\n```"}
	})
	cfg := DefaultConfig()
	cfg.Transport = TransportMultiTurn
	s = &Steps{cfg: cfg, llm: m}
	if tr, err = s.Run(context.Background(), tools(t, wh), warehouse.SQLite, "Q?", "", seeds, &cost.Cost{}); err != nil || len(tr.Ops) != 1 {
		t.Fatalf("multi-turn: %+v (%v)", tr, err)
	}
	msgs := m.Request(1).Messages
	if m.Request(1).ContinueFinal || len(msgs) != 3 || msgs[1].Role != "assistant" || msgs[2].Role != "user" || !strings.HasPrefix(msgs[2].Content, TagResult) ||
		!strings.Contains(msgs[0].Content, "Begin your reasoning with: "+PhraseStart) {
		t.Errorf("multi-turn conversation: %+v", msgs)
	}
}

// TestFinalRefinement: an error, then an empty result, then a good query:
// 3 calls, each retry a fresh prompt listing every earlier attempt.
func TestFinalRefinement(t *testing.T) {
	t.Parallel()
	wh := agenttest.SQLite(t, tSQL)
	replies := []string{"SELECT nope FROM t", "SELECT * FROM t WHERE id > 9", "SELECT COUNT(*) AS n FROM t"}
	m := script(func(_ llm.Request, n int) *llm.Response {
		return &llm.Response{Text: "```sql\n" + replies[min(n, 2)] + "\n```"}
	})
	s := &Steps{cfg: DefaultConfig(), llm: m}
	c, refine := &cost.Cost{}, &cost.Cost{}
	cand, err := s.Final(context.Background(), wh, RoleFinalA, warehouse.SQLite, "How many rows?", "", nil, seeds, c, refine)
	if err != nil || cand.Status != "ok" || cand.Attempts != 3 || c.LLMCalls != 1 || refine.LLMCalls != 2 || cand.CSV != "n\n3\n" {
		t.Fatalf("refinement: %+v (%v), calls %d + %d", cand, err, c.LLMCalls, refine.LLMCalls)
	}
	last := m.Request(2).Messages
	if len(last) != 1 || !strings.Contains(last[0].Content, "Attempt 1:\n```sql\nSELECT nope FROM t\n```\nResult: Error: ") ||
		!strings.Contains(last[0].Content, "Attempt 2:\n```sql\nSELECT * FROM t WHERE id > 9\n```\nResult: "+noRows) {
		t.Errorf("retry prompt:\n%s", last[0].Content)
	}
}

// TestColumnPostProcessContract: only a rewrite of the final select list
// is accepted (D-R9).
func TestColumnPostProcessContract(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		same bool
	}{
		{"SELECT id, name FROM t WHERE id > 1", "select name, id from t where id > 1", true},
		{"SELECT id FROM t WHERE id > 1", "SELECT id FROM t WHERE id > 2", false},
		{"SELECT id FROM t", "SELECT id FROM t ORDER BY id", false},
		{"WITH x AS (SELECT id, name FROM t) SELECT id FROM x", "WITH x AS (SELECT id, name FROM t) SELECT name, id FROM x -- swapped", true},
		{"WITH x AS (SELECT id FROM t) SELECT id FROM x", "WITH x AS (SELECT name FROM t) SELECT id FROM x", false},
		{"SELECT COUNT(*) FROM t", "SELECT COUNT(*) AS n\nFROM   t;", true},
		{"SELECT name FROM t WHERE name = 'a'", "SELECT name FROM t WHERE name = 'A'", false},
	} {
		if got := SameOutsideSelect(tt.a, tt.b, warehouse.SQLite); got != tt.same {
			t.Errorf("%q vs %q: %v, want %v", tt.a, tt.b, got, tt.same)
		}
	}
	wh := agenttest.SQLite(t, tSQL)
	m := script(func(llm.Request, int) *llm.Response {
		return &llm.Response{Text: "```sql\nSELECT name FROM t WHERE id > 2\n```"}
	})
	s := &Steps{cfg: DefaultConfig(), llm: m}
	cand, why, err := s.Columns(context.Background(), wh, warehouse.SQLite, "Q?", "SELECT id, name FROM t WHERE id > 1", 1, &cost.Cost{})
	if err != nil || cand != nil || !strings.Contains(why, "rejected") {
		t.Errorf("a rewrite that changes WHERE: %+v %q (%v)", cand, why, err)
	}
}
