package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/quorumsql/quorum/pkg/dataset"
)

// MakeDataset writes a Spider 2.0-layout dataset of n examples into dir by
// cycling through base's examples: example k is base example k mod len,
// with its own id (bench00001, …) and a question made distinct by a suffix,
// so every copy gets its own (deterministic) simulated answers. Databases,
// documents and gold results are the base's.
func MakeDataset(base string, n int, dir string) (string, error) {
	ds, err := dataset.Load(base, dataset.Options{})
	if err != nil {
		return "", err
	}
	var src []*dataset.Example
	for _, e := range ds.Examples {
		if ds.Runnable(e.ID) && len(e.Gold.Results) > 0 {
			src = append(src, e)
		}
	}
	if len(src) == 0 {
		return "", fmt.Errorf("dataset %s has no runnable example with gold results to copy", base)
	}
	absBase, err := filepath.Abs(base)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(dir, "evaluation_suite", "gold", "exec_result"), 0o755); err != nil {
		return "", err
	}
	if err := os.Symlink(filepath.Join(absBase, "resource"), filepath.Join(dir, "resource")); err != nil && !os.IsExist(err) {
		return "", err
	}
	tasks, err := os.Create(filepath.Join(dir, "bench.jsonl"))
	if err != nil {
		return "", err
	}
	defer tasks.Close()
	specs, err := os.Create(filepath.Join(dir, "evaluation_suite", "gold", "bench_eval.jsonl"))
	if err != nil {
		return "", err
	}
	defer specs.Close()
	tw, sw := bufio.NewWriter(tasks), bufio.NewWriter(specs)
	for k := 0; k < n; k++ {
		e := src[k%len(src)]
		// The prefix keeps the dialect derivable from the id.
		prefix := map[string]string{"sqlite": "local", "snowflake": "sf", "bigquery": "bq"}[string(e.Dialect)]
		id := fmt.Sprintf("%sbench%05d", prefix, k)
		question := e.Question
		if k >= len(src) {
			question = fmt.Sprintf("%s (request %d)", e.Question, k/len(src))
		}
		task := map[string]any{"instance_id": id, "db": e.DB, "question": question, "external_knowledge": nil}
		if e.ExternalKnowledgeFile != "" {
			task["external_knowledge"] = e.ExternalKnowledgeFile
		}
		b, _ := json.Marshal(task)
		tw.Write(append(b, '\n'))
		spec := map[string]any{"instance_id": id, "condition_cols": e.Gold.Spec.ConditionCols, "ignore_order": e.Gold.Spec.IgnoreOrder}
		b, _ = json.Marshal(spec)
		sw.Write(append(b, '\n'))
		for i, g := range e.Gold.Results {
			name := id + ".csv"
			if !e.Gold.Single {
				name = fmt.Sprintf("%s_%c.csv", id, 'a'+i)
			}
			// Copied, not linked: the loader refuses a gold file that
			// leads out of its dataset.
			b, err := os.ReadFile(g)
			if err != nil {
				return "", err
			}
			if err := os.WriteFile(filepath.Join(dir, "evaluation_suite", "gold", "exec_result", name), b, 0o644); err != nil {
				return "", err
			}
		}
		if e.Gold.SQL != "" {
			_ = os.MkdirAll(filepath.Join(dir, "evaluation_suite", "gold", "sql"), 0o755)
			_ = os.WriteFile(filepath.Join(dir, "evaluation_suite", "gold", "sql", id+".sql"), []byte(strings.TrimSpace(e.Gold.SQL)+"\n"), 0o644)
		}
	}
	if err := tw.Flush(); err != nil {
		return "", err
	}
	return dir, sw.Flush()
}
