package reforce

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

func sqlReply(q string) string { return "Thinking...\n" + agenttest.Fence("sql", q) }

// tSQL is the small database of the rule tests (agenttest.SQLite).
const tSQL = `CREATE TABLE t (id INTEGER, name TEXT, v REAL);
	INSERT INTO t VALUES (1, 'a', 1.5), (2, 'b', 2.5), (3, 'c', 0)`

func newAgent(t *testing.T, cfg Config, m llm.Client) *Agent {
	t.Helper()
	a, err := New(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var ex = Example{ID: "t1", Question: "How many rows?", Dialect: warehouse.SQLite}

func TestPromptsAreRecognisedBySimulator(t *testing.T) {
	t.Parallel()
	in := CandidateInput{Example: ex, TableInfo: "Table full name: t", TableStruct: "['t']"}
	cands := []*Candidate{{Index: 0, SQL: "SELECT 1", CSV: "a\n1\n"}, {Index: 9, SQL: "SELECT 2", CSV: "a\n2\n"}}
	tests := []struct {
		prompt string
		want   llmsim.Kind
	}{
		{GeneratePrompt(in), llmsim.KindGenerate},
		{RefinePrompt("SELECT 1", "no such column: x"), llmsim.KindRefine},
		{RefinePrompt("SELECT 1", EmptyResult), llmsim.KindRefine},
		{ReaskOneSQL, llmsim.KindReaskSQL},
		{FormatPrompt(ex.Question), llmsim.KindFormat},
		{SelfConsistencyPrompt("", "a\n1\n", "SELECT 1"), llmsim.KindSelfConsistency},
		{CTEPrompt("WITH a AS (SELECT 1) SELECT * FROM a", "CTE 1 a: no rows\n"), llmsim.KindCTERefine},
		{ExplorePrompt(ExploreInput{Example: ex, TableInfo: "x", TableStruct: "['t']"}), llmsim.KindExplore},
		{ExploreReask(warehouse.SQLite, 1), llmsim.KindExplore},
		{CorrectPrompt("SELECT x FROM t", "no such column: x", false), llmsim.KindExploreCorrect},
		{CorrectPrompt("SELECT x FROM t", EmptyResult, true), llmsim.KindExploreCorrect},
		{FixOthersPrompt("SELECT x", "SELECT y", []string{"SELECT z"}), llmsim.KindExploreFixOther},
		{VotePrompt("info", ex.Question, cands), llmsim.KindVote},
	}
	for _, tt := range tests {
		if got := llmsim.Classify(tt.prompt); got != tt.want {
			t.Errorf("simulator classifies %q… as %s, want %s", tt.prompt[:min(60, len(tt.prompt))], got, tt.want)
		}
	}
}

func TestCandidateReasksForOneSQL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		replies []string
		calls   int
		status  Status
		sql     string
	}{
		{"one block first time", []string{sqlReply("SELECT count(*) FROM t")}, 1, StatusOK, "SELECT count(*) FROM t"},
		// Several blocks are no reason to re-ask (issue 52): the reader's
		// policy picks the one marked final, else the last.
		{"two blocks: the last (the final after a draft) at the first ask", []string{sqlReply("SELECT 2") + "\n" + sqlReply("SELECT id FROM t")}, 1, StatusOK, "SELECT id FROM t"},
		{"two blocks, the first marked final", []string{"Final answer:\n" + sqlReply("SELECT id FROM t") + "\nFor comparison, my draft:\n" + sqlReply("SELECT 2")}, 1, StatusOK, "SELECT id FROM t"},
		{"no block: gave up", []string{"I cannot answer."}, 3, StatusGaveUp, ""},
		{"a refusal that begins with a SQL word: gave up, never run", []string{"With the schema given I cannot tell which table to select from. Which table holds the orders?"}, 3, StatusGaveUp, ""},
		{"upper-case fence accepted", []string{"```SQL\nSELECT name FROM t\n```"}, 1, StatusOK, "SELECT name FROM t"},
		// Real models' spellings (Qwen-coder, GPT-4o, R1 via vLLM): one ask each.
		{"sqlite fence", []string{"```sqlite\nSELECT name FROM t\n```"}, 1, StatusOK, "SELECT name FROM t"},
		{"bare fence", []string{"Query:\n```\nSELECT name FROM t\n```"}, 1, StatusOK, "SELECT name FROM t"},
		{"inline fence", []string{"Use ```sql SELECT name FROM t``` here."}, 1, StatusOK, "SELECT name FROM t"},
		{"plain SQL", []string{"The answer:\n\nSELECT name FROM t;\n\nThis lists the names."}, 1, StatusOK, "SELECT name FROM t"},
		{"think block with a draft", []string{"<think>\n```sql\nSELECT 2\n```\n</think>\n```sql\nSELECT name FROM t\n```"}, 1, StatusOK, "SELECT name FROM t"},
		{"cut reply re-asked, never run", []string{"```sql\nSELECT name FR", sqlReply("SELECT name FROM t")}, 2, StatusOK, "SELECT name FROM t"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := agenttest.Script(func(_ llm.Request, n int) *llm.Response {
				text := tt.replies[min(n, len(tt.replies)-1)]
				if strings.Count(text, "```")%2 == 1 {
					return agenttest.Cut(text) // an open block: the reply was cut
				}
				return agenttest.Text(text)
			})
			c, err := newAgent(t, Config{}, m).Candidate(context.Background(), agenttest.SQLite(t, tSQL), CandidateInput{Example: ex})
			if err != nil {
				t.Fatal(err)
			}
			if m.Calls() != tt.calls || c.Status != tt.status || c.SQL != tt.sql || c.Cost.LLMCalls != tt.calls {
				t.Errorf("calls %d (ledger %d), status %s, sql %q", m.Calls(), c.Cost.LLMCalls, c.Status, c.SQL)
			}
			if strings.HasPrefix(tt.name, "cut") && (c.Cost.FormatReasks != 1 || !strings.Contains(m.Asked()[1], "```sql")) {
				t.Errorf("a cut reply: %d format re-asks, re-asked %q; want 1 naming the fence", c.Cost.FormatReasks, m.Asked()[1])
			}
			if tt.status == StatusGaveUp && c.Cost.FormatLost != 1 {
				t.Errorf("a candidate lost to format counted %d times, want 1", c.Cost.FormatLost)
			}
			if strings.HasPrefix(tt.name, "a refusal") && (c.Cost.Refusals != tt.calls || c.Cost.Queries != 0) {
				t.Errorf("a refusal: %d refusals recorded, %d warehouse queries; want %d and 0", c.Cost.Refusals, c.Cost.Queries, tt.calls)
			}
			if tt.calls > 1 && tt.status == StatusOK && !strings.Contains(m.Asked()[1], "cut off") {
				t.Errorf("second ask was %q", m.Asked()[1])
			}
		})
	}
	// Every shape real models write one query in is read at the first ask.
	for _, shape := range agenttest.Shapes("SELECT name FROM t") {
		t.Run(shape.Name, func(t *testing.T) {
			t.Parallel()
			m := agenttest.Script(func(llm.Request, int) *llm.Response { return shape.Reply })
			c, err := newAgent(t, Config{}, m).Candidate(context.Background(), agenttest.SQLite(t, tSQL), CandidateInput{Example: ex})
			if err != nil || m.Calls() != 1 || c.Status != StatusOK || c.SQL != "SELECT name FROM t" {
				t.Errorf("%d calls, status %s, sql %q (%v)", m.Calls(), c.Status, c.SQL, err)
			}
		})
	}
}

