package testkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// SourceFiles parses the Go files of dir (relative to the test's package)
// other than its tests, keyed by path: for the checks that find what the
// code declares in its source (the event types, the codes) instead of in a
// list kept beside it.
func SourceFiles(t testing.TB, dir string) map[string]*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	files := make(map[string]*ast.File, len(paths))
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[path] = f
	}
	if len(files) == 0 {
		t.Fatalf("no Go source in %s", dir)
	}
	return files
}
