package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ordersvc/ordersvc/internal/infra/postgres"
	"github.com/ordersvc/ordersvc/internal/testkit"
)

// TestConcurrentMigrateThroughPgBouncer: two `api migrate up` started at
// once on an empty database, both through PgBouncer in transaction mode,
// apply each migration exactly once and both succeed: goose's table locker
// (a row in goose_lock) serializes them where a session advisory lock could
// not, since the pooler hands each transaction to any server connection.
func TestConcurrentMigrateThroughPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testkit.Direct(testkit.DB(t))
	downTo(t, url, 0)
	bouncer := testkit.StartPgBouncer(t, testkit.HostPort(t, url))
	via := bouncer.Via(url)

	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	start := make(chan struct{})
	for i := range 2 {
		wg.Go(func() {
			<-start
			outs[i], errs[i] = runCmd(t, env("DATABASE_URL", via), "migrate", "up", "--force-contract")
		})
	}
	close(start)
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Errorf("migrate up %d through PgBouncer: %v\n%s", i, errs[i], outs[i])
		}
	}

	schema, err := postgres.EmbeddedSchema()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT version_id, count(*) FROM goose_db_version WHERE version_id > 0 GROUP BY version_id ORDER BY version_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var versions []string
	for rows.Next() {
		var v, n int64
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("migration %d recorded %d times", v, n)
		}
		versions = append(versions, fmt.Sprint(v))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(versions) == 0 || versions[len(versions)-1] != fmt.Sprint(schema.Built) {
		t.Errorf("applied versions %v, want all up to %d", versions, schema.Built)
	}
	applied := strings.Count(outs[0], "applied ") + strings.Count(outs[1], "applied ")
	if applied != len(versions) {
		t.Errorf("the two runs report %d applied migrations between them, want %d (each once):\n%s\n%s", applied, len(versions), outs[0], outs[1])
	}
}
