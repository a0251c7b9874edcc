package layout

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

// clockOK is the comment that lets a use of the wall clock stand in a test,
// on its line or the line above, followed by why it asserts nothing about
// elapsed time (a hang guard, a benchmark figure, a fake server's delay).
const clockOK = "//clock:ok"

// clockUse is a place where a test reads or waits on the wall clock.
type clockUse struct {
	pos  token.Position
	what string
	// reason is what the //clock:ok comment says; "" when there is none.
	reason    string
	annotated bool
}

// clockUses returns every use in a test file of time.Sleep, time.Since and
// time.Until, and every one-argument .Sub call (time.Time's) whose result
// is compared, directly or through a variable of the same function: the
// ways a test waits a fixed time or asserts elapsed time. A run on a slow
// machine makes such a test fail or flake. Inside the function given to
// synctest.Test the clock is fake, so uses there are not returned.
func clockUses(fset *token.FileSet, f *ast.File) []clockUse {
	timeName, synctestName := importName(f, "time"), importName(f, "testing/synctest")
	var uses []clockUse
	add := func(n ast.Node, what string) {
		uses = append(uses, clockUse{pos: fset.Position(n.Pos()), what: what})
	}
	for _, decl := range f.Decls {
		// compared holds the names used as an operand of a comparison in
		// this declaration: a Sub result stored in one of them is compared.
		compared := make(map[string]bool)
		ast.Inspect(decl, func(n ast.Node) bool {
			if b, ok := n.(*ast.BinaryExpr); ok && isComparison(b.Op) {
				for _, side := range []ast.Expr{b.X, b.Y} {
					ast.Inspect(side, func(n ast.Node) bool {
						if id, ok := n.(*ast.Ident); ok {
							compared[id.Name] = true
						}
						return true
					})
				}
			}
			return true
		})
		// stack is the path from decl to the node being inspected.
		var stack []ast.Node
		ast.Inspect(decl, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			stack = append(stack, n)
			if call, ok := n.(*ast.CallExpr); ok && isSel(call.Fun, synctestName, "Test") {
				// The bubble's clock is fake: its function may use it.
				stack = stack[:len(stack)-1]
				return false
			}
			switch n := n.(type) {
			case *ast.SelectorExpr:
				for _, name := range []string{"Sleep", "Since", "Until"} {
					if isSel(n, timeName, name) {
						add(n, "time."+name)
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Sub" && len(n.Args) == 1 &&
					subCompared(stack, compared) {
					add(n, ".Sub compared")
				}
			}
			return true
		})
	}
	for i, u := range uses {
		uses[i].reason, uses[i].annotated = clockComment(fset, f, u.pos.Line)
	}
	return uses
}

// importName is the name f refers to the package path by; "" if f does
// not import it.
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return path[strings.LastIndex(path, "/")+1:]
		}
	}
	return ""
}

// isSel says whether e is pkg.name, pkg being an import's name.
func isSel(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || pkg == "" || sel.Sel.Name != name {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == pkg
}

func isComparison(op token.Token) bool {
	switch op {
	case token.LSS, token.GTR, token.LEQ, token.GEQ, token.EQL, token.NEQ:
		return true
	}
	return false
}

// subCompared says whether the .Sub call at the top of stack is compared:
// an operand of a comparison, or assigned to a name that is one.
func subCompared(stack []ast.Node, compared map[string]bool) bool {
	for i := len(stack) - 2; i >= 0; i-- {
		switch p := stack[i].(type) {
		case *ast.BinaryExpr:
			if isComparison(p.Op) {
				return true
			}
		case *ast.AssignStmt:
			for _, lhs := range p.Lhs {
				if id, ok := lhs.(*ast.Ident); ok && compared[id.Name] {
					return true
				}
			}
			return false
		case *ast.ValueSpec:
			for _, id := range p.Names {
				if compared[id.Name] {
					return true
				}
			}
			return false
		case ast.Stmt:
			return false
		}
	}
	return false
}

// clockComment returns the reason of a //clock:ok comment on line or the
// line above (the comment group ending there: a reason may run on), and
// whether there is one.
func clockComment(fset *token.FileSet, f *ast.File, line int) (string, bool) {
	for _, g := range f.Comments {
		if end := fset.Position(g.End()).Line; end != line && end != line-1 {
			continue
		}
		for _, c := range g.List {
			if rest, ok := strings.CutPrefix(c.Text, clockOK); ok && (rest == "" || rest[0] == ' ') {
				return strings.TrimSpace(rest), true
			}
		}
	}
	return "", false
}

// moduleRoot is the directory of the module's go.mod, two levels up.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.HasPrefix(string(mod), "module "+strings.TrimSuffix(module, "/")+"\n") {
		t.Fatalf("%s/go.mod is not the module %s's (err %v)", root, module, err)
	}
	return root
}

