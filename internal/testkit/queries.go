package testkit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Query is one statement of db/queries as its file spells it: the
// "-- name: Name :cmd" line, the comment lines under it (each as written,
// "--" included) and its SQL, up to the next statement.
type Query struct {
	File    string // the file's base name, e.g. "orders.sql"
	Name    string // OrderAddPayment
	Cmd     string // ":one", ":many", ":exec", …
	Comment []string
	SQL     string
}

// Note is the text after "-- <label>: " on the first line of the query's
// comment that has it ("Balance", "Corruption", "Finds"), and whether one
// does.
func (q Query) Note(label string) (string, bool) {
	for _, line := range q.Comment {
		if text, ok := strings.CutPrefix(line, "-- "+label+":"); ok {
			return strings.TrimSpace(text), true
		}
	}
	return "", false
}

// Queries reads every statement of the db/queries folder beside the go.mod
// above the test's directory, file by file in name order. The tests that
// read what a statement's comment declares (its -- Balance: line, the
// corruption of an api check kind) and those that count the statements read
// them here, so the comment's format is parsed in one place.
func Queries(t testing.TB) []Query {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := moduleRoot(wd)
	if dir == "" {
		t.Fatal("no go.mod above the test's directory: db/queries not found")
	}
	files, err := filepath.Glob(filepath.Join(dir, "db", "queries", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no query files in %s/db/queries: %v", dir, err)
	}
	var out []Query
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, parseQueries(filepath.Base(f), string(raw))...)
	}
	return out
}

// parseQueries splits a file of queries at its "-- name:" lines. A
// statement's comment is the run of "--" lines right under its name line.
func parseQueries(file, text string) []Query {
	var out []Query
	var cur *Query
	inComment := false
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "-- name: "); ok {
			fields := strings.Fields(rest)
			out = append(out, Query{File: file, Name: fields[0]})
			cur, inComment = &out[len(out)-1], true
			if len(fields) > 1 {
				cur.Cmd = fields[1]
			}
			continue
		}
		if cur == nil {
			continue
		}
		if inComment && strings.HasPrefix(line, "--") {
			cur.Comment = append(cur.Comment, line)
			continue
		}
		inComment = false
		cur.SQL += line + "\n"
	}
	for i := range out {
		out[i].SQL = strings.TrimSpace(out[i].SQL)
	}
	return out
}
