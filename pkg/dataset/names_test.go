package dataset

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"local001", true}, {"sf_bq001", true}, {"GA360", true}, {"ga4_obfuscated_sample_ecommerce.md", true}, {"dev_1534", true},
		{"", false}, {"../../escape-a", false}, {"/etc/passwd", false}, {".hidden", false}, {"a/b", false}, {`a\b`, false},
		{"a b", false}, {"naïve", false}, {strings.Repeat("x", MaxNameLength+1), false}, {"x\x00y", false},
	} {
		if err := CheckName(tt.name); (err == nil) != tt.ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

// TestNamesAreDataNeverPaths: task lines whose id or database could be
// taken for a path are left out, each named with file:line; a document
// name that escapes the documents folder, by name or by symlink, blocks
// its example without reading the file.
func TestNamesAreDataNeverPaths(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	docs := filepath.Join(root, "resource", "documents")
	if err := os.MkdirAll(docs, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(secret, []byte("TOP SECRET"), 0o600)
	os.Symlink(secret, filepath.Join(docs, "leak.md"))
	os.WriteFile(filepath.Join(docs, "fine.md"), []byte("hint"), 0o644)
	lines := []string{
		`{"instance_id": "local001", "db": "shop", "question": "q", "external_knowledge": "fine.md"}`,
		`{"instance_id": "../../escape-a", "db": "shop", "question": "q"}`,
		`{"instance_id": "/abs", "db": "shop", "question": "q"}`,
		`{"instance_id": "local002", "db": "../../etc", "question": "q"}`,
		`{"instance_id": "local003", "db": "shop", "question": "q", "external_knowledge": "../../../etc/passwd"}`,
		`{"instance_id": "local004", "db": "shop", "question": "q", "external_knowledge": "leak.md"}`,
	}
	os.WriteFile(filepath.Join(root, "t.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	ds, err := Load(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var skipped []string
	for _, p := range ds.Skipped() {
		skipped = append(skipped, p.String())
	}
	// Documents that escape leave their lines out too: refused unless
	// --skip-invalid, like a path in an id.
	want := []string{`t.jsonl:2: instance_id "../../escape-a"`, `t.jsonl:3: instance_id "/abs"`, `t.jsonl:4: db "../../etc"`,
		`t.jsonl:5: local003: external_knowledge "../../../etc/passwd": starts with '.'`, `t.jsonl:6: local004: external_knowledge "leak.md": document `}
	if len(skipped) != len(want) {
		t.Fatalf("skipped %v, want %d lines", skipped, len(want))
	}
	for i, w := range want {
		if !strings.Contains(skipped[i], w) {
			t.Errorf("skipped line %d: %q, want it to name %q", i, skipped[i], w)
		}
	}
	for _, e := range ds.Examples {
		if strings.Contains(e.ExternalKnowledge, "SECRET") || strings.Contains(e.ExternalKnowledge, "root:") {
			t.Errorf("%s read a file outside the documents folder", e.ID)
		}
	}
	for _, id := range []string{"local003", "local004"} {
		if _, ok := ds.Example(id); ok {
			t.Errorf("%s, whose document escapes, is still an example", id)
		}
	}
	e, _ := ds.Example("local001")
	if e == nil || e.ExternalKnowledge != "hint" {
		t.Errorf("a document inside the folder is still read: %+v", e)
	}
}

// FuzzLoadTaskLine: whatever a task line holds, loading never panics, and
// every example that loads has an id and a database that are names, not
// paths, and reads no document from outside the documents folder.
func FuzzLoadTaskLine(f *testing.F) {
	for _, s := range []string{
		`{"instance_id": "local001", "db": "shop", "question": "q"}`,
		`{"instance_id": "../x", "db": "shop", "question": "q"}`,
		`{"instance_id": "local002", "db": "shop", "question": "q", "external_knowledge": "../../etc/passwd"}`,
		`{"instance_id": "local003", "db": "a/b", "question": "q"}`,
		`not json`, `{}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "resource", "documents"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "t.jsonl"), []byte(line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ds, err := Load(root, Options{})
		if err != nil {
			return
		}
		for _, e := range ds.Examples {
			if CheckName(e.ID) != nil || (e.DB != "" && CheckName(e.DB) != nil) {
				t.Errorf("loaded an example named %q on database %q", e.ID, e.DB)
			}
			if e.ExternalKnowledgeFile != "" && e.ExternalKnowledge != "" && CheckName(e.ExternalKnowledgeFile) != nil {
				t.Errorf("read document %q", e.ExternalKnowledgeFile)
			}
		}
	})
}
