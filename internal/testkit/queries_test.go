package testkit

import (
	"slices"
	"testing"
)

// TestParseQueries: a statement's comment is the run of "--" lines under its
// name line, its SQL what follows up to the next name line; a file's header
// comment belongs to no statement.
func TestParseQueries(t *testing.T) {
	t.Parallel()
	got := parseQueries("x.sql", `-- The file's header.

-- name: OrderGet :one
-- Reads one order.
-- Balance: none
SELECT * FROM orders WHERE id = $1;

-- name: CheckPaid :many
-- Corruption: UPDATE orders SET paid_cents = 1;
--   DELETE FROM payments;
-- Finds: paid_cents 1
SELECT format('order %s', id) FROM orders;
`)
	if len(got) != 2 || got[0].Name != "OrderGet" || got[0].Cmd != ":one" || got[1].Name != "CheckPaid" || got[1].File != "x.sql" {
		t.Fatalf("parsed %+v", got)
	}
	if note, ok := got[0].Note("Balance"); !ok || note != "none" {
		t.Errorf("Balance note %q %v", note, ok)
	}
	if _, ok := got[1].Note("Balance"); ok {
		t.Error("CheckPaid has no Balance note")
	}
	if want := []string{"-- Corruption: UPDATE orders SET paid_cents = 1;", "--   DELETE FROM payments;", "-- Finds: paid_cents 1"}; !slices.Equal(got[1].Comment, want) {
		t.Errorf("comment %q, want %q", got[1].Comment, want)
	}
	if got[0].SQL != "SELECT * FROM orders WHERE id = $1;" {
		t.Errorf("SQL %q", got[0].SQL)
	}
}

// TestQueriesReadsTheRepository: every file of db/queries has statements.
func TestQueriesReadsTheRepository(t *testing.T) {
	t.Parallel()
	files := map[string]int{}
	for _, q := range Queries(t) {
		files[q.File]++
	}
	if len(files) < 4 || files["orders.sql"] == 0 {
		t.Errorf("statements by file: %v", files)
	}
}