// TestNoWallClockInTests enforces the rule of issue 51: no test sleeps a
// fixed time or asserts elapsed time, because such a test fails when the
// machine is slow. Waits are on events, timeouts are tested with
// testing/synctest or a fake clock. A use that asserts nothing (a hang
// guard, a benchmark figure, a fake server's deliberate delay) stands with
// a //clock:ok comment saying so.
func TestNoWallClockInTests(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			// The nested modules (deploy/check, which make test runs too)
			// are walked as well.
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, u := range clockUses(fset, f) {
			rel, _ := filepath.Rel(root, u.pos.Filename)
			switch {
			case !u.annotated:
				t.Errorf("%s:%d: %s in a test: a slow machine can fail it; use testing/synctest, a fake clock or wait on an event (internal/testutil/wait), or, if it asserts no elapsed time, say why on the line or the line above: %s <reason>",
					rel, u.pos.Line, u.what, clockOK)
			case u.reason == "":
				t.Errorf("%s:%d: %s: the %s comment gives no reason", rel, u.pos.Line, u.what, clockOK)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("found %d test files under %s; expected the whole module (100 or more)", files, root)
	}
}

// TestClockRuleFinds checks the rule on small sources: what it flags and
// what it lets stand.
func TestClockRuleFinds(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       []string // the uses found, "what" or "what ok" when annotated
	}{
		{"sleep", `time.Sleep(time.Second)`, []string{"time.Sleep"}},
		{"sleep as a value", `f := time.Sleep; f(0)`, []string{"time.Sleep"}},
		{"since compared", `if time.Since(start) > time.Second { t.Fatal() }`, []string{"time.Since"}},
		{"until", `d := time.Until(deadline); _ = d`, []string{"time.Until"}},
		{"sub compared", `if end.Sub(start) > time.Second { t.Fatal() }`, []string{".Sub compared"}},
		{"sub through a variable", "gap := end.Sub(start)\nif gap > time.Second { t.Fatal() }", []string{".Sub compared"}},
		{"sub through max", "var gap time.Duration\ngap = max(gap, end.Sub(start))\nif gap > time.Second { t.Fatal() }", []string{".Sub compared"}},
		{"sub logged", `t.Logf("took %s", end.Sub(start))`, nil},
		{"big.Int sub", `if z.Sub(x, y) == nil { t.Fatal() }`, nil},
		{"annotated on the line", `time.Sleep(1) //clock:ok a fake server's delay`, []string{"time.Sleep ok"}},
		{"annotated above", "//clock:ok a hang guard\nif time.Since(start) > time.Minute { t.Fatal() }", []string{"time.Since ok"}},
		{"annotation without reason", "//clock:ok\ntime.Sleep(1)", []string{"time.Sleep ok-no-reason"}},
		{"annotation two lines above", "//clock:ok a hang guard\n\ntime.Sleep(1)", []string{"time.Sleep"}},
		{"now alone", `start := time.Now(); _ = start`, nil},
		{"in a synctest bubble", "synctest.Test(t, func(t T) {\ntime.Sleep(time.Minute)\nif time.Since(start) > time.Second { t.Fatal() }\n})\ntime.Sleep(1)", []string{"time.Sleep"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := "package p\n\nimport (\n\"testing/synctest\"\n\"time\"\n)\n\nfunc f(t T, start, end, deadline time.Time, x, y, z Int) {\n" + c.body + "\n}\n"
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "x_test.go", src, parser.ParseComments)
			if err != nil {
				t.Fatalf("parse: %v\n%s", err, src)
			}
			var got []string
			for _, u := range clockUses(fset, f) {
				s := u.what
				if u.annotated {
					s += " ok"
					if u.reason == "" {
						s += "-no-reason"
					}
				}
				got = append(got, s)
			}
			if strings.Join(got, ";") != strings.Join(c.want, ";") {
				t.Errorf("found %q, want %q in\n%s", got, c.want, c.body)
			}
		})
	}
}
