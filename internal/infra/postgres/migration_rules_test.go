package postgres_test

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"

	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// The online migration rules (docs/migrations.md) that a run against real
// PostgreSQL can see. The observer below is installed in the test database:
// an event trigger at the end of every DDL command, and a statement trigger
// on goose's version table, whose row goose writes in the migration's own
// transaction, look at the locks the transaction holds (pg_locks), its
// lock_timeout and the rows it has read and written so far
// (its xid in xmin; reads since its first DDL command from
// pg_stat_xact_user_tables); the test compares each table's relfilenode
// before and after, and each table's columns: one added to a table that
// existed before must be nullable or have a default, or the previous
// binary's inserts, which do not name it, fail. "A table with rows" is one
// ANALYZE found rows in.
const (
	ruleLockTimeout  = "lock_timeout"       // a write-blocking lock on a table with rows, lock_timeout 0
	ruleLongLock     = "long_lock"          // a write-blocking lock held while rows are written, or read after a DDL command
	ruleIndex        = "index_concurrently" // CREATE INDEX without CONCURRENTLY on a table with rows
	ruleBackfillInTx = "backfill_in_ddl_tx" // rows written in the transaction of a DDL statement
	ruleRewrite      = "table_rewrite"      // a table with rows got a new relfilenode
	ruleNoDefault    = "column_no_default"  // a column added to an existing table NOT NULL without a default
)

const observer = `
CREATE SCHEMA migcheck;
CREATE TABLE migcheck.finding (rule text NOT NULL, detail text NOT NULL);

-- The application's tables that have rows (not goose's own).
CREATE FUNCTION migcheck.hot(c pg_class) RETURNS boolean LANGUAGE sql AS $$
    SELECT c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace AND c.reltuples > 0
       AND c.relname NOT LIKE 'goose%' AND c.relname <> 'migcheck_version'
$$;

-- Tables with rows that this transaction holds in a mode that blocks writes.
CREATE FUNCTION migcheck.blocking_locks() RETURNS TABLE (relname text, mode text)
LANGUAGE sql AS $$
    SELECT c.relname::text, l.mode
    FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
    WHERE l.pid = pg_backend_pid() AND l.granted AND migcheck.hot(c)
      AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
$$;

-- Rows of tables with rows read by this session and not yet flushed to the
-- cumulative statistics (PostgreSQL 15 keeps them pending across
-- transactions): only a difference between two readings in one
-- transaction means something.
CREATE FUNCTION migcheck.rows_read() RETURNS bigint LANGUAGE sql AS $$
    SELECT coalesce(sum(s.seq_tup_read + s.idx_tup_fetch), 0)::bigint
    FROM pg_stat_xact_user_tables s JOIN pg_class c ON c.oid = s.relid
    WHERE migcheck.hot(c)
$$;

-- Rows of tables with rows that this transaction wrote (their xmin is its xid).
CREATE FUNCTION migcheck.rows_written() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    rel text;
    n bigint;
    total bigint := 0;
BEGIN
    IF pg_current_xact_id_if_assigned() IS NULL THEN
        RETURN 0;
    END IF;
    FOR rel IN SELECT c.relname FROM pg_class c WHERE migcheck.hot(c) LOOP
        EXECUTE format('SELECT count(*) FROM public.%I WHERE age(xmin) = 0', rel) INTO n;
        total := total + n;
    END LOOP;
    RETURN total;
END
$$;

-- The reading of rows_read at the start of the transaction's first DDL command.
CREATE FUNCTION migcheck.on_ddl_start() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('migcheck.base', true), '') = '' THEN
        PERFORM set_config('migcheck.base', migcheck.rows_read()::text, true);
    END IF;
END
$$;
CREATE EVENT TRIGGER migcheck_ddl_start ON ddl_command_start EXECUTE FUNCTION migcheck.on_ddl_start();

CREATE FUNCTION migcheck.judge(what text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    locks text;
    t record;
    r0 bigint;
    r1 bigint;
    own bigint := coalesce(nullif(current_setting('migcheck.own', true), ''), '0')::bigint;
BEGIN
    SELECT string_agg(relname || ' ' || mode, ', ') INTO locks FROM migcheck.blocking_locks();
    -- rows_written reads every table: its own reads are left out.
    r0 := migcheck.rows_read();
    SELECT CASE WHEN coalesce(current_setting('migcheck.base', true), '') = '' THEN 0
                ELSE r0 - current_setting('migcheck.base')::bigint - own END AS read,
           migcheck.rows_written() AS written
    INTO t;
    r1 := migcheck.rows_read();
    PERFORM set_config('migcheck.own', (own + r1 - r0)::text, true);
    IF locks IS NOT NULL AND current_setting('lock_timeout') IN ('0', '0ms') THEN
        INSERT INTO migcheck.finding VALUES ('lock_timeout', what || ' holds ' || locks || ' with no lock_timeout');
    END IF;
    IF locks IS NOT NULL AND t.read + t.written > 0 THEN
        INSERT INTO migcheck.finding VALUES ('long_lock', what || ' holds ' || locks || ' while its transaction read ' || t.read || ' and wrote ' || t.written || ' rows');
    END IF;
    IF current_setting('migcheck.ddl', true) = 'on' AND t.written > 0 THEN
        INSERT INTO migcheck.finding VALUES ('backfill_in_ddl_tx', what || ': ' || t.written || ' rows written in the transaction of a DDL statement');
    END IF;
END
$$;

CREATE FUNCTION migcheck.on_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE
    cmd record;
    r record;
BEGIN
    FOR cmd IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
        IF cmd.schema_name = 'migcheck' THEN
            CONTINUE;
        END IF;
        IF cmd.command_tag = 'CREATE INDEX' THEN
            FOR r IN SELECT * FROM migcheck.blocking_locks() WHERE mode = 'ShareLock' LOOP
                INSERT INTO migcheck.finding VALUES ('index_concurrently', cmd.object_identity || ' built on ' || r.relname || ' without CONCURRENTLY');
            END LOOP;
        END IF;
        PERFORM migcheck.judge(cmd.command_tag || ' ' || coalesce(cmd.object_identity, ''));
    END LOOP;
    PERFORM set_config('migcheck.ddl', 'on', true);
END
$$;
CREATE EVENT TRIGGER migcheck_ddl ON ddl_command_end EXECUTE FUNCTION migcheck.on_ddl();

CREATE FUNCTION migcheck.at_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM migcheck.judge('the migration''s transaction');
    RETURN NULL;
END
$$;
`

