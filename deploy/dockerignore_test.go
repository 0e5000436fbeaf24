package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// TestDockerignoreLetsInExactlyTheBuild: every source and embedded file of
// cmd/api and examples/webhook-receiver (the image builds both) and the packages they import is in the build context, and files a
// newcomer leaves around (the responses the README's first calls used to
// save, requests.http, docs, a .env) are not, so they never bust the layer
// cache of `COPY . .`.
func TestDockerignoreLetsInExactlyTheBuild(t *testing.T) {
	t.Parallel()
	f, err := os.Open("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	excluded := func(path string) bool {
		ex, err := pm.MatchesOrParentMatches(filepath.ToSlash(path))
		if err != nil {
			t.Fatal(err)
		}
		return ex
	}
	out, err := exec.Command("go", "list", "-deps", "-f",
		`{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}`,
		"../cmd/api", "../examples/webhook-receiver").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"go.mod", "go.sum"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], root+string(filepath.Separator)) {
			continue // a module dependency, downloaded in the image
		}
		dir, _ := filepath.Rel(root, fields[0])
		for _, name := range fields[1:] {
			needed = append(needed, filepath.Join(dir, name))
		}
	}
	if len(needed) < 20 {
		t.Fatalf("go list found only %v", needed)
	}
	for _, p := range needed {
		if excluded(p) {
			t.Errorf("%s is needed to build cmd/api but .dockerignore leaves it out", p)
		}
	}
	for _, p := range []string{"product.http", "order.http", "requests.http", "README.md", "docs/template.md",
		".env", ".git/HEAD", "bin/api", "internal/httpapi/contract_test.go", "internal/httpapi/testdata/fuzz/x", "tmp.txt"} {
		if !excluded(p) {
			t.Errorf("%s is in the build context: a change to it would rebuild the image", p)
		}
	}
}
