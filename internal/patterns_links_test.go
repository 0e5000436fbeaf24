package internal_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// citation is how comments cite the transaction patterns ("pattern 2")
// and rule ids ("EXT.IDEMPOTENCY.KEY.001") that docs/patterns.md defines.
var citation = regexp.MustCompile(`\b[Pp]atterns? [1-7]\b|\bEXT\.[A-Z]+\.[A-Z]+`)

// TestCommentsCitingAPatternLinkIt: docs/patterns.md defines the patterns
// and rule ids; every comment that cites one says where, so that a reader of
// a copied file can look the name up. Go comment groups and SQL comment
// blocks (db/) are checked; generated code repeats the SQL's comments.
func TestCommentsCitingAPatternLinkIt(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..")
	var missing []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "dbsqlc", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go":
			missing = append(missing, goCitations(t, path)...)
		case ".sql":
			missing = append(missing, sqlCitations(t, path)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range missing {
		t.Errorf("%s: the comment cites a pattern or rule id without naming docs/patterns.md", m)
	}
}

func goCitations(t *testing.T, path string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	var out []string
	for _, g := range f.Comments {
		text := g.Text()
		if citation.MatchString(text) && !strings.Contains(text, "patterns.md") {
			out = append(out, fset.Position(g.Pos()).String())
		}
	}
	return out
}

func sqlCitations(t *testing.T, path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), "--") {
			i++
			continue
		}
		j := i
		for j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "--") {
			j++
		}
		block := strings.Join(lines[i:j], "\n")
		if citation.MatchString(block) && !strings.Contains(block, "patterns.md") {
			out = append(out, path+":"+strconv.Itoa(i+1))
		}
		i = j
	}
	return out
}
