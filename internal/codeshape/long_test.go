package codeshape

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// root is the module's root directory, two levels above this package.
const root = "../.."

// longFunc is a non-test function longer than LongFunction.
type longFunc struct {
	pos    string // file:line
	name   string // Recv.Name or Name
	lines  int
	reason string // after LongMarker; "" when unmarked
}

func (f longFunc) String() string { return fmt.Sprintf("%s %s (%d lines)", f.pos, f.name, f.lines) }

// longFuncs lists the module's non-test functions longer than LongFunction
// (testdata, vendor and hidden directories left out), and how many non-test
// Go files it read.
func longFuncs(t *testing.T) (out []longFunc, files int) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		files++
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			n := end.Line - start.Line + 1
			if n <= LongFunction {
				continue
			}
			rel, _ := filepath.Rel(root, path)
			out = append(out, longFunc{pos: fmt.Sprintf("%s:%d", rel, start.Line), name: funcName(fd), lines: n,
				reason: marker(fset, f, fd)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].lines > out[j].lines })
	return out, files
}

// funcName is "Recv.Name" for a method, "Name" for a function.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if g, ok := typ.(*ast.IndexExpr); ok {
		typ = g.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// marker returns the reason of a LongMarker comment in fd's doc comment or
// on the line just above the func keyword; "" without one.
func marker(fset *token.FileSet, f *ast.File, fd *ast.FuncDecl) string {
	line := fset.Position(fd.Pos()).Line
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			l := fset.Position(c.Pos()).Line
			inDoc := fd.Doc != nil && c.Pos() >= fd.Doc.Pos() && c.End() <= fd.Doc.End()
			if (inDoc || l == line-1) && strings.HasPrefix(c.Text, LongMarker) {
				return strings.TrimSpace(strings.TrimPrefix(c.Text, LongMarker))
			}
		}
	}
	return ""
}

// TestLongFunctions: at most MaxLongFunctions non-test functions exceed
// LongFunction lines without a LongMarker comment, and every marker says
// why.
func TestLongFunctions(t *testing.T) {
	funcs, files := longFuncs(t)
	if files < 100 {
		t.Fatalf("read only %d Go files under %s: is root wrong, or the walk skipping the tree?", files, root)
	}
	var unmarked []string
	for _, f := range funcs {
		if f.reason != "" {
			t.Logf("marked: %s: %s", f, f.reason)
			continue
		}
		unmarked = append(unmarked, f.String())
	}
	t.Logf("%d unmarked non-test functions over %d lines (at most %d allowed)", len(unmarked), LongFunction, MaxLongFunctions)
	if len(unmarked) > MaxLongFunctions {
		t.Errorf("%d non-test functions exceed %d lines, at most %d may: split them along their concerns, or say above one %q:\n  %s",
			len(unmarked), LongFunction, MaxLongFunctions, LongMarker+"...", strings.Join(unmarked, "\n  "))
	}
}

// TestMarker: a marker counts in the doc comment or on the line above the
// function, and only with its reason.
func TestMarker(t *testing.T) {
	src := `package p

// a does things.
// long: reads as one story because it is a table.
func a() {}

// long: reads as one story because it is a list.
func b() {}

// long: too long
func c() {}

func d() {}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "it is a table.", "b": "it is a list.", "c": "", "d": ""}
	for _, decl := range f.Decls {
		fd := decl.(*ast.FuncDecl)
		if got := marker(fset, f, fd); got != want[fd.Name.Name] {
			t.Errorf("%s: marker %q, want %q", fd.Name.Name, got, want[fd.Name.Name])
		}
	}
}

func init() {
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		panic("codeshape's tests must run from internal/codeshape: " + err.Error())
	}
}
