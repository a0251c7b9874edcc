package dataset

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveInside: a file resolves inside the folder it is found in, or
// is refused; only a folder directly in it may be a link elsewhere.
func TestResolveInside(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	write := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "resource", "documents", "a.md"))
	write(filepath.Join(outside, "secret.txt"))
	write(filepath.Join(outside, "shared", "documents", "b.md"))
	link(filepath.Join(root, "resource", "documents", "a.md"), filepath.Join(root, "resource", "documents", "in.md"))
	link(filepath.Join(outside, "secret.txt"), filepath.Join(root, "resource", "documents", "out.md"))
	link("../../../"+filepath.Base(outside)+"/secret.txt", filepath.Join(root, "resource", "documents", "rel.md"))
	link(filepath.Join(outside, "shared"), filepath.Join(root, "shared"))
	link(filepath.Join(outside, "secret.txt"), filepath.Join(outside, "shared", "documents", "out.md"))
	link(filepath.Join(outside, "shared", "documents"), filepath.Join(root, "resource", "linked"))
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"resource/documents/a.md", true},
		{"resource/documents/in.md", true},
		{"resource/documents/out.md", false},
		{"resource/documents/rel.md", false},
		{"shared/documents/b.md", true},       // a top-level folder linked whole
		{"shared/documents/out.md", false},    // ... but nothing under it leads further out
		{"resource/linked/b.md", false},       // a deeper folder link leads out
		{"resource/documents/none.md", false}, // missing
	} {
		real, err := resolveInside(root, filepath.Join(root, tc.path))
		if (err == nil) != tc.ok {
			t.Errorf("%s: resolved %q, %v; want ok=%v", tc.path, real, err, tc.ok)
		}
		if err != nil && tc.ok == false && strings.Contains(tc.path, "out") && !errors.Is(err, errOutside) {
			t.Errorf("%s: %v does not say it leads outside", tc.path, err)
		}
	}
}

// TestLineReader: lines come back without their endings; a line over the
// limit is reported by its size and the lines after it still come.
func TestLineReader(t *testing.T) {
	t.Parallel()
	in := "one\r\n\n" + strings.Repeat("x", 100) + "\nfour\n" + strings.Repeat("y", 17) + "\nlast"
	type got struct {
		line string
		size int64
		over bool
	}
	want := []got{{"one", 5, false}, {"", 1, false}, {"", 101, true}, {"four", 5, false}, {"", 18, true}, {"last", 4, false}}
	// A buffer smaller than the long line makes ReadSlice return it in
	// pieces.
	lr := &lineReader{br: bufio.NewReaderSize(strings.NewReader(in), 16), max: 16}
	var all []got
	for {
		line, size, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got{string(line), size, line == nil})
	}
	if len(all) != len(want) {
		t.Fatalf("lines %+v, want %+v", all, want)
	}
	for i := range want {
		if all[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i+1, all[i], want[i])
		}
	}
}

// TestHostileFilesAreRefused: every file the loader opens that leads out
// of the dataset, or is over its limit, leaves out the lines that need it
// with the file named; the other lines still load, and nothing outside is
// read.
func TestHostileFilesAreRefused(t *testing.T) {
	t.Parallel()
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "secret")
	if err := os.WriteFile(secret, []byte("TOP SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	// evil is a second database beside shop; local002 uses it.
	tasks := `{"instance_id": "local001", "db": "shop", "question": "q", "external_knowledge": "doc.md"}
{"instance_id": "local002", "db": "evil", "question": "q", "external_knowledge": "evil.md"}
`
	sparse := func(t *testing.T, p string, size int64) {
		t.Helper()
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
	}
	replaceWithLink := func(t *testing.T, p string) {
		t.Helper()
		os.Remove(p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, p); err != nil {
			t.Fatal(err)
		}
	}
	meta := filepath.Join("resource", "databases", "sqlite", "evil")
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, root string)
		want  string
	}{
		{"sqlite file linked out", func(t *testing.T, root string) {
			replaceWithLink(t, filepath.Join(root, "resource", "databases", "spider2-localdb", "evil.sqlite"))
		}, `database "evil" is refused: sqlite file`},
		{"DDL.csv linked out", func(t *testing.T, root string) {
			replaceWithLink(t, filepath.Join(root, meta, "DDL.csv"))
		}, `database "evil" is refused: DDL.csv`},
		{"table JSON linked out", func(t *testing.T, root string) {
			replaceWithLink(t, filepath.Join(root, meta, "items.json"))
		}, `database "evil" is refused: table JSON`},
		{"metadata folder linked out", func(t *testing.T, root string) {
			os.RemoveAll(filepath.Join(root, meta))
			os.MkdirAll(filepath.Join(secretDir, "evil"), 0o755)
			os.WriteFile(filepath.Join(secretDir, "evil", "DDL.csv"), []byte("table_name,DDL\nsecret,x\n"), 0o644)
			os.Symlink(filepath.Join(secretDir, "evil"), filepath.Join(root, meta))
		}, `database "evil" is refused: metadata folder`},
		{"oversize table JSON", func(t *testing.T, root string) {
			sparse(t, filepath.Join(root, meta, "big.json"), MaxMetadataBytes+1)
		}, "over the size limit of 33554432 bytes for a table JSON"},
		{"document linked out", func(t *testing.T, root string) {
			replaceWithLink(t, filepath.Join(root, "resource", "documents", "evil.md"))
		}, `external_knowledge "evil.md": document`},
		{"oversize document", func(t *testing.T, root string) {
			sparse(t, filepath.Join(root, "resource", "documents", "evil.md"), MaxDocumentBytes+1)
		}, "is 1048577 bytes, over the size limit of 1048576 bytes for a document"},
		{"gold SQL linked out", func(t *testing.T, root string) {
			replaceWithLink(t, filepath.Join(root, "evaluation_suite", "gold", "sql", "local002.sql"))
		}, "gold SQL "},
		{"gold CSV linked out", func(t *testing.T, root string) {
			replaceWithLink(t, filepath.Join(root, "evaluation_suite", "gold", "exec_result", "local002.csv"))
		}, "gold CSV "},
		{"oversize task line", func(t *testing.T, root string) {
			f, _ := os.OpenFile(filepath.Join(root, "tasks.jsonl"), os.O_WRONLY|os.O_TRUNC, 0)
			defer f.Close()
			f.WriteString(strings.SplitAfter(tasks, "\n")[0])
			f.WriteString(`{"instance_id": "local002", "db": "evil", "question": "` + strings.Repeat("x", MaxTaskLineBytes) + `"}` + "\n")
		}, "tasks.jsonl:2: the line is 1048634 bytes, over the 1048576-byte limit for a task line"}, // the line and its newline
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := writeDataset(t, tasks)
			for _, p := range []string{
				filepath.Join(root, "resource", "documents", "evil.md"),
				filepath.Join(root, "evaluation_suite", "gold", "sql", "local002.sql"),
				filepath.Join(root, "evaluation_suite", "gold", "exec_result", "local002.csv"),
			} {
				os.MkdirAll(filepath.Dir(p), 0o755)
				os.WriteFile(p, []byte("a\n1\n"), 0o644)
			}
			if err := os.CopyFS(filepath.Join(root, meta), os.DirFS(filepath.Join(root, "resource", "databases", "sqlite", "shop"))); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(filepath.Join(root, "resource", "databases", "spider2-localdb", "shop.sqlite"))
			os.WriteFile(filepath.Join(root, "resource", "databases", "spider2-localdb", "evil.sqlite"), b, 0o644)
			tc.setup(t, root)
			ds, err := Load(root, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := ds.Example("local002"); ok {
				t.Errorf("local002 loaded; problems %v", ds.Problems)
			}
			if e, ok := ds.Example("local001"); !ok || !ds.Runnable("local001") {
				t.Errorf("local001 did not load: %+v, problems %v", e, ds.Problems)
			}
			skipped := ds.Skipped()
			if len(skipped) != 1 || !strings.Contains(skipped[0].String(), tc.want) {
				t.Fatalf("left out %v, want one line naming %q", skipped, tc.want)
			}
			if _, ok := ds.Databases["sqlite/evil"]; ok && tc.want[:9] == "database " {
				t.Error("the refused database is still in the dataset")
			}
		})
	}
}

