package dbinfo

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

const (
	demoDir   = "../../../examples/demo"
	subsetDir = "../../../../shared/data/spider2-lite-subset"
)

func TestGroupKeyAndFamilies(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, key string }{
		{"ga_sessions_20170801", "ga_sessions_"},
		{"GSOD1945", "GSOD"},
		{"events_20240301", "events_"},
		{"2019_q1", "_q"},
		{"orders", "orders"},
	}
	for _, tt := range tests {
		if got := groupKey(tt.name); got != tt.key {
			t.Errorf("groupKey(%q) = %q, want %q", tt.name, got, tt.key)
		}
	}
	mk := func(prefix string, n int) []*Block {
		var out []*Block
		for i := 0; i < n; i++ {
			out = append(out, &Block{Name: fmt.Sprintf("%s%08d", prefix, 20170801+i)})
		}
		return out
	}
	tests2 := []struct {
		name   string
		blocks []*Block
		want   int // blocks after grouping
	}{
		{"eleven shards collapse", mk("ga_sessions_", 11), 1},
		{"ten shards stay", mk("ga_sessions_", 10), 10},
		{"case matters", append(mk("ga_sessions_", 6), mk("GA_SESSIONS_", 6)...), 12},
		{"other tables kept in order", append(append([]*Block{{Name: "a"}}, mk("t_", 12)...), &Block{Name: "z"}), 3},
	}
	for _, tt := range tests2 {
		got := group(tt.blocks, 11)
		if len(got) != tt.want {
			t.Errorf("%s: %d blocks, want %d", tt.name, len(got), tt.want)
		}
	}
	g := group(mk("ga_sessions_", 12), 11)
	if g[0].Name != "ga_sessions_20170801" || len(g[0].Members) != 12 || g[0].Members[11] != "ga_sessions_20170812" {
		t.Errorf("representative %s with %d members", g[0].Name, len(g[0].Members))
	}
}