// versionTrigger judges each migration's transaction when goose records it.
func versionTrigger(table string) string {
	return `CREATE TRIGGER migcheck_version AFTER INSERT ON ` + table + ` FOR EACH STATEMENT EXECUTE FUNCTION migcheck.at_version()`
}

// lastOffline is the last migration that creates its tables in an empty
// database. Every migration after it is online: it runs on tables with rows
// while the previous binary serves, and TestMigrationsFollowTheOnlineRules
// and TestEveryMigrationKeepsThePreviousBinarysStatementsWorking hold it to
// that.
const lastOffline = 3

// seedAt3 fills every table of schema 00003 with rows, as the release that
// served it would have.
const seedAt3 = `
INSERT INTO actors (id, name, role, credit_limit_cents)
SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid, 'c' || i, 'customer', 1000000
FROM generate_series(1, 50) i;
INSERT INTO products (id, sku, name, price_cents, stock)
SELECT ('00000000-0000-7000-9000-' || lpad(to_hex(i), 12, '0'))::uuid, 'SKU-' || i, 'p' || i, 100 * i, 1000
FROM generate_series(1, 20) i;
INSERT INTO orders (id, customer_id, status, total_cents, paid_cents)
SELECT ('00000000-0000-7000-a000-' || lpad(to_hex(i), 12, '0'))::uuid,
       ('00000000-0000-7000-8000-' || lpad(to_hex(1 + i % 50), 12, '0'))::uuid,
       (ARRAY['placed', 'shipped', 'cancelled'])[1 + i % 3], 100 * (1 + i % 20), CASE WHEN i % 4 = 0 THEN 100 ELSE 0 END
FROM generate_series(1, 300) i;
INSERT INTO order_lines (order_id, line_no, product_id, quantity, unit_price_cents)
SELECT o.id, 1, ('00000000-0000-7000-9000-' || lpad(to_hex(1 + (o.total_cents / 100 - 1)), 12, '0'))::uuid, 1, o.total_cents
FROM orders o;
INSERT INTO payments (id, order_id, actor_id, amount_cents)
SELECT gen_random_uuid(), o.id, o.customer_id, o.paid_cents FROM orders o WHERE o.paid_cents > 0;
INSERT INTO idempotency_keys (actor_id, operation, key, fingerprint, state, response_status, expires_at)
SELECT a.id, 'placeOrder', 'k-' || a.name, sha256(a.name::bytea), 'completed', 201, now() + interval '1 day' FROM actors a;
INSERT INTO outbox_events (id, type, aggregate_id, payload, state, delivered_at)
SELECT gen_random_uuid(), 'order.placed', o.id, '{}', 'delivered', now() FROM orders o;
ANALYZE;
`

// rulesDB returns a database at schema 00003 filled with rows, with the
// observer installed, and a connection to it.
func rulesDB(t *testing.T) (*sql.DB, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	url := testkit.Direct(testkit.DB(t))
	sqlDB, migrator := testkit.Migrator(t, url)
	if _, err := migrator.DownTo(ctx, lastOffline); err != nil {
		t.Fatalf("down to %05d: %v", lastOffline, err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	for _, q := range []string{seedAt3, observer, versionTrigger("goose_db_version")} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("prepare the rules database: %v", err)
		}
	}
	return sqlDB, conn
}

