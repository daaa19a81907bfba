package record

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

// maxFuncLines is the longest a function of the record, and of the
// dispatch engine that writes through it (pkg/delivery), may be.
const maxFuncLines = 80

// TestNoFunctionOverEightyLines parses the non-test files of this package
// and of pkg/delivery and fails naming every function longer than
// maxFuncLines lines, from its signature to its closing brace.
// Test-support packages (directories ending in "test") are left out.
func TestNoFunctionOverEightyLines(t *testing.T) {
	long, files := longFunctions(t, ".")
	more, n := longFunctions(t, "../delivery")
	long, files = append(long, more...), files+n
	if files < 15 {
		t.Fatalf("parsed %d files: the walk did not find the package", files)
	}
	for _, f := range long {
		t.Errorf("%s is over %d lines", f, maxFuncLines)
	}
}

// TestLongFunctionsAreFound keeps the guard honest: a function over the
// limit is reported.
func TestLongFunctionsAreFound(t *testing.T) {
	dir := t.TempDir()
	src := "package x\n\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", maxFuncLines-1) + "}\n\nfunc short() {}\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	long, _ := longFunctions(t, dir)
	if len(long) != 1 || !strings.Contains(long[0], "long (81 lines)") {
		t.Fatalf("long functions: %q, want only long (81 lines)", long)
	}
}

func longFunctions(t *testing.T, root string) (long []string, files int) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasSuffix(d.Name(), "test") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			if n := end.Line - start.Line + 1; n > maxFuncLines {
				long = append(long, start.String()+" "+funcName(fn)+" ("+strconv.Itoa(n)+" lines)")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return long, files
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return "(" + id.Name + ")." + fn.Name.Name
	}
	return fn.Name.Name
}
