package store

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/ordersvc/ordersvc/internal/infra/dbsqlc"
	"github.com/ordersvc/ordersvc/internal/infra/postgres"
)

// Every invariant and derived value of the contract that SQL can see is a
// kind of finding of `api check`, and each kind is one sqlc statement named
// Check<Kind> that returns the finding's line, one row per thing broken
// (db/queries/check.sql, or the table's own file, as CheckBalance in
// actors.sql). Check finds them in the generated code by that name: adding
// a kind is adding its statement, with its `-- Corruption:` and `-- Finds:`
// lines (TestCheckFindsEachCorruption, cmd/api/check_test.go, runs them and
// fails for a kind without), and `make generate`. Nothing here changes.
// The constraints of the schema (paid_cents within total_cents, a line's
// quantity, …) are not repeated: the database refuses any row that breaks
// them.

// Finding is one broken invariant or stale derived value that Check found,
// printed by `api check` as one line.
type Finding struct {
	Kind   string // a stable name, e.g. "balance"
	Detail string
}

func (f Finding) String() string { return f.Kind + ": " + f.Detail }

// CheckOptions are what some checks need to know of the configuration.
type CheckOptions struct {
	// Retention is OUTBOX_RETENTION: a delivered event older than it may
	// be gone [168h].
	Retention time.Duration
}

// check is one kind of finding and the call of its statement.
type check struct {
	kind string
	find func(ctx context.Context, db dbsqlc.DBTX, o CheckOptions) ([]string, error)
}

// checkPrefix names the generated methods that are checks.
const checkPrefix = "Check"

// CheckKind gives the kind of finding that the statement (or generated
// method) of that name checks: Check, then the kind in CamelCase
// (CheckNegativeStock checks negative_stock). It is false for a statement
// that is no check, CheckoutCart or OrderGet.
func CheckKind(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, checkPrefix)
	if !ok || rest == "" || !unicode.IsUpper(rune(rest[0])) {
		return "", false
	}
	return snake(rest), true
}

// checksOf finds the checks among the methods of q (a *dbsqlc.Queries),
// those named Check<Kind>, in the order of their names. A check's statement
// takes no parameter, or one, @retention::text: OUTBOX_RETENTION as Go
// writes it (168h0m0s), which order_event reads as an interval and prints.
// Any check may take it, rather than every check (sqlc generates only the
// parameters a statement uses, so the others would have to pretend to read
// it) or order_event alone, by name (a new kind that needs the retention
// would edit this file again); TestChecksAreTheGeneratedCheckMethods makes
// sure that a check's parameter is the retention. A method named Check… of
// any other signature is an error, never skipped: a check that silently
// never ran would pass for one that holds.
func checksOf(q any) ([]check, error) {
	v := reflect.ValueOf(q)
	var out []check
	for i := range v.NumMethod() {
		name := v.Type().Method(i).Name
		if name == checkPrefix {
			return nil, fmt.Errorf("%s names no kind: Check<Kind>, e.g. CheckNegativeStock", name)
		}
		kind, ok := CheckKind(name)
		if !ok {
			continue
		}
		c := check{kind: kind}
		switch f := v.Method(i).Interface().(type) {
		case func(context.Context, dbsqlc.DBTX) ([]string, error):
			c.find = func(ctx context.Context, db dbsqlc.DBTX, _ CheckOptions) ([]string, error) { return f(ctx, db) }
		case func(context.Context, dbsqlc.DBTX, string) ([]string, error):
			c.find = func(ctx context.Context, db dbsqlc.DBTX, o CheckOptions) ([]string, error) {
				return f(ctx, db, o.Retention.String())
			}
		default:
			return nil, fmt.Errorf("%s is %s: a check's statement is a :many that returns one text column (its line) and takes no parameter or @retention::text",
				name, v.Method(i).Type())
		}
		out = append(out, c)
	}
	return out, nil
}

// snake turns a kind's CamelCase into its stable name: NegativeStock is
// negative_stock.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// CheckKinds names every kind of finding Check looks for, in its order. It
// panics on a Check… method that is not a check, which Check returns as an
// error first and TestChecksAreTheGeneratedCheckMethods catches before.
func CheckKinds() []string {
	checks, err := checksOf(dbsqlc.New())
	if err != nil {
		panic(err)
	}
	kinds := make([]string, len(checks))
	for i, c := range checks {
		kinds[i] = c.kind
	}
	return kinds
}

// Check reads the database and reports every broken invariant and every
// derived value that differs from what it summarises, one kind after the
// other in the order of their names. Each kind is one statement, so it sees
// one snapshot. It reads whole tables: an operator's command, not a request
// path.
func Check(ctx context.Context, db dbsqlc.DBTX, o CheckOptions) ([]Finding, error) {
	if o.Retention <= 0 {
		o.Retention = 168 * time.Hour
	}
	checks, err := checksOf(dbsqlc.New())
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, c := range checks {
		found, err := c.find(ctx, db, o)
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", c.kind, postgres.Translate(err))
		}
		for _, d := range found {
			out = append(out, Finding{Kind: c.kind, Detail: d})
		}
	}
	return out, nil
}
