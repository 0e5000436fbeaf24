package postgres_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"

	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/infra/store"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestEveryMigrationKeepsThePreviousBinarysStatementsWorking applies each
// online migration (every one after lastOffline, the ones
// TestMigrationsFollowTheOnlineRules holds to the online rules) one at a
// time, on tables with rows, while a connection keeps the statements of the
// binary that serves meanwhile prepared, as its pool's statement cache
// does. For an expand migration N that is the binary built for N-1, and its
// statements are:
//   - every statement the service sends (the generated sqlc statements)
//     that prepares at schema N-1: a binary built for N-1 could send it.
//     The others are N's own (logged);
//   - each table's row as sqlc expanded * for schema N-1 (its columns
//     then, in their order): the previous release's reads and RETURNING
//     lists, which this release may have extended (actors.balance_cents
//     at 00005).
//
// A contract migration runs once every older binary has stopped
// (`api migrate up` refuses it before): under binaries built for it or
// later, so the statements are the generated ones that prepare at N-1, and
// the rows of N-1 are not read.
//
// Each statement runs at N-1 and again at N on that connection, with NULL
// arguments, in a savepoint rolled back, and must end the same way: a
// changed result shape (0A000, cached plan must not change result type) or a
// missing object (42xxx) fails the test, naming the statement and the
// migration. Errors of classes 22 and 23 that the NULL arguments cause are
// the same before and after. The previous binary's inserts give each new
// column its default (TestMigrationsFollowTheOnlineRules refuses a new NOT
// NULL column without one), so the rows already there, whose new columns
// read as that default, are what those inserts write: every constraint
// added NOT VALID must hold for them.
//
// While a transaction holds every table as a writer does (ROW EXCLUSIVE),
// the migration either gives up on its lock_timeout (55P03) and leaves the
// schema exactly as it was (a NO TRANSACTION migration too: what runs
// before its first statement that waits must change no table), or waits
// without queueing other writers behind it (CREATE INDEX CONCURRENTLY), or
// needs none of those tables; then it applies. At the end, api check finds
// nothing in the rows the migrations moved.
//
// A migration needs no test of its own for this; one that moves data does
// (TestStockLevelMigrationKeepsEveryVersionAndUnit).
func TestEveryMigrationKeepsThePreviousBinarysStatementsWorking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	statements := serviceStatements(t)
	url := testkit.Direct(testkit.DB(t))
	sqlDB, migrator := testkit.Migrator(t, url)
	if _, err := migrator.DownTo(ctx, lastOffline); err != nil {
		t.Fatalf("down to %05d: %v", lastOffline, err)
	}
	mustExec(t, sqlDB, seedAt3)
	mustExec(t, sqlDB, `INSERT INTO actors (id, name, role) VALUES (gen_random_uuid(), 'staff', 'staff')`)

	migrations, tested := 0, 0
	for _, src := range migrator.ListSources() {
		if src.Version <= lastOffline {
			continue
		}
		migrations++
		tested += migrateUnderPreviousBinary(t, url, migrator, src.Version, statements)
	}
	// Not silently zero: each migration is tried under most statements.
	if migrations == 0 || tested < migrations*len(statements)/2 {
		t.Errorf("%d statements tested across %d online migrations, of %d generated statements: too few", tested, migrations, len(statements))
	}
	t.Logf("%d statements tested across %d online migrations", tested, migrations)

	conn := connect(t, url)
	for _, name := range slices.Sorted(maps.Keys(statements)) {
		if _, err := conn.Prepare(ctx, name, statements[name]); err != nil {
			t.Errorf("%s does not prepare on the newest schema: %v", name, err)
		}
	}
	findings, err := store.Check(ctx, conn, store.CheckOptions{})
	if err != nil {
		t.Fatalf("api check after the migrations: %v", err)
	}
	for _, f := range findings {
		t.Errorf("api check after the migrations: %s", f)
	}
}

