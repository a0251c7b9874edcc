package rdb

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRdbOwnsRedis: no Go file outside internal/rdb (tests aside) spells a
// key ("quorum:…" string literal) or makes a Lua script (redis.NewScript):
// keys.go lists every key and scripts.go every script, and this keeps it
// so. It reads the source, so a new file breaking the rule is named with
// its line.
func TestRdbOwnsRedis(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root %s: %v", root, err)
	}
	own := filepath.Join(root, "internal", "rdb")
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == own || path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
				if v, err := strconv.Unquote(n.Value); err == nil && strings.HasPrefix(v, Prefix) {
					t.Errorf("%s:%d: Redis key literal %s: name it in internal/rdb/keys.go", rel, fset.Position(n.Pos()).Line, n.Value)
				}
			case *ast.SelectorExpr:
				if n.Sel.Name == "NewScript" {
					t.Errorf("%s:%d: a Lua script outside internal/rdb: put it in internal/rdb/scripts.go", rel, fset.Position(n.Pos()).Line)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s: not the repository", files, root)
	}
}

// TestScriptsLiveInScriptsGo: within this package too, every script is in
// scripts.go, beside the function that runs it.
func TestScriptsLiveInScriptsGo(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if s, ok := n.(*ast.SelectorExpr); ok && s.Sel.Name == "NewScript" && name != "scripts.go" {
				t.Errorf("%s:%d: a Lua script outside scripts.go", name, fset.Position(s.Pos()).Line)
			}
			return true
		})
	}
}
