package internal_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the longest a hand-written file of the service may be: a file
// that grows past it holds more than one thing, and is split by role
// (docs/adr/0024-infra-packages-by-role.md).
const maxLines = 300

// TestNoServiceFileOverMaxLines: every hand-written, non-test Go file of
// the service and its test kit (cmd/, internal/) is at most maxLines long.
// Generated code (dbsqlc) is exempt.
func TestNoServiceFileOverMaxLines(t *testing.T) {
	t.Parallel()
	for _, root := range []string{"../cmd", "."} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "dbsqlc" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || filepath.Ext(path) != ".go" || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if n := bytes.Count(data, []byte("\n")); n > maxLines {
				t.Errorf("%s has %d lines (at most %d): split it by role", path, n, maxLines)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