// serviceStatements reads every statement the service sends: the string
// constants of the generated code that start with "-- name:", by name.
func serviceStatements(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../dbsqlc/*.sql.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stringValues(f) {
			if strings.HasPrefix(s, "-- name:") {
				out[strings.Fields(s)[2]] = s
			}
		}
	}
	named := len(testkit.Queries(t))
	if len(out) != named || named < 40 {
		t.Fatalf("found %d generated statements in ../dbsqlc, %d named in db/queries: not the service's every statement", len(out), named)
	}
	return out
}

// stringValues lists the values of f's constants (and variables) that are
// string constant expressions.
func stringValues(f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for _, v := range spec.Values {
			if s, ok := stringConstant(v); ok {
				out = append(out, s)
			}
		}
		return false
	})
	return out
}

// stringConstant evaluates a constant expression of string literals joined
// by + (sqlc writes a backquote as "`" between raw strings).
func stringConstant(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		s, err := strconv.Unquote(e.Value)
		return s, err == nil && e.Kind == token.STRING
	case *ast.ParenExpr:
		return stringConstant(e.X)
	case *ast.BinaryExpr:
		x, okX := stringConstant(e.X)
		y, okY := stringConstant(e.Y)
		return x + y, okX && okY && e.Op == token.ADD
	}
	return "", false
}

// preparedStatement is a statement the previous binary's connection holds.
type preparedStatement struct {
	name   string
	params int
}

// migrateUnderPreviousBinary applies migration v under the statements of
// the binaries that serve while it runs and returns how many it tested.
func migrateUnderPreviousBinary(t *testing.T, url string, migrator *goose.Provider, v int64, statements map[string]string) int {
	t.Helper()
	schema, err := postgres.EmbeddedSchema()
	if err != nil {
		t.Fatal(err)
	}
	old := connect(t, url)
	var prepared []preparedStatement
	var added []string
	for _, name := range slices.Sorted(maps.Keys(statements)) {
		sd, err := old.Prepare(context.Background(), name, statements[name])
		if err != nil {
			added = append(added, name)
			continue
		}
		prepared = append(prepared, preparedStatement{name, len(sd.ParamOIDs)})
	}
	if len(added) > 0 {
		t.Logf("%05d: %d statements do not prepare on the schema before it (its own or a later migration's): %s", v, len(added), strings.Join(added, ", "))
	}
	if len(prepared) < len(statements)/2 {
		t.Errorf("migration %05d: only %d of %d statements prepare on the schema before it: too few to test it", v, len(prepared), len(statements))
	}
	if !schema.IsContract(v) {
		// An expand migration runs under the binary built for v-1; a
		// contract migration only once every binary older than v stopped.
		prepared = append(prepared, prepareRows(t, old)...)
	}

	before := runPrepared(t, old, prepared)
	migrateBehindWriter(t, url, migrator, v)
	after := runPrepared(t, old, prepared)
	for _, p := range prepared {
		b, a := before[p.name], after[p.name]
		if a.Code == b.Code {
			continue
		}
		why := ""
		switch {
		case a.Code == "0A000":
			why = ": the migration changed its result shape"
		case strings.HasPrefix(a.Code, "42"):
			why = ": the migration removed or renamed something it uses"
		}
		t.Errorf("migration %05d breaks the previous binary's %s%s: after it %s, before it %s", v, p.name, why, a, b)
	}
	validateNotValid(t, old, v)
	return len(prepared)
}

// prepareRows prepares, for each table, a read of its row as sqlc expands *
// for the current schema.
func prepareRows(t *testing.T, conn *pgx.Conn) []preparedStatement {
	t.Helper()
	ctx := context.Background()
	rows, err := conn.Query(ctx, `SELECT quote_ident(table_name), string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position)
		FROM information_schema.columns
		WHERE table_schema = 'public' AND table_name IN (SELECT table_name FROM information_schema.tables
			WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name NOT LIKE 'goose%')
		GROUP BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	type table struct{ Name, Columns string }
	tables, err := pgx.CollectRows(rows, pgx.RowToStructByPos[table])
	if err != nil {
		t.Fatal(err)
	}
	var out []preparedStatement
	for _, tc := range tables {
		name := "row of " + tc.Name
		if _, err := conn.Prepare(ctx, name, "SELECT "+tc.Columns+" FROM "+tc.Name+" LIMIT 1"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, preparedStatement{name, 0})
	}
	return out
}

// outcome is how a statement ended: Code is "" for success.
type outcome struct{ Code, Message string }

func (o outcome) String() string {
	if o.Code == "" {
		return "succeeds"
	}
	return "fails with " + o.Code + " (" + o.Message + ")"
}

// runPrepared runs each prepared statement with NULL arguments, each in a
// savepoint rolled back, in one transaction rolled back.
func runPrepared(t *testing.T, conn *pgx.Conn, prepared []preparedStatement) map[string]outcome {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	out := map[string]outcome{}
	for _, p := range prepared {
		sp, err := tx.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = sp.Exec(ctx, p.name, make([]any, p.params)...)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr):
			out[p.name] = outcome{pgErr.Code, pgErr.Message}
		case err != nil:
			t.Fatalf("%s: %v", p.name, err)
		}
		if err := sp.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// migrateBehindWriter applies migration v while a transaction holds every
// table of the application as one that wrote a row of each does: it must
// give up on its lock_timeout leaving the schema as it was, or wait without
// queueing other writers, or need none of them; then it applies.
func migrateBehindWriter(t *testing.T, url string, migrator *goose.Provider, v int64) {
	t.Helper()
	ctx := context.Background()
	conn := connect(t, url)
	var tables string
	if err := conn.QueryRow(ctx, `SELECT string_agg(quote_ident(table_name), ', ') FROM information_schema.tables
		WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name NOT LIKE 'goose%'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	lockAll := `LOCK TABLE ` + tables + ` IN ROW EXCLUSIVE MODE`
	before := schemaDigest(t, conn)
	holder, err := connect(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, lockAll); err != nil {
		t.Fatal(err)
	}
	migrating, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := migrator.UpTo(migrating, v); done <- err }()

	// The migration ends (applied, or given up on its lock_timeout), or is
	// seen waiting for the holder's transaction itself, as CREATE INDEX
	// CONCURRENTLY does once it has its table lock: then writers must go on.
	// Seen waiting for a table lock for longer than the rule's lock_timeout
	// (1 s) allows, by the server's own clock, it has none or a longer one,
	// and queues every writer behind it.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-tick.C:
			onTransaction, onTable := lockWaits(t, conn)
			if onTable > 2*time.Second {
				t.Errorf("migration %05d has waited %s for a table lock behind a writer's transaction: its lock_timeout is missing or over 1 s, and every writer queues behind it (docs/migrations.md)", v, onTable.Round(time.Millisecond))
			}
			if onTransaction || onTable > 2*time.Second {
				if onTransaction {
					t.Logf("%05d waits for a writer's transaction to end", v)
					writersGoOn(t, url, v, lockAll)
				}
				_ = holder.Rollback(ctx)
				err = <-done
				break wait
			}
		}
	}
	_ = holder.Rollback(ctx)
	if err == nil {
		t.Logf("%05d applied behind a writer's transaction", v)
		return
	}
	gaveUp(t, conn, v, err, before)
	if _, err := migrator.UpTo(ctx, v); err != nil {
		t.Fatalf("migration %05d once the transaction ended: %v", v, err)
	}
}

// gaveUp checks that migration v failed on its lock_timeout (55P03) with
// err and left the schema as before.
func gaveUp(t *testing.T, conn *pgx.Conn, v int64, err error, before []string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Errorf("migration %05d while a transaction held its tables: %v; want it to give up on its lock_timeout (55P03)", v, err)
		return
	}
	t.Logf("%05d gave up behind a writer: %v", v, err)
	if diff := digestDiff(before, schemaDigest(t, conn)); diff != "" {
		t.Errorf("migration %05d gave up on its lock_timeout but left the schema changed:\n%s", v, diff)
	}
}

// writersGoOn checks that, while migration v waits, another transaction
// still takes the locks of a writer (lockAll) within a second.
func writersGoOn(t *testing.T, url string, v int64, lockAll string) {
	t.Helper()
	ctx := context.Background()
	probe, err := connect(t, url).Begin(ctx)
	if err == nil {
		_, err = probe.Exec(ctx, `SET LOCAL lock_timeout = '1s'; `+lockAll)
		_ = probe.Rollback(ctx)
	}
	if err != nil {
		t.Errorf("migration %05d, waiting for a transaction that held its tables, kept another writer waiting: %v", v, err)
	}
}

// lockWaits reads what the other sessions of conn's database wait for:
// whether one waits for another transaction to end (a virtualxid or
// transactionid lock), and the longest wait for a table lock, which a
// migration's lock_timeout ends.
func lockWaits(t *testing.T, conn *pgx.Conn) (onTransaction bool, onTable time.Duration) {
	t.Helper()
	var secs float64
	if err := conn.QueryRow(context.Background(), `SELECT
		coalesce(bool_or(l.locktype IN ('virtualxid', 'transactionid')), false),
		coalesce(max(extract(epoch FROM clock_timestamp() - l.waitstart)) FILTER (WHERE l.locktype = 'relation'), 0)
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE NOT l.granted AND a.datname = current_database() AND a.pid <> pg_backend_pid()`).Scan(&onTransaction, &secs); err != nil {
		t.Fatal(err)
	}
	return onTransaction, time.Duration(secs * float64(time.Second))
}

// schemaDigest lists the application's tables, columns, constraints,
// indexes and triggers, one line each, sorted.
func schemaDigest(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `
		SELECT 'table ' || table_name || ' ' || table_type FROM information_schema.tables
		WHERE table_schema = 'public' AND table_name NOT LIKE 'goose%'
		UNION ALL
		SELECT format('column %s.%s %s nullable=%s default=%s', table_name, column_name, data_type, is_nullable, column_default)
		FROM information_schema.columns WHERE table_schema = 'public' AND table_name NOT LIKE 'goose%'
		UNION ALL
		SELECT format('constraint %s.%s %s validated=%s', conrelid::regclass, conname, pg_get_constraintdef(oid), convalidated)
		FROM pg_constraint WHERE connamespace = 'public'::regnamespace
		UNION ALL
		SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename NOT LIKE 'goose%'
		UNION ALL
		SELECT format('trigger %s.%s', tgrelid::regclass, tgname) FROM pg_trigger WHERE NOT tgisinternal
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// digestDiff names the lines only one of two digests has.
func digestDiff(before, after []string) string {
	var out []string
	for _, l := range before {
		if !slices.Contains(after, l) {
			out = append(out, "  gone: "+l)
		}
	}
	for _, l := range after {
		if !slices.Contains(before, l) {
			out = append(out, "  new:  "+l)
		}
	}
	return strings.Join(out, "\n")
}

// validateNotValid validates, in a transaction rolled back, every
// constraint added NOT VALID, against the rows already there.
func validateNotValid(t *testing.T, conn *pgx.Conn, v int64) {
	t.Helper()
	ctx := context.Background()
	rows, err := conn.Query(ctx, `SELECT format('ALTER TABLE %s VALIDATE CONSTRAINT %I', conrelid::regclass, conname)
		FROM pg_constraint WHERE connamespace = 'public'::regnamespace AND NOT convalidated`)
	if err != nil {
		t.Fatal(err)
	}
	validations, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range validations {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Errorf("migration %05d: %s: %v; the rows already there are what the previous binary writes (its columns, the new ones at their default)", v, q, err)
		}
		_ = tx.Rollback(ctx)
	}
}

// connect opens a connection that caches its prepared statements, as the
// service's do, closed when t ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
