package dbinfo

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/pyrepr"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// writeSnowflakeFolder lays out a Spider 2.0-lite Snowflake database DB
// with one schema S: a DDL.csv row per table, in order, and a JSON file for
// each table not in noJSON. It returns the database's metadata folder.
func writeSnowflakeFolder(t *testing.T, tables []string, noJSON map[string]bool) string {
	t.Helper()
	meta := filepath.Join(t.TempDir(), "DB")
	dir := filepath.Join(meta, "S")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var ddl strings.Builder
	w := csv.NewWriter(&ddl)
	w.Write([]string{"table_name", "description", "DDL"})
	for _, name := range tables {
		w.Write([]string{name, "", "create or replace TABLE " + name + " (\n\tID NUMBER(38,0),\n\tV VARCHAR\n);"})
		if noJSON[name] {
			continue
		}
		js, err := json.Marshal(map[string]any{
			"table_name":     name,
			"table_fullname": "DB.S." + name,
			"column_names":   []string{"ID", "V"},
			"column_types":   []string{"NUMBER", "TEXT"},
			"description":    []string{"row id", "value"},
			"sample_rows":    []map[string]any{{"ID": 1, "V": name}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), js, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	if err := os.WriteFile(filepath.Join(dir, "DDL.csv"), []byte(ddl.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return meta
}

func seq(format string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf(format, i))
	}
	return out
}

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// TestFamiliesGroupDDLRows: digit families are formed over DDL.csv rows,
// JSON or not, as the reference's process_ddl does before any JSON is read
// (reconstruct_data.py:13-30, 200-213). A family's member list (the hint and
// the structure line) names every DDL row; a family whose representative
// has no JSON vanishes whole (block and structure entry); outside families
// a table without JSON is skipped.
func TestFamiliesGroupDDLRows(t *testing.T) {
	t.Parallel()
	events := seq("EVENTS_%02d", 1, 12)
	logs := seq("LOG_%d", 2001, 2011)
	shards := seq("SHARD_%d", 1, 10)
	tests := []struct {
		name   string
		tables []string
		noJSON map[string]bool
		// blocks are the rendered tables, each with its members ("" when
		// not grouped, else space-separated).
		blocks  []string
		members []string
		// structure is the schema's table list of the structure line.
		structure []string
	}{
		{
			name:   "family of 12, three members without JSON: all 12 listed",
			tables: events, noJSON: set("EVENTS_03", "EVENTS_07", "EVENTS_12"),
			blocks: []string{"EVENTS_01"}, members: []string{strings.Join(events, " ")},
			structure: events,
		},
		{
			name:   "representative without JSON: the family is dropped",
			tables: append(append([]string{"CUSTOMERS"}, logs...), "ORDERS"), noJSON: set("LOG_2001"),
			blocks: []string{"CUSTOMERS", "ORDERS"}, members: []string{"", ""},
			structure: []string{"CUSTOMERS", "ORDERS"},
		},
		{
			name:   "family of 10 is not grouped: members without JSON skipped",
			tables: append(append([]string{}, shards...), "ORPHAN"), noJSON: set("SHARD_2", "SHARD_10", "ORPHAN"),
			blocks:    []string{"SHARD_1", "SHARD_3", "SHARD_4", "SHARD_5", "SHARD_6", "SHARD_7", "SHARD_8", "SHARD_9"},
			members:   []string{"", "", "", "", "", "", "", ""},
			structure: []string{"SHARD_1", "SHARD_3", "SHARD_4", "SHARD_5", "SHARD_6", "SHARD_7", "SHARD_8", "SHARD_9"},
		},
		{
			name:   "family of 11, every member with JSON",
			tables: logs, noJSON: nil,
			blocks: []string{"LOG_2001"}, members: []string{strings.Join(logs, " ")},
			structure: logs,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := &dataset.Database{Name: "DB", Dialect: warehouse.Snowflake, MetaDir: writeSnowflakeFolder(t, tt.tables, tt.noJSON)}
			s, problems, err := dataset.LoadSchema(db)
			if err != nil || len(problems) > 0 {
				t.Fatalf("load: %v %v", err, problems)
			}
			info := FromMetadata(s, db, DefaultOptions())
			var blocks, members []string
			for _, bl := range info.Blocks {
				blocks = append(blocks, bl.Name)
				members = append(members, strings.Join(bl.Members, " "))
			}
			if strings.Join(blocks, ",") != strings.Join(tt.blocks, ",") {
				t.Errorf("blocks %q, want %q", blocks, tt.blocks)
			}
			if strings.Join(members, ",") != strings.Join(tt.members, ",") {
				t.Errorf("members %q, want %q", members, tt.members)
			}
			if got, want := info.TableStruct(), "{'DB': {'S': "+pyrepr.List(tt.structure)+"}}"; got != want {
				t.Errorf("structure\n got %s\nwant %s", got, want)
			}
			for i, bl := range info.Blocks {
				if len(info.Blocks) != len(tt.members) {
					break // the block list is already reported
				}
				hint := similarPrefix + pyrepr.List(bl.Members)
				if has := strings.Contains(info.BlockText(i), hint); has != (tt.members[i] != "") {
					t.Errorf("block %s: family hint present %v, want %v:\n%s", bl.Name, has, !has, info.BlockText(i))
				}
			}
			if len(tt.members) > 0 && tt.members[0] != "" {
				if want := similarPrefix + pyrepr.List(strings.Fields(tt.members[0])) + "\n"; !strings.Contains(info.Tables, want) {
					t.Errorf("the prompt lacks the hint %q:\n%.600s", want, info.Tables)
				}
			}
			for n := range tt.noJSON {
				if strings.Contains(info.Tables, "Table full name: DB.S."+n+"\n") {
					t.Errorf("%s has no JSON but got a block", n)
				}
			}
		})
	}
}
