package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestHostileInputs is the table of what an attacker (or an accident) can
// hand quorum and the outcome each gets: a refusal with an error naming the
// input and a meaningful exit code, and nothing already computed lost (the
// other examples of the same call still answered or scored). Each row's
// deeper test is named in its comment.
func TestHostileInputs(t *testing.T) {
	t.Parallel()
	abs, _ := filepath.Abs(demo)
	lines, err := os.ReadFile(filepath.Join(demo, "demo.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	good := strings.SplitN(string(lines), "\n", 3)[:2] // local001, local002

	// dataset makes a dataset of the two good lines and bad, sharing the
	// demo's resources.
	dataset := func(t *testing.T, bad string, docs map[string]string) string {
		root := t.TempDir()
		res := filepath.Join(root, "resource")
		os.MkdirAll(filepath.Join(res, "documents"), 0o755)
		// Copied: a folder linked below the dataset's top level is refused.
		if err := os.CopyFS(filepath.Join(res, "databases"), os.DirFS(filepath.Join(abs, "resource", "databases"))); err != nil {
			t.Fatal(err)
		}
		for name, target := range docs {
			os.Symlink(target, filepath.Join(res, "documents", name))
		}
		os.WriteFile(filepath.Join(root, "t.jsonl"), []byte(strings.Join(append(good, bad), "\n")+"\n"), 0o644)
		return root
	}
	secret := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(secret, []byte("TOP SECRET"), 0o600)
	line := func(id, db, ek string) string {
		return `{"instance_id": "` + id + `", "db": "` + db + `", "question": "How many customers?", "external_knowledge": ` + ek + `}`
	}

	// The dataset rows: refused before any work, the line named (exit 2);
	// with --skip-invalid the two good examples are answered.
	// (TestHostileNamesWriteNothingOutside checks nothing is written
	// outside --out; FuzzLoadTaskLine fuzzes the loader.)
	for _, tc := range []struct {
		name, bad string
		docs      map[string]string
		want      string
	}{
		{"id climbing out of --out", line("../../escape", "shop", "null"), nil, `t.jsonl:3: instance_id "../../escape"`},
		{"absolute id", line("/tmp/escape", "shop", "null"), nil, `t.jsonl:3: instance_id "/tmp/escape"`},
		{"database path", line("local901", "../../../etc", "null"), nil, `t.jsonl:3: db "../../../etc"`},
		{"document path", line("local902", "shop", `"../../secret.txt"`), nil, `external_knowledge "../../secret.txt"`},
		{"document symlinked out", line("local903", "shop", `"leak.md"`), map[string]string{"leak.md": secret}, `external_knowledge "leak.md"`},
		{"id with a NUL", line("local\\u0000x", "shop", "null"), nil, `t.jsonl:3: instance_id`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := dataset(t, tc.bad, tc.docs)
			out := filepath.Join(t.TempDir(), "out")
			_, err := run(t, "solve", "--dataset", root, "--votes", "2", "--out", out)
			if exitCode(err) != exitUsage || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("exit %d, %v; want exit 2 naming %q", exitCode(err), err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(out, "run.json")); err == nil {
				t.Error("work was done before the refusal")
			}
			log, err := run(t, "solve", "--dataset", root, "--votes", "2", "--out", out, "--skip-invalid")
			for _, id := range []string{"local001", "local002"} {
				if _, serr := os.Stat(filepath.Join(out, id+".sql")); serr != nil {
					t.Errorf("--skip-invalid did not answer %s: %v\n%s", id, err, log)
				}
			}
			b, _ := os.ReadFile(filepath.Join(out, "run.json"))
			if strings.Contains(string(b), "TOP SECRET") || strings.Contains(log, "TOP SECRET") {
				t.Error("the document outside the dataset was read")
			}
		})
	}

	// A question over the size limit is refused when the dataset loads,
	// before any work, its line named (exit 2); --skip-invalid leaves it
	// out and the rest is answered.
	t.Run("oversize question", func(t *testing.T) {
		root := dataset(t, `{"instance_id": "local904", "db": "shop", "question": "`+strings.Repeat("x", 70_000)+`"}`, nil)
		out := filepath.Join(t.TempDir(), "out")
		_, err := run(t, "solve", "--dataset", root, "--votes", "2", "--out", out)
		if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "t.jsonl:3: local904: the question is 70000 bytes, over the 65536-byte limit") {
			t.Fatalf("exit %d, %v; want exit 2 naming line 3 and the limit", exitCode(err), err)
		}
		_, err = run(t, "solve", "--dataset", root, "--votes", "2", "--out", out, "--skip-invalid")
		if rep, rerr := outputs.ReadReport(out); err != nil || rerr != nil || rep.Totals.Answered != 2 {
			t.Fatalf("--skip-invalid: %v; run.json %v", err, rerr)
		}
	})

	// The evaluation rows: the hostile prediction scores 0 with the reason;
	// the other predictions are scored as usual. (eval_hostile_test.go
	// measures the hostile queries' time and memory.)
	gold := filepath.Join(abs, "evaluation_suite", "gold")
	for _, tc := range []struct {
		name, mode, file, body, want string
	}{
		{"a prediction that writes", "sql", "local002.sql", "ATTACH DATABASE '/tmp/x.db' AS x", "refused"},
		{"a prediction that deletes", "sql", "local002.sql", "DELETE FROM customers", "refused"},
		{"two statements", "sql", "local002.sql", "SELECT 1; DROP TABLE customers", ""},
		{"a huge value", "sql", "local002.sql", "SELECT zeroblob(1000000000)", "too big"},
		{"a wide-header CSV", "exec_result", "local002.csv", strings.Repeat("c,", 300_000) + "c\n" + strings.Repeat("1\n", 300_000), "result too large"},
		{"a CSV that is not UTF-8", "exec_result", "local002.csv", "a\n\xff\xfe\n", "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pred := t.TempDir()
			ext := ".csv"
			if tc.mode == "sql" {
				ext = ".sql"
			}
			// local001 is predicted right: its score must survive.
			src := filepath.Join(gold, "exec_result", "local001.csv")
			if tc.mode == "sql" {
				src = filepath.Join(gold, "sql", "local001.sql")
			}
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(pred, "local001"+ext), b, 0o644)
			os.WriteFile(filepath.Join(pred, tc.file), []byte(tc.body), 0o644)
			args := []string{"eval", "--gold", gold, "--pred", pred, "--json"}
			if tc.mode == "sql" {
				args = append(args, "--mode", "sql", "--dataset", demo)
			}
			out, err := run(t, args...)
			if err != nil {
				t.Fatalf("eval: %v\n%s", err, out)
			}
			rep := eval.Report{}
			if err := jsonFrom(out, &rep); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			scores := map[string]eval.InstanceScore{}
			for _, s := range rep.Instances {
				scores[s.InstanceID] = s
			}
			if scores["local001"].Score != 1 {
				t.Errorf("the good prediction lost its score: %+v", scores["local001"])
			}
			bad := scores["local002"]
			if bad.Score != 0 || bad.Error == "" || (tc.want != "" && !strings.Contains(bad.Error, tc.want)) {
				t.Errorf("hostile prediction: %+v, want 0 with an error saying %q", bad, tc.want)
			}
		})
	}

	// Configuration: a warehouse name that would become a NATS wildcard.
	t.Run("warehouse name with a wildcard", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "wh.yaml")
		os.WriteFile(cfg, []byte("warehouses:\n  - {name: 'a.>', kind: sqlite}\n"), 0o644)
		_, err := run(t, "run", "--dataset", demo, "--warehouses-config", cfg, "--out", t.TempDir())
		if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "single word") {
			t.Errorf("exit %d, %v; want exit 2 saying the name must be a single word", exitCode(err), err)
		}
	})
}

// jsonFrom decodes the JSON object in a command's output.
func jsonFrom(out string, v any) error {
	i := strings.Index(out, "{")
	if i < 0 {
		return os.ErrNotExist
	}
	return json.Unmarshal([]byte(out[i:]), v)
}