func TestCandidateRefinesAndStops(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		replies []string
		calls   int
		queries int
		status  Status
	}{
		{"error then fix", Config{}, []string{sqlReply("SELECT nope FROM t"), sqlReply("SELECT id FROM t")}, 2, 2, StatusOK},
		{"empty four times stops early", Config{}, []string{sqlReply("SELECT id FROM t WHERE id > 9")}, 4, 4, StatusEmpty},
		{"errors until max iter", Config{MaxIter: 5}, []string{sqlReply("SELECT nope FROM t")}, 5, 5, StatusError},
		{"empty, error, empty: no early stop", Config{MaxIter: 5}, []string{
			sqlReply("SELECT id FROM t WHERE id > 9"), sqlReply("SELECT nope FROM t"), sqlReply("SELECT id FROM t WHERE id > 9"),
			sqlReply("SELECT id FROM t WHERE id > 9"), sqlReply("SELECT id FROM t WHERE id > 9"), sqlReply("SELECT id FROM t WHERE id > 9")}, 5, 5, StatusEmpty},
		{"self-consistency needs the answer twice", Config{SelfConsistency: true}, []string{
			sqlReply("SELECT id FROM t"), sqlReply("SELECT name FROM t"), sqlReply("SELECT id FROM t ORDER BY id DESC")}, 3, 3, StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := agenttest.Replies(tt.replies...)
			c, err := newAgent(t, tt.cfg, m).Candidate(context.Background(), agenttest.SQLite(t, tSQL), CandidateInput{Example: ex})
			if err != nil {
				t.Fatal(err)
			}
			if m.Calls() != tt.calls || c.Cost.Queries != tt.queries || c.Status != tt.status {
				t.Errorf("calls %d, queries %d, status %s (%s)", m.Calls(), c.Cost.Queries, c.Status, c.Error)
			}
		})
	}
	// The feedback the model sees is the engine's error text verbatim.
	m := agenttest.Replies(sqlReply("SELECT nope FROM t"), sqlReply("SELECT id FROM t"))
	if _, err := newAgent(t, Config{}, m).Candidate(context.Background(), agenttest.SQLite(t, tSQL), CandidateInput{Example: ex}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Asked()[1], "Input sql:\nSELECT nope FROM t\nThe error information is:\n") || !strings.Contains(m.Asked()[1], "no such column: nope") {
		t.Errorf("refinement prompt %q", m.Asked()[1])
	}
}

