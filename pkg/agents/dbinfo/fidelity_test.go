package dbinfo

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// yes is a model that answers every linking request "Y".
func yes() *agenttest.Model {
	return agenttest.Replies("```json\n{\"think\": \"t\", \"answer\": \"Y\", \"columns\": []}\n```")
}

// blockOf is the table block a linking prompt shows.
var blockOf = regexp.MustCompile(`(?s)Table info: (.*)\nTask: `)

// oversized is two blocks over a 5,000-character threshold: sample rows
// are shrunk and descriptions removed.
func oversized() *Info {
	digitsRows := `[{"v": "` + strings.Repeat("1234567890", 300) + `"}]`
	textRows := `[{"v": "` + strings.Repeat("abcdefghij", 3000) + `"}]`
	opt := DefaultOptions()
	opt.Threshold = 5000
	info := &Info{Database: "db", Dialect: warehouse.SQLite, opt: opt, Blocks: []*Block{
		{FullName: "d", Name: "d", Columns: []Column{{"v", "TEXT", "digits"}}, sampleJSON: []byte(digitsRows), Members: []string{"d", "d2"}},
		{FullName: "t", Name: "t", Columns: []Column{{"v", "TEXT", "letters"}}, sampleJSON: []byte(textRows)},
	}}
	info.render()
	return info
}

// TestLinkBlocksShowTheOversizeRules: the linking prompt shows each block
// as the prompt does, after the oversize rules, without its separator —
// the reference split prompts.txt on the separator (schema_linking.py:180,
// utils.py:288-294) — and at temperature 0 (schema_linking.py:166).
func TestLinkBlocksShowTheOversizeRules(t *testing.T) {
	t.Parallel()
	info := oversized()
	rec := yes()
	l := &Linker{LLM: rec, Budget: 1}
	if _, _, _, err := l.Link(context.Background(), info, LinkQuestion{ID: "x", Question: "q"}); err != nil {
		t.Fatal(err)
	}
	if rec.Calls() != 2 {
		t.Fatalf("%d link calls for 2 blocks", rec.Calls())
	}
	for _, req := range rec.Requests() {
		if req.Temperature == nil || *req.Temperature != 0 || req.Role != llm.RoleLink {
			t.Errorf("link request role %s, temperature %v; want link at 0", req.Role, req.Temperature)
		}
		m := blockOf.FindStringSubmatch(req.Messages[0].Content)
		if m == nil {
			t.Fatalf("no table block in %.200q", req.Messages[0].Content)
		}
		block := m[1]
		if strings.Contains(block, "Description:") || strings.Contains(block, Separator) || Chars(block) > 10_300 {
			t.Errorf("the link block is not the oversize-shrunk one (%d chars):\n%.300s", Chars(block), block)
		}
		if !strings.Contains(info.Tables, block+"\n") || block != info.BlockText(0) && block != info.BlockText(1) {
			t.Errorf("the link block is not the prompt's block:\n%.300s", block)
		}
	}
	// Temperature is the linker's to set.
	half := 0.5
	rec = yes()
	l = &Linker{LLM: rec, Budget: 1, Temperature: &half}
	if _, _, _, err := l.Link(context.Background(), info, LinkQuestion{ID: "x", Question: "q"}); err != nil {
		t.Fatal(err)
	}
	if *rec.Request(0).Temperature != 0.5 {
		t.Errorf("temperature %v, want 0.5", *rec.Request(0).Temperature)
	}
}

// TestLinkTriggerIsPromptBytes: linking starts when the prompt (what the
// reference wrote to prompts.txt) is at least Budget bytes of UTF-8, as
// the reference compared os.path.getsize with its threshold
// (schema_linking.py:55), not when it exceeds Budget characters.
func TestLinkTriggerIsPromptBytes(t *testing.T) {
	t.Parallel()
	opt := DefaultOptions()
	info := &Info{Database: "db", Dialect: warehouse.SQLite, opt: opt, Blocks: []*Block{
		{FullName: "t", Name: "t", Columns: []Column{{"nom", "TEXT", "électricité — 電力"}}, sampleJSON: []byte(`[{"nom": "façade ☃"}]`)},
	}}
	info.render()
	ek := "Connaissances: éèê"
	bytes, chars := PromptBytes(info, ek), Chars(info.Prompt(ek))
	if bytes <= chars+2 {
		t.Fatalf("the test prompt has %d bytes for %d characters; it needs multibyte text", bytes, chars)
	}
	for _, tt := range []struct {
		budget int
		want   bool
	}{
		{bytes, true},      // at the budget: linked (>=)
		{bytes + 1, false}, // under it
		{chars + 1, true},  // over it in bytes, under it in characters
	} {
		if got := (&Linker{Budget: tt.budget}).NeedsLinking(info, ek); got != tt.want {
			t.Errorf("budget %d for a prompt of %d bytes (%d chars): NeedsLinking %v, want %v", tt.budget, bytes, chars, got, tt.want)
		}
	}
	if (&Linker{}).budget() != DefaultLinkBudget {
		t.Error("the default budget is not DefaultLinkBudget")
	}
}

// legacyOversize is the oversize rules applied to the whole rendered text,
// as before the blocks were kept apart: the per-block rendering must give
// the same prompt.
func legacyOversize(tables string, opt Options) string {
	if opt.Threshold <= 0 || Chars(tables) <= opt.Threshold {
		return tables
	}
	tables = shrinkSamples(tables)
	if Chars(tables) > opt.Threshold && opt.ClearLongDescriptions {
		tables = description.ReplaceAllString(tables, "")
	}
	return tables
}

func TestOversizePerBlockEqualsWholePrompt(t *testing.T) {
	t.Parallel()
	infos := []*Info{oversized()}
	dirs := []string{demoDir, subsetDir}
	if raceEnabled {
		// The race detector makes the Spider 2.0 subset ~10x slower.
		dirs = dirs[:1]
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		ds, err := dataset.Load(dir, dataset.Options{})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, e := range ds.Examples {
			db, _ := ds.Database(e)
			if seen[db.Key()] || db.MetaDir == "" {
				continue
			}
			seen[db.Key()] = true
			for _, opt := range []Options{DefaultOptions(), func() Options { o := DefaultOptions(); o.Threshold = 20_000; return o }()} {
				info, err := ForExample(context.Background(), ds, e, nil, opt)
				if err != nil {
					t.Fatal(err)
				}
				infos = append(infos, info)
			}
		}
	}
	for _, info := range infos {
		var whole strings.Builder
		for _, bl := range info.Blocks {
			whole.WriteString(bl.render(info.opt, bl.keep))
		}
		if want := legacyOversize(whole.String(), info.opt); info.Tables != want {
			t.Errorf("%s: per-block oversize rules give %d chars, the whole-text rules %d", info.Database, Chars(info.Tables), Chars(want))
		}
		for j := range info.Blocks {
			if !strings.Contains(info.Tables, info.BlockText(j)) {
				t.Errorf("%s: block %d is not in the prompt", info.Database, j)
			}
		}
	}
	t.Logf("%d table informations compared", len(infos))
}