// TestLoadSchemaRefusesLinksOut: LoadSchema, which serve calls again after
// Load, reads no metadata file that has become a link out since.
func TestLoadSchemaRefusesLinksOut(t *testing.T) {
	t.Parallel()
	root := writeDataset(t, `{"instance_id": "local001", "db": "shop", "question": "q"}`+"\n")
	ds, err := Load(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(secret, []byte(`{"table_name":"secret","column_names":["pin"],"column_types":["TEXT"],"sample_rows":[{"pin":"1234"}]}`), 0o644)
	p := filepath.Join(root, "resource", "databases", "sqlite", "shop", "leak.json")
	if err := os.Symlink(secret, p); err != nil {
		t.Fatal(err)
	}
	s, probs, err := LoadSchema(ds.Databases["sqlite/shop"])
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Folders {
		for _, tb := range f.Tables {
			if tb.Name == "secret" {
				t.Error("the table JSON linked out was read")
			}
		}
	}
	if len(probs) != 1 || probs[0].File != p || !strings.Contains(probs[0].Message, "outside the folder") {
		t.Errorf("problems %v, want one naming %s", probs, p)
	}
}

// TestSpider1HostileFiles: a BIRD database linked out of the dataset, or
// with a description file linked out, leaves out its entries.
func TestSpider1HostileFiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, link, want string
	}{
		{"sqlite file", "dev_databases/evil/evil.sqlite", `database "evil" is refused: sqlite file`},
		{"description CSV", "dev_databases/evil/database_description/items.csv", `database "evil" is refused: description CSV`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			src, err := os.ReadFile(filepath.Join(birdMini, "dev_databases", "shop", "shop.sqlite"))
			if err != nil {
				t.Fatal(err)
			}
			for _, db := range []string{"shop", "evil"} {
				os.MkdirAll(filepath.Join(root, "dev_databases", db, DescriptionDirName), 0o755)
				os.WriteFile(filepath.Join(root, "dev_databases", db, db+".sqlite"), src, 0o644)
			}
			secret := filepath.Join(t.TempDir(), "secret")
			os.WriteFile(secret, []byte("original_column_name,column_description\npin,TOP SECRET\n"), 0o600)
			os.Remove(filepath.Join(root, tc.link))
			if err := os.Symlink(secret, filepath.Join(root, tc.link)); err != nil {
				t.Fatal(err)
			}
			dev := `[{"question_id": 1, "db_id": "shop", "question": "q", "SQL": "SELECT 1"}, {"question_id": 2, "db_id": "evil", "question": "q", "SQL": "SELECT 1"}]`
			os.WriteFile(filepath.Join(root, "dev.json"), []byte(dev), 0o644)
			ds, err := Load(root, Options{})
			if err != nil {
				t.Fatal(err)
			}
			skipped := ds.Skipped()
			if _, ok := ds.Example("dev_2"); ok || len(skipped) != 1 || !strings.Contains(skipped[0].String(), tc.want) {
				t.Errorf("left out %v, want dev_2 left out naming %q", skipped, tc.want)
			}
			if _, ok := ds.Example("dev_1"); !ok {
				t.Error("dev_1 did not load")
			}
		})
	}
}
