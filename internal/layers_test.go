// Package internal_test checks that the layers depend inwards only: domain
// on nothing of ours, app on domain, infra and httpapi on app and domain but
// not on each other (see the house style's "Shape of the tree"); and, inside
// infra, that the roles depend one way (ADR 0024): store, outbox and
// maintenance on postgres, never the reverse; outbox on maintenance's loop.
package internal_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/ordersvc/ordersvc"

// deps lists the packages that pkg depends on, directly or not, as go list
// -deps reports them (test files excluded: they may reach further).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard", module+"/"+pkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, stderr.String())
	}
	var paths []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Standard   bool
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list %s output: %v", pkg, err)
		}
		if !p.Standard && p.ImportPath != module+"/"+pkg {
			paths = append(paths, p.ImportPath)
		}
	}
	if len(paths) == 0 && pkg != "internal/domain" {
		t.Fatalf("go list %s found no dependencies: the check would pass vacuously", pkg)
	}
	return paths
}

const infra = module + "/internal/infra"

// infraDep is what no infra package may depend on: the HTTP layer and its
// router.
func infraDep(dep string) bool {
	return !strings.HasPrefix(dep, module+"/internal/httpapi") && !strings.HasPrefix(dep, "github.com/go-chi/")
}

// TestLayers: each layer imports only the layers inside it, and the domain
// imports no driver, router or serialisation package.
func TestLayers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pkg string
		// allowed reports whether a non-standard dependency is fine.
		allowed func(dep string) bool
	}{
		{"internal/domain", func(dep string) bool {
			return dep == "github.com/google/uuid"
		}},
		{"internal/app", func(dep string) bool {
			return dep == "github.com/google/uuid" || dep == module+"/internal/domain"
		}},
		{"internal/httpapi", func(dep string) bool {
			return !strings.HasPrefix(dep, module+"/internal/infra") && !strings.HasPrefix(dep, "github.com/jackc/")
		}},
		{"internal/infra/postgres", func(dep string) bool {
			return infraDep(dep) && (!strings.HasPrefix(dep, infra) || dep == infra+"/dbsqlc")
		}},
		{"internal/infra/store", func(dep string) bool {
			return infraDep(dep) && (!strings.HasPrefix(dep, infra) || dep == infra+"/dbsqlc" || dep == infra+"/postgres")
		}},
		{"internal/infra/maintenance", func(dep string) bool {
			return infraDep(dep) && (!strings.HasPrefix(dep, infra) || dep == infra+"/dbsqlc" || dep == infra+"/postgres")
		}},
		{"internal/infra/outbox", func(dep string) bool {
			return infraDep(dep) && (!strings.HasPrefix(dep, infra) || dep == infra+"/dbsqlc" || dep == infra+"/postgres" ||
				dep == infra+"/maintenance")
		}},
		// The test kit's core serves no HTTP: the use-case tests take it
		// alone; the HTTP part is testkit/httpkit (ADR 0027).
		{"internal/testkit", func(dep string) bool {
			return !strings.HasPrefix(dep, module+"/internal/httpapi") && !strings.HasPrefix(dep, "github.com/go-chi/")
		}},
	}
	for _, c := range cases {
		t.Run(c.pkg, func(t *testing.T) {
			t.Parallel()
			for _, dep := range deps(t, c.pkg) {
				if !c.allowed(dep) {
					t.Errorf("%s depends on %s", c.pkg, dep)
				}
			}
		})
	}
}

// TestDomainHasNoStructTags: domain types carry no json, db or other struct
// tags; the boundaries map them to DTOs and rows explicitly.
func TestDomainHasNoStructTags(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-json=Dir,GoFiles", module+"/internal/domain").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkg struct {
		Dir     string
		GoFiles []string
	}
	if err := json.Unmarshal(out, &pkg); err != nil {
		t.Fatal(err)
	}
	if len(pkg.GoFiles) == 0 {
		t.Fatal("no domain files found")
	}
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if field, ok := n.(*ast.Field); ok && field.Tag != nil {
				t.Errorf("%s: struct tag %s", fset.Position(field.Pos()), field.Tag.Value)
			}
			return true
		})
	}
}
