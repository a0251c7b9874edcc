package cli

import (
	"bytes"
	"database/sql"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestHostileDatasetFiles is the table of dataset files that lead out of
// the dataset or are too big, run through the real binary: quorum inspect
// names each as a problem (--strict: exit 2), quorum run refuses the
// dataset before any work (exit 2) naming the file or line, and with
// --skip-invalid the other examples are answered and nothing of the
// outside file reaches --out. Every process stays under 1 GiB.
func TestHostileDatasetFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quorum binary")
	}
	t.Parallel()
	bin := quorumBinary(t)
	abs, err := filepath.Abs(demo)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := os.ReadFile(filepath.Join(demo, "demo.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	good := strings.SplitN(string(lines), "\n", 4)[:3] // local001 to local003

	// What lies outside the dataset: a database, a table JSON and a
	// document, each holding the marker.
	const marker = "PIN-4242-OUTSIDE"
	outside := t.TempDir()
	secretDB := filepath.Join(outside, "evil.sqlite")
	db, err := sql.Open("sqlite", secretDB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE secret_pins (pin TEXT); INSERT INTO secret_pins VALUES ('` + marker + `')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	secretJSON := filepath.Join(outside, "secret_pins.json")
	os.WriteFile(secretJSON, []byte(`{"table_name":"secret_pins","table_fullname":"secret_pins","column_names":["pin"],"column_types":["TEXT"],"description":[""],"sample_rows":[{"pin":"`+marker+`"}]}`), 0o600)
	secretDoc := filepath.Join(outside, "secret.md")
	os.WriteFile(secretDoc, []byte(marker), 0o600)

	link := func(t *testing.T, target, p string) {
		t.Helper()
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	// sparse makes a file of size bytes without writing them.
	sparse := func(t *testing.T, p string, size int64) {
		t.Helper()
		if err := os.Truncate(p, size); err != nil {
			f, cerr := os.Create(p)
			if cerr != nil {
				t.Fatal(cerr)
			}
			f.Close()
			if err := os.Truncate(p, size); err != nil {
				t.Fatal(err)
			}
		}
	}
	task := func(id, db, question, ek string) string {
		return `{"instance_id": "` + id + `", "db": "` + db + `", "question": "` + question + `", "external_knowledge": ` + ek + `}`
	}
	dbs := func(root string) string { return filepath.Join(root, "resource", "databases") }

	for _, tc := range []struct {
		name  string
		line  string // task line 3, between the good lines
		setup func(t *testing.T, root string)
		want  []string // in inspect's problems and run's error
	}{
		{"database linked out", task("local905", "evil", "How many pins?", "null"), func(t *testing.T, root string) {
			link(t, secretDB, filepath.Join(dbs(root), "spider2-localdb", "evil.sqlite"))
		}, []string{`t.jsonl:3: local905: database "evil" is refused: sqlite file`, "evil.sqlite resolves to " + secretDB}},
		{"table JSON linked out", task("local906", "evil", "How many pins?", "null"), func(t *testing.T, root string) {
			meta := filepath.Join(dbs(root), "sqlite", "evil")
			if err := os.CopyFS(meta, os.DirFS(filepath.Join(dbs(root), "sqlite", "shop"))); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(filepath.Join(dbs(root), "spider2-localdb", "shop.sqlite"))
			os.WriteFile(filepath.Join(dbs(root), "spider2-localdb", "evil.sqlite"), b, 0o644)
			link(t, secretJSON, filepath.Join(meta, "secret_pins.json"))
		}, []string{`t.jsonl:3: local906: database "evil" is refused: table JSON`, "secret_pins.json resolves to " + secretJSON}},
		{"document linked out", task("local907", "shop", "How many customers?", `"leak.md"`), func(t *testing.T, root string) {
			link(t, secretDoc, filepath.Join(root, "resource", "documents", "leak.md"))
		}, []string{`t.jsonl:3: local907: external_knowledge "leak.md": document`, "leak.md resolves to " + secretDoc}},
		{"54 MB document", task("local908", "shop", "How many customers?", `"big.md"`), func(t *testing.T, root string) {
			sparse(t, filepath.Join(root, "resource", "documents", "big.md"), 54<<20)
		}, []string{`t.jsonl:3: local908: external_knowledge "big.md": document`, "big.md is 56623104 bytes, over the size limit of 1048576 bytes for a document"}},
		{"100 MB task line", "", func(t *testing.T, root string) {
			// Line 3 is 100 MB of NUL bytes: a hole in a sparse file.
			p := filepath.Join(root, "t.jsonl")
			head := strings.Join(good[:2], "\n") + "\n"
			os.WriteFile(p, []byte(head), 0o644)
			sparse(t, p, int64(len(head))+100<<20)
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			f.WriteString("\n" + good[2] + "\n")
		}, []string{"t.jsonl:3: the line is 104857601 bytes, over the 1048576-byte limit for a task line"}},
		{"oversize question", task("local910", "shop", strings.Repeat("x", 70_000), "null"), nil,
			[]string{"t.jsonl:3: local910: the question is 70000 bytes, over the 65536-byte limit for a question"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			for _, dir := range []string{"resource", "evaluation_suite"} {
				if err := os.CopyFS(filepath.Join(root, dir), os.DirFS(filepath.Join(abs, dir))); err != nil {
					t.Fatal(err)
				}
			}
			body := strings.Join([]string{good[0], good[1], tc.line, good[2]}, "\n") + "\n"
			if err := os.WriteFile(filepath.Join(root, "t.jsonl"), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.setup != nil {
				tc.setup(t, root)
			}
			names := func(what, text string) {
				t.Helper()
				for _, w := range tc.want {
					if !strings.Contains(text, w) {
						t.Errorf("%s does not say %q:\n%.3000s", what, w, text)
					}
				}
			}

			// quorum inspect lists the file among the problems; --strict
			// makes them exit 2.
			out, code, rss := runBinary(t, bin, "inspect", "--strict", root)
			if code != exitUsage {
				t.Errorf("inspect --strict: exit %d, want %d", code, exitUsage)
			}
			names("inspect", out)
			if strings.Contains(out, marker) {
				t.Errorf("inspect printed what lies outside the dataset:\n%s", out)
			}
			peak := rss

			// quorum run refuses before any work.
			dir := filepath.Join(t.TempDir(), "out")
			out, code, rss = runBinary(t, bin, "run", "--dataset", root, "--votes", "2", "--out", dir, "--log-level", "error")
			if code != exitUsage {
				t.Errorf("run: exit %d, want %d (refused before any work)", code, exitUsage)
			}
			names("run", out)
			if _, err := os.Stat(filepath.Join(dir, "run.json")); err == nil {
				t.Error("run did work before refusing the dataset")
			}
			peak = max(peak, rss)

			// With --skip-invalid the line is left out, recorded, and the
			// other examples are answered.
			out, code, rss = runBinary(t, bin, "run", "--dataset", root, "--votes", "2", "--out", dir, "--log-level", "error", "--skip-invalid")
			peak = max(peak, rss)
			rep, err := outputs.ReadReport(dir)
			if code != 0 || err != nil {
				t.Fatalf("run --skip-invalid: exit %d, run.json %v\n%s", code, err, out)
			}
			ids := map[string]string{}
			for _, e := range rep.Examples {
				ids[e.InstanceID] = e.Status
			}
			if len(ids) != 3 || ids["local001"] == "" || ids["local002"] == "" || ids["local003"] == "" {
				t.Errorf("run --skip-invalid ran %v, want local001 to local003", ids)
			}
			if len(rep.Skipped) != 1 {
				t.Errorf("run.json skipped %v, want the one line", rep.Skipped)
			}
			names("run.json's skipped lines", strings.Join(rep.Skipped, "\n"))
			if leaked := grepTree(t, dir, marker); leaked != "" {
				t.Errorf("%s holds what lies outside the dataset", leaked)
			}
			t.Logf("peak RSS %d MiB", peak>>10)
			if peak > 1<<20 {
				t.Errorf("peak RSS %d MiB, want under 1 GiB", peak>>10)
			}
		})
	}
}

// runBinary runs the quorum binary with the simulated LLM and returns its
// output, exit code and peak RSS in KiB.
func runBinary(t *testing.T, bin string, args ...string) (string, int, int64) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL=", "OPENAI_API_KEY=")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); cmd.ProcessState == nil {
		t.Fatalf("quorum %s did not run: %v", args[0], err)
	}
	return buf.String(), cmd.ProcessState.ExitCode(), cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
}

// grepTree returns the first file under dir that holds s.
func grepTree(t *testing.T, dir, s string) string {
	t.Helper()
	found := ""
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found != "" {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(s)) {
			found = p
		}
		return nil
	})
	return found
}