// judgeStep applies one migration with apply and returns the findings.
func judgeStep(t *testing.T, conn *pgx.Conn, apply func() error) []string {
	t.Helper()
	ctx := context.Background()
	relfiles := func() map[string]uint32 {
		rows, err := conn.Query(ctx, `SELECT relname::text, relfilenode::int8 FROM pg_class
			WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace AND reltuples > 0`)
		if err != nil {
			t.Fatal(err)
		}
		m, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
			name string
			node int64
		}, error) {
			var v struct {
				name string
				node int64
			}
			err := r.Scan(&v.name, &v.node)
			return v, err
		})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]uint32{}
		for _, v := range m {
			out[v.name] = uint32(v.node)
		}
		return out
	}
	if _, err := conn.Exec(ctx, `TRUNCATE migcheck.finding; ANALYZE`); err != nil {
		t.Fatal(err)
	}
	before := relfiles()
	columnsBefore := columns(t, conn)
	if err := apply(); err != nil {
		t.Fatalf("apply: %v", err)
	}
	findings := requiredNewColumns(columnsBefore, columns(t, conn))
	for name, node := range relfiles() {
		if old, ok := before[name]; ok && old != node {
			findings = append(findings, ruleRewrite+": "+name+" was rewritten (new relfilenode)")
		}
	}
	rows, err := conn.Query(ctx, `SELECT rule || ': ' || detail FROM migcheck.finding`)
	if err != nil {
		t.Fatal(err)
	}
	more, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	findings = append(findings, more...)
	slices.Sort(findings)
	return slices.Compact(findings)
}

// columns maps each column of the application's tables ("table.column") to
// whether an insert must name it (NOT NULL, no default, not generated), and
// each table to an entry "table.".
func columns(t *testing.T, conn *pgx.Conn) map[string]bool {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT table_name || '.' || column_name,
			is_nullable = 'NO' AND column_default IS NULL AND is_identity = 'NO' AND is_generated = 'NEVER'
		FROM information_schema.columns WHERE table_schema = 'public'
		UNION ALL
		SELECT table_name || '.', false FROM information_schema.tables WHERE table_schema = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	var col string
	var required bool
	_, err = pgx.ForEachRow(rows, []any{&col, &required}, func() error {
		out[col] = required
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// requiredNewColumns finds the columns added to a table that existed before
// that an insert must name.
func requiredNewColumns(before, after map[string]bool) []string {
	var findings []string
	for col, required := range after {
		table, _, _ := strings.Cut(col, ".")
		_, existed := before[table+"."]
		if _, old := before[col]; existed && !old && required {
			findings = append(findings, ruleNoDefault+": "+col+" was added NOT NULL without a default: the previous binary's inserts do not name it")
		}
	}
	return findings
}

// TestMigrationsFollowTheOnlineRules applies every migration after
// lastOffline (00001 to 00003 create tables in an empty database) one at a
// time to a database whose tables have rows, and fails on any rule a
// migration breaks.
func TestMigrationsFollowTheOnlineRules(t *testing.T) {
	t.Parallel()
	sqlDB, conn := rulesDB(t)
	migrator, err := postgres.NewMigrator(sqlDB)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for {
		var res *goose.MigrationResult
		findings := judgeStep(t, conn, func() error {
			var err error
			res, err = migrator.UpByOne(ctx)
			if err != nil && strings.Contains(err.Error(), "no next version") {
				return nil
			}
			return err
		})
		if res == nil {
			break
		}
		for _, f := range findings {
			t.Errorf("%s breaks an online migration rule (docs/migrations.md): %s", res.Source.Path, f)
		}
	}
}

// TestMigrationRulesCatchEachViolation runs the checks on the migrations of
// testdata/migrations: each breaks one rule, which must be reported, and
// accepted_expand.sql (a new column with a constant default and a new table,
// like a refunds migration) breaks none.
func TestMigrationRulesCatchEachViolation(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"long_exclusive_lock.sql":         ruleLongLock,
		"index_without_concurrently.sql":  ruleIndex,
		"table_rewrite.sql":               ruleRewrite,
		"backfill_in_ddl_transaction.sql": ruleBackfillInTx,
		"no_lock_timeout.sql":             ruleLockTimeout,
		"column_without_default.sql":      ruleNoDefault,
		"accepted_expand.sql":             "",
	}
	for file, rule := range cases {
		t.Run(strings.TrimSuffix(file, ".sql"), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			sqlDB, conn := rulesDB(t)
			migrator, err := postgres.NewMigrator(sqlDB)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := migrator.Up(ctx); err != nil {
				t.Fatalf("migrate up: %v", err)
			}
			body, err := os.ReadFile("testdata/migrations/" + file)
			if err != nil {
				t.Fatal(err)
			}
			fsys := fstest.MapFS{"90001_" + file: &fstest.MapFile{Data: body}}
			p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, fs.FS(fsys), goose.WithTableName("migcheck_version"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.GetDBVersion(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, versionTrigger("migcheck_version")); err != nil {
				t.Fatal(err)
			}
			findings := judgeStep(t, conn, func() error { _, err := p.Up(ctx); return err })
			if rule == "" {
				for _, f := range findings {
					t.Errorf("%s follows the rules, but was reported: %s", file, f)
				}
				return
			}
			caught := slices.ContainsFunc(findings, func(f string) bool { return strings.HasPrefix(f, rule+":") })
			if !caught {
				t.Errorf("%s breaks %s, not reported; findings: %v", file, rule, findings)
			}
			t.Logf("%s: %v", file, findings)
		})
	}
}
