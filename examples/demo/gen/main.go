// Command gen writes quorum's demo dataset: an online shop's SQLite database
// in Spider 2.0's layout, with metadata, questions, gold SQL and gold
// results produced by running that SQL. Everything comes from one seeded
// generator, so the output is the same on every run.
//
//	go generate ./examples/demo/...
package main

//go:generate go run . -out ..

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite"

	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

const dbName = "shop"

func main() {
	out := flag.String("out", "..", "dataset folder to write (examples/demo)")
	seed := flag.Uint64("seed", 20240301, "generator seed")
	flag.Parse()
	if err := write(*out, *seed); err != nil {
		log.Fatal(err)
	}
}

func write(out string, seed uint64) error {
	for _, p := range []string{"resource", "evaluation_suite", "demo.jsonl"} {
		if err := os.RemoveAll(filepath.Join(out, p)); err != nil {
			return err
		}
	}
	dirs := map[string]string{
		"db":   filepath.Join(out, "resource", "databases", "spider2-localdb"),
		"meta": filepath.Join(out, "resource", "databases", "sqlite", dbName),
		"docs": filepath.Join(out, "resource", "documents"),
		"sql":  filepath.Join(out, "evaluation_suite", "gold", "sql"),
		"res":  filepath.Join(out, "evaluation_suite", "gold", "exec_result"),
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	data := generate(seed)
	dbPath := filepath.Join(dirs["db"], dbName+".sqlite")
	tables := allTables()
	if err := writeDatabase(dbPath, tables, data); err != nil {
		return err
	}
	if err := writeMetadata(dirs["meta"], tables, data); err != nil {
		return err
	}
	for name, text := range documents {
		if err := os.WriteFile(filepath.Join(dirs["docs"], name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return writeTasksAndGold(out, dirs, dbPath)
}

// allTables is the shop tables followed by the daily event tables.
func allTables() []table {
	out := append([]table(nil), shopTables...)
	for _, d := range eventDays {
		out = append(out, table{name: d, desc: "Site events of " + d[7:11] + "-" + d[11:13] + "-" + d[13:15] + ".", cols: eventColumns})
	}
	return out
}

func (d *shopData) rowsOf(name string) [][]any {
	if strings.HasPrefix(name, "events_") {
		return d.events[name]
	}
	return d.rows[name]
}

func createSQL(t table) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (\n", t.name)
	for i, c := range t.cols {
		sep := ","
		if i == len(t.cols)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "    %s %s%s\n", c.name, c.typ, sep)
	}
	b.WriteString(");")
	return b.String()
}

func writeDatabase(path string, tables []table, data *shopData) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	for _, t := range tables {
		if _, err := tx.Exec(createSQL(t)); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		marks := strings.TrimSuffix(strings.Repeat("?,", len(t.cols)), ",")
		stmt, err := tx.Prepare(fmt.Sprintf("INSERT INTO %s VALUES (%s)", t.name, marks))
		if err != nil {
			return err
		}
		rows := data.rowsOf(t.name)
		if len(rows) == 0 {
			return fmt.Errorf("table %s has no rows", t.name)
		}
		for _, r := range rows {
			if len(r) != len(t.cols) {
				return fmt.Errorf("table %s: row has %d values for %d columns", t.name, len(r), len(t.cols))
			}
			if _, err := stmt.Exec(r...); err != nil {
				return fmt.Errorf("insert into %s: %w", t.name, err)
			}
		}
		stmt.Close()
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	_, err = db.Exec("VACUUM")
	return err
}

// writeMetadata writes DDL.csv and one JSON file per table, as Spider 2.0
// ships them for its SQLite databases (plus column descriptions, which ours
// has).
func writeMetadata(dir string, tables []table, data *shopData) error {
	var ddl bytes.Buffer
	w := csv.NewWriter(&ddl)
	w.Write([]string{"table_name", "DDL"})
	for _, t := range tables {
		w.Write([]string{t.name, createSQL(t)})
		rows := data.rowsOf(t.name)
		var sample []json.RawMessage
		for i := 0; i < 5 && i < len(rows); i++ {
			r := rows[i*len(rows)/5]
			var b bytes.Buffer
			b.WriteByte('{')
			for j, c := range t.cols {
				if j > 0 {
					b.WriteString(", ")
				}
				k, _ := json.Marshal(c.name)
				v, _ := json.Marshal(r[j])
				b.Write(k)
				b.WriteString(": ")
				b.Write(v)
			}
			b.WriteByte('}')
			sample = append(sample, b.Bytes())
		}
		meta := struct {
			TableName     string            `json:"table_name"`
			TableFullName string            `json:"table_fullname"`
			ColumnNames   []string          `json:"column_names"`
			ColumnTypes   []string          `json:"column_types"`
			Description   []string          `json:"description"`
			SampleRows    []json.RawMessage `json:"sample_rows"`
		}{TableName: t.name, TableFullName: t.name, SampleRows: sample}
		for _, c := range t.cols {
			meta.ColumnNames = append(meta.ColumnNames, c.name)
			meta.ColumnTypes = append(meta.ColumnTypes, c.typ)
			meta.Description = append(meta.Description, c.desc)
		}
		b, err := json.MarshalIndent(meta, "", "    ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, t.name+".json"), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	w.Flush()
	return os.WriteFile(filepath.Join(dir, "DDL.csv"), ddl.Bytes(), 0o644)
}

func writeTasksAndGold(out string, dirs map[string]string, dbPath string) error {
	db, err := sqlite.Open(sqlite.Config{Path: dbPath})
	if err != nil {
		return err
	}
	defer db.Close()
	var tasks, specs bytes.Buffer
	for _, q := range questions {
		task := map[string]any{"instance_id": q.id, "db": dbName, "question": q.text, "external_knowledge": nil}
		if q.doc != "" {
			if _, ok := documents[q.doc]; !ok {
				return fmt.Errorf("%s references unknown document %s", q.id, q.doc)
			}
			task["external_knowledge"] = q.doc
		}
		if q.temporal {
			task["temporal"] = "Yes"
		}
		if err := writeJSONLine(&tasks, task, []string{"instance_id", "db", "question", "external_knowledge", "temporal"}); err != nil {
			return err
		}
		for i, gsql := range q.gold {
			res, err := db.Query(context.Background(), gsql, warehouse.Limits{})
			if err != nil {
				return fmt.Errorf("%s gold %d: %w", q.id, i, err)
			}
			if res.RowCount() == 0 {
				return fmt.Errorf("%s gold %d returned no rows", q.id, i)
			}
			name := fmt.Sprintf("%s_%c.csv", q.id, 'a'+i)
			if q.single {
				name = q.id + ".csv"
			}
			if err := os.WriteFile(filepath.Join(dirs["res"], name), []byte(res.CSV()), 0o644); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(dirs["sql"], q.id+".sql"), []byte(q.gold[0]+"\n"), 0o644); err != nil {
			return err
		}
		spec := map[string]any{"instance_id": q.id, "condition_cols": q.cond, "ignore_order": !q.ordered}
		if err := writeJSONLine(&specs, spec, []string{"instance_id", "condition_cols", "ignore_order"}); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(out, "demo.jsonl"), tasks.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "evaluation_suite", "gold", "demo_eval.jsonl"), specs.Bytes(), 0o644)
}

// writeJSONLine writes the keys in the given order (Spider's files keep
// instance_id first), skipping absent ones.
func writeJSONLine(b *bytes.Buffer, m map[string]any, order []string) error {
	b.WriteByte('{')
	first := true
	for _, k := range order {
		v, ok := m[k]
		if !ok {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		enc, err := json.Marshal(v)
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "%q: %s", k, enc)
	}
	b.WriteString("}\n")
	return nil
}
