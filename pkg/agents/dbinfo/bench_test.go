package dbinfo

import (
	"fmt"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// shardedSchema is a BigQuery-like dataset of 400 daily shards of a
// 30-column events table plus 20 ordinary tables.
func shardedSchema() (*dataset.Schema, *dataset.Database) {
	f := &dataset.SchemaFolder{Path: "proj.analytics"}
	cols := make([]dataset.ColumnMeta, 30)
	for i := range cols {
		cols[i] = dataset.ColumnMeta{Name: fmt.Sprintf("col_%d", i), Type: "STRING", Description: "A column of the events."}
	}
	sample := []byte(`[{"col_0": "a", "col_1": 12, "col_2": "2024-01-01"}, {"col_0": "b", "col_1": 13, "col_2": "2024-01-02"}]`)
	for d := 0; d < 400; d++ {
		name := fmt.Sprintf("events_%d", 20230101+d)
		f.Tables = append(f.Tables, &dataset.Table{Name: name, FullName: "proj.analytics." + name, Columns: cols, SampleRows: sample, HasJSON: true})
	}
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("dim_%c", 'a'+i)
		f.Tables = append(f.Tables, &dataset.Table{Name: name, FullName: "proj.analytics." + name, Columns: cols[:8], SampleRows: sample, HasJSON: true})
	}
	return &dataset.Schema{Database: "analytics", Folders: []*dataset.SchemaFolder{f}}, &dataset.Database{Name: "analytics", Dialect: warehouse.BigQuery}
}

func BenchmarkCompress400ShardedTables(b *testing.B) {
	s, db := shardedSchema()
	var info *Info
	for b.Loop() {
		info = FromMetadata(s, db, DefaultOptions())
	}
	full := FromMetadata(s, db, Uncompressed())
	b.ReportMetric(float64(Chars(info.Tables)), "chars_after")
	b.ReportMetric(float64(Chars(full.Tables)), "chars_before")
}
