package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestHostileNamesWriteNothingOutside: a dataset whose task lines name
// paths (an instance id climbing out of --out, an absolute one, a database
// path) is refused before any work with each line named; with
// --skip-invalid the rest is answered, run.json lists the lines left out,
// and nothing is written outside --out.
func TestHostileNamesWriteNothingOutside(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	abs, _ := filepath.Abs(filepath.Join(demo, "resource"))
	if err := os.Symlink(abs, filepath.Join(root, "resource")); err != nil {
		t.Fatal(err)
	}
	lines, err := os.ReadFile(filepath.Join(demo, "demo.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	good := strings.SplitN(string(lines), "\n", 3)[:2]
	hostile := []string{
		strings.Replace(good[0], `"local001"`, `"../../escape-a"`, 1),
		strings.Replace(good[0], `"local001"`, `"/tmp/escape-b"`, 1),
		strings.Replace(good[1], `"local002"`, `"local902"`, 1),
	}
	hostile[2] = strings.Replace(hostile[2], `"db": "`, `"db": "../`, 1)
	os.WriteFile(filepath.Join(root, "t.jsonl"), []byte(strings.Join(append(good, hostile...), "\n")+"\n"), 0o644)
	work := t.TempDir()
	out := filepath.Join(work, "a", "b", "out")
	log, err := run(t, "run", "--dataset", root, "--out", out, "--run-id", "hostile", "--log-level", "error")
	if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), `t.jsonl:3: instance_id "../../escape-a"`) ||
		!strings.Contains(err.Error(), `t.jsonl:4: instance_id "/tmp/escape-b"`) || !strings.Contains(err.Error(), `t.jsonl:5: db "../`) {
		t.Fatalf("hostile dataset: %v (exit %d)\n%s", err, exitCode(err), log)
	}
	log, err = run(t, "run", "--dataset", root, "--out", out, "--run-id", "hostile", "--skip-invalid", "--log-level", "error")
	if err != nil {
		t.Fatalf("--skip-invalid: %v\n%s", err, log)
	}
	rep, err := outputs.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Totals.Examples != 2 || rep.Totals.Answered != 2 || len(rep.Skipped) != 3 {
		t.Errorf("run.json: %d examples, %d answered, skipped %v", rep.Totals.Examples, rep.Totals.Answered, rep.Skipped)
	}
	// Nothing but the output folder was written under the work folder.
	filepath.Walk(work, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && !strings.HasPrefix(p, out+string(filepath.Separator)) {
			t.Errorf("written outside --out: %s", p)
		}
		return nil
	})
	if _, err := os.Stat("/tmp/escape-b.sql"); err == nil {
		t.Error("an absolute instance id wrote /tmp/escape-b.sql")
	}
}