func TestCTERefinementFindsWhereRowsDisappear(t *testing.T) {
	t.Parallel()
	stuck := "WITH a AS (SELECT id FROM t), b AS (SELECT id FROM a WHERE id > 9) SELECT * FROM b"
	m := agenttest.Texts(func(n int, last string) string {
		if strings.Contains(last, "intermediate results of each CTE") {
			return sqlReply("WITH a AS (SELECT id FROM t), b AS (SELECT id FROM a WHERE id > 1) SELECT * FROM b")
		}
		return sqlReply(stuck)
	})
	c, err := newAgent(t, Config{CTERefine: true}, m).Candidate(context.Background(), agenttest.SQLite(t, tSQL), CandidateInput{Example: ex})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != StatusOK || !c.CTERefined || c.Rows != 2 {
		t.Fatalf("candidate %+v", c)
	}
	asked := m.Asked()
	last := asked[len(asked)-1]
	if !strings.Contains(last, "CTE 1 a: rows") || !strings.Contains(last, "CTE 2 b: no rows") {
		t.Errorf("CTE prompt:\n%s", last)
	}
}

func rcand(round, i int, csv string) *agent.Candidate {
	return &agent.Candidate{Round: round, Index: i, Status: agent.StatusOK, CSV: csv, SQL: fmt.Sprintf("SELECT %d", i)}
}

// TestModelVoteBreaksTies: the model chooses among the tied candidates
// by file name (v1's model vote), and the final vote takes its choice.
func TestModelVoteBreaksTies(t *testing.T) {
	t.Parallel()
	A, B := "x\n1\n", "x\n2\n"
	mv := newAgent(t, Config{ModelVote: true}, agenttest.Replies("```plaintext\n1result.sql\n```"))
	all := []*agent.Candidate{rcand(0, 0, A), rcand(0, 1, B), rcand(0, 2, A), rcand(0, 3, B)}
	tieBreak := func(tied []*agent.Candidate) *agent.Candidate {
		rc := make([]*Candidate, len(tied))
		for i, c := range tied {
			rc[i] = &Candidate{Round: c.Round, Index: c.Index, SQL: c.SQL, CSV: c.CSV, Status: StatusOK}
		}
		w, err := mv.modelVote(context.Background(), rc, CandidateInput{Example: ex}, 1, &cost.Cost{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range tied {
			if c.Index == w.Index {
				return c
			}
		}
		return nil
	}
	if d := DecideFinal(all, Pool{}, 1, tieBreak); d.Method != vote.MethodModelVote || d.Winner.Index != 1 {
		t.Errorf("model vote: %+v", d)
	}
}

func TestExplorationStopRules(t *testing.T) {
	t.Parallel()
	many := func(n int, q string) string {
		var b strings.Builder
		b.WriteString("```sql\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "--Description: query %d\n%s;\n", i, q)
		}
		return b.String() + "```"
	}
	tests := []struct {
		name      string
		reply     func(n int, last string) string
		successes int
		calls     int
		stopped   string
	}{
		{"more than 10 successes stop", func(int, string) string { return many(14, "SELECT id FROM t LIMIT 20") }, 11, 1, "enough successful queries"},
		// The reference's error_rec: the first query and its three
		// corrections fail (5 records: not yet more than 5); the second
		// query still gets its three corrections, then the last 5 records
		// are failures of more than 5 and exploration stops, abandoned.
		{"a second fully failed query stops", func(int, string) string { return many(10, "SELECT nope FROM t") }, 0, 1 + 3 + 3, "no query succeeded (the last 5 attempts failed)"},
		{"too few queries: asked again, then runs", func(n int, _ string) string {
			if n == 0 {
				return many(2, "SELECT id FROM t")
			}
			return many(3, "SELECT id FROM t")
		}, 3, 2, "all queries run"},
		{"a fix then the others corrected alike", func(n int, last string) string {
			switch {
			case strings.Contains(last, "Write at most 10"):
				return many(3, "SELECT nope FROM t")
			case strings.Contains(last, "is corrected to"):
				return many(2, "SELECT name FROM t")
			}
			return sqlReply("SELECT id FROM t")
		}, 3, 3, "all queries run"},
		{"semicolons in strings are not split", func(int, string) string {
			return "```sql\nSELECT 'a;b' AS s FROM t;\n-- only a comment;\nSELECT id FROM t;\nSELECT name FROM t;\n```"
		}, 3, 1, "all queries run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := agenttest.Texts(tt.reply)
			e, err := newAgent(t, Config{}, m).Explore(context.Background(), agenttest.SQLite(t, tSQL), ExploreInput{Example: ex, TableInfo: "t", TableStruct: "['t']"})
			if err != nil {
				t.Fatal(err)
			}
			if e.Successes != tt.successes || m.Calls() != tt.calls || e.Stopped != tt.stopped || e.Cost.LLMCalls != m.Calls() {
				t.Errorf("successes %d, calls %d (ledger %d), stopped %q", e.Successes, m.Calls(), e.Cost.LLMCalls, e.Stopped)
			}
			if tt.successes > 0 && (!strings.HasPrefix(e.Transcript, "Query:\n") || !strings.Contains(e.Transcript, "\nAnswer:\n")) {
				t.Errorf("transcript %q", e.Transcript)
			}
		})
	}
}