func demoInfo(t *testing.T, opt Options) (*dataset.Dataset, *Info) {
	t.Helper()
	ds, err := dataset.Load(demoDir, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := ds.Example("local022")
	info, err := ForExample(context.Background(), ds, e, nil, opt)
	if err != nil {
		t.Fatal(err)
	}
	return ds, info
}

func TestDemoPromptFromMetadata(t *testing.T) {
	t.Parallel()
	ds, info := demoInfo(t, DefaultOptions())
	if len(info.Blocks) != 16 {
		t.Errorf("%d blocks, want 15 tables + 1 events family", len(info.Blocks))
	}
	e, _ := ds.Example("local022")
	p := info.Prompt(e.ExternalKnowledge)
	for _, want := range []string{
		"Table full name: customers\nColumn name: customer_id Type: INTEGER Description: Unique customer identifier.\n",
		"Sample rows:\n[{'customer_id': 1, ",
		"Table full name: events_20240301\n",
		similarPrefix + "['events_20240301', 'events_20240302',",
		"\n\n" + Separator + "\n",
		"External knowledge that might be helpful: \n# Gross margin",
		"The table structure information is (table names): \n['customers', 'addresses',",
		"'events_20240301', 'events_20240302', ",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
	if strings.Contains(p, "Table full name: events_20240302") {
		t.Error("a grouped family member got its own block")
	}
	_, full := demoInfo(t, Uncompressed())
	if Chars(full.Tables) <= Chars(info.Tables) || len(full.Blocks) != 29 {
		t.Errorf("uncompressed %d chars in %d blocks vs compressed %d", Chars(full.Tables), len(full.Blocks), Chars(info.Tables))
	}
	if !strings.Contains(info.Prompt(""), "External knowledge that might be helpful: \nNone\n") {
		t.Error("missing external knowledge must read None")
	}
}

func TestDemoPromptFromLiveSQLite(t *testing.T) {
	t.Parallel()
	ds, err := dataset.Load(demoDir, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := ds.Example("local001")
	db, _ := ds.Database(e)
	wh, err := sqlite.Open(sqlite.Config{Path: db.SQLitePath})
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	info, err := FromSQLite(context.Background(), wh, "shop", DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Blocks) != 16 {
		t.Errorf("%d blocks from the live file, want 16", len(info.Blocks))
	}
	if !strings.Contains(info.Tables, "Table full name: categories\nColumn name: category_id Type: INTEGER\n") ||
		!strings.Contains(info.Tables, "Sample rows:\n[(1, 'Electronics', None, ") {
		t.Errorf("live prompt:\n%.600s", info.Tables)
	}
	// External knowledge reaches SQLite examples too (the reference dropped it).
	if !strings.Contains(info.Prompt("the doc"), "External knowledge that might be helpful: \nthe doc\n") {
		t.Error("external knowledge missing from a SQLite prompt")
	}
}

func TestOversizeRules(t *testing.T) {
	t.Parallel()
	digitsRows := `[{"v": "` + strings.Repeat("1234567890", 300) + `"}]`
	textRows := `[{"v": "` + strings.Repeat("abcdefghij", 3000) + `"}]`
	blocks := []*Block{
		{FullName: "d", Name: "d", Columns: []Column{{"v", "TEXT", "digits"}}, sampleJSON: []byte(digitsRows), Members: []string{"d", "d2"}},
		{FullName: "t", Name: "t", Columns: []Column{{"v", "TEXT", "letters"}}, sampleJSON: []byte(textRows)},
	}
	opt := DefaultOptions()
	opt.Threshold = 5000
	info := &Info{Dialect: warehouse.SQLite, Blocks: blocks, opt: opt}
	info.render()
	parts := strings.Split(info.Tables, Separator)
	if n := Chars(parts[0]); n > 1300 {
		t.Errorf("digit-heavy sample rows kept %d chars, want about 1,000", n)
	}
	if n := Chars(parts[1]); n < 9000 || n > 10300 {
		t.Errorf("text sample rows kept %d chars, want about 10,000", n)
	}
	if !strings.Contains(parts[0], similarPrefix+"['d', 'd2']") {
		t.Error("the family hint was cut with the sample rows")
	}
	if strings.Contains(info.Tables, "Description:") {
		t.Error("descriptions survive although the prompt is still over the threshold")
	}
	opt.Threshold = 1 << 30
	small := &Info{Dialect: warehouse.SQLite, Blocks: blocks, opt: opt}
	small.render()
	if !strings.Contains(small.Tables, "Description: digits") || Chars(small.Tables) < 30000 {
		t.Error("a prompt under the threshold was changed")
	}
}

func TestSpiderBigQueryCompression(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(subsetDir); err != nil {
		t.Skipf("shared subset missing: %v", err)
	}
	ds, err := dataset.Load(subsetDir, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := ds.Example("bq011")
	before, err := ForExample(context.Background(), ds, e, nil, Uncompressed())
	if err != nil {
		t.Fatal(err)
	}
	after, err := ForExample(context.Background(), ds, e, nil, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Blocks) != 1 || len(after.Blocks[0].Members) != 92 {
		t.Errorf("ga4: %d blocks after grouping, want 1 representative of 92 shards", len(after.Blocks))
	}
	ratio := float64(Chars(after.Tables)) / float64(Chars(before.Tables))
	if ratio > 0.05 {
		t.Errorf("compressed to %.1f%% of the original, want under 5%%", 100*ratio)
	}
	p := after.Prompt(e.ExternalKnowledge)
	for _, want := range []string{
		// The representative is the first shard in DDL.csv order, as in the reference.
		"Table full name: bigquery-public-data.ga4_obfuscated_sample_ecommerce.events_20210109\n",
		"Column name: event_params Type: ARRAY<STRUCT<key STRING",
		"The table structure information is ({database name: {schema name: [table name]}}): \n{'bigquery-public-data': {'ga4_obfuscated_sample_ecommerce': ['events_20210109', 'events_20201109',",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
}
