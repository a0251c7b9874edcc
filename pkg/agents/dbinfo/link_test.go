package dbinfo

import (
	"context"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

func TestParseLink(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text    string
		related bool
		cols    int
		err     bool
	}{
		{"```json\n{\"think\": \"t\", \"answer\": \"Y\", \"columns\": [\"a\", \"b\"]}\n```", true, 2, false},
		{"```json\n{\"think\": \"t\", \"answer\": \" n \", \"columns\": []}\n```", false, 0, false},
		{"```json\n{\"answer\": \"maybe\"}\n```", false, 0, true},
		{"no block", false, 0, true},
		{"```json\n{broken\n```", false, 0, true},
		// A draft then a final answer: the last block.
		{"```json\n{\"answer\":\"Y\"}\n```\n```json\n{\"answer\":\"N\"}\n```", false, 0, false},
		// Real models' forms: JSON in prose, Python literals, a trailing comma, yes/no.
		{"The table is related: {\"think\": \"has sales\", \"answer\": \"Y\", \"columns\": [\"a\"]}", true, 1, false},
		{"```json\n{'think': 'x', 'answer': 'N', 'columns': [],}\n```", false, 0, false},
		{"<think>{\"answer\": \"N\"}</think>```json\n{\"answer\": \"yes\", \"columns\": [\"a\", \"b\"]}\n```", true, 2, false},
	}
	for _, tt := range tests {
		a, err := parseLink(tt.text)
		if (err != nil) != tt.err || a.Related != tt.related || len(a.Columns) != tt.cols {
			t.Errorf("parseLink(%q) = %+v, %v", tt.text, a, err)
		}
	}
}

// TestLinkAgainstSimulator links the demo schema for one question through
// llmsim, keeps only the gold tables and columns, and pays nothing the
// second time thanks to the Redis cache.
func TestLinkAgainstSimulator(t *testing.T) {
	t.Parallel()
	ds, err := dataset.Load(demoDir, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, client := agenttest.Sim(t, llmsim.Config{Dataset: ds, Noise: llmsim.Noise{Gold: 1, Link: 1}}, "")
	srv := redistest.Start(t)
	linker := &Linker{LLM: client, Cache: &RedisLinkCache{Client: srv.Client(t)}, Budget: 1000}
	e, _ := ds.Example("local011") // inventory joined with warehouses
	info, err := ForExample(context.Background(), ds, e, nil, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !linker.NeedsLinking(info, e.ExternalKnowledge) {
		t.Fatal("a 1,000-character budget must require linking")
	}
	q := LinkQuestion{ID: e.ID, Question: e.Question, Seed: 1}
	linked, answers, c, err := linker.Link(context.Background(), info, q)
	if err != nil {
		t.Fatal(err)
	}
	if c.LLMCalls != len(info.Blocks) || len(answers) != len(info.Blocks) || sim.Stats().ByKind[llmsim.KindLink] != int64(len(info.Blocks)) {
		t.Errorf("%d calls for %d blocks; simulator saw %d link requests", c.LLMCalls, len(info.Blocks), sim.Stats().ByKind[llmsim.KindLink])
	}
	if len(linked.Blocks) != 2 || !linked.Linked {
		t.Fatalf("linked %d blocks, want inventory and warehouses", len(linked.Blocks))
	}
	p := linked.Prompt("")
	for _, want := range []string{"Table full name: inventory\n", "Table full name: warehouses\n", "Column name: quantity Type: INTEGER", "Column name: name Type: TEXT"} {
		if !strings.Contains(p, want) {
			t.Errorf("linked prompt lacks %q", want)
		}
	}
	// Exact column matching: bin_code is not in the gold SQL and must go,
	// and "id" must not keep every column ending in id.
	if strings.Contains(p, "bin_code") || strings.Contains(p, "Table full name: customers") {
		t.Errorf("linked prompt keeps unrelated columns or tables:\n%s", p)
	}
	if Chars(p) >= Chars(info.Prompt("")) {
		t.Error("linking did not shrink the prompt")
	}
	before := sim.Stats().Requests
	_, _, c2, err := linker.Link(context.Background(), info, q)
	if err != nil {
		t.Fatal(err)
	}
	if c2.LLMCalls != 0 || c2.CacheHits != len(info.Blocks) || sim.Stats().Requests != before {
		t.Errorf("rerun made %d calls (%d cache hits), want all from the cache", c2.LLMCalls, c2.CacheHits)
	}
}
